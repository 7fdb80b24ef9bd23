//! What the host's role needs granted in a database whose tables belong to someone else
//! (`almanac grants`): the host passes each plugin's declared privileges on to the
//! plugin's own role ([`crate::access`]), and PostgreSQL lets it pass on only what it
//! owns or holds `WITH GRANT OPTION`. So for the plugins of a folder this lists, per
//! owner, exactly the statements that owner runs — the tables (read or write), the
//! sequences behind a written table's serial and identity columns (USAGE, the least that
//! `nextval` needs), the schemas (USAGE; CREATE where a plugin's setup creates its
//! tables), and CREATE on the database for the host's own schemas — leaving out what is
//! in effect already, each with the reason a reviewer can check.
use std::collections::BTreeMap;

use crate::db::{quote_ident, Sql};
use crate::task::TaskSpec;

const TABLE: &str = include_str!("table.sql");
const SEQUENCES: &str = include_str!("sequences.sql");
const SCHEMA: &str = include_str!("schema.sql");
const DATABASE: &str = include_str!("database.sql");

const WRITE: &str = "SELECT, INSERT, UPDATE, DELETE";

/// One statement an owner runs for the host's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Who runs it: the object's owner (or a superuser).
    pub by: String,
    pub sql: String,
    /// Why the host needs it.
    pub why: String,
}

/// What the host's role needs for a set of plugins.
#[derive(Debug, Default)]
pub struct Needs {
    pub host: String,
    pub database: String,
    /// The database's owner.
    pub owner: String,
    /// Missing, in the order to run them.
    pub grants: Vec<Grant>,
    /// Held already: one line each.
    pub held: Vec<String>,
    /// What no grant settles (a table that does not exist, a role attribute).
    pub notes: Vec<String>,
}

/// Who uses a table or schema, by task name.
#[derive(Default)]
struct Users {
    readers: Vec<String>,
    writers: Vec<String>,
    /// Tasks whose setup creates tables in it (schemas only).
    creators: Vec<String>,
}

fn list(tasks: &[String]) -> String {
    tasks.join(", ")
}

/// Why `almanac grants` cannot say what a role needs.
#[derive(Debug, thiserror::Error)]
pub enum GrantsError {
    #[error("no role {0:?} in this cluster")]
    NoRole(String),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// What `host` (a role name; None: the connected role) needs so that it can set up and
/// serve `tasks`.
pub async fn needs(client: &impl Sql, host: Option<&str>, tasks: &[&TaskSpec]) -> Result<Needs, GrantsError> {
    let db = client.opt(DATABASE, &[&host]).await?.ok_or_else(|| GrantsError::NoRole(host.unwrap_or_default().to_owned()))?;
    let (database, db_owner, can_create, create_role, superuser): (String, String, bool, bool, bool) = (db.get(0), db.get(1), db.get(2), db.get(3), db.get(4));
    let host: String = db.get(5);
    let host = host.as_str();
    let mut needs = Needs { host: host.to_owned(), database: database.clone(), owner: db_owner.clone(), ..Needs::default() };
    let grantee = quote_ident(host);
    if superuser {
        needs.notes.push(format!("{host} is a superuser: it needs no grant (and should not be one; see the database-roles page)"));
        return Ok(needs);
    }
    if !create_role {
        needs.notes.push(format!(
            "{host} lacks CREATEROLE: it creates a role and a login per plugin. A superuser runs: ALTER ROLE {grantee} CREATEROLE; \
             (or create each plugin's role beforehand, as the database-roles page says)"
        ));
    }
    match can_create {
        true => needs.held.push(format!("CREATE on database {database}: the host's schemas almanac and almanac_job")),
        false => needs.grants.push(Grant {
            by: db_owner,
            sql: format!("GRANT CREATE ON DATABASE {} TO {grantee};", quote_ident(&database)),
            why: format!("CREATE on database {database}: the host's migrations create its own schemas, almanac and almanac_job"),
        }),
    }

    // Who uses what, by the name each table resolves to.
    let mut tables: BTreeMap<String, (tokio_postgres::Row, Users)> = BTreeMap::new();
    let mut schemas: BTreeMap<String, Users> = BTreeMap::new();
    for spec in tasks {
        for table in &spec.tables {
            match client.opt(TABLE, &[&table.name, &host]).await? {
                Some(row) => {
                    let (resolved, schema): (String, String) = (row.get(0), row.get(1));
                    let entry = tables.entry(resolved).or_insert_with(|| (row, Users::default()));
                    let users = if table.write { &mut entry.1.writers } else { &mut entry.1.readers };
                    users.push(spec.name.clone());
                    let users = schemas.entry(schema).or_default();
                    users.readers.push(spec.name.clone());
                    if table.write && !spec.setup.is_empty() {
                        users.creators.push(spec.name.clone());
                    }
                }
                None if table.write && !spec.setup.is_empty() => {
                    needs.notes.push(format!("{} does not exist yet: {}'s setup creates it, owned by the task's role", table.name, spec.name));
                    let users = schemas.entry(crate::access::schema_of(&table.name).to_owned()).or_default();
                    users.readers.push(spec.name.clone());
                    users.creators.push(spec.name.clone());
                }
                None => needs.notes.push(format!(
                    "{} does not exist: {} declares it and no setup creates it; create it, then run `almanac grants` again",
                    table.name, spec.name
                )),
            }
        }
    }

    for (schema, users) in &mut schemas {
        for tasks in [&mut users.readers, &mut users.creators] {
            tasks.sort();
            tasks.dedup();
        }
        let Some(row) = client.opt(SCHEMA, &[schema, &host]).await? else {
            needs.notes.push(format!("schema {schema} does not exist: its owner creates it (CREATE SCHEMA {})", quote_ident(schema)));
            continue;
        };
        let (owner, usage, create): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
        // PostgreSQL 15's schema public belongs to whoever owns the database.
        let owner = if owner == "pg_database_owner" { needs.owner.clone() } else { owner };
        let want_create = !users.creators.is_empty();
        let why = match want_create {
            true if usage => format!(
                "CREATE on schema {schema}: the host passes it to {} for its setup only (taken back after it); USAGE the roles of {} have already",
                list(&users.creators),
                list(&users.readers)
            ),
            true => format!(
                "USAGE and CREATE on schema {schema}: the host passes USAGE to the roles of {}, and CREATE to {} for its setup only (taken back after it)",
                list(&users.readers),
                list(&users.creators)
            ),
            false => format!("USAGE on schema {schema}: the host passes it to the roles of {}", list(&users.readers)),
        };
        if usage && (create || !want_create) {
            needs.held.push(why);
            continue;
        }
        let privileges = match (usage, want_create) {
            (true, _) => "CREATE",
            (false, true) => "USAGE, CREATE",
            (false, false) => "USAGE",
        };
        needs.grants.push(Grant { by: owner, sql: format!("GRANT {privileges} ON SCHEMA {} TO {grantee} WITH GRANT OPTION;", quote_ident(schema)), why });
    }

    for (resolved, (row, users)) in &mut tables {
        for tasks in [&mut users.readers, &mut users.writers] {
            tasks.sort();
            tasks.dedup();
        }
        let (owner, read, write): (String, bool, bool) = (row.get(2), row.get(3), row.get(4));
        let writes = !users.writers.is_empty();
        let why = match (writes, users.readers.is_empty()) {
            (true, true) => format!("{WRITE} on {resolved}: {} write(s) it", list(&users.writers)),
            (true, false) => format!("{WRITE} on {resolved}: {} write(s) it, {} read(s) it", list(&users.writers), list(&users.readers)),
            (false, _) => format!("SELECT on {resolved}: {} read(s) it", list(&users.readers)),
        };
        let privileges = if writes { WRITE } else { "SELECT" };
        match read && (write || !writes) {
            true => needs.held.push(why),
            false => needs.grants.push(Grant { by: owner, sql: format!("GRANT {privileges} ON TABLE {resolved} TO {grantee} WITH GRANT OPTION;"), why }),
        }
        if !writes {
            continue;
        }
        let table_name = resolved.clone();
        for seq in client.rows(SEQUENCES, &[&table_name, &host]).await? {
            let (sequence, column, owner, held): (String, String, String, bool) = (seq.get(0), seq.get(1), seq.get(2), seq.get(3));
            let why = format!("USAGE on sequence {sequence}: {resolved}.{column} draws from it, and {} insert(s) rows", list(&users.writers));
            match held {
                true => needs.held.push(why),
                false => needs.grants.push(Grant { by: owner, sql: format!("GRANT USAGE ON SEQUENCE {sequence} TO {grantee} WITH GRANT OPTION;"), why }),
            }
        }
    }
    Ok(needs)
}

impl Needs {
    /// As `almanac grants` prints it: a summary in SQL comments, then the statements
    /// grouped by the role that runs them, ready for psql.
    pub fn script(&self, plugins: &str) -> String {
        // Role, schema and folder names are anyone's text: a newline in one must not end
        // its comment and leave a statement for the owner to run.
        let mut out = String::new();
        let mut comment = |text: &str| {
            out.push_str("--");
            if !text.is_empty() {
                out.push(' ');
                out.push_str(&crate::text::printable(text));
            }
            out.push('\n');
        };
        comment(&format!("What role {} (the host's) needs in database {} for the plugins in {plugins}.", self.host, self.database));
        comment("Each plugin's role gets from the host only what that plugin declares; the host can pass on");
        comment("only what it owns or holds WITH GRANT OPTION.");
        if !self.grants.is_empty() {
            comment("");
            comment("To grant:");
            for g in &self.grants {
                comment(&format!("  {} (run by {})", g.why, g.by));
            }
        }
        if !self.held.is_empty() {
            comment("");
            comment("Held already:");
            for h in &self.held {
                comment(&format!("  {h}"));
            }
        }
        for note in &self.notes {
            comment("");
            comment(&format!("NOTE: {note}"));
        }
        if self.grants.is_empty() {
            comment("");
            comment(&format!("Nothing to grant: {} holds what these plugins need.", self.host));
            return out;
        }
        let mut seen = std::collections::BTreeSet::new();
        for owner in self.grants.iter().map(|g| g.by.as_str()).filter(|o| seen.insert(*o)) {
            out.push_str(&format!("\n-- as {}:\n", crate::text::printable(owner)));
            for g in self.grants.iter().filter(|g| g.by == owner) {
                out.push_str(&g.sql);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_a_newline_stays_inside_its_comment() {
        let evil = "x\nDROP TABLE accounts; --";
        let needs = Needs {
            host: "almanac_host".into(),
            database: "app".into(),
            owner: evil.into(),
            grants: vec![Grant {
                by: evil.into(),
                sql: "GRANT CREATE ON DATABASE \"app\" TO \"almanac_host\";".into(),
                why: format!("CREATE on schema {evil}"),
            }],
            held: vec![format!("USAGE on schema {evil}")],
            notes: vec![format!("{evil} does not exist yet")],
        };
        let script = needs.script("./plugins");
        let statements: Vec<&str> = script.lines().filter(|l| !l.is_empty() && !l.starts_with("--")).collect();
        assert_eq!(statements, ["GRANT CREATE ON DATABASE \"app\" TO \"almanac_host\";"], "{script}");
    }
}
