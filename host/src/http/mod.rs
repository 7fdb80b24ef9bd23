//! `almanac run --listen ADDR`: what an operator looks at and acts through. `/metrics`
//! (Prometheus), `/healthz` (the process is up), `/readyz` (the database answers and
//! plugins are loaded), `/` (the console), `/api/overview` (its data, JSON) and
//! `/api/actions/ACTION` (what it does: [`actions`]). Who may see and do what is
//! [`auth`]'s; `/healthz` and `/readyz` answer anyone.
//!
//! It starts before the host has connected, so `/healthz` answers during start-up and
//! `/readyz` says why the host is not ready yet. Its queries use a pool of their own: a
//! dashboard left open never takes a connection a worker is waiting for.
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;

pub mod actions;
pub mod auth;
mod observed;
mod pacer;
mod periods;
mod signin;
mod views;

pub use observed::{Observed, Started};

/// What every answer carries: nothing a plugin wrote (errors, keys, labels, file names)
/// can run in the page, as the page sets them as text and this policy allows no inline
/// script; nor can another site frame it.
const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// Bind `addr` now (so a taken port is an error at start), then serve until `shutdown`;
/// the address bound.
pub async fn bind(addr: SocketAddr, observed: Arc<Observed>, shutdown: CancellationToken) -> anyhow::Result<SocketAddr> {
    observed.access.check(addr).map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    tracing::info!(address = %bound, sign_in = ?observed.access.sign_in, read_only = observed.access.read_only, "serving /metrics, /healthz, /readyz and the console");
    let app = Router::new()
        .route("/", get(crate::dashboard::page))
        .route("/app.js", get(crate::dashboard::script))
        .route("/app.css", get(crate::dashboard::style))
        .route("/login", get(signin::form).post(signin::sign_in))
        .route("/logout", post(signin::sign_out))
        .route("/api/session", get(signin::session))
        .route("/api/overview", get(overview))
        .route("/api/calendar", get(views::month))
        .route("/api/year", get(views::year))
        .route("/api/jobs", get(views::list))
        .route("/api/job", get(views::job))
        .route("/api/changes", get(views::changes))
        .route("/api/chart.svg", get(views::chart))
        .route("/api/messages", get(views::messages))
        .route("/api/actions/{action}", post(actions::act))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(observed.clone(), paced))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .layer(axum::middleware::map_response(|mut response: Response| async move {
            for (name, value) in SECURITY_HEADERS {
                response.headers_mut().insert(name, HeaderValue::from_static(value));
            }
            response
        }))
        .with_state(observed);
    tokio::spawn(async move {
        let serve =
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(e) = serve.await {
            tracing::error!("the listener stopped: {e}");
        }
    });
    Ok(bound)
}

/// Every route but the probes waits its turn ([`pacer`]).
async fn paced(State(observed): State<Arc<Observed>>, request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let _turn = observed.pacer.turn().await;
    next.run(request).await
}

async fn metrics(State(observed): State<Arc<Observed>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    if let Err(refused) = observed.caller(&headers, peer.ip()).await {
        return refused.into_response();
    }
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

async fn overview(State(observed): State<Arc<Observed>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    if let Err(refused) = observed.caller(&headers, peer.ip()).await {
        return refused.into_response();
    }
    let json = |body: axum::body::Bytes| ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    let mut cached = observed.overview.lock().await;
    if let Some((_, body)) = cached.as_ref().filter(|(at, _)| at.elapsed() < observed::FRESH) {
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
