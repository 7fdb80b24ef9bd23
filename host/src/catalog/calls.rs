//! The functions a plugin declares it calls (`task-info.calls`), checked against the
//! catalog when it is loaded: each must exist, and what operators should know of it is
//! kept with the plugin's row (`almanac plugins`) and said at load. A statement may call
//! the host's allowlist of built-in functions and these, nothing else
//! ([`crate::capability::db::Policy`]); attribute notation (`x.name`, which calls
//! `name(x)`) and unqualified calls of a built-in's name are held against the database's
//! own functions, read here.
use serde::{Deserialize, Serialize};

use crate::capability::db::policy::allow;
pub use crate::capability::db::policy::Functions;
use crate::db::Sql;

const DECLARED_CALL: &str = include_str!("declared_call.sql");
const ATTRIBUTE_CALLABLE: &str = include_str!("attribute_callable.sql");

/// One overload of a declared function (or operator), as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// As declared: `public.credit`.
    pub name: String,
    /// `public.credit(integer,integer)`.
    pub signature: String,
    pub volatility: String,
    /// Runs with its owner's rights: the plugin reaches whatever it reaches.
    pub security_definer: bool,
    /// The extension that owns it, if any.
    pub extension: Option<String>,
    /// Runs SQL given to it as text (crosstab, dblink, query_to_xml, ...), which no
    /// statement policy can see into.
    pub runs_text: bool,
}

impl Call {
    /// What an operator should be warned of, if anything.
    pub fn warning(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.runs_text {
            why.push("runs SQL given to it as text, which the statement policy cannot see into".to_owned());
        }
        if self.security_definer {
            why.push("is SECURITY DEFINER: it runs with its owner's rights, and the plugin reaches whatever it reaches".to_owned());
        }
        if let Some(extension) = &self.extension {
            why.push(format!("belongs to extension {extension}"));
        }
        (!why.is_empty()).then(|| format!("declared call {}: {}", self.signature, why.join("; ")))
    }

    /// One line for `almanac plugins` and a dry run.
    pub fn describe(&self) -> String {
        let mut line = format!("{} {}", self.signature, self.volatility);
        if self.security_definer {
            line.push_str(" SECURITY DEFINER");
        }
        if let Some(extension) = &self.extension {
            line.push_str(&format!(" (extension {extension})"));
        }
        if self.runs_text {
            line.push_str(" RUNS SQL GIVEN AS TEXT");
        }
        line
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("it declares a call of {0}, which this database has no function or operator of that name for")]
    Missing(String),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// Every overload of each of `task`'s declared calls, or the first one that does not
/// exist; each one operators should know of is logged as a warning.
pub async fn resolve(client: &impl Sql, task: &str, calls: &[String]) -> Result<Vec<Call>, CallError> {
    let mut found = Vec::new();
    for name in calls {
        let Some((schema, function)) = name.split_once('.') else { return Err(CallError::Missing(name.clone())) };
        let rows = client.rows(DECLARED_CALL, &[&schema, &function]).await?;
        if rows.is_empty() {
            return Err(CallError::Missing(name.clone()));
        }
        for row in rows {
            found.push(Call {
                name: name.clone(),
                signature: row.get(0),
                volatility: row.get(1),
                security_definer: row.get(2),
                extension: row.get(3),
                runs_text: allow::never(function),
            });
        }
    }
    for warning in found.iter().filter_map(Call::warning) {
        tracing::warn!(%task, "{}", crate::text::printable(&warning));
    }
    Ok(found)
}

/// The database's own functions a statement could reach without naming their schema
/// (see `attribute_callable.sql`), for [`crate::capability::db::Policy::learn_functions`].
pub async fn reachable(client: &impl Sql) -> Result<Functions, tokio_postgres::Error> {
    let mut functions = Functions::default();
    for row in client.rows(ATTRIBUTE_CALLABLE, &[]).await? {
        let (name, schema, one_argument): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        if one_argument {
            functions.attribute.entry(name.clone()).or_default().insert(schema.clone());
        }
        functions.any.entry(name).or_default().insert(schema);
    }
    Ok(functions)
}

/// A plugin as the hosts last installed it, with what it declares it calls.
pub struct Installed {
    pub name: String,
    pub version: String,
    pub digest: String,
    pub loaded_at: chrono::DateTime<chrono::Utc>,
    pub calls: Vec<Call>,
}

/// Every plugin of `almanac.plugins`, by name.
pub async fn installed(client: &impl Sql) -> Result<Vec<Installed>, tokio_postgres::Error> {
    let rows = client.rows("SELECT name, version, digest, loaded_at, calls FROM almanac.plugins ORDER BY name", &[]).await?;
    Ok(rows
        .iter()
        .map(|r| Installed {
            name: r.get(0),
            version: r.get(1),
            digest: r.get(2),
            loaded_at: r.get(3),
            calls: serde_json::from_value(r.get(4)).unwrap_or_default(),
        })
        .collect())
}
