//! What the console reads beyond the overview: a task's month on the calendar, a list of
//! jobs (filtered, paged), a job's page. Each needs a caller, as the overview does.
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Datelike, Utc};
use serde::Deserialize;

use crate::dashboard::{calendar, charts, jobs};
use crate::http::auth::Refusal;
use crate::http::observed::Observed;

/// The caller's database connection, or why not.
async fn client(observed: &Observed, headers: &HeaderMap, peer: SocketAddr) -> Result<crate::db::Conn, Response> {
    observed.caller(headers, peer.ip()).await.map_err(IntoResponse::into_response)?;
    observed.client().await.ok_or_else(|| Refusal::Unavailable.into_response())
}

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
}

#[derive(Deserialize)]
pub struct MonthQuery {
    task: String,
    month: Option<String>,
}

#[derive(Deserialize)]
pub struct YearQuery {
    task: String,
    year: Option<i32>,
}

/// Calendar answers kept at most (one per task and month or year asked for).
const CALENDARS_KEPT: usize = 256;

/// A calendar answer (a month, a year strip) for `key`: the one made less than a second ago,
/// else `make`'s, kept. One is made at a time: the others wait for it, then share it.
async fn calendar_answer<T: serde::Serialize>(
    observed: &Observed,
    task: &str,
    key: (String, Option<String>),
    make: impl AsyncFnOnce(&crate::db::Conn) -> Result<Option<T>, calendar::CalendarError>,
) -> Response {
    let json = |body: axum::body::Bytes| ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response();
    let mut cached = observed.calendars.lock().await;
    if let Some((_, body)) = cached.get(&key).filter(|(at, _)| at.elapsed() < crate::http::observed::FRESH) {
        return json(body.clone());
    }
    let Some(client) = observed.client().await else {
        return Refusal::Unavailable.into_response();
    };
    match make(&client).await {
        Ok(Some(answer)) => {
            let body = axum::body::Bytes::from(serde_json::to_vec(&answer).unwrap_or_default());
            if cached.len() >= CALENDARS_KEPT {
                cached.clear();
            }
            cached.insert(key, (std::time::Instant::now(), body.clone()));
            json(body)
        }
        Ok(None) => (StatusCode::NOT_FOUND, format!("no task {:?}\n", crate::text::printable(task))).into_response(),
        Err(calendar::CalendarError::Month(m)) => {
            (StatusCode::BAD_REQUEST, format!("a month is YYYY-MM and a year 1970 to 9999, not {:?}\n", crate::text::printable(&m))).into_response()
        }
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}

pub async fn month(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<MonthQuery>,
) -> Response {
    if let Err(refused) = observed.caller(&headers, peer.ip()).await {
        return refused.into_response();
    }
    let key = (q.task.clone(), q.month.clone());
    calendar_answer(&observed, &q.task, key, async |client| calendar::month(client, &q.task, q.month.as_deref()).await).await
}

/// A task's year strip: each month's worst state and counts.
pub async fn year(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<YearQuery>,
) -> Response {
    if let Err(refused) = observed.caller(&headers, peer.ip()).await {
        return refused.into_response();
    }
    let year = q.year.unwrap_or_else(|| Utc::now().year());
    let key = (q.task.clone(), Some(format!("year {year}")));
    calendar_answer(&observed, &q.task, key, async |client| calendar::year(client, &q.task, year).await).await
}

pub async fn list(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(f): Query<jobs::Filter>,
) -> Response {
    let client = match client(&observed, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    match jobs::page(&client, &f).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}

#[derive(Deserialize)]
pub struct JobQuery {
    task: String,
    slot: DateTime<Utc>,
    key: String,
}

pub async fn job(State(observed): State<Arc<Observed>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap, Query(q): Query<JobQuery>) -> Response {
    let client = match client(&observed, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    match jobs::one(&client, &q.task, q.slot, &q.key).await {
        Ok(Some(page)) => Json(page).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such job\n").into_response(),
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}

#[derive(Deserialize)]
pub struct ChangesQuery {
    task: Option<String>,
    topic: Option<String>,
    /// The last change of the previous page.
    before: Option<i64>,
    limit: Option<i64>,
}

/// The change history (`almanac changes`), newest first, paged by id.
pub async fn changes(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ChangesQuery>,
) -> Response {
    let client = match client(&observed, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let some = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let (task, topic) = (some(&q.task), some(&q.topic));
    let limit = q.limit.unwrap_or(50).clamp(1, jobs::MOST);
    match crate::scheduler::operate::changes(&**client, task.as_deref(), topic.as_deref(), q.before, limit).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}

#[derive(Deserialize)]
pub struct ChartQuery {
    task: Option<String>,
    topic: Option<String>,
    span: Option<String>,
}

/// A task's or a topic's chart, an SVG image ([`charts`]).
pub async fn chart(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ChartQuery>,
) -> Response {
    let Some(span) = charts::Span::parse(q.span.as_deref()) else {
        return (StatusCode::BAD_REQUEST, "a chart's span is hour or day\n").into_response();
    };
    let client = match client(&observed, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let chart = match (&q.task, &q.topic) {
        (Some(task), None) => charts::task(&client, task, span).await,
        (None, Some(topic)) => charts::topic(&client, topic, span).await,
        _ => return (StatusCode::BAD_REQUEST, "a chart names a task or a topic\n").into_response(),
    };
    match chart {
        Ok(chart) => ([(axum::http::header::CONTENT_TYPE, "image/svg+xml")], charts::svg(&chart)).into_response(),
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}

#[derive(Deserialize)]
pub struct MessagesQuery {
    topic: Option<String>,
    status: Option<String>,
    before: Option<i64>,
}

/// Outbox messages (`almanac outbox`), newest first, by topic and state, paged by id.
pub async fn messages(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<MessagesQuery>,
) -> Response {
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    if status.is_some_and(|s| !["pending", "delivered", "dead", "discarded"].contains(&s)) {
        return (StatusCode::BAD_REQUEST, "a message's status is pending, delivered, dead or discarded\n").into_response();
    }
    let client = match client(&observed, &headers, peer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let topic = q.topic.as_deref().filter(|t| !t.is_empty());
    match crate::outbox::operate::list(&client, status, topic, q.before, 50).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(crate::db::error_chain(&e)),
    }
}
