//! `POST /api/actions/ACTION`: what the console does, each the CLI command's own code
//! (`almanac retry`, `discard`, `hold`, `release`, `pause`, `resume`, `backfill`, `cursor`,
//! and `almanac outbox pause`, `resume`, `deliver-now`, `retry`, `discard`), recorded in
//! almanac.changes with who did it and from where. A retry or a discard may be previewed
//! first: the same code in a transaction rolled back, so the count the confirmation shows
//! is what the action would change. A backfill or a moved cursor is previewed as the CLI's
//! `--preview` does: the periods it would generate or pass over.
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::http::auth::{self, Refusal};
use crate::http::observed::Observed;
use crate::operators::Action;

/// Which jobs, task or topic an action is for, and why.
#[derive(Debug, Deserialize)]
pub struct Request {
    /// The task (job and schedule actions).
    #[serde(default)]
    pub task: String,
    /// The topic (outbox actions).
    #[serde(default)]
    pub topic: String,
    /// One period of the task's jobs, as `almanac retry --slot` reads it (RFC 3339, a slot
    /// label, UTC as `almanac jobs` prints it, or a date: that day's slot of a daily
    /// schedule); every period if absent.
    pub slot: Option<String>,
    /// One key (a job's, or a message's); every key if absent.
    pub key: Option<String>,
    /// Recorded with the change; a discard needs one.
    pub reason: Option<String>,
    /// Discard every pending and failed job of the task (nothing else narrows it).
    #[serde(default)]
    pub all: bool,
    /// Say how many jobs it would change, changing nothing.
    #[serde(default)]
    pub preview: bool,
    /// How many the confirmation showed (its preview's count): if the action would change
    /// another number now, nothing is done (409).
    pub expect: Option<i64>,
    /// A backfill's range, as `almanac backfill --from/--to` takes them; for a retry or a
    /// discard, the first slot taken (as `almanac retry --from` reads it: a date is
    /// midnight in the task's zone).
    pub from: Option<String>,
    /// A backfill's end, or where a cursor moves to (as `almanac cursor --to`); for a
    /// retry or a discard, the slot before which it stops.
    pub to: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Outcome {
    pub action: Action,
    /// The task or topic acted on.
    pub subject: String,
    /// Jobs or messages retried, discarded or made due; for hold, release, pause, resume:
    /// 1 if the state changed, 0 if it already was so.
    pub changed: i64,
    pub preview: bool,
    pub message: String,
    /// A backfill's or a cursor's preview: the periods in its range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periods: Option<crate::scheduler::range::Preview>,
}

fn refuse(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

pub async fn act(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(action): Path<String>,
    headers: HeaderMap,
    Json(request): Json<Request>,
) -> Response {
    let Some(action) = Action::ALL.into_iter().find(|a| a.as_str() == action) else {
        return refuse(StatusCode::NOT_FOUND, format!("no action {:?}", crate::text::printable(&action)));
    };
    let caller = match observed.caller(&headers, peer.ip()).await {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    if observed.access.read_only {
        return Refusal::Forbidden("this console is read-only (almanac run --read-only)".into()).into_response();
    }
    if !caller.identity.may(action) {
        let role = caller.identity.role.as_str();
        return Refusal::Forbidden(format!("{} ({role}) may not {}", caller.identity.name, action.as_str())).into_response();
    }
    if !auth::same_origin(&caller, &headers) || auth::cross_site(&headers) {
        return Refusal::Forbidden("missing or wrong CSRF token (X-CSRF-Token)".into()).into_response();
    }
    if request.preview && !matches!(action, Action::Retry | Action::Discard | Action::OutboxRetry | Action::OutboxDiscard | Action::Backfill | Action::Cursor) {
        return refuse(StatusCode::BAD_REQUEST, format!("{} has no preview (retries, discards, backfills and cursor moves do)", action.as_str()));
    }
    let subject = if action.on_topic() { request.topic.clone() } else { request.task.clone() };
    if subject.is_empty() {
        return refuse(StatusCode::BAD_REQUEST, format!("{} needs a {}", action.as_str(), if action.on_topic() { "topic" } else { "task" }));
    }
    let origin = caller.origin(peer.ip());
    // Its own task, which owns the connection: a client that hangs up mid-action must not
    // drop it between a preview's BEGIN and ROLLBACK, returning a connection inside a
    // transaction (and its row locks) to the pool.
    let taken = tokio::spawn(async move {
        // One backfill at a time: it holds one of the listener's two connections while it
        // runs, so a second would leave pages none. Refused before taking a connection.
        let _alone = match (action, request.preview) {
            (Action::Backfill, false) => match observed.backfilling.try_lock() {
                Ok(guard) => Some(guard),
                Err(_) => {
                    return refuse(
                        StatusCode::CONFLICT,
                        "another backfill from the console is running on this host: wait for it to end, or use `almanac backfill`".into(),
                    )
                }
            },
            _ => None,
        };
        let Some(client) = observed.client().await else {
            return Refusal::Unavailable.into_response();
        };
        if matches!(action, Action::Backfill | Action::Cursor) {
            let asked = crate::http::periods::Asked {
                task: &request.task,
                from: request.from.as_deref(),
                to: request.to.as_deref(),
                reason: request.reason.as_deref(),
                preview: request.preview,
            };
            return match crate::http::periods::act(&observed, Arc::new(client), action, asked, &origin).await {
                Ok(done) => {
                    if !request.preview {
                        tracing::info!(action = action.as_str(), %subject, changed = done.changed, %origin, "console action");
                    }
                    let crate::http::periods::Done { changed, message, periods } = done;
                    Json(Outcome { action, subject, changed, preview: request.preview, message, periods }).into_response()
                }
                Err((status, message)) => refuse(status, message),
            };
        }
        let done = match (request.preview, request.expect) {
            (true, _) => in_transaction(&client, action, &request, &origin, None).await,
            (false, None) => take(&client, action, &request, &origin).await,
            (false, confirmed) => in_transaction(&client, action, &request, &origin, confirmed).await,
        };
        match done {
            Ok(Ok(changed)) => {
                let message = said(action, &subject, changed, request.preview);
                if !request.preview {
                    tracing::info!(action = action.as_str(), %subject, changed, %origin, "console action");
                }
                Json(Outcome { action, subject, changed, preview: request.preview, message, periods: None }).into_response()
            }
            Ok(Err((status, message))) => refuse(status, message),
            Err(e) => refuse(StatusCode::SERVICE_UNAVAILABLE, crate::db::error_chain(&e)),
        }
    });
    taken.await.unwrap_or_else(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("the action failed: {e}")))
}

type Taken = Result<Result<i64, (StatusCode, String)>, tokio_postgres::Error>;

/// The action in a transaction, a job a worker holds making it wait a few seconds at
/// most: a preview (`confirmed` None) is rolled back; a confirmed action is kept only if
/// it changes what its confirmation showed (between the preview and the click, jobs may
/// have failed, been generated or enqueued), else rolled back and refused.
async fn in_transaction(conn: &crate::db::Conn, action: Action, request: &Request, origin: &str, confirmed: Option<i64>) -> Taken {
    // A panic before the end closes the connection rather than lend it on mid-transaction.
    conn.in_transaction(true);
    let taken = ended(conn, action, request, origin, confirmed).await;
    if taken.is_ok() {
        conn.in_transaction(false);
    }
    taken
}

async fn ended(client: &Client, action: Action, request: &Request, origin: &str, confirmed: Option<i64>) -> Taken {
    client.batch_execute("BEGIN; SET LOCAL lock_timeout = '5s'").await?;
    let taken = take(client, action, request, origin).await;
    match (taken, confirmed) {
        (Ok(Ok(changed)), Some(expected)) if changed == expected => {
            client.batch_execute("COMMIT").await?;
            Ok(Ok(changed))
        }
        (Ok(Ok(changed)), Some(expected)) => {
            client.batch_execute("ROLLBACK").await?;
            Ok(Err((
                StatusCode::CONFLICT,
                format!("{changed} would change now, not the {expected} the confirmation showed: nothing was done; look again and confirm anew"),
            )))
        }
        (taken, _) => {
            client.batch_execute("ROLLBACK").await?;
            taken
        }
    }
}

/// No host registered `task`: a retry or discard that changed nothing names the typo, as
/// the CLI does, rather than answer "0 jobs".
async fn unknown(client: &Client, task: &str) -> Result<bool, tokio_postgres::Error> {
    Ok(crate::scheduler::operate::schedule_of(client, task).await?.is_none())
}

async fn take(client: &Client, action: Action, request: &Request, origin: &str) -> Taken {
    let task = request.task.as_str();
    let (key, reason) = (request.key.as_deref(), request.reason.as_deref().filter(|r| !r.trim().is_empty()));
    let no_task = || (StatusCode::NOT_FOUND, format!("no task {:?}", crate::text::printable(task)));
    let topic = request.topic.as_str();
    let no_topic = || (StatusCode::NOT_FOUND, format!("no outbox topic {:?}", crate::text::printable(topic)));
    let needs_reason = || (StatusCode::BAD_REQUEST, "a discard needs a reason (recorded on each one and with the change)".to_owned());
    // An empty slot is no slot at all: refused, rather than taken for every slot.
    if request.slot.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Ok(Err((StatusCode::BAD_REQUEST, "slot is empty: leave it out to take every slot".into())));
    }
    let given = |text: &Option<String>| text.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
    let (slot, from, to) = (given(&request.slot), given(&request.from), given(&request.to));
    // Read as the CLI reads them: by the task's calendar (an on-demand task's in UTC).
    let schedule = match (action, slot.is_some() || from.is_some() || to.is_some()) {
        (Action::Retry | Action::Discard, true) => match crate::scheduler::operate::schedule_of(client, task).await? {
            Some(stored) => match stored.schedule() {
                Ok(schedule) => schedule,
                // Stored by a newer host, say: this one cannot read its dates (as periods.rs).
                Err(e) => return Ok(Err((StatusCode::CONFLICT, format!("{task}'s stored schedule cannot be read by this host: {e}")))),
            },
            None => return Ok(Err(no_task())),
        },
        _ => None,
    };
    let zone = schedule.as_ref().map_or(chrono_tz::UTC, |s| s.zone());
    let read = |what: &str, text: Option<String>, slot: bool| {
        let Some(text) = text else { return Ok(None) };
        let at = match (&schedule, slot) {
            (Some(schedule), true) => schedule.parse_slot(&text),
            _ => crate::calendar::parse_instant(&text, zone),
        };
        at.map(Some).map_err(|e| (StatusCode::BAD_REQUEST, format!("{what}: {e}")))
    };
    let which = match (read("slot", slot, true), read("from", from, false), read("to", to, false)) {
        (Ok(slot), Ok(from), Ok(to)) => crate::executor::operate::Which { slot, key, from, to },
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Ok(Err(e)),
    };
    Ok(Ok(match action {
        Action::Retry => {
            let retried = crate::executor::operate::retry(client, task, which, origin).await? as i64;
            if retried == 0 && unknown(client, task).await? {
                return Ok(Err(no_task()));
            }
            retried
        }
        Action::Discard => {
            let Some(reason) = reason else { return Ok(Err(needs_reason())) };
            if request.all != which.is_every() {
                let say = match request.all {
                    true => "all takes every pending and failed job of the task: no slot, key or range with it",
                    false => "say which jobs: a slot, a key, a range (from, to), or all",
                };
                return Ok(Err((StatusCode::BAD_REQUEST, say.into())));
            }
            let discarded = crate::executor::operate::discard(client, task, which, origin, reason).await?;
            if discarded == 0 && unknown(client, task).await? {
                return Ok(Err(no_task()));
            }
            discarded
        }
        Action::Hold | Action::Release => {
            let held = action == Action::Hold;
            match crate::scheduler::operate::set_held(client, task, held, origin, reason).await? {
                Some((was, _)) => i64::from(was != held),
                None => return Ok(Err(no_task())),
            }
        }
        Action::Pause | Action::Resume => {
            let paused = action == Action::Pause;
            match crate::scheduler::operate::set_paused(client, task, paused, origin, reason).await? {
                Some(was) => i64::from(was != paused),
                None => return Ok(Err(no_task())),
            }
        }
        Action::OutboxPause | Action::OutboxResume => {
            let paused = action == Action::OutboxPause;
            match crate::outbox::operate::set_paused(client, topic, paused, reason, origin).await? {
                true => 1,
                false => return Ok(Err(no_topic())),
            }
        }
        Action::OutboxDeliverNow => crate::outbox::operate::deliver_now(client, topic, key, origin).await? as i64,
        Action::OutboxRetry => crate::outbox::operate::retry(client, Some(topic), key, origin).await? as i64,
        Action::OutboxDiscard => {
            let Some(reason) = reason else { return Ok(Err(needs_reason())) };
            crate::outbox::operate::discard(client, topic, key, reason, origin).await? as i64
        }
        // Taken by http::periods before a transaction could be opened around them.
        Action::Backfill | Action::Cursor => return Ok(Err((StatusCode::BAD_REQUEST, format!("{} is not taken here", action.as_str())))),
    }))
}

/// What the page tells the operator.
fn said(action: Action, subject: &str, changed: i64, preview: bool) -> String {
    let task = crate::text::printable(subject);
    match (action, preview) {
        (Action::Retry, true) => format!("{changed} failed job(s) of {task} would go back to pending"),
        (Action::Retry, false) => format!("{changed} failed job(s) of {task} back to pending"),
        (Action::Discard, true) => format!("{changed} pending or failed job(s) of {task} would be discarded"),
        (Action::Discard, false) => format!("{changed} job(s) of {task} discarded: kept as evidence, never run"),
        (Action::Hold, _) if changed == 0 => format!("{task} was already held"),
        (Action::Hold, _) => format!("{task} held: no job of it starts on any host; jobs running now finish"),
        (Action::Release, _) if changed == 0 => format!("{task} was not held"),
        (Action::Release, _) => format!("{task} released: its pending jobs run again"),
        (Action::Pause, _) if changed == 0 => format!("{task} was already paused"),
        (Action::Pause, _) => format!("{task} paused: no new periods are generated"),
        (Action::Resume, _) if changed == 0 => format!("{task} was not paused"),
        (Action::Resume, _) => format!("{task} resumed: its periods are generated again, catching up per its policy"),
        (Action::OutboxPause, _) => format!("outbox topic {task} paused: no host delivers its messages until resumed"),
        (Action::OutboxResume, _) => format!("outbox topic {task} resumed"),
        (Action::OutboxDeliverNow, _) => format!("{changed} pending message(s) of {task} due now; its circuit is closed"),
        (Action::OutboxRetry, true) => format!("{changed} dead message(s) of {task} would go back to pending"),
        (Action::OutboxRetry, false) => format!("{changed} dead message(s) of {task} back to pending"),
        (Action::OutboxDiscard, true) => format!("{changed} message(s) of {task} would be discarded"),
        (Action::OutboxDiscard, false) => format!("{changed} message(s) of {task} discarded: never delivered"),
        (Action::Backfill | Action::Cursor, _) => format!("{} of {task}", action.as_str()),
    }
}
