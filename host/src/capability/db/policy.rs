//! Which statements a plugin may send. The host owns the transaction and the session;
//! a plugin may only read and write rows.
//!
//! This is a lexical check (comments, quotes and dollar quotes are understood), not a
//! parse: it looks at the statement's first keyword and at any `;` outside quotes.
//! Functions called from an allowed statement (`set_config`, `pg_read_file`, ...) are
//! not inspected here; the database role a plugin runs under is what limits them.

/// The longest statement text accepted, in bytes.
pub const MAX_SQL_BYTES: usize = 1 << 20;

const ALLOWED: &[&str] = &["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE"];

/// Why a statement was refused; the message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused: the statement is {0} bytes; the limit is {MAX_SQL_BYTES}")]
    TooLong(usize),
    #[error("refused: empty statement")]
    Empty,
    #[error("refused: more than one statement in one string; send them one at a time")]
    MultipleStatements,
    #[error("refused: {0} is transaction control, which belongs to the host (the job's transaction commits when `run` returns ok)")]
    TransactionControl(String),
    #[error("refused: {0} changes the session, which belongs to the host")]
    Session(String),
    #[error("refused: COPY is not available to plugins")]
    Copy,
    #[error("refused: {0} is DDL; declare your tables in `describe().setup` instead")]
    Ddl(String),
    #[error("refused: {0} statements are not allowed; only SELECT, INSERT, UPDATE, DELETE, WITH, VALUES and TABLE are")]
    NotAllowed(String),
}

/// Accept or refuse one statement text.
pub fn check(sql: &str) -> Result<(), Refusal> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(Refusal::TooLong(sql.len()));
    }
    let tokens = Lexer::new(sql);
    let mut first = None;
    let mut after_semicolon = false;
    for token in tokens {
        match token {
            Token::Semicolon => after_semicolon = true,
            _ if after_semicolon => return Err(Refusal::MultipleStatements),
            Token::Word(w) if first.is_none() => first = Some(w.to_ascii_uppercase()),
            Token::Other if first.is_none() => first = Some(String::from("(")),
            _ => {}
        }
    }
    let Some(first) = first else { return Err(Refusal::Empty) };
    // A parenthesised query, `(SELECT ...) UNION (...)`, is still a query.
    if first == "(" || ALLOWED.contains(&first.as_str()) {
        return Ok(());
    }
    Err(match first.as_str() {
        "BEGIN" | "START" | "COMMIT" | "END" | "ROLLBACK" | "ABORT" | "SAVEPOINT" | "RELEASE"
        | "PREPARE" => Refusal::TransactionControl(first),
        "SET" | "RESET" | "SHOW" | "LISTEN" | "UNLISTEN" | "NOTIFY" | "DISCARD" | "DEALLOCATE"
        | "LOAD" => Refusal::Session(first),
        "COPY" => Refusal::Copy,
        "CREATE" | "ALTER" | "DROP" | "TRUNCATE" | "GRANT" | "REVOKE" | "COMMENT" | "REINDEX"
        | "CLUSTER" | "VACUUM" | "ANALYZE" | "REFRESH" | "SECURITY" | "IMPORT" => Refusal::Ddl(first),
        _ => Refusal::NotAllowed(first),
    })
}

enum Token {
    Word(String),
    Semicolon,
    Other,
}

/// Just enough of PostgreSQL's lexical rules to find words and `;` outside literals.
struct Lexer<'a> {
    rest: &'a str,
}

impl<'a> Lexer<'a> {
    fn new(sql: &'a str) -> Self {
        Lexer { rest: sql }
    }

    fn skip(&mut self, n: usize) {
        self.rest = self.rest.get(n..).unwrap_or("");
    }

    /// Skip past `close`, or to the end of input when it never comes.
    fn skip_past(&mut self, close: &str) {
        match self.rest.find(close) {
            Some(i) => self.skip(i + close.len()),
            None => self.rest = "",
        }
    }

    fn skip_block_comment(&mut self) {
        // Block comments nest in PostgreSQL.
        let mut depth = 0usize;
        while !self.rest.is_empty() {
            if self.rest.starts_with("/*") {
                depth += 1;
                self.skip(2);
            } else if self.rest.starts_with("*/") {
                depth -= 1;
                self.skip(2);
                if depth == 0 {
                    return;
                }
            } else {
                let c = self.rest.chars().next().map_or(1, char::len_utf8);
                self.skip(c);
            }
        }
    }

    fn skip_quoted(&mut self, quote: char, backslash_escapes: bool) {
        let mut chars = self.rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            if backslash_escapes && c == '\\' {
                chars.next();
            } else if c == quote {
                // A doubled quote is an escaped quote, not the end.
                if self.rest[i + 1..].starts_with(quote) {
                    chars.next();
                } else {
                    self.skip(i + 1);
                    return;
                }
            }
        }
        self.rest = "";
    }

    /// `$tag$ ... $tag$`; returns false when `$` does not open a dollar quote (`$1`).
    fn skip_dollar_quote(&mut self) -> bool {
        let tag_len = self.rest[1..]
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
            .map(|(i, c)| (i, c == '$'));
        match tag_len {
            Some((i, true)) if !self.rest[1..].starts_with(|c: char| c.is_ascii_digit()) => {
                let tag = self.rest[..i + 2].to_owned();
                self.skip(tag.len());
                self.skip_past(&tag);
                true
            }
            _ => false,
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        loop {
            let c = self.rest.chars().next()?;
            if c.is_whitespace() {
                self.skip(c.len_utf8());
            } else if self.rest.starts_with("--") {
                self.skip_past("\n");
            } else if self.rest.starts_with("/*") {
                self.skip_block_comment();
            } else if c == ';' {
                self.skip(1);
                return Some(Token::Semicolon);
            } else if c == '\'' {
                self.skip_quoted('\'', false);
                return Some(Token::Other);
            } else if (c == 'E' || c == 'e') && self.rest[1..].starts_with('\'') {
                self.skip(1);
                self.skip_quoted('\'', true);
                return Some(Token::Other);
            } else if c == '"' {
                self.skip_quoted('"', false);
                return Some(Token::Other);
            } else if c == '$' && self.skip_dollar_quote() {
                return Some(Token::Other);
            } else if c.is_alphabetic() || c == '_' {
                let end = self
                    .rest
                    .char_indices()
                    .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '$'))
                    .map_or(self.rest.len(), |(i, _)| i);
                let word = self.rest[..end].to_owned();
                self.skip(end);
                return Some(Token::Word(word));
            } else {
                self.skip(c.len_utf8());
                return Some(Token::Other);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_writes_pass() {
        for sql in [
            "SELECT 1",
            "select id from accounts where id > $1 order by id limit $2",
            "  -- leading comment\n INSERT INTO t VALUES ($1);",
            "/* a /* nested */ comment */ UPDATE t SET x = 1",
            "WITH a AS (SELECT 1) SELECT * FROM a",
            "(SELECT 1) UNION (SELECT 2)",
            "SELECT 'a;b', \"we;ird\", $$x;y$$, $tag$;COMMIT;$tag$, E'\\';'",
            "DELETE FROM t WHERE a = $1 ;  -- trailing\n",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql}");
        }
    }

    #[test]
    fn host_owned_statements_are_refused_with_their_rule() {
        let cases: &[(&str, Refusal)] = &[
            ("COMMIT", Refusal::TransactionControl("COMMIT".into())),
            ("  rollback", Refusal::TransactionControl("ROLLBACK".into())),
            ("/* hi */ begin", Refusal::TransactionControl("BEGIN".into())),
            ("SAVEPOINT x", Refusal::TransactionControl("SAVEPOINT".into())),
            ("SET ROLE postgres", Refusal::Session("SET".into())),
            ("RESET ROLE", Refusal::Session("RESET".into())),
            ("LISTEN x", Refusal::Session("LISTEN".into())),
            ("COPY t TO PROGRAM 'sh'", Refusal::Copy),
            ("DROP TABLE accounts", Refusal::Ddl("DROP".into())),
            ("DO $$ BEGIN END $$", Refusal::NotAllowed("DO".into())),
            ("SELECT 1; COMMIT", Refusal::MultipleStatements),
            ("SELECT 1;;SELECT 2", Refusal::MultipleStatements),
            ("", Refusal::Empty),
            ("-- only a comment", Refusal::Empty),
        ];
        for (sql, want) in cases {
            assert_eq!(check(sql).as_ref(), Err(want), "{sql}");
        }
    }

    #[test]
    fn oversized_and_unterminated_input_is_refused_not_panicking() {
        let big = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
        assert!(matches!(check(&big), Err(Refusal::TooLong(_))));
        for sql in ["SELECT 'open", "SELECT $a$ open", "SELECT /* open", "SELECT E'\\", "$", "$1", "É"] {
            let _ = check(sql);
        }
    }
}
