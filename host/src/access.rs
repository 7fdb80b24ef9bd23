//! Least privilege in the database. Each plugin has a role of its own, and that role
//! holds exactly the table privileges the plugin's `describe()` declares, plus EXECUTE on
//! the functions of schema `almanac_job` (the host's bookkeeping in the job's
//! transaction, each touching only that task's rows): never anything in schema
//! `almanac`, never another plugin's undeclared table. The plugin's statements run in
//! sessions of a login that is a member of this role alone ([`crate::login`]).
//!
//! The host's own connection role needs no superuser: it must be able to create roles
//! (`CREATEROLE`), or find them created for it, be a member of each plugin role, and
//! own (or hold `WITH GRANT OPTION`) the tables it grants.
use tokio_postgres::GenericClient;

use crate::db::quote_ident;
use crate::db::Sql;

/// The host's own view of its connection role.
const WHO_AM_I: &str = "SELECT current_user::text, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user";
const ROLE_EXISTS: &str = "SELECT pg_catalog.pg_has_role(current_user, oid, 'MEMBER') FROM pg_catalog.pg_roles WHERE rolname = $1";
/// Everything the role holds in this database now: revoked before the declared set is
/// granted, so a table dropped from a new version's declaration loses its grant.
/// Tables the role owns are left alone: an owner's rights are its own (revoking them
/// once took TRUNCATE from the plugin's own ledger, and from the host with it).
// pg_catalog-qualified: an exact-type function of a schema a plugin could create in
// (`public.quote_ident(name)`) would otherwise be picked over the built-in, and run as the host.
const HELD_TABLES: &str = "SELECT c.oid::regclass::text, c.relkind = 'S' FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
     WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1)
       AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = $1)";
const HELD_SCHEMAS: &str = "SELECT pg_catalog.quote_ident(n.nspname::text) FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1)";
/// Task roles (`$1`, or every one when NULL) that may create on a schema of this
/// database, whoever granted it (a superuser host's grant is recorded as the schema
/// owner's). Where the host holds no right at all a REVOKE fails outright, so those are
/// left (not the host's grant, not its to take back).
const MAY_CREATE: &str = "SELECT pg_catalog.quote_ident(r.rolname::text), pg_catalog.quote_ident(n.nspname::text)
     FROM pg_catalog.pg_namespace n CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
     WHERE a.privilege_type = 'CREATE' AND r.rolname LIKE 'almanac\\_task\\_%' AND ($1::text IS NULL OR r.rolname = $1)
       AND (pg_catalog.has_schema_privilege(n.oid, 'USAGE') OR pg_catalog.has_schema_privilege(n.oid, 'CREATE'))";
/// A declared table as the server resolves it (the session's search_path applies).
const RESOLVE_TABLE: &str = "SELECT c.oid::regclass::text, n.nspname::text, c.relowner = (SELECT oid FROM pg_roles WHERE rolname = $2)
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = pg_catalog.to_regclass($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')";
/// Sequences behind a table's serial columns: writers need USAGE on them (an identity
/// column's sequence needs none: its values are drawn without a privilege check).
const OWNED_SEQUENCES: &str =
    "SELECT pg_catalog.format('%I.%I', n.nspname, s.relname) FROM pg_depend d JOIN pg_class s ON s.oid = d.objid JOIN pg_namespace n ON n.oid = s.relnamespace
     WHERE d.classid = 'pg_class'::regclass AND d.refobjid = pg_catalog.to_regclass($1) AND s.relkind = 'S' AND d.deptype = 'a'";

/// Of the privileges $3 (comma-separated) on object $2 (a `table`, `sequence` or
/// `schema`, $1), those the host's role may not pass on (it holds them neither WITH
/// GRANT OPTION nor as the owner; an object that does not resolve holds none); the
/// object's owner (schema public of PostgreSQL 15 belongs to whoever owns the database);
/// and the host's role.
const GRANTABLE: &str = "SELECT coalesce(array_agg(p) FILTER (WHERE NOT coalesce(CASE $1
             WHEN 'table' THEN pg_catalog.has_table_privilege(pg_catalog.to_regclass($2), p || ' WITH GRANT OPTION')
             WHEN 'sequence' THEN pg_catalog.has_sequence_privilege(pg_catalog.to_regclass($2), p || ' WITH GRANT OPTION')
             ELSE pg_catalog.has_schema_privilege($2, p || ' WITH GRANT OPTION') END, false)), '{}'),
       CASE $1
         WHEN 'schema' THEN (SELECT CASE WHEN pg_catalog.pg_get_userbyid(n.nspowner) = 'pg_database_owner'
                                         THEN (SELECT pg_catalog.pg_get_userbyid(d.datdba) FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
                                         ELSE pg_catalog.pg_get_userbyid(n.nspowner) END
                             FROM pg_catalog.pg_namespace n WHERE n.nspname = $2)
         ELSE (SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($2)) END::text,
       current_user::text
     FROM pg_catalog.unnest(pg_catalog.string_to_array($3, ', ')) AS p";

/// Whether everyone (PUBLIC) may use schema $1: then a plugin's role needs no grant of it
/// (PostgreSQL 15 gives PUBLIC USAGE on schema public).
const PUBLIC_USAGE: &str = "SELECT pg_catalog.has_schema_privilege('public', $1, 'USAGE')";

/// Schemas no plugin role is ever granted anything in.
const HOST_SCHEMAS: &[&str] = &["almanac", "almanac_job", "pg_catalog", "information_schema", "pg_toast"];

/// One table a plugin declares, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableGrant {
    /// As the plugin's SQL names it: `accounts` or `schema.table`.
    pub name: String,
    /// INSERT, UPDATE and DELETE as well as SELECT.
    pub write: bool,
}

impl TableGrant {
    fn privileges(&self) -> &'static str {
        if self.write {
            "SELECT, INSERT, UPDATE, DELETE"
        } else {
            "SELECT"
        }
    }
}

/// Check a declared table name: lowercase identifiers, at most one schema, not a
/// host schema.
pub fn check_table_name(name: &str) -> Result<(), String> {
    let parts: Vec<&str> = name.split('.').collect();
    let ident_ok = |p: &&str| {
        !p.is_empty() && p.len() <= 63 && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') && !p.as_bytes()[0].is_ascii_digit()
    };
    if parts.len() > 2 || !parts.iter().all(ident_ok) {
        return Err(format!("table {name:?} is invalid: use lowercase letters, digits and '_', as `table` or `schema.table`"));
    }
    if parts.len() == 2 && (HOST_SCHEMAS.contains(&parts[0]) || parts[0].starts_with("pg_")) {
        return Err(format!("table {name:?} is in schema {}, which belongs to the host", parts[0]));
    }
    Ok(())
}

/// Check a declared call: `schema.function` (lowercase identifier) or `schema.operator`
/// (operator characters), the schema not the host's or the system's: what a plugin may
/// call there is the host's allowlist, not a declaration.
pub fn check_call_name(name: &str) -> Result<(), String> {
    let Some((schema, function)) = name.split_once('.') else {
        return Err(format!("call {name:?} is invalid: name the function with its schema, as `public.credit`"));
    };
    let ident = |p: &str| {
        !p.is_empty() && p.len() <= 63 && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') && !p.as_bytes()[0].is_ascii_digit()
    };
    let operator = |p: &str| !p.is_empty() && p.len() <= 63 && p.bytes().all(|b| b"+-*/<>=~!@#%^&|`?".contains(&b));
    if !ident(schema) || !(ident(function) || operator(function)) {
        return Err(format!("call {name:?} is invalid: use `schema.function` in lowercase letters, digits and '_' (or `schema.<operator>`)"));
    }
    if HOST_SCHEMAS.contains(&schema) || schema.starts_with("pg_") {
        return Err(format!(
            "call {name:?} is in schema {schema}, which belongs to the host or the system: built-in functions are the host's allowlist (`almanac run --allow-function`)"
        ));
    }
    Ok(())
}

/// The schema of a declared table name: `accounts` is in `public`.
pub fn schema_of(table: &str) -> &str {
    table.split_once('.').map_or("public", |(s, _)| s)
}

/// The schemas of declared table names, each once.
pub fn schemas_of(tables: &[String]) -> Vec<String> {
    let mut schemas: Vec<String> = tables.iter().map(|t| schema_of(t).to_owned()).collect();
    schemas.sort();
    schemas.dedup();
    schemas
}

/// The database role a task's statements run under in `database`. Role names are the
/// cluster's, so the name carries a digest of the database's: one role shared by two
/// databases' tasks of one name let database B's plugin read database A's tables, and
/// B's host (a member) write them. See [`scoped_name`] for the form.
///
/// The database's part follows a `.`, which no task name holds, so no role of this form
/// is the role older versions shared (`almanac_task_<task>`) of any task: with a `_`, a
/// plugin naming its task `ledger_1a2b3c4d` had its load "retire" task ledger's live role
/// as its own legacy one, and take its tables.
pub fn role_name(task: &str, database: &str) -> String {
    scoped_name("almanac_task_", '.', task, database)
}

/// `<prefix><task><sep><8 hex of the database's digest>`, at most 63 bytes. A long task
/// name is cut and made unique with a digest of it after a `.`, which no task name holds:
/// a short task named like a long one's shortened form would otherwise get its role and
/// its rights. The database's part is always the last 9 bytes, so no two (task,
/// database) pairs share a name.
pub fn scoped_name(prefix: &str, sep: char, task: &str, database: &str) -> String {
    use sha2::Digest;
    let db = &hex::encode(sha2::Sha256::digest(database.as_bytes()))[..8];
    let name = format!("{prefix}{task}{sep}{db}");
    if name.len() <= 63 {
        return name;
    }
    let digest = hex::encode(sha2::Sha256::digest(task.as_bytes()));
    let mut cut = 63 - prefix.len() - 1 - 8 - 1 - 8;
    while !task.is_char_boundary(cut.min(task.len())) {
        cut -= 1;
    }
    format!("{prefix}{}.{}{sep}{db}", &task[..cut.min(task.len())], &digest[..8])
}

/// The role every database's tasks of one name shared before roles were per database.
fn shared_role_name(task: &str) -> String {
    let name = format!("almanac_task_{task}");
    if name.len() <= 63 {
        return name;
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(task.as_bytes()));
    format!("{}.{}", &name[..50], &digest[..12])
}

/// Whether a role exists, and whether the host is a member.
const SHARED_ROLE: &str = "SELECT pg_catalog.pg_has_role(current_user, oid, 'MEMBER'),
            NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend d WHERE d.refclassid = 'pg_catalog.pg_authid'::regclass AND d.refobjid = r.oid
                        AND d.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
     FROM pg_catalog.pg_roles r WHERE rolname = $1";
/// Whether any database still holds an object or a privilege of the role.
const ROLE_UNUSED: &str = "SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend d
     WHERE d.refclassid = 'pg_catalog.pg_authid'::regclass AND d.refobjid = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1))";

/// Move this database off the role older versions shared across databases (see
/// [`role_name`]): what it owns here becomes `role`'s, what it was granted here is
/// revoked, this database's login leaves it, and once no database holds anything of it
/// the role is dropped. Hosts of an older version still running here keep working: their
/// sessions are this database's login, which is a member of `role` now. Inside the
/// caller's transaction, under the setup lock.
pub async fn retire_shared_role(tx: &(impl GenericClient + Sql), task: &str, role: &str, login: &str) -> Result<(), AccessError> {
    let old = shared_role_name(task);
    let Some(row) = tx.opt(SHARED_ROLE, &[&old]).await? else { return Ok(()) };
    let (member, clean_here): (bool, bool) = (row.get(0), row.get(1));
    if !member {
        if !clean_here {
            tracing::warn!(
                role = %old, %task,
                "the role older versions shared across databases still holds privileges here, and this host is not a member of it: \
                 revoke them (`DROP OWNED BY \"{old}\"` in this database, as a member)"
            );
        }
        return Ok(());
    }
    let (old_q, role_q, login_q) = (quote_ident(&old), quote_ident(role), quote_ident(login));
    tx.batch_execute(&format!("REASSIGN OWNED BY {old_q} TO {role_q}; DROP OWNED BY {old_q}")).await?;
    let in_login: bool = tx
        .one("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles l ON l.oid = m.member WHERE r.rolname = $1 AND l.rolname = $2)", &[&old, &login])
        .await?
        .get(0);
    if in_login {
        tx.batch_execute(&format!("REVOKE {old_q} FROM {login_q}")).await?;
    }
    if tx.one(ROLE_UNUSED, &[&old]).await?.get::<_, bool>(0) {
        // Other databases' logins may still be members while their hosts upgrade: only
        // a role nothing depends on any more is dropped, and a failure is not the load's.
        tx.batch_execute("SAVEPOINT retire").await?;
        let outcome = tx.batch_execute(&format!("DROP ROLE {old_q}")).await;
        tx.batch_execute(if outcome.is_ok() { "RELEASE SAVEPOINT retire" } else { "ROLLBACK TO SAVEPOINT retire" }).await?;
    }
    tracing::info!(%task, old = %old, new = %role, "the task's role is now this database's own");
    Ok(())
}

/// A plugin's role, as a call's session uses it.
#[derive(Debug)]
pub struct Role {
    pub name: String,
    /// The functions of the database the plugin declares it calls (`schema.name`): no
    /// other function outside the host's allowlist may be called by its statements.
    pub calls: Vec<String>,
}

impl Role {
    pub fn new(name: &str, calls: &[String]) -> Role {
        Role { name: name.to_owned(), calls: calls.to_vec() }
    }
}

/// Why a plugin's database access could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("cannot create its database role {role}: {reason}. The host's role needs CREATEROLE, or create the role beforehand: CREATE ROLE \"{role}\" NOLOGIN; GRANT \"{role}\" TO <host role>")]
    CreateRole { role: String, reason: String },
    #[error("it declares table {table}, which does not exist (create it first, or in the plugin's setup)")]
    MissingTable { table: String },
    #[error("it declares table {table}, which resolves to {resolved} in schema {schema}, which belongs to the host")]
    HostTable { table: String, resolved: String, schema: String },
    #[error("cannot grant {privileges} on {object} to {role}: {reason}. As {owner} (its owner), run: {fix} (`almanac grants --plugins DIR` prints every statement the host's role needs)")]
    Grant { privileges: String, object: String, role: String, reason: String, owner: String, fix: String },
    #[error("setup statement {statement:?} failed as role {role}: {reason}")]
    Setup { statement: String, role: String, reason: String },
    #[error("cannot take the setup lock: {0}")]
    Lock(String),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// Who the host is connected as.
pub struct HostRole {
    pub name: String,
    pub superuser: bool,
    pub create_role: bool,
}

/// Look at the host's own role and say loudly if it is more than it needs to be.
pub async fn check_host_role(client: &(impl GenericClient + Sql)) -> Result<HostRole, tokio_postgres::Error> {
    let row = client.one(WHO_AM_I, &[]).await?;
    let role = HostRole { name: row.get(0), superuser: row.get(1), create_role: row.get(2) };
    if role.superuser {
        tracing::warn!(
            role = %role.name,
            "CONNECTED AS A SUPERUSER: Almanac does not need it. Plugins stay confined to their own roles and the statement policy, \
             but a superuser host is one bug away from owning the cluster. Connect as an ordinary role with CREATEROLE that owns \
             schema almanac (docs/src/operations/database-roles.md)"
        );
    } else if !role.create_role {
        tracing::info!(role = %role.name, "the host's role lacks CREATEROLE: plugin roles must already exist and be granted to it");
    }
    Ok(role)
}

/// Create the role if it is missing and make the host a member, so it can `SET ROLE`.
/// Roles are shared by every database of the cluster, so another host may be doing the
/// same right now: a lost race is retried, not reported.
pub async fn ensure_role(client: &(impl GenericClient + Sql), role: &str) -> Result<(), AccessError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = async {
            match client.opt(ROLE_EXISTS, &[&role]).await?.map(|row| row.get::<_, bool>(0)) {
                Some(true) => Ok(()),
                Some(false) => client.batch_execute(&format!("GRANT {} TO CURRENT_USER", quote_ident(role))).await,
                None => client.batch_execute(&format!("CREATE ROLE {0} NOLOGIN; GRANT {0} TO CURRENT_USER", quote_ident(role))).await,
            }
        }
        .await;
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) if attempt < 5 && lost_race(&e) => continue,
            Err(e) => return Err(AccessError::CreateRole { role: role.to_owned(), reason: crate::db::error_chain(&e) }),
        }
    }
}

/// Two sessions creating or granting the same role: a unique violation, a duplicate,
/// or "tuple concurrently updated".
fn lost_race(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| ["23505", "42710", "XX000", "40001"].contains(&c.code()))
}

/// Refuse, before granting, what the host's role cannot pass on to `role`: each of
/// `privileges` (comma-separated) on `object` (a `table`, `sequence` or `schema`: `kind`)
/// that it does not hold WITH GRANT OPTION. The refusal names the object, the privilege
/// and the statement its owner runs. Checked rather than read from the GRANT's failure:
/// a GRANT of what one lacks may only warn ("no privileges were granted") or name
/// another object (a sequence's `tableoid` column, as a REVOKE ALL does: [`grant_present`]).
async fn check_grantable(tx: &impl Sql, kind: &str, object: &str, privileges: &str, role: &str) -> Result<(), AccessError> {
    let row = tx.one(GRANTABLE, &[&kind, &object, &privileges]).await?;
    let missing: Vec<String> = row.get(0);
    if missing.is_empty() {
        return Ok(());
    }
    let (owner, host): (String, String) = (row.get::<_, Option<String>>(1).unwrap_or_else(|| "its owner".into()), row.get(2));
    let target = if kind == "schema" { quote_ident(object) } else { object.to_owned() };
    Err(AccessError::Grant {
        privileges: missing.join(", "),
        object: format!("{kind} {object}"),
        role: role.to_owned(),
        reason: format!("the host's role {host} does not hold it WITH GRANT OPTION"),
        owner,
        fix: format!("GRANT {} ON {} {target} TO {} WITH GRANT OPTION;", missing.join(", "), kind.to_uppercase(), quote_ident(&host)),
    })
}

/// Let `role` create tables in the schemas of its writable tables, for the length of
/// its setup: [`grant`], which follows it, revokes this.
pub async fn open_setup(tx: &(impl GenericClient + Sql), role: &str, writable: &[String]) -> Result<(), AccessError> {
    let grantee = quote_ident(role);
    // The clean-up after setup's transaction (login::CLEAN) calls the host's function.
    tx.batch_execute(&format!("GRANT USAGE ON SCHEMA almanac_job TO {grantee}; GRANT EXECUTE ON FUNCTION almanac_job.unlink_large_objects() TO {grantee}"))
        .await?;
    for schema in schemas_of(writable) {
        let privileges = if tx.one(PUBLIC_USAGE, &[&schema]).await?.get(0) { "CREATE" } else { "USAGE, CREATE" };
        // What the host cannot pass on is not passed: a setup that needs it there fails
        // saying so (run_setup); one that creates nothing in this schema (it writes a
        // table of it that exists) needs nothing, and PUBLIC may hold CREATE anyway.
        match check_grantable(tx, "schema", &schema, privileges, role).await {
            Ok(()) => tx.batch_execute(&format!("GRANT {privileges} ON SCHEMA {} TO {grantee}", quote_ident(&schema))).await?,
            Err(AccessError::Grant { .. }) => tracing::debug!(%schema, "the host's role cannot pass CREATE on: left to the setup"),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Take back the right to create tables that [`open_setup`] gave `role` (None: every task
/// role), and only that: [`grant`] does so with the rest. A load whose grants failed does
/// it for its role alone, so the role never keeps it past its setup while the rights a
/// running version of the plugin uses (on another host) stay. Under the [`SetupLock`] no
/// task's setup runs in this database, so a task role still able to create then kept it
/// from a load that ended mid-way (a host killed between its setup and its grants): the
/// next load takes it back first.
pub async fn close_setup(tx: &(impl GenericClient + Sql), role: Option<&str>) -> Result<(), AccessError> {
    for row in tx.rows(MAY_CREATE, &[&role]).await? {
        let (grantee, schema): (String, String) = (row.get(0), row.get(1));
        if role.is_none() {
            tracing::warn!(role = %grantee, %schema, "a plugin's role kept the right to create tables from an unfinished load: taken back");
        }
        tx.batch_execute(&format!("REVOKE CREATE ON SCHEMA {schema} FROM {grantee}")).await?;
    }
    Ok(())
}

/// Run a plugin's setup statements (already checked by the policy) in a session of the
/// plugin's own login, as the plugin's role, so PostgreSQL's ownership and privilege
/// checks apply to them as they would to the plugin: INHERITS or PARTITION OF a table it
/// does not own, or a foreign key to a table it may not reference, fail here; the tables
/// it creates are its role's (not the login's: logins are per database).
pub async fn run_setup(session: &(impl GenericClient + Sql), role: &str, statements: &[String]) -> Result<(), AccessError> {
    session.batch_execute(&format!("SET LOCAL ROLE {}", quote_ident(role))).await?;
    for statement in statements {
        session.batch_execute(statement).await.map_err(|e| {
            let mut reason = crate::db::error_chain(&e);
            if let Some(db) = e.as_db_error().filter(|d| d.code().code() == "42501") {
                let hint = match db.message().strip_prefix("permission denied for schema ") {
                    Some(schema) => format!(
                        "its setup creates objects in schema {schema}, and the host's role holds no CREATE there it may pass on: as the \
                         schema's owner, run GRANT CREATE ON SCHEMA {} TO <the host's role> WITH GRANT OPTION; (`almanac grants --plugins DIR` \
                         prints it)",
                        quote_ident(schema)
                    ),
                    None => crate::db::refusal::plugin_hint(db.message(), statement, role),
                };
                reason = format!("{reason} ({hint})");
            }
            AccessError::Setup { statement: crate::text::clip(statement.clone(), 200), role: role.to_owned(), reason }
        })?;
    }
    Ok(())
}

/// Make `role`'s privileges in this database exactly `tables`, inside `tx`.
pub async fn grant(tx: &(impl GenericClient + Sql), role: &str, tables: &[TableGrant]) -> Result<(), AccessError> {
    grant_present(tx, role, tables, false).await
}

/// [`grant`]; `skip_missing`: a declared table that does not exist yet is left out (a
/// dry run's setup creates it later, in the plugin's own rolled-back transaction).
pub async fn grant_present(tx: &(impl GenericClient + Sql), role: &str, tables: &[TableGrant], skip_missing: bool) -> Result<(), AccessError> {
    let grantee = quote_ident(role);
    for row in tx.rows(HELD_TABLES, &[&role]).await? {
        let (table, sequence): (String, bool) = (row.get(0), row.get(1));
        // A sequence's USAGE is all a host grants on one. REVOKE ALL would take SELECT and
        // UPDATE too, column privileges that a host holding only USAGE is refused
        // (`permission denied for column "tableoid"`): every reload of a plugin writing a
        // table with a serial column the host does not own failed so.
        let revoke = match sequence {
            true => format!("REVOKE USAGE ON SEQUENCE {table} FROM {grantee}"),
            false => format!("REVOKE ALL ON TABLE {table} FROM {grantee}"),
        };
        tx.batch_execute(&revoke).await?;
    }
    for row in tx.rows(HELD_SCHEMAS, &[&role]).await? {
        let schema: String = row.get(0);
        tx.batch_execute(&format!("REVOKE ALL ON SCHEMA {schema} FROM {grantee}")).await?;
    }
    for table in tables {
        let Some(row) = tx.opt(RESOLVE_TABLE, &[&table.name, &role]).await? else {
            if skip_missing {
                continue;
            }
            return Err(AccessError::MissingTable { table: table.name.clone() });
        };
        let (resolved, schema, owned): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        if HOST_SCHEMAS.contains(&schema.as_str()) || schema.starts_with("pg_") {
            return Err(AccessError::HostTable { table: table.name.clone(), resolved, schema });
        }
        // A table its setup created is the plugin's own: all rights (restored, should an
        // earlier version of this code have revoked them).
        let privileges = if owned { "ALL" } else { table.privileges() };
        let mut grants = String::new();
        if !tx.one(PUBLIC_USAGE, &[&schema]).await?.get::<_, bool>(0) {
            check_grantable(tx, "schema", &schema, "USAGE", role).await?;
            grants.push_str(&format!("GRANT USAGE ON SCHEMA {} TO {grantee}; ", quote_ident(&schema)));
        }
        if !owned {
            check_grantable(tx, "table", &resolved, privileges, role).await?;
        }
        grants.push_str(&format!("GRANT {privileges} ON TABLE {resolved} TO {grantee};"));
        if table.write {
            for row in tx.rows(OWNED_SEQUENCES, &[&table.name]).await? {
                let sequence: String = row.get(0);
                check_grantable(tx, "sequence", &sequence, "USAGE", role).await?;
                grants.push_str(&format!(" GRANT USAGE ON SEQUENCE {sequence} TO {grantee};"));
            }
        }
        tx.batch_execute(&grants).await?;
    }
    // The host's bookkeeping in the plugin's sessions: claim, failure record, outbox.
    tx.batch_execute(&format!("GRANT USAGE ON SCHEMA almanac_job TO {grantee}; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA almanac_job TO {grantee}")).await?;
    Ok(())
}

/// Make `role`'s right to enqueue (WIT `jobs.enqueue`, `almanac_job.enqueue`) exactly
/// `tasks`, inside `tx`.
pub async fn grant_enqueues(tx: &impl Sql, role: &str, tasks: &[String]) -> Result<(), AccessError> {
    tx.exec("DELETE FROM almanac.enqueue_grants WHERE grantee = $1 AND NOT task = ANY($2)", &[&role, &tasks]).await?;
    tx.exec("INSERT INTO almanac.enqueue_grants (grantee, task) SELECT $1, t FROM unnest($2::text[]) t ON CONFLICT DO NOTHING", &[&role, &tasks]).await?;
    Ok(())
}

/// Held while one plugin's setup runs anywhere: from the right to create tables given,
/// through its setup, to that right taken back, so no other host's setup or grants come
/// between (one host's grants once took the right back while another's setup ran).
/// A row lock on a host table, in a transaction of a connection of its own: no plugin can
/// take or hold it (an advisory lock's key is anyone's), and it works through a
/// transaction pooler. A lock never released (the host dies) ends with its connection.
pub struct SetupLock {
    conn: Option<crate::db::Conn>,
}

impl SetupLock {
    pub async fn take(pool: &crate::db::Pool) -> Result<SetupLock, AccessError> {
        let conn = pool.get().await.map_err(|e| AccessError::Lock(e.to_string()))?;
        conn.batch_execute("BEGIN; SELECT 1 FROM almanac.setup_lock FOR UPDATE").await?;
        Ok(SetupLock { conn: Some(conn) })
    }

    pub async fn release(mut self) -> Result<(), AccessError> {
        if let Some(conn) = self.conn.take() {
            conn.batch_execute("COMMIT").await?;
        }
        Ok(())
    }
}

impl Drop for SetupLock {
    fn drop(&mut self) {
        // Released on an error path: the connection goes, its transaction with it.
        if let Some(conn) = self.conn.take() {
            conn.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_table_names_are_checked() {
        for ok in ["accounts", "points_ledger", "app.audit_2026", "t1"] {
            assert_eq!(check_table_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "Accounts", "a.b.c", "almanac.jobs", "pg_catalog.pg_authid", "pg_temp.x", "1abc", "a;b", "a b", "\"x\""] {
            assert!(check_table_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn role_names_fit_postgres_and_stay_distinct() {
        assert_eq!(role_name("daily-points", "almanac").len(), "almanac_task_daily-points.".len() + 8);
        // No role of a task is the shared role of another (`x_1a2b3c4d`'s, older versions).
        let live = role_name("ledger", "db");
        let impostor = &live["almanac_task_".len()..];
        assert!(impostor.contains('.'), "{live}: no task may be named {impostor}");
        assert_ne!(shared_role_name(&impostor.replace('.', "_")), live);
        assert_ne!(role_name("t", "one"), role_name("t", "two"), "per database");
        assert_ne!(role_name("t", "db"), crate::login::login_name("t", "db"));
        for task in ["a".repeat(40), "a".repeat(63), format!("{}é", "a".repeat(40))] {
            assert!(role_name(&task, "almanac").len() <= 63, "{task}");
        }
        let long_a = role_name(&"a".repeat(64), "db");
        let long_b = role_name(&format!("{}b", "a".repeat(63)), "db");
        assert_ne!(long_a, long_b);
        // A short task named like a long one's shortened form does not get its role.
        let lookalike = long_a["almanac_task_".len()..long_a.len() - 9].replace('.', "_");
        assert_ne!(role_name(&lookalike, "db"), long_a);
        assert_eq!(shared_role_name("daily-points"), "almanac_task_daily-points");
    }
}
