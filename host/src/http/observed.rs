//! What the listener serves from: the host's counters, its database (a pool of its own:
//! a console left open never takes a connection a worker is waiting for) and loaded
//! plugins once it has started, and who is asking ([`Observed::caller`]).
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::{header, HeaderMap};

use crate::db::Pool;
use crate::http::auth::{self, Caller, Found, Refusal, SignIn, COOKIE};
use crate::metrics::Metrics;
use crate::operators::{self, Identity, Role};
use crate::plugin::{Loaded, Registry};

/// How long one `/api/overview` (or calendar) answer serves every request (five queries
/// per hit once made jobs 12x slower under 400 requests): the console refreshes every few
/// seconds.
pub const FRESH: Duration = Duration::from_secs(1);

/// An answer and when it was made.
pub type Answer = (std::time::Instant, axum::body::Bytes);

/// Connections the listener may hold, apart from the host's pool.
const POOL_SIZE: usize = 2;
/// How long a request waits for the database before answering without it.
const DB_WAIT: Duration = Duration::from_secs(3);

/// What the listener shows: set up before the host starts, told when it has.
pub struct Observed {
    pub metrics: Arc<Metrics>,
    pub access: auth::Access,
    pub gate: auth::Gate,
    pub pacer: crate::http::pacer::Pacer,
    pub(crate) running: OnceLock<Running>,
    /// The last `/api/overview` answer and when it was made; its lock also makes one
    /// request at a time do the queries, the others waiting for its answer.
    pub overview: tokio::sync::Mutex<Option<Answer>>,
    /// The last calendar answers per (task, month), as the overview's: one computed at a
    /// time, each serving every request for a second.
    pub calendars: tokio::sync::Mutex<std::collections::HashMap<(String, Option<String>), Answer>>,
    /// Held by the console's backfill while it runs: one at a time, so it keeps one of the
    /// listener's two connections at most, and page loads the other.
    pub backfilling: tokio::sync::Mutex<()>,
}

/// What a started host hands the console.
pub struct Started {
    pub loaded: Arc<Loaded>,
    pub topics: Vec<String>,
    pub logins: Arc<crate::login::Logins>,
    pub scheduler: crate::scheduler::Options,
}

pub(crate) struct Running {
    pub pool: Pool,
    pub loaded: Arc<Loaded>,
    /// The configured outbox topics, exported at 0 when nothing waits in them.
    pub topics: Vec<String>,
    /// What a backfill from the console plans with: the plugins' logins and the
    /// scheduler's options, as the host's own scheduler has them.
    pub logins: Arc<crate::login::Logins>,
    pub scheduler: crate::scheduler::Options,
}

impl Observed {
    pub fn new(metrics: Arc<Metrics>, access: auth::Access) -> Arc<Observed> {
        Arc::new(Observed {
            metrics,
            access,
            gate: auth::Gate::default(),
            pacer: Default::default(),
            running: OnceLock::new(),
            overview: Default::default(),
            calendars: Default::default(),
            backfilling: Default::default(),
        })
    }

    /// The host has connected and loaded its plugins.
    pub fn started(&self, target: crate::db::Target, running: Started) -> Result<(), crate::db::DbError> {
        let pool = crate::db::Pool::new(&target.role("http"), POOL_SIZE)?;
        let Started { loaded, topics, logins, scheduler } = running;
        let _ = self.running.set(Running { pool, loaded, topics, logins, scheduler });
        Ok(())
    }

    pub async fn client(&self) -> Option<crate::db::Conn> {
        let running = self.running.get()?;
        tokio::time::timeout(DB_WAIT, running.pool.get()).await.ok()?.ok()
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.running.get().map(|r| r.loaded.load_full()).unwrap_or_default()
    }

    /// Who is asking: a Bearer token, else a session cookie, else what `access` trusts.
    /// A Bearer value that is not an Almanac token (an OIDC token a proxy passes on) is
    /// not one; a cookie of the wrong shape is no session. Neither costs a query.
    pub async fn caller(&self, headers: &HeaderMap, address: IpAddr) -> Result<Caller, Refusal> {
        let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if let Some(token) = bearer.filter(|t| t.starts_with(operators::TOKEN_PREFIX)) {
            let key = format!("b:{}", operators::digest(token));
            let shaped = operators::is_token(token);
            let found = self.found(key, address, shaped, true, |c| async move { Ok(operators::verify(&**c, token).await?.map(|i| (i, None))) }).await?;
            let (identity, _) = found.ok_or(Refusal::SignIn)?;
            return Ok(Caller { identity, csrf: None, via: "token" });
        }
        if let Some(cookie) = auth::cookie(headers, COOKIE) {
            let key = format!("s:{}", operators::digest(cookie));
            let shaped = operators::is_secret(cookie);
            let found = self
                .found(key, address, shaped, true, |c| async move { Ok(operators::find_session(&**c, cookie).await?.map(|(i, csrf)| (i, Some(csrf)))) })
                .await?;
            if let Some((identity, csrf)) = found {
                return Ok(Caller { identity, csrf, via: "session" });
            }
        }
        match self.access.sign_in {
            SignIn::None if !auth::loopback_host(headers) => {
                Err(Refusal::Forbidden("without sign-in, the console answers only requests for a loopback host".into()))
            }
            SignIn::None => Ok(Caller { identity: Identity { name: "anonymous".into(), role: Role::Viewer, grants: vec![] }, csrf: None, via: "loopback" }),
            SignIn::Token => Err(Refusal::SignIn),
            SignIn::Header => {
                let header = self.access.trusted_header.as_deref().and_then(|h| headers.get(h));
                let name = header.and_then(|v| v.to_str().ok()).ok_or(Refusal::SignIn)?;
                let key = format!("h:{}", operators::digest(name));
                // Not a guess: the proxy names who signed in there. Counted as failures, one
                // user without a token here, their page open, had every user behind the
                // proxy (one address) refused within a minute.
                let found = self.found(key, address, true, false, |c| async move { Ok(operators::named(&**c, name).await?.map(|i| (i, None))) }).await?;
                let (identity, _) =
                    found.ok_or_else(|| Refusal::Forbidden(format!("{name} has no token here: `almanac token create --name {name} --role ROLE`")))?;
                Ok(Caller { identity, csrf: None, via: "proxy" })
            }
        }
    }

    /// What `key` was found to be, believed a few seconds ([`auth::Gate`]), else `look`ed
    /// up (not when it has the wrong `shape`). A lookup of a secret (`guessed`) that finds
    /// nothing is a failed sign-in of `address`, and an address with too many is not
    /// looked up for a while: random tokens or cookies must neither be tried without end
    /// nor take the listener's two connections.
    async fn found<F, Fut>(&self, key: String, address: IpAddr, shaped: bool, guessed: bool, look: F) -> Result<Found, Refusal>
    where
        F: FnOnce(crate::db::Conn) -> Fut,
        Fut: std::future::Future<Output = Result<Found, tokio_postgres::Error>>,
    {
        if let Some(found) = self.gate.cached(&key) {
            return Ok(found);
        }
        if !self.gate.may_try(address) {
            return Err(Refusal::TooMany);
        }
        let found = match shaped {
            true => {
                let client = self.client().await.ok_or(Refusal::Unavailable)?;
                look(client).await.map_err(|_| Refusal::Unavailable)?
            }
            false => None,
        };
        if found.is_none() && guessed {
            self.gate.failed(address);
        }
        self.gate.remember(key, found.clone());
        Ok(found)
    }
}
