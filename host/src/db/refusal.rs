//! A permission refusal (SQLSTATE 42501) as the one who must act on it reads it: the
//! object, the privilege, and what to change. A plugin's role holds exactly what its
//! `describe()` declares, so for a plugin's statement the change is a declaration (the
//! host grants it at load), never a GRANT an operator runs by hand (the host would take
//! it back at the next load).

/// What PostgreSQL's message names: `permission denied for <kind> <name>`, or a column
/// of a relation (a sequence's `tableoid` column is how a sequence refusal can read).
fn denied(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("permission denied for ")?;
    if let Some(column) = rest.strip_prefix("column ") {
        let (_, relation) = column.split_once(" of relation ")?;
        return Some(("relation", relation.trim_matches('"')));
    }
    for kind in ["materialized view", "foreign table", "table", "view", "sequence", "schema", "function", "procedure", "large object", "database"] {
        if let Some(name) = rest.strip_prefix(kind).and_then(|n| n.strip_prefix(' ')) {
            return Some((kind, name.trim_matches('"')));
        }
    }
    None
}

/// The privilege a statement needs, by its first word (SELECT ... FOR UPDATE needs
/// UPDATE as well, which the declaration of a written table gives).
fn verb(sql: &str) -> Option<&'static str> {
    let word = sql.split_whitespace().next()?.to_ascii_uppercase();
    ["SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE"].into_iter().find(|v| *v == word)
}

/// What to add to a plugin statement's permission refusal (`message`, for `sql` run as
/// `role`): the object, the privilege and the declaration that grants it.
pub fn plugin_hint(message: &str, sql: &str, role: &str) -> String {
    let Some((kind, name)) = denied(message) else {
        return format!("the plugin runs as role {role}, which may use only what its describe() declares");
    };
    let declare =
        format!("declare it in describe(): .reads(&[\"{name}\"]) to read it, .writes(&[\"{name}\"]) to write it; the host grants it to role {role} at load");
    match kind {
        "table" | "view" | "materialized view" | "foreign table" => match verb(sql) {
            Some(verb) => format!("role {role} may not {verb} {kind} {name}: {declare}"),
            None => format!("role {role} lacks a privilege on {kind} {name} this statement needs: {declare}"),
        },
        "sequence" | "relation" => format!(
            "role {role} may not use sequence {name} (USAGE, which nextval needs): the host grants it on the sequences behind the serial and \
             identity columns of the tables a plugin writes; declare that table with .writes(&[...]), or attach the sequence to its column \
             as its owner: ALTER SEQUENCE {name} OWNED BY <table>.<column>;"
        ),
        "schema" if ["almanac", "almanac_job", "pg_catalog", "information_schema"].contains(&name) || name.starts_with("pg_") => {
            format!("role {role} may not use schema {name}: it belongs to the host (or the system), and no plugin's role is granted anything in it")
        }
        "schema" => format!(
            "role {role} may not use schema {name} (USAGE): the host grants it on the schemas of the tables a plugin declares; declare the \
             table with its schema, as .reads(&[\"{name}.<table>\"])"
        ),
        "function" | "procedure" => {
            format!(
                "role {role} may not EXECUTE {kind} {name}: its owner took EXECUTE from PUBLIC; as its owner, run: GRANT EXECUTE ON {} {name} TO \"{role}\";",
                kind.to_uppercase()
            )
        }
        _ => format!("role {role} may not use {kind} {name}: plugins reach only what their describe() declares"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_refusal_names_the_privilege_and_the_declaration() {
        let hint = plugin_hint("permission denied for table invoices", "insert into invoices values (1)", "almanac_task_billing.1a2b3c4d");
        assert!(hint.starts_with("role almanac_task_billing.1a2b3c4d may not INSERT table invoices: declare it"), "{hint}");
        assert!(hint.contains(".writes(&[\"invoices\"])"), "{hint}");
    }

    #[test]
    fn a_sequences_tableoid_column_reads_as_the_sequence() {
        let hint = plugin_hint("permission denied for column \"tableoid\" of relation \"invoices_id_seq\"", "INSERT INTO invoices DEFAULT VALUES", "r");
        assert!(hint.starts_with("role r may not use sequence invoices_id_seq (USAGE, which nextval needs)"), "{hint}");
        let hint = plugin_hint("permission denied for sequence invoices_id_seq", "SELECT nextval('invoices_id_seq')", "r");
        assert!(hint.contains("ALTER SEQUENCE invoices_id_seq OWNED BY"), "{hint}");
    }

    #[test]
    fn schemas_functions_and_the_unknown() {
        assert!(plugin_hint("permission denied for schema billing", "SELECT 1", "r").contains(".reads(&[\"billing.<table>\"])"));
        assert!(plugin_hint("permission denied for schema almanac", "UPDATE almanac.jobs SET status = 'done'", "r")
            .ends_with("it belongs to the host (or the system), and no plugin's role is granted anything in it"));
        assert!(plugin_hint("permission denied for function credit", "SELECT credit(1)", "r").contains("GRANT EXECUTE ON FUNCTION credit TO \"r\";"));
        assert_eq!(plugin_hint("must be owner of table x", "ALTER TABLE x", "r"), "the plugin runs as role r, which may use only what its describe() declares");
    }
}
