//! The console's backfill and cursor move (`POST /api/actions/backfill`, `…/cursor`): the
//! CLI's own rules and code (`scheduler::range`), previewed as `--preview` does. Neither
//! runs in a transaction to roll back: a backfill commits batch by batch, as it asks the
//! task's plugin (loaded on this host) for each period's keys.
use std::sync::Arc;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};

use crate::db::Conn;
use crate::http::observed::Observed;
use crate::operators::Action;
use crate::scheduler::range::{self, RangeError};
use crate::scheduler::BackfillError;

/// Periods a backfill from the console may generate; a longer one is `almanac backfill`'s,
/// which shows its progress (a request would wait the whole time).
pub const MOST_PERIODS: usize = 1_000;

type Refused = (StatusCode, String);

/// What the request asks (`http::actions::Request`'s fields for these two actions).
pub struct Asked<'a> {
    pub task: &'a str,
    pub from: Option<&'a str>,
    pub to: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub preview: bool,
}

/// What it did, or would do.
pub struct Done {
    pub changed: i64,
    pub message: String,
    pub periods: Option<range::Preview>,
}

fn refused(e: RangeError) -> Refused {
    match e {
        RangeError::Db(e) => (StatusCode::SERVICE_UNAVAILABLE, crate::db::error_chain(&e)),
        e => (StatusCode::BAD_REQUEST, e.to_string()),
    }
}

fn db(e: tokio_postgres::Error) -> Refused {
    refused(RangeError::Db(e))
}

pub async fn act(observed: &Observed, conn: Arc<Conn>, action: Action, request: Asked<'_>, origin: &str) -> Result<Done, Refused> {
    let task = request.task;
    let shown = crate::text::printable(task);
    let Some(stored) = crate::scheduler::operate::schedule_of(&*conn, task).await.map_err(db)? else {
        return Err((StatusCode::NOT_FOUND, format!("no task {shown:?}")));
    };
    let schedule = match stored.schedule() {
        Ok(Some(schedule)) => schedule,
        Ok(None) => return Err(refused(RangeError::OnDemand { task: task.to_owned() })),
        Err(e) => return Err((StatusCode::CONFLICT, format!("{shown}'s stored schedule cannot be read by this host: {e}"))),
    };
    let instant = |what: &str, text: Option<&str>| -> Result<DateTime<Utc>, Refused> {
        let text = text.map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| (StatusCode::BAD_REQUEST, format!("{} needs `{what}`", action.as_str())))?;
        crate::calendar::parse_instant(text, schedule.zone()).map_err(|e| (StatusCode::BAD_REQUEST, format!("{what}: {e}")))
    };
    let reason = request.reason.filter(|r| !r.trim().is_empty());
    let outcome = |changed: i64, message: String, periods| Done { changed, message, periods };
    match action {
        Action::Backfill => {
            let (from, to) = (instant("from", request.from)?, instant("to", request.to)?);
            range::check_backfill(&conn, task, &schedule, from, to).await.map_err(refused)?;
            let preview = range::preview(&*conn, task, &schedule, from, to).await.map_err(db)?;
            // What the confirmation would refuse is refused at the preview already.
            if preview.total > MOST_PERIODS {
                let more = if preview.more { "more than " } else { "" };
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("{more}{} periods: the console backfills {MOST_PERIODS} at most; run `almanac backfill {task}` for more", preview.total),
                ));
            }
            let running = observed.running.get().ok_or_else(|| (StatusCode::SERVICE_UNAVAILABLE, "the host is starting".to_owned()))?;
            let Some(plugin) = observed.registry().get(task).cloned() else {
                return Err((StatusCode::CONFLICT, format!("{shown}'s plugin is not loaded on this host: backfill from a host that serves it")));
            };
            if request.preview {
                let message = format!(
                    "a backfill of {shown} would consider {} period(s): {} new, {} in the ledger already (passed over)",
                    preview.total,
                    preview.new,
                    preview.total - preview.new
                );
                return Ok(outcome(preview.new as i64, message, Some(preview)));
            }
            let done = match crate::scheduler::backfill_recorded(&conn, &running.logins, &plugin, from, to, &running.scheduler, origin, reason, |_, _| {}).await
            {
                Ok(done) => done,
                Err(e) => {
                    // A batch that failed may leave its transaction open; the connection
                    // goes back to the listener's pool.
                    let _ = conn.batch_execute("ROLLBACK").await;
                    return Err(match e {
                        BackfillError::Range(e) => refused(e),
                        BackfillError::Db(e) => db(e),
                        BackfillError::Scheduler(e) => (StatusCode::INTERNAL_SERVER_ERROR, crate::db::error_chain(&e)),
                    });
                }
            };
            let message = format!(
                "backfill of {shown}: {} period(s) generated ({} empty), {} new job(s), {} skipped, {} passed over (in the ledger already)",
                done.generated,
                done.empty,
                done.jobs,
                done.skipped,
                done.handled.len()
            );
            Ok(outcome(done.generated as i64, message, None))
        }
        Action::Cursor => {
            let to = match request.to.map(str::trim) {
                Some("now") => crate::db::server_now(&conn).await.map_err(db)?,
                Some(text) if !text.is_empty() => schedule.parse_slot(text).map_err(|e| (StatusCode::BAD_REQUEST, format!("to: {e}")))?,
                _ => return Err((StatusCode::BAD_REQUEST, "cursor needs `to` (a period, a date, an instant, or now)".into())),
            };
            range::check_cursor(&conn, task, stored.cursor, to).await.map_err(refused)?;
            if request.preview {
                let moved = range::cursor_preview(&conn, task, &schedule, stored.cursor, to).await.map_err(db)?;
                let p = &moved.periods;
                let more = if p.more { "more than " } else { "" };
                let message = match moved.back {
                    true => format!(
                        "moved back, {shown}'s scheduler would consider {more}{} started period(s) again ({} new; its catch-up policy applies)",
                        p.total, p.new
                    ),
                    false => format!("moved forward, {more}{} period(s) of {shown} ({} never generated) would be passed over for good", p.total, p.new),
                };
                return Ok(outcome(p.new as i64, message, Some(moved.periods)));
            }
            let Some(from) = crate::scheduler::operate::set_cursor(&conn, task, to, origin, reason).await.map_err(db)? else {
                return Err((StatusCode::NOT_FOUND, format!("no task {shown:?}")));
            };
            let fmt = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
            Ok(outcome(i64::from(from != to), format!("{shown}: cursor {} -> {}", fmt(from), fmt(to)), None))
        }
        _ => Err((StatusCode::BAD_REQUEST, format!("{} is not a backfill or a cursor move", action.as_str()))),
    }
}
