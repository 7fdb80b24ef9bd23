//! The book (`docs/src`) and the README hold together: every relative link leads to a
//! file that exists, every `#anchor` to a heading of its page, and every page of the book
//! is in its table of contents. (`scripts/book.sh` builds the book; this needs no mdBook.)
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// Markdown files checked: the README, the CHANGELOG and the book's pages.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// A heading's anchor as mdBook (and GitHub) make it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    prose(&text).iter().filter_map(|l| l.trim_start_matches('#').strip_prefix(' ').filter(|_| l.starts_with('#'))).map(anchor).collect()
}

/// `(target)` of every `[text](target)` in a line, skipping inline code.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let code_free: String = line.split('`').enumerate().filter(|(i, _)| i % 2 == 0).map(|(_, s)| s).collect::<Vec<_>>().join(" ");
    let mut rest = code_free.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_link_in_the_readme_and_the_book_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in prose(&text) {
            for target in links(line) {
                if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
                let resolved = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
                let shown = page.strip_prefix(root()).unwrap().display().to_string();
                if !resolved.exists() {
                    broken.push(format!("{shown}: {target}: no such file"));
                    continue;
                }
                if let Some(fragment) = fragment {
                    if resolved.extension().is_some_and(|e| e == "md") && !anchors(&resolved).iter().any(|a| a == fragment) {
                        broken.push(format!("{shown}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_table_of_contents() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = prose(&summary).iter().flat_map(|l| links(l)).collect();
    let missing: Vec<String> = pages()
        .iter()
        .filter_map(|p| p.strip_prefix(&src).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p != "SUMMARY.md" && !listed.contains(p))
        .collect();
    assert!(missing.is_empty(), "pages not in docs/src/SUMMARY.md: {missing:?}");
}

#[test]
fn the_readme_fits_on_a_screen_or_four() {
    let lines = std::fs::read_to_string(root().join("README.md")).unwrap().lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: it says what Almanac is, the two commands, a plugin per language, and links into the book (docs/)");
}

/// The code lines of the README's first `lang` block, comments and blank lines left out.
fn readme_block(lang: &str, comment: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find(&format!("```{lang}\n")).unwrap_or_else(|| panic!("a {lang} block in the README")) + lang.len() + 4;
    let end = start + readme[start..].find("```").unwrap();
    readme[start..end].lines().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with(comment)).map(str::to_owned).collect()
}

/// Each of `shown` is a line of `file`, in the file's order: the example is the code,
/// perhaps abridged, never rewritten.
fn is_drawn_from(shown: &[String], file: &str) {
    let code = std::fs::read_to_string(root().join(file)).unwrap();
    let mut lines = code.lines();
    for line in shown {
        assert!(lines.any(|l| l == line), "README.md shows {line:?}, which is not (or not in this order) in {file}: copy the code again");
    }
}

#[test]
fn the_readmes_plugins_are_the_plugins_code() {
    let rust = readme_block("rust", "//");
    assert!(rust.len() > 30, "the Rust plugin is shown whole");
    is_drawn_from(&rust, "plugins/daily-points/src/lib.rs");
    let python = readme_block("python", "#");
    assert!(python.len() > 15, "the Python plugin is shown");
    is_drawn_from(&python, "plugins/daily-points-py/app.py");
    let typescript = readme_block("typescript", "//");
    assert!(typescript.len() > 10, "the TypeScript plugin is shown");
    is_drawn_from(&typescript, "plugins/daily-points-ts/src/plugin.ts");
}
