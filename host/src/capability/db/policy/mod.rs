//! Which statements a plugin may send, decided by PostgreSQL's own parser (libpg_query,
//! through the `pg_query` crate) before the statement reaches the server.
//!
//! The parser says *what* a statement is and which functions it calls (by allowlist,
//! [`allow`]); the plugin's database role ([`crate::access`]) says *which tables* it may
//! touch; and the executor checks after each call that the plugin is still in its role
//! and left the session as it found it, so a statement that fooled the parser still
//! cannot keep the host's powers (the book: docs/src/concepts/least-privilege.md).
//!
//! Parsing runs on threads of its own ([`parser`]) under node and depth budgets
//! ([`walk`]), never on the fiber of the plugin call.
pub mod allow;
pub mod parser;
pub mod walk;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use pg_query::protobuf::{AlterTableType, ConstrType, RangeVar, TransactionStmtKind, VariableSetKind};
use pg_query::NodeEnum;

/// The longest statement text accepted, in bytes. A statement is code, not data (data
/// goes in parameters, an array for a list): parsing a 1 MiB list of literals took
/// ~300 MB of host memory even without a copy of the tree, a 256 KiB one ~80 MB.
pub const MAX_SQL_BYTES: usize = 256 << 10;

/// Statement texts remembered with their verdict, per host.
const CACHE_ENTRIES: usize = 4096;
/// Longer texts are checked every time rather than kept.
const CACHE_MAX_TEXT: usize = 16 * 1024;

/// Why a statement was refused; the message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused: the statement is {0} bytes; the limit is {MAX_SQL_BYTES}")]
    TooLong(usize),
    #[error("refused: the statement has {0}; send a simpler one (pass long lists as one array parameter)")]
    TooComplex(String),
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
    #[error("refused: function {0} is not on the host's allowlist (built-in functions for math, text, date/time, JSON, arrays and aggregates are; a function of the database is when the plugin declares it in `calls` and calls it as declared, with its schema)")]
    Function(String),
    #[error("refused: function {0} is never available to plugins (it runs SQL given as text, changes the host's session, or reaches outside the job){hint}", hint = never_hint(.0))]
    Never(String),
    #[error("refused: operator {0} is not one the plugin declares in `calls`")]
    Operator(String),
    #[error("refused: `.{0}` may call function {0} of the database (PostgreSQL reads `x.{0}` as `{0}(x)` when x has no such column); declare the function in `calls` if that is meant")]
    AttributeCall(String),
    #[error("refused: {0}(...) may call function {1}.{0} of the database, which an unqualified call can reach; write pg_catalog.{0}(...) for the built-in, or declare {1}.{0} in `calls` and call it so")]
    Shadowed(String, String),
    #[error("refused in setup: {0} is not allowed; setup may only CREATE TABLE, CREATE INDEX and ALTER TABLE ... ADD")]
    SetupStatement(String),
    #[error("refused in setup: table {0} is not one the plugin declares for writing in `tables`")]
    SetupTable(String),
    #[error("refused in setup: {0} ties the table to another one; a plugin's tables stand alone")]
    SetupClause(String),
    #[error("refused in setup: a foreign key to {0}, which the plugin does not declare in `tables`")]
    SetupReference(String),
}

/// A text-SQL runner of an extension (`public.crosstab`) may still be declared.
fn never_hint(name: &str) -> &'static str {
    if name.contains('.') {
        "; a plugin that must call it declares it in `calls`, and the operator is warned"
    } else {
        ""
    }
}

impl Refusal {
    /// The SQLSTATE a plugin sees: a syntax error keeps the server's; a refusal has none.
    pub fn sqlstate(&self) -> Option<String> {
        matches!(self, Refusal::Syntax(_)).then(|| "42601".to_owned())
    }
}

/// A call or operator qualified with a schema other than `pg_catalog`: allowed only if
/// the plugin declares it (`calls`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Qualified {
    /// `schema.name`, as declared.
    name: String,
    operator: bool,
}

/// What a statement calls that only the plugin's declaration can allow.
#[derive(Debug, Default)]
struct Calls {
    qualified: Vec<Qualified>,
    /// Names in attribute notation (`x.name`), which call `name(x)` when x has no such
    /// column: refused when the database has such a function the plugin did not declare.
    attributes: Vec<String>,
    /// Built-ins called unqualified (`round(x, 2)`): refused when a schema of the
    /// database has a function of that name the plugin did not declare, which the call
    /// may resolve to.
    unqualified: Vec<String>,
}

/// The database's own functions by name, with the schemas that have one (read by the
/// host at each load: `catalog::calls::reachable`).
#[derive(Debug, Default, Clone)]
pub struct Functions {
    /// Those taking one argument: attribute notation can call them.
    pub attribute: HashMap<String, std::collections::BTreeSet<String>>,
    /// All of them: an unqualified call of a built-in's name can reach an overload.
    pub any: HashMap<String, std::collections::BTreeSet<String>>,
}

impl Functions {
    /// The first schema whose function `name` the plugin did not declare.
    fn undeclared<'a>(found: Option<&'a std::collections::BTreeSet<String>>, name: &str, calls: &[String]) -> Option<&'a String> {
        found?.iter().find(|schema| !calls.iter().any(|c| c.split_once('.') == Some((schema.as_str(), name))))
    }
}

/// What the parser decided about one text, before the plugin's declaration is known.
type Verdict = Result<Arc<Calls>, Refusal>;

/// The statement policy of one host: the function allowlist, the parser threads, a
/// cache of verdicts by text, and the names of the database's own one-argument
/// functions (which attribute notation can call).
pub struct Policy {
    allowed: Arc<HashSet<String>>,
    cache: Mutex<HashMap<String, Verdict>>,
    parser: parser::Parser,
    functions: arc_swap::ArcSwap<Functions>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new(&[], &[]).expect("the default policy")
    }
}

impl Policy {
    /// [`allow::ALLOWED`] plus `allow`, without `deny`. A name in [`allow::NEVER`] cannot
    /// be allowed: the error says which.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Policy, String> {
        let mut allowed: HashSet<String> = allow::ALLOWED.iter().map(|s| s.to_string()).collect();
        for name in allow {
            let name = name.trim().trim_end_matches('*').to_ascii_lowercase();
            if allow::never(&name) {
                return Err(format!("--allow-function {name}: this function is never available to plugins"));
            }
            allowed.insert(name);
        }
        for name in deny {
            let pattern = name.trim().to_ascii_lowercase();
            allowed.retain(|a| !allow::matches(&pattern, a));
        }
        Ok(Policy {
            allowed: Arc::new(allowed),
            cache: Mutex::new(HashMap::new()),
            parser: parser::Parser::new(),
            functions: arc_swap::ArcSwap::from_pointee(Functions::default()),
        })
    }

    /// The database's functions that attribute notation can call (read by the host at
    /// each load: `catalog::calls`).
    pub fn learn_functions(&self, functions: Functions) {
        self.functions.store(Arc::new(functions));
    }

    /// Accept or refuse one statement from `task`'s plugin, which declares `calls`
    /// (statements wait for a parser by task, in turn).
    pub async fn check(&self, task: &str, sql: &str, calls: &[String]) -> Result<(), Refusal> {
        within_length(sql)?;
        if let Some(verdict) = self.cache.lock().expect("policy cache").get(sql) {
            return permitted(verdict, calls, &self.functions.load());
        }
        let (text, allowed) = (sql.to_owned(), self.allowed.clone());
        let verdict = self.parser.run(task, move || decide(&text, &allowed)).await;
        let outcome = permitted(&verdict, calls, &self.functions.load());
        if sql.len() <= CACHE_MAX_TEXT {
            let mut cache = self.cache.lock().expect("policy cache");
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(sql.to_owned(), verdict);
        }
        outcome
    }

    /// The full decision without the cache, blocking: for tests and for measuring it.
    pub fn check_uncached(&self, sql: &str, calls: &[String]) -> Result<(), Refusal> {
        within_length(sql)?;
        let (text, allowed) = (sql.to_owned(), self.allowed.clone());
        permitted(&self.parser.run_blocking(move || decide(&text, &allowed)), calls, &self.functions.load())
    }

    /// Accept or refuse one of a plugin's setup statements: only tables the plugin
    /// declares writable may be created or extended, standing alone (no INHERITS,
    /// PARTITION OF, OF or LIKE, no foreign key to a table it does not declare), and the
    /// allowlist applies to the defaults and checks they carry.
    pub async fn check_setup(&self, task: &str, sql: &str, writable: &[String], declared: &[String], calls: &[String]) -> Result<(), Refusal> {
        within_length(sql)?;
        let (text, allowed, writable, declared) = (sql.to_owned(), self.allowed.clone(), writable.to_vec(), declared.to_vec());
        let verdict = self.parser.run(task, move || decide_setup(&text, &allowed, &writable, &declared)).await;
        permitted(&verdict, calls, &self.functions.load())
    }
}

fn within_length(sql: &str) -> Result<(), Refusal> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(Refusal::TooLong(sql.len()));
    }
    Ok(())
}

fn permitted(verdict: &Verdict, calls: &[String], functions: &Functions) -> Result<(), Refusal> {
    let found = verdict.as_ref().map_err(Clone::clone)?;
    for q in &found.qualified {
        if calls.contains(&q.name) {
            continue;
        }
        let function = q.name.split_once('.').map_or("", |(_, f)| f);
        return Err(match q.operator {
            true => Refusal::Operator(q.name.clone()),
            // Whatever schema it is found in (an extension's `public.dblink_exec`).
            false if allow::never(function) => Refusal::Never(q.name.clone()),
            false => Refusal::Function(q.name.clone()),
        });
    }
    for name in &found.attributes {
        if Functions::undeclared(functions.attribute.get(name), name, calls).is_some() {
            return Err(Refusal::AttributeCall(name.clone()));
        }
    }
    for name in &found.unqualified {
        if let Some(schema) = Functions::undeclared(functions.any.get(name), name, calls) {
            return Err(Refusal::Shadowed(name.clone(), schema.clone()));
        }
    }
    Ok(())
}

fn decide(sql: &str, allowed: &HashSet<String>) -> Verdict {
    let parsed = parse(sql)?;
    let stmts = &parsed.protobuf.stmts;
    let node = match stmts.as_slice() {
        [] => return Err(Refusal::Empty),
        [one] => one.stmt.as_ref().and_then(|n| n.node.as_ref()).ok_or(Refusal::Empty)?,
        many => return Err(Refusal::MultipleStatements(many.len())),
    };
    classify(node)?;
    check_calls(&parsed.protobuf, allowed)
}

fn decide_setup(sql: &str, allowed: &HashSet<String>, writable: &[String], declared: &[String]) -> Verdict {
    let parsed = parse(sql)?;
    if parsed.protobuf.stmts.is_empty() {
        return Err(Refusal::Empty);
    }
    let is_declared = |table: &str| declared.iter().any(|d| d.eq_ignore_ascii_case(table));
    for stmt in &parsed.protobuf.stmts {
        let Some(node) = stmt.stmt.as_ref().and_then(|n| n.node.as_ref()) else { continue };
        let mut constraints = Vec::new();
        let relation = match node {
            NodeEnum::CreateStmt(s) => {
                // PARTITION OF names its parent among the inherited relations too.
                if s.partbound.is_some() {
                    return Err(Refusal::SetupClause("PARTITION OF".into()));
                }
                if !s.inh_relations.is_empty() {
                    return Err(Refusal::SetupClause("INHERITS".into()));
                }
                if s.of_typename.is_some() {
                    return Err(Refusal::SetupClause("OF <type>".into()));
                }
                for element in &s.table_elts {
                    match &element.node {
                        Some(NodeEnum::TableLikeClause(_)) => return Err(Refusal::SetupClause("LIKE".into())),
                        Some(NodeEnum::Constraint(c)) => constraints.push(c.as_ref()),
                        Some(NodeEnum::ColumnDef(column)) => constraints.extend(column_constraints(column)),
                        _ => {}
                    }
                }
                s.relation.as_ref()
            }
            NodeEnum::IndexStmt(s) => s.relation.as_ref(),
            NodeEnum::AlterTableStmt(s) => {
                for cmd in &s.cmds {
                    let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else { continue };
                    let kind = AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined);
                    let allowed = matches!(
                        kind,
                        AlterTableType::AtAddColumn
                            | AlterTableType::AtColumnDefault
                            | AlterTableType::AtAddConstraint
                            | AlterTableType::AtAddIndex
                            | AlterTableType::AtSetNotNull
                            | AlterTableType::AtDropNotNull
                    );
                    if !allowed {
                        return Err(Refusal::SetupStatement(format!("ALTER TABLE ({kind:?})")));
                    }
                    match cmd.def.as_ref().and_then(|d| d.node.as_ref()) {
                        Some(NodeEnum::Constraint(c)) => constraints.push(c.as_ref()),
                        Some(NodeEnum::ColumnDef(column)) => constraints.extend(column_constraints(column)),
                        _ => {}
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
        for constraint in constraints {
            if ConstrType::try_from(constraint.contype) == Ok(ConstrType::ConstrForeign) {
                let target = constraint.pktable.as_ref().map(qualified).unwrap_or_default();
                if !is_declared(&target) {
                    return Err(Refusal::SetupReference(target));
                }
            }
        }
    }
    check_calls(&parsed.protobuf, allowed)
}

/// The constraints written on one column.
fn column_constraints(column: &pg_query::protobuf::ColumnDef) -> impl Iterator<Item = &pg_query::protobuf::Constraint> {
    column.constraints.iter().filter_map(|c| match &c.node {
        Some(NodeEnum::Constraint(c)) => Some(c.as_ref()),
        _ => None,
    })
}

/// Check every function called and every qualified operator anywhere in the tree
/// against the allowlist, and refuse SELECT ... INTO. Returns the calls and operators
/// qualified with a user schema, and the names in attribute notation, which the
/// plugin's declaration decides.
fn check_calls(tree: &pg_query::protobuf::ParseResult, allowed: &HashSet<String>) -> Verdict {
    let found = walk::walk(tree).map_err(|e| Refusal::TooComplex(e.to_string()))?;
    if found.into {
        return Err(Refusal::SelectInto);
    }
    let mut qualified = Vec::new();
    let mut attributes = Vec::new();
    let mut unqualified = Vec::new();
    for name in &found.calls {
        match name.as_slice() {
            [function] | [_, function] if name.len() == 1 || name[0] == "pg_catalog" => {
                if allow::never(function) {
                    return Err(Refusal::Never(function.clone()));
                }
                if !allowed.contains(function.as_str()) {
                    return Err(Refusal::Function(function.clone()));
                }
                if name.len() == 1 {
                    unqualified.push(function.clone());
                }
            }
            [schema, function] => qualified.push(Qualified { name: format!("{schema}.{function}"), operator: false }),
            _ => return Err(Refusal::Function(name.join("."))),
        }
    }
    for name in &found.attributes {
        if allow::never(name) {
            return Err(Refusal::Never(name.clone()));
        }
        // A column is rarely named like a system function.
        if name.starts_with("pg_") && !allowed.contains(name.as_str()) {
            return Err(Refusal::Function(name.clone()));
        }
        attributes.push(name.clone());
    }
    for name in &found.operators {
        match name.as_slice() {
            [schema, _] if schema == "pg_catalog" => {}
            [schema, operator] => qualified.push(Qualified { name: format!("{schema}.{operator}"), operator: true }),
            _ => return Err(Refusal::Operator(name.join("."))),
        }
    }
    for method in &found.samples {
        let name = method.last().map(String::as_str).unwrap_or_default();
        if !matches!(name, "system" | "bernoulli") || (method.len() == 2 && method[0] != "pg_catalog") || method.len() > 2 {
            return Err(Refusal::NotAllowed(format!("TABLESAMPLE {}", method.join("."))));
        }
    }
    for names in [&mut attributes, &mut unqualified] {
        names.sort();
        names.dedup();
    }
    Ok(Arc::new(Calls { qualified, attributes, unqualified }))
}

fn parse(sql: &str) -> Result<pg_query::ParseResult, Refusal> {
    if sql.contains('\0') {
        return Err(Refusal::Syntax("the statement contains a NUL byte".into()));
    }
    pg_query::parse(sql).map_err(|e| match e {
        // libpg_query's stack bound, and bison's own parse stack.
        pg_query::Error::Parse(message) if message.contains("stack depth limit exceeded") || message.starts_with("memory exhausted") => {
            Refusal::TooComplex(format!("nesting deeper than the parser's limit ({message})"))
        }
        pg_query::Error::Parse(message) => Refusal::Syntax(message),
        other => Refusal::Syntax(other.to_string()),
    })
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
            let ddl = [
                "CREATE",
                "ALTER",
                "DROP",
                "GRANT",
                "TRUNCATE",
                "RENAME",
                "COMMENT",
                "REFRESH",
                "REASSIGN",
                "IMPORT",
                "SECURITY LABEL",
                "REINDEX",
                "CLUSTER",
                "VACUUM",
            ];
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
mod tests;
