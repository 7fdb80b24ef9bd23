//! Which statements a plugin may send, decided by PostgreSQL's own parser (libpg_query,
//! through the `pg_query` crate) before the statement reaches the server.
//!
//! The parser says *what* a statement is; the plugin's database role ([`crate::access`])
//! says *which tables* it may touch. Each covers what the other cannot: a role cannot stop
//! `RESET ROLE` or `set_config('search_path', ...)` on the host's session, and a parser
//! cannot see which table a view or an operator reaches.
use std::collections::HashMap;
use std::sync::Mutex;

use pg_query::protobuf::{AlterTableType, RangeVar, TransactionStmtKind, VariableSetKind};
use pg_query::NodeEnum;

/// The longest statement text accepted, in bytes.
pub const MAX_SQL_BYTES: usize = 1 << 20;

/// Functions no plugin statement may call. A trailing `*` matches any suffix. Most of
/// these already need privileges a plugin role lacks; they are refused by name anyway so
/// the error says why, and so a host connected as a superuser is not the only guard.
pub const DEFAULT_DENY: &[&str] = &[
    // The session belongs to the host: a setting changed here would outlive the job.
    "set_config",
    "pg_sleep*",
    // Out-of-database effects and other connections.
    "dblink*",
    "lo_*",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_*",
    "pg_stat_file",
    "pg_file_*",
    "pg_notify",
    "pg_logical_emit_message",
    // Other sessions and the server itself.
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_*",
    "pg_drop_replication_slot",
    // The host's own locks (migrations, setup) are advisory locks.
    "pg_advisory*",
    "pg_try_advisory*",
    // These run a query given as text, which this policy would never see.
    "query_to_xml*",
    "cursor_to_xml*",
    "table_to_xml*",
    "schema_to_xml*",
    "database_to_xml*",
];

/// Statement texts remembered with their verdict, per host.
const CACHE_ENTRIES: usize = 4096;
/// Longer texts are checked every time rather than kept.
const CACHE_MAX_TEXT: usize = 16 * 1024;

/// Why a statement was refused; the message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused: the statement is {0} bytes; the limit is {MAX_SQL_BYTES}")]
    TooLong(usize),
    #[error("refused: empty statement")]
    Empty,
    /// The parser's own message, as the server would have said it.
    #[error("{0}")]
    Syntax(String),
    #[error("refused: {0} statements in one string; send them one at a time")]
    MultipleStatements(usize),
    #[error("refused: {0} is transaction control, which belongs to the host (the job's transaction commits when `run` returns ok)")]
    TransactionControl(String),
    #[error("refused: {0} changes the session, which belongs to the host")]
    Session(String),
    #[error("refused: COPY is not available to plugins")]
    Copy,
    #[error("refused: {0} is DDL; declare your tables in `describe()` (`tables` and `setup`) instead")]
    Ddl(String),
    #[error("refused: SELECT ... INTO creates a table, which is DDL")]
    SelectInto,
    #[error("refused: {0} statements are not allowed; only SELECT, INSERT, UPDATE, DELETE and WITH are")]
    NotAllowed(String),
    #[error("refused: function {0} is on the host's deny list")]
    Function(String),
    #[error("refused in setup: {0} is not allowed; setup may only CREATE TABLE, CREATE INDEX and ALTER TABLE ... ADD")]
    SetupStatement(String),
    #[error("refused in setup: table {0} is not one the plugin declares for writing in `tables`")]
    SetupTable(String),
}

impl Refusal {
    /// The SQLSTATE a plugin sees: a syntax error keeps the server's; a refusal has none.
    pub fn sqlstate(&self) -> Option<String> {
        matches!(self, Refusal::Syntax(_)).then(|| "42601".to_owned())
    }
}

/// One deny-list entry.
#[derive(Debug, Clone)]
struct Pattern {
    name: String,
    prefix: bool,
}

impl Pattern {
    fn new(text: &str) -> Pattern {
        let text = text.trim().to_ascii_lowercase();
        match text.strip_suffix('*') {
            Some(prefix) => Pattern { name: prefix.to_owned(), prefix: true },
            None => Pattern { name: text, prefix: false },
        }
    }

    fn matches(&self, function: &str) -> bool {
        if self.prefix {
            function.starts_with(&self.name)
        } else {
            function == self.name
        }
    }
}

/// The statement policy of one host: the deny list and a cache of verdicts by text.
pub struct Policy {
    deny: Vec<Pattern>,
    cache: Mutex<HashMap<String, Result<(), Refusal>>>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new(&[], &[])
    }
}

impl Policy {
    /// [`DEFAULT_DENY`] without the entries in `allow` (matched as written, e.g.
    /// `pg_sleep*` or `pg_sleep`), plus `deny`.
    pub fn new(allow: &[String], deny: &[String]) -> Policy {
        let allowed = |entry: &str| allow.iter().any(|a| a.trim().eq_ignore_ascii_case(entry) || a.trim().eq_ignore_ascii_case(entry.trim_end_matches('*')));
        let deny = DEFAULT_DENY
            .iter()
            .filter(|entry| !allowed(entry))
            .map(|entry| Pattern::new(entry))
            .chain(deny.iter().map(|entry| Pattern::new(entry)))
            .collect();
        Policy { deny, cache: Mutex::new(HashMap::new()) }
    }

    /// Accept or refuse one statement from a plugin.
    pub fn check(&self, sql: &str) -> Result<(), Refusal> {
        if sql.len() > MAX_SQL_BYTES {
            return Err(Refusal::TooLong(sql.len()));
        }
        if let Some(verdict) = self.cache.lock().expect("policy cache").get(sql) {
            return verdict.clone();
        }
        let verdict = self.decide(sql);
        if sql.len() <= CACHE_MAX_TEXT {
            let mut cache = self.cache.lock().expect("policy cache");
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(sql.to_owned(), verdict.clone());
        }
        verdict
    }

    /// [`Policy::check`] without the cache: the full parse, for measuring it.
    pub fn check_uncached(&self, sql: &str) -> Result<(), Refusal> {
        if sql.len() > MAX_SQL_BYTES {
            return Err(Refusal::TooLong(sql.len()));
        }
        self.decide(sql)
    }

    fn decide(&self, sql: &str) -> Result<(), Refusal> {
        let parsed = parse(sql)?;
        let stmts = &parsed.protobuf.stmts;
        let node = match stmts.as_slice() {
            [] => return Err(Refusal::Empty),
            [one] => one.stmt.as_ref().and_then(|n| n.node.as_ref()).ok_or(Refusal::Empty)?,
            many => return Err(Refusal::MultipleStatements(many.len())),
        };
        classify(node)?;
        self.check_calls(&parsed.protobuf)
    }

    /// Accept or refuse one of a plugin's setup statements: only tables the plugin
    /// declares writable may be created or extended, and the deny list applies to the
    /// defaults and checks they carry.
    pub fn check_setup(&self, sql: &str, writable: &[String]) -> Result<(), Refusal> {
        if sql.len() > MAX_SQL_BYTES {
            return Err(Refusal::TooLong(sql.len()));
        }
        let parsed = parse(sql)?;
        if parsed.protobuf.stmts.is_empty() {
            return Err(Refusal::Empty);
        }
        for stmt in &parsed.protobuf.stmts {
            let Some(node) = stmt.stmt.as_ref().and_then(|n| n.node.as_ref()) else { continue };
            let relation = match node {
                NodeEnum::CreateStmt(s) => s.relation.as_ref(),
                NodeEnum::IndexStmt(s) => s.relation.as_ref(),
                NodeEnum::AlterTableStmt(s) => {
                    for cmd in &s.cmds {
                        let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else { continue };
                        let allowed = matches!(
                            AlterTableType::try_from(cmd.subtype),
                            Ok(AlterTableType::AtAddColumn
                                | AlterTableType::AtColumnDefault
                                | AlterTableType::AtAddConstraint
                                | AlterTableType::AtAddIndex
                                | AlterTableType::AtSetNotNull
                                | AlterTableType::AtDropNotNull)
                        );
                        if !allowed {
                            return Err(Refusal::SetupStatement(format!("ALTER TABLE ({:?})", AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined))));
                        }
                    }
                    s.relation.as_ref()
                }
                other => return Err(Refusal::SetupStatement(statement_name(other))),
            };
            let table = relation.map(qualified).unwrap_or_default();
            if !writable.iter().any(|w| w.eq_ignore_ascii_case(&table)) {
                return Err(Refusal::SetupTable(table));
            }
        }
        self.check_calls(&parsed.protobuf)
    }

    /// Refuse a statement that calls a denied function anywhere in its tree, or that
    /// creates a table with SELECT ... INTO. The tree is walked as data (every node
    /// type serializes), so no expression position is overlooked.
    fn check_calls(&self, tree: &pg_query::protobuf::ParseResult) -> Result<(), Refusal> {
        let tree = serde_json::to_value(tree).map_err(|e| Refusal::Syntax(format!("unreadable parse tree: {e}")))?;
        let mut stack = vec![&tree];
        while let Some(value) = stack.pop() {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(call) = map.get("FuncCall") {
                        if let Some(name) = function_name(call) {
                            if self.deny.iter().any(|p| p.matches(&name)) {
                                return Err(Refusal::Function(name));
                            }
                        }
                    }
                    if map.contains_key("IntoClause") || map.get("into_clause").is_some_and(|v| !v.is_null()) {
                        return Err(Refusal::SelectInto);
                    }
                    stack.extend(map.values());
                }
                serde_json::Value::Array(items) => stack.extend(items),
                _ => {}
            }
        }
        Ok(())
    }
}

fn parse(sql: &str) -> Result<pg_query::ParseResult, Refusal> {
    if sql.contains('\0') {
        return Err(Refusal::Syntax("the statement contains a NUL byte".into()));
    }
    pg_query::parse(sql).map_err(|e| match e {
        pg_query::Error::Parse(message) => Refusal::Syntax(message),
        other => Refusal::Syntax(other.to_string()),
    })
}

/// The called function's own name, without its schema: `pg_catalog.set_config` is
/// `set_config`.
fn function_name(call: &serde_json::Value) -> Option<String> {
    let last = call.get("funcname")?.as_array()?.last()?;
    Some(last.get("node")?.get("String")?.get("sval")?.as_str()?.to_ascii_lowercase())
}

fn qualified(relation: &RangeVar) -> String {
    if relation.schemaname.is_empty() {
        relation.relname.clone()
    } else {
        format!("{}.{}", relation.schemaname, relation.relname)
    }
}

fn classify(node: &NodeEnum) -> Result<(), Refusal> {
    let word = |w: &str| w.to_owned();
    Err(match node {
        NodeEnum::SelectStmt(_) | NodeEnum::InsertStmt(_) | NodeEnum::UpdateStmt(_) | NodeEnum::DeleteStmt(_) => return Ok(()),
        NodeEnum::TransactionStmt(t) => Refusal::TransactionControl(word(match TransactionStmtKind::try_from(t.kind) {
            Ok(TransactionStmtKind::TransStmtBegin) => "BEGIN",
            Ok(TransactionStmtKind::TransStmtStart) => "START TRANSACTION",
            Ok(TransactionStmtKind::TransStmtCommit) => "COMMIT",
            Ok(TransactionStmtKind::TransStmtRollback) => "ROLLBACK",
            Ok(TransactionStmtKind::TransStmtSavepoint) => "SAVEPOINT",
            Ok(TransactionStmtKind::TransStmtRelease) => "RELEASE",
            Ok(TransactionStmtKind::TransStmtRollbackTo) => "ROLLBACK TO",
            Ok(TransactionStmtKind::TransStmtPrepare) => "PREPARE TRANSACTION",
            Ok(TransactionStmtKind::TransStmtCommitPrepared) => "COMMIT PREPARED",
            _ => "ROLLBACK PREPARED",
        })),
        NodeEnum::VariableSetStmt(s) => {
            let verb = match VariableSetKind::try_from(s.kind) {
                Ok(VariableSetKind::VarReset | VariableSetKind::VarResetAll) => "RESET",
                _ => "SET",
            };
            Refusal::Session(if s.name.is_empty() { word(verb) } else { format!("{verb} {}", s.name.to_ascii_uppercase()) })
        }
        NodeEnum::VariableShowStmt(_) => Refusal::Session(word("SHOW")),
        NodeEnum::DiscardStmt(_) => Refusal::Session(word("DISCARD")),
        NodeEnum::ListenStmt(_) => Refusal::Session(word("LISTEN")),
        NodeEnum::UnlistenStmt(_) => Refusal::Session(word("UNLISTEN")),
        NodeEnum::NotifyStmt(_) => Refusal::Session(word("NOTIFY")),
        NodeEnum::LoadStmt(_) => Refusal::Session(word("LOAD")),
        NodeEnum::PrepareStmt(_) => Refusal::Session(word("PREPARE")),
        NodeEnum::ExecuteStmt(_) => Refusal::Session(word("EXECUTE")),
        NodeEnum::DeallocateStmt(_) => Refusal::Session(word("DEALLOCATE")),
        NodeEnum::ConstraintsSetStmt(_) => Refusal::Session(word("SET CONSTRAINTS")),
        NodeEnum::CopyStmt(_) => Refusal::Copy,
        other => {
            let name = statement_name(other);
            let ddl = ["CREATE", "ALTER", "DROP", "GRANT", "TRUNCATE", "RENAME", "COMMENT", "REFRESH", "REASSIGN", "IMPORT", "SECURITY LABEL", "REINDEX", "CLUSTER", "VACUUM"];
            if ddl.iter().any(|prefix| name.starts_with(prefix)) {
                Refusal::Ddl(name)
            } else {
                Refusal::NotAllowed(name)
            }
        }
    })
}

/// A statement node as SQL people write it: `DropStmt` is "DROP", `CreateStmt` is
/// "CREATE TABLE".
fn statement_name(node: &NodeEnum) -> String {
    match node {
        NodeEnum::CreateStmt(_) => return "CREATE TABLE".into(),
        NodeEnum::IndexStmt(_) => return "CREATE INDEX".into(),
        NodeEnum::ViewStmt(_) => return "CREATE VIEW".into(),
        NodeEnum::RuleStmt(_) => return "CREATE RULE".into(),
        NodeEnum::GrantStmt(g) => return if g.is_grant { "GRANT" } else { "REVOKE" }.into(),
        NodeEnum::GrantRoleStmt(g) => return if g.is_grant { "GRANT" } else { "REVOKE" }.into(),
        NodeEnum::SecLabelStmt(_) => return "SECURITY LABEL".into(),
        NodeEnum::DoStmt(_) => return "DO".into(),
        NodeEnum::CallStmt(_) => return "CALL".into(),
        NodeEnum::ExplainStmt(_) => return "EXPLAIN".into(),
        NodeEnum::LockStmt(_) => return "LOCK".into(),
        NodeEnum::MergeStmt(_) => return "MERGE".into(),
        _ => {}
    }
    // The variant's name, from its Debug form: `CreateTableAsStmt(..)` -> "CREATE TABLE AS".
    let debug = format!("{node:?}");
    let variant = debug.split(['(', ' ', '{']).next().unwrap_or("").trim_end_matches("Stmt");
    let mut words = String::new();
    for (i, c) in variant.char_indices() {
        if c.is_ascii_uppercase() && i > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_uppercase());
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_writes_pass() {
        let policy = Policy::default();
        for sql in [
            "SELECT 1",
            "select id from accounts where id > $1 order by id limit $2",
            "  -- leading comment\n INSERT INTO t VALUES ($1);",
            "/* a /* nested */ comment */ UPDATE t SET x = 1",
            "WITH a AS (SELECT 1) SELECT * FROM a",
            "WITH d AS (DELETE FROM t RETURNING id) INSERT INTO u SELECT id FROM d",
            "(SELECT 1) UNION (SELECT 2)",
            "SELECT 'a;b', \"we;ird\", $$x;y$$, $tag$;COMMIT;$tag$, E'\\';'",
            "DELETE FROM t WHERE a = $1 ;  -- trailing\n",
            "SELECT now(), count(*), coalesce(max(x), 0) FROM t FOR UPDATE SKIP LOCKED",
        ] {
            assert_eq!(policy.check(sql), Ok(()), "{sql}");
        }
    }

    #[test]
    fn host_owned_statements_are_refused_with_their_rule() {
        let policy = Policy::default();
        let cases: &[(&str, Refusal)] = &[
            ("COMMIT", Refusal::TransactionControl("COMMIT".into())),
            ("  rollback", Refusal::TransactionControl("ROLLBACK".into())),
            ("/* hi */ begin", Refusal::TransactionControl("BEGIN".into())),
            ("SAVEPOINT x", Refusal::TransactionControl("SAVEPOINT".into())),
            ("SET ROLE postgres", Refusal::Session("SET ROLE".into())),
            ("RESET ROLE", Refusal::Session("RESET ROLE".into())),
            ("set local search_path = evil", Refusal::Session("SET SEARCH_PATH".into())),
            ("LISTEN x", Refusal::Session("LISTEN".into())),
            ("NOTIFY x", Refusal::Session("NOTIFY".into())),
            ("COPY t TO PROGRAM 'sh'", Refusal::Copy),
            ("DROP TABLE accounts", Refusal::Ddl("DROP".into())),
            ("CREATE TABLE x (a int)", Refusal::Ddl("CREATE TABLE".into())),
            ("CREATE TABLE x AS SELECT 1", Refusal::Ddl("CREATE TABLE AS".into())),
            ("GRANT ALL ON accounts TO public", Refusal::Ddl("GRANT".into())),
            ("TRUNCATE accounts", Refusal::Ddl("TRUNCATE".into())),
            ("SELECT * INTO copy_of FROM accounts", Refusal::SelectInto),
            ("DO $$ BEGIN END $$", Refusal::NotAllowed("DO".into())),
            ("CALL p()", Refusal::NotAllowed("CALL".into())),
            ("EXPLAIN ANALYZE DELETE FROM t", Refusal::NotAllowed("EXPLAIN".into())),
            ("SELECT 1; COMMIT", Refusal::MultipleStatements(2)),
            ("SELECT 1;;SELECT 2", Refusal::MultipleStatements(2)),
            ("", Refusal::Empty),
            ("-- only a comment", Refusal::Empty),
        ];
        for (sql, want) in cases {
            assert_eq!(policy.check(sql).as_ref(), Err(want), "{sql}");
        }
    }

    #[test]
    fn denied_functions_are_found_in_every_position() {
        let policy = Policy::default();
        for sql in [
            "SELECT set_config('role', 'postgres', true)",
            "SELECT pg_catalog.set_config('search_path', 'evil', false)",
            "SELECT * FROM set_config('a.b', 'c', true)",
            "VALUES (set_config('a.b', 'c', true))",
            "SELECT ARRAY[set_config('a.b', 'c', true)]",
            "SELECT 1 LIMIT length(set_config('a.b', 'c', true))",
            "UPDATE t SET x = (SELECT set_config('a.b', 'c', true))",
            "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET x = set_config('a.b', 'c', true)",
            "WITH a AS (SELECT set_config('a.b', 'c', true)) SELECT 1",
            "SELECT CASE WHEN true THEN set_config('a.b', 'c', true) END",
            "SELECT \"set_config\"('a.b', 'c', true)",
        ] {
            assert_eq!(policy.check(sql), Err(Refusal::Function("set_config".into())), "{sql}");
        }
        assert_eq!(policy.check("SELECT pg_read_file('/etc/passwd')"), Err(Refusal::Function("pg_read_file".into())));
        assert_eq!(policy.check("SELECT lo_import('/etc/passwd')"), Err(Refusal::Function("lo_import".into())));
        assert_eq!(policy.check("SELECT dblink_exec('x', 'y')"), Err(Refusal::Function("dblink_exec".into())));
        assert_eq!(policy.check("SELECT query_to_xml('RESET ROLE', true, true, '')"), Err(Refusal::Function("query_to_xml".into())));
        assert_eq!(policy.check("SELECT pg_sleep(1)"), Err(Refusal::Function("pg_sleep".into())));
    }

    #[test]
    fn the_deny_list_is_configurable() {
        let policy = Policy::new(&["pg_sleep".into()], &["my_secret_fn".into()]);
        assert_eq!(policy.check("SELECT pg_sleep(0)"), Ok(()));
        assert_eq!(policy.check("SELECT my_secret_fn()"), Err(Refusal::Function("my_secret_fn".into())));
        assert_eq!(policy.check("SELECT set_config('a.b', 'c', true)"), Err(Refusal::Function("set_config".into())));
    }

    #[test]
    fn syntax_errors_keep_the_servers_words_and_code() {
        let refusal = Policy::default().check("SELECT * FROM WHERE").unwrap_err();
        assert_eq!(refusal.to_string(), "syntax error at or near \"WHERE\"");
        assert_eq!(refusal.sqlstate().as_deref(), Some("42601"));
    }

    #[test]
    fn oversized_and_unterminated_input_is_refused_not_panicking() {
        let policy = Policy::default();
        let big = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
        assert!(matches!(policy.check(&big), Err(Refusal::TooLong(_))));
        for sql in ["SELECT 'open", "SELECT $a$ open", "SELECT /* open", "SELECT E'\\", "$", "$1", "É", "SELECT '\0'"] {
            assert!(policy.check(sql).is_err(), "{sql}");
        }
        let deep = format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(policy.check(&deep).is_err());
    }

    #[test]
    fn setup_may_only_shape_declared_tables() {
        let policy = Policy::default();
        let writable = vec!["points_ledger".to_owned(), "app.audit".to_owned()];
        for sql in [
            "CREATE TABLE IF NOT EXISTS points_ledger (id bigint PRIMARY KEY, at timestamptz DEFAULT now())",
            "CREATE INDEX IF NOT EXISTS points_ledger_at ON points_ledger (at)",
            "ALTER TABLE points_ledger ADD COLUMN IF NOT EXISTS note text",
            "CREATE TABLE IF NOT EXISTS app.audit (id int)",
        ] {
            assert_eq!(policy.check_setup(sql, &writable), Ok(()), "{sql}");
        }
        assert_eq!(policy.check_setup("CREATE TABLE accounts (id int)", &writable), Err(Refusal::SetupTable("accounts".into())));
        assert_eq!(policy.check_setup("CREATE INDEX ON almanac.jobs (key)", &writable), Err(Refusal::SetupTable("almanac.jobs".into())));
        assert_eq!(policy.check_setup("DROP TABLE points_ledger", &writable), Err(Refusal::SetupStatement("DROP".into())));
        assert!(matches!(policy.check_setup("ALTER TABLE points_ledger OWNER TO evil", &writable), Err(Refusal::SetupStatement(_))));
        assert_eq!(
            policy.check_setup("CREATE TABLE points_ledger (x text DEFAULT set_config('search_path', 'evil', false))", &writable),
            Err(Refusal::Function("set_config".into()))
        );
    }
}
