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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        assert_eq!(clip("short".into(), 10), "short");
        assert_eq!(clip("ééé".into(), 3), "é… (cut: 6 bytes in all)");
        assert!(clip("x".repeat(50 << 20), MAX_ERROR).len() < MAX_ERROR + 40);
    }
}
