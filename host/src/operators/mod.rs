//! Who may use the console and the JSON API of `almanac run --listen`: tokens made by
//! `almanac token create` (only their SHA-256 is stored), each with a role and optional
//! extra actions (Oban Web's per-action access), and the browser sessions a sign-in with
//! one opens (`migrations/V29__console_tokens.sql`).
//!
//! One rule decides every action: [`Identity::may`]. The console's buttons, its JSON
//! API and its checks all ask it.
use chrono::{DateTime, Utc};
use rand::Rng;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::db::Sql;

const TOKEN_CREATE: &str = include_str!("token_create.sql");
const TOKEN_LIST: &str = include_str!("token_list.sql");
const TOKEN_REVOKE: &str = include_str!("token_revoke.sql");
const TOKEN_VERIFY: &str = include_str!("token_verify.sql");
const TOKEN_NAMED: &str = include_str!("token_named.sql");
const SESSION_OPEN: &str = include_str!("session_open.sql");
const SESSION_FIND: &str = include_str!("session_find.sql");
const SESSION_CLOSE: &str = include_str!("session_close.sql");

/// What a token's holder may do, each role all the one before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sees everything the console shows; changes nothing.
    Viewer,
    /// Retries and discards jobs, holds and releases tasks, pauses and resumes schedules;
    /// pauses, resumes, delivers now, retries and discards outbox messages.
    Operator,
    /// Everything an operator does, and the actions that rewrite a schedule's history:
    /// backfill a range, move a cursor.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Role {
        match text {
            "admin" => Role::Admin,
            "operator" => Role::Operator,
            // The table's CHECK allows nothing else; the least is the safe reading.
            _ => Role::Viewer,
        }
    }
}

/// An action the console can take, each the CLI command's own code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Retry,
    Discard,
    Hold,
    Release,
    Pause,
    Resume,
    OutboxPause,
    OutboxResume,
    OutboxDeliverNow,
    OutboxRetry,
    OutboxDiscard,
    Backfill,
    Cursor,
}

impl Action {
    pub const ALL: [Action; 13] = [
        Action::Retry,
        Action::Discard,
        Action::Hold,
        Action::Release,
        Action::Pause,
        Action::Resume,
        Action::OutboxPause,
        Action::OutboxResume,
        Action::OutboxDeliverNow,
        Action::OutboxRetry,
        Action::OutboxDiscard,
        Action::Backfill,
        Action::Cursor,
    ];

    /// As `almanac.changes` and the console's URLs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Discard => "discard",
            Action::Hold => "hold",
            Action::Release => "release",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::OutboxPause => "outbox-pause",
            Action::OutboxResume => "outbox-resume",
            Action::OutboxDeliverNow => "outbox-deliver-now",
            Action::OutboxRetry => "outbox-retry",
            Action::OutboxDiscard => "outbox-discard",
            Action::Backfill => "backfill",
            Action::Cursor => "cursor",
        }
    }

    /// Whether it acts on an outbox topic (else on a task's jobs or schedule).
    pub fn on_topic(self) -> bool {
        self.as_str().starts_with("outbox-")
    }

    /// The least role that may take it without a grant of its own. Generating periods
    /// again or passing them over for good (a backfill, a moved cursor) is an admin's;
    /// the rest an operator's.
    fn least(self) -> Role {
        match self {
            Action::Backfill | Action::Cursor => Role::Admin,
            _ => Role::Operator,
        }
    }
}

/// Who is asking, once signed in (or trusted: a proxy's header, a loopback listener
/// without sign-in).
#[derive(Debug, Clone, Serialize)]
pub struct Identity {
    pub name: String,
    pub role: Role,
    /// Actions granted beyond the role's.
    pub grants: Vec<Action>,
}

impl Identity {
    /// The one rule: whether this identity may take `action`.
    pub fn may(&self, action: Action) -> bool {
        self.role >= action.least() || self.grants.contains(&action)
    }

    /// Every action it may take.
    pub fn actions(&self) -> Vec<Action> {
        Action::ALL.into_iter().filter(|a| self.may(*a)).collect()
    }

    fn from_row(row: &tokio_postgres::Row) -> Identity {
        let grants: Vec<String> = row.get(2);
        Identity {
            name: row.get(0),
            role: Role::parse(row.get(1)),
            grants: grants.iter().filter_map(|g| Action::ALL.into_iter().find(|a| a.as_str() == g)).collect(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorsError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("a token named {0:?} exists (revoked names are kept as evidence and not given again)")]
    NameTaken(String),
    #[error("a token's name is 1 to 64 letters, digits, '.', '_', '@' or '-', not {0:?}")]
    BadName(String),
}

/// How every token begins: a Bearer value without it is someone else's (an OIDC token).
pub const TOKEN_PREFIX: &str = "alm_";

/// Whether `text` has a secret's shape (64 lowercase hex digits).
pub fn is_secret(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `text` has a token's shape.
pub fn is_token(text: &str) -> bool {
    text.strip_prefix(TOKEN_PREFIX).is_some_and(is_secret)
}

/// A secret of 256 random bits (the thread's CSPRNG, seeded from the OS), as text.
fn secret(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::rng().random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// What is stored of a secret.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Make a token; the token itself is returned once and never stored.
pub async fn create(client: &impl Sql, name: &str, role: Role, grants: &[Action], by: &str) -> Result<String, OperatorsError> {
    let valid = (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c));
    if !valid {
        return Err(OperatorsError::BadName(name.to_owned()));
    }
    let token = secret(TOKEN_PREFIX);
    let grants: Vec<&str> = grants.iter().map(|g| g.as_str()).collect();
    match client.opt(TOKEN_CREATE, &[&name, &role.as_str(), &grants, &digest(&token), &by]).await? {
        Some(_) => Ok(token),
        None => Err(OperatorsError::NameTaken(name.to_owned())),
    }
}

/// A token as `almanac token list` shows it.
#[derive(Debug, Serialize)]
pub struct TokenRow {
    pub name: String,
    pub role: String,
    pub grants: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub sessions: i64,
}

pub async fn list(client: &impl Sql) -> Result<Vec<TokenRow>, tokio_postgres::Error> {
    Ok(client
        .rows(TOKEN_LIST, &[])
        .await?
        .iter()
        .map(|r| TokenRow {
            name: r.get(0),
            role: r.get(1),
            grants: r.get(2),
            created_at: r.get(3),
            created_by: r.get(4),
            revoked_at: r.get(5),
            last_used_at: r.get(6),
            sessions: r.get(7),
        })
        .collect())
}

/// Revoke a token and end its sessions; false if no live token has that name.
pub async fn revoke(client: &impl Sql, name: &str) -> Result<bool, tokio_postgres::Error> {
    Ok(client.one(TOKEN_REVOKE, &[&name]).await?.get::<_, i64>(0) > 0)
}

/// The live token `token` is, if any.
pub async fn verify(client: &impl Sql, token: &str) -> Result<Option<Identity>, tokio_postgres::Error> {
    Ok(client.opt(TOKEN_VERIFY, &[&digest(token)]).await?.as_ref().map(Identity::from_row))
}

/// The live token named `name` (who a trusted proxy's header names).
pub async fn named(client: &impl Sql, name: &str) -> Result<Option<Identity>, tokio_postgres::Error> {
    Ok(client.opt(TOKEN_NAMED, &[&name]).await?.as_ref().map(Identity::from_row))
}

/// A browser session: the cookie's value and the CSRF token its page sends.
pub struct Opened {
    pub cookie: String,
    pub csrf: String,
}

/// Open a session for a verified token's `identity`, lasting `lasts`.
pub async fn open_session(client: &impl Sql, identity: &Identity, address: &str, lasts: std::time::Duration) -> Result<Opened, tokio_postgres::Error> {
    let (cookie, csrf) = (secret(""), secret(""));
    let seconds = lasts.as_secs_f64();
    client.exec(SESSION_OPEN, &[&identity.name, &digest(&cookie), &csrf, &address, &seconds]).await?;
    Ok(Opened { cookie, csrf })
}

/// The identity behind a session cookie, and its CSRF token.
pub async fn find_session(client: &impl Sql, cookie: &str) -> Result<Option<(Identity, String)>, tokio_postgres::Error> {
    Ok(client.opt(SESSION_FIND, &[&digest(cookie)]).await?.map(|r| (Identity::from_row(&r), r.get(3))))
}

pub async fn close_session(client: &impl Sql, cookie: &str) -> Result<(), tokio_postgres::Error> {
    client.exec(SESSION_CLOSE, &[&digest(cookie)]).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_may_what_the_ones_below_may_and_a_grant_adds_one_action() {
        let viewer = Identity { name: "v".into(), role: Role::Viewer, grants: vec![] };
        assert!(viewer.actions().is_empty());
        let granted = Identity { grants: vec![Action::Retry], ..viewer.clone() };
        assert_eq!(granted.actions(), vec![Action::Retry]);
        let operator = Identity { role: Role::Operator, ..viewer };
        let theirs: Vec<Action> = Action::ALL.into_iter().filter(|a| !matches!(a, Action::Backfill | Action::Cursor)).collect();
        assert_eq!(operator.actions(), theirs, "periods generated again or passed over are an admin's");
        let admin = Identity { role: Role::Admin, ..operator.clone() };
        assert_eq!(admin.actions(), Action::ALL.to_vec());
        assert!(Identity { grants: vec![Action::Backfill], ..operator }.may(Action::Backfill));
    }

    #[test]
    fn secrets_are_long_random_and_stored_only_as_digests() {
        let (a, b) = (secret("alm_"), secret("alm_"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert_eq!(digest(&a).len(), 64);
        assert!(is_token(&a) && is_secret(&secret("")));
        assert!(!is_token("alm_x") && !is_secret(&"G".repeat(64)));
        assert_ne!(digest(&a), a);
    }
}
