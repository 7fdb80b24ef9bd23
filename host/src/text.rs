//! Untrusted text kept by the host (task errors, database messages, log lines, plugin
//! stderr) is clipped to a few KiB before it is stored, logged or served: a plugin
//! returning a 50 MiB error once made `/api/overview` answer with 1.1 GB of JSON.

/// The most bytes of one error message the host stores or logs.
pub const MAX_ERROR: usize = 4096;
/// The most bytes of one stored message composed of clipped parts (a database error
/// with its SQLSTATE, a trap with the plugin's stderr).
pub const MAX_STORED: usize = 2 * MAX_ERROR;
/// The most bytes of one plugin log line.
pub const MAX_LOG_LINE: usize = 4096;

/// `text` cut to at most `max` bytes (on a character boundary), saying so.
pub fn clip(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!("… (cut: {total} bytes in all)"));
    text
}

/// `text` with every control character (C0, DEL, C1) and every invisible format
/// character ([`is_format`]) written as an escape (`\n`, `\x1b`, `\u{202e}`), for
/// printing or logging plugin-controlled text as a line of its own: an ESC sequence in a
/// task's error once reached the operator's terminal through `almanac status`, a newline
/// in a log line forged a host log line, and a right-to-left override (U+202E) or a
/// line separator (U+2028) shows a reader text other than what is there.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || is_format(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || is_format(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Unicode's invisible format characters (category Cf) and its line and paragraph
/// separators (Zl, Zp): bidirectional overrides and isolates, zero-width characters, the
/// byte-order mark, interlinear annotations and tags. None belongs in an error, a key or
/// a log line, and each can make printed text read as something else.
pub fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x0890..=0x0891
            | 0x070F
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// A path as [`printable`] text: file names are whoever made them's, and may hold a
/// newline (a forged log line) or an escape sequence.
pub fn printable_path(path: &std::path::Path) -> String {
    printable(&path.display().to_string()).into_owned()
}

/// `text` safe inside HTML element content or a quoted attribute.
pub fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        assert_eq!(clip("short".into(), 10), "short");
        assert_eq!(clip("ééé".into(), 3), "é… (cut: 6 bytes in all)");
        assert!(clip("x".repeat(50 << 20), MAX_ERROR).len() < MAX_ERROR + 40);
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain é"), "plain é");
        assert_eq!(printable("a\nb\r\x1b[31mred\x00\x7f\u{9b}"), "a\\nb\\r\\x1b[31mred\\x00\\x7f\\u{9b}");
        // A right-to-left override, line and paragraph separators, a zero-width joiner.
        assert_eq!(printable("paid\u{202e}diap\u{2028}x\u{2029}\u{200d}"), "paid\\u{202e}diap\\u{2028}x\\u{2029}\\u{200d}");
        assert_eq!(printable("日本 ünïcödé"), "日本 ünïcödé");
    }
}
