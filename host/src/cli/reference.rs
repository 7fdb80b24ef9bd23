//! The book's CLI reference (`docs/src/reference/cli.md`), made from the CLI's own
//! definitions: a test fails when the page and the definitions differ, so the page cannot
//! drift. `ALMANAC_BLESS=1 cargo test -p almanac --bin almanac reference` writes it again.
//! The commands the README and the book show are parsed by the CLI too.

/// Every command's long help, as `almanac <command> --help` prints it, in one page.
pub fn markdown(root: &clap::Command) -> String {
    let mut root = quiet(root.clone()).term_width(100).disable_colored_help(true);
    root.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Made from the CLI's own definitions (`host/src/cli/reference.rs`; a test fails when\n\
         this page and the CLI differ). `almanac <command> --help` prints the same.\n\n",
    );
    section(&mut out, &mut root, &[]);
    out
}

/// Without the environment's values (the page is the same wherever it is made).
fn quiet(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.hide_env_values(true)).mut_subcommands(quiet)
}

fn section(out: &mut String, cmd: &mut clap::Command, path: &[&str]) {
    let name = std::iter::once("almanac").chain(path.iter().copied()).collect::<Vec<_>>().join(" ");
    let level = if path.is_empty() { "##" } else { "###" };
    let help = cmd.render_long_help().to_string();
    let help: Vec<&str> = help.lines().map(str::trim_end).collect();
    out.push_str(&format!("{level} `{name}`\n\n```text\n{}\n```\n\n", help.join("\n").trim()));
    let children: Vec<String> = cmd.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help").map(|c| c.get_name().to_owned()).collect();
    for child in children {
        let sub = cmd.find_subcommand_mut(&child).expect("a listed subcommand");
        let mut deeper = path.to_vec();
        deeper.push(&child);
        section(out, sub, &deeper);
    }
}

/// Words of a shell command line: quotes group, a `#` word starts a comment, a final `&`
/// is dropped. (Enough for the book's examples, which use no other shell syntax.)
pub fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut started) = (Vec::new(), String::new(), None::<char>, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => (quote, started) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, '#') if !started => break,
            (None, c) => (word, started) = (word + &c.to_string(), true),
        }
    }
    if started {
        out.push(word);
    }
    if out.last().is_some_and(|w| w == "&") {
        out.pop();
    }
    out
}

/// The commands the README and the book show: `$ almanac …` lines of their code blocks
/// (each must parse whole), and inline `` `almanac … --flag …` `` spans with no
/// placeholder syntax (each may leave out arguments or use placeholders as values). Returns
/// (page, command, must parse whole).
pub fn shown_commands(root: &std::path::Path) -> Vec<(String, String, bool)> {
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => dirs.push(path),
                false if path.extension().is_some_and(|e| e == "md") && !path.ends_with("reference/cli.md") => pages.push(path),
                false => {}
            }
        }
    }
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(root).unwrap_or(&page).display().to_string();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                if let Some(command) = line.strip_prefix("$ almanac ") {
                    out.push((name.clone(), format!("almanac {command}"), true));
                }
                continue;
            }
            for (i, span) in line.split('`').enumerate() {
                let plain = !span.contains(['[', '|', '…', '<', '(']) && !span.contains("...");
                if i % 2 == 1 && span.starts_with("almanac ") && span.contains(" --") && plain {
                    out.push((name.clone(), span.to_owned(), false));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    #[test]
    fn every_command_the_book_shows_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let shown = super::shown_commands(&root);
        assert!(shown.len() > 20, "the book shows commands: {}", shown.len());
        let mut wrong = Vec::new();
        for (page, command, whole) in shown {
            match super::super::Cli::try_parse_from(super::words(&command)) {
                Ok(_) => {}
                // Prose may leave out arguments or name a value by a placeholder; a flag
                // or a command that does not exist is wrong anywhere.
                Err(e)
                    if !whole
                        && matches!(
                            e.kind(),
                            clap::error::ErrorKind::MissingRequiredArgument | clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
                        ) => {}
                Err(e) => wrong.push(format!("{page}: `{command}`: {}", e.to_string().lines().next().unwrap_or_default())),
            }
        }
        assert!(wrong.is_empty(), "commands the docs show that the CLI refuses:\n{}", wrong.join("\n"));
    }

    #[test]
    fn shell_words_group_quotes_and_drop_comments() {
        assert_eq!(
            super::words(r#"almanac slots --cron "30 2 * * *" --zone 'A/B' &   # a comment"#),
            ["almanac", "slots", "--cron", "30 2 * * *", "--zone", "A/B"]
        );
    }

    #[test]
    fn the_books_cli_reference_is_the_clis_own_help() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/cli.md");
        let made = super::markdown(&super::super::Cli::command());
        if std::env::var_os("ALMANAC_BLESS").is_some() {
            std::fs::write(&page, &made).unwrap();
        }
        let kept = std::fs::read_to_string(&page).unwrap_or_default();
        assert!(
            kept == made,
            "docs/src/reference/cli.md differs from the CLI's definitions: run `ALMANAC_BLESS=1 cargo test -p almanac --bin almanac reference` and commit the page"
        );
    }
}
