//! `almanac run --listen ADDR`: what an operator looks at. `/metrics` (Prometheus),
//! `/healthz` (the process is up), `/readyz` (the database answers and plugins are
//! loaded), `/` (the dashboard) and `/api/overview` (the dashboard's data, JSON).
//!
//! It starts before the host has connected, so `/healthz` answers during start-up and
//! `/readyz` says why the host is not ready yet. Its queries use a pool of their own: a
//! dashboard left open never takes a connection a worker is waiting for.
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::db::Pool;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::plugin::{Loaded, Registry};

/// Connections the listener may hold, apart from the host's pool.
const POOL_SIZE: usize = 2;
/// How long a request waits for the database before answering without it.
const DB_WAIT: Duration = Duration::from_secs(3);
/// How long one `/api/overview` answer serves every request (five queries per hit once
/// made jobs 12x slower under 400 requests): the dashboard refreshes every few seconds.
const OVERVIEW_FRESH: Duration = Duration::from_secs(1);

/// What the listener shows: set up before the host starts, told when it has.
pub struct Observed {
    pub metrics: Arc<Metrics>,
    running: OnceLock<Running>,
    /// The last `/api/overview` answer and when it was made; its lock also makes one
    /// request at a time do the queries, the others waiting for its answer.
    overview: tokio::sync::Mutex<Option<(std::time::Instant, axum::body::Bytes)>>,
}

struct Running {
    pool: Pool,
    loaded: Arc<Loaded>,
    /// The configured outbox topics, exported at 0 when nothing waits in them.
    topics: Vec<String>,
}

impl Observed {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Observed> {
        Arc::new(Observed { metrics, running: OnceLock::new(), overview: tokio::sync::Mutex::new(None) })
    }

    /// The host has connected and loaded its plugins.
    pub fn started(&self, target: crate::db::Target, loaded: Arc<Loaded>, topics: Vec<String>) -> Result<(), crate::db::DbError> {
        let pool = crate::db::Pool::new(&target.role("http"), POOL_SIZE)?;
        let _ = self.running.set(Running { pool, loaded, topics });
        Ok(())
    }

    async fn client(&self) -> Option<crate::db::Conn> {
        let running = self.running.get()?;
        tokio::time::timeout(DB_WAIT, running.pool.get()).await.ok()?.ok()
    }

    fn registry(&self) -> Arc<Registry> {
        self.running.get().map(|r| r.loaded.load_full()).unwrap_or_default()
    }
}

/// Bind `addr` now (so a taken port is an error at start), then serve until `shutdown`.
pub async fn bind(addr: std::net::SocketAddr, observed: Arc<Observed>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz and the dashboard");
    if !addr.ip().is_loopback() {
        tracing::warn!(
            address = %addr,
            "--listen is not on a loopback address: /metrics, /api/overview and the dashboard have no authentication and show task \
             names, keys and error messages; put them behind a proxy that authenticates, or listen on 127.0.0.1"
        );
    }
    let app = Router::new()
        .route("/", get(crate::dashboard::page))
        .route("/api/overview", get(overview))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(observed);
    tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(e) = serve.await {
            tracing::error!("the listener stopped: {e}");
        }
    });
    Ok(())
}

async fn metrics(State(observed): State<Arc<Observed>>) -> Response {
    let client = observed.client().await;
    let served: Vec<crate::metrics::Served> = observed
        .registry()
        .iter()
        .map(|p| crate::metrics::Served { task: p.name().to_owned(), version: p.spec.version.clone(), digest: p.digest.clone() })
        .collect();
    let topics = observed.running.get().map(|r| r.topics.clone()).unwrap_or_default();
    let text = observed.metrics.render(client.as_deref().map(|c| &**c), &served, &topics).await;
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

async fn readyz(State(observed): State<Arc<Observed>>) -> (StatusCode, String) {
    let unready = |why: String| (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n"));
    if observed.running.get().is_none() {
        return unready("starting (connecting to the database, loading plugins)".into());
    }
    let Some(client) = observed.client().await else {
        return unready("the database does not answer".into());
    };
    if let Err(e) = client.simple_query("SELECT 1").await {
        return unready(format!("the database does not answer: {}", crate::db::error_chain(&e)));
    }
    let tasks = observed.registry().tasks();
    if tasks.is_empty() {
        return unready("no plugins loaded".into());
    }
    (StatusCode::OK, format!("ready: {}\n", tasks.join(", ")))
}

async fn overview(State(observed): State<Arc<Observed>>) -> Response {
    let json = |body: axum::body::Bytes| ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    let mut cached = observed.overview.lock().await;
    if let Some((_, body)) = cached.as_ref().filter(|(at, _)| at.elapsed() < OVERVIEW_FRESH) {
        return json(body.clone());
    }
    let Some(client) = observed.client().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the database does not answer").into_response();
    };
    match crate::dashboard::overview(&client, &observed.registry()).await {
        Ok(overview) => match serde_json::to_vec(&overview) {
            Ok(body) => {
                let body = axum::body::Bytes::from(body);
                *cached = Some((std::time::Instant::now(), body.clone()));
                json(body)
            }
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        },
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, crate::db::error_chain(&e)).into_response(),
    }
}
