//! Running one batch: a transaction in a session of a task's login that claims due jobs,
//! runs each under its own savepoint, records how each ended and commits.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::try_join4;
use tracing::Instrument;

use super::batch::{BatchError, Claimed, JobRun, COMMIT};
use super::claims;
use super::context::{Context, Options};
use super::record::{poisoned, record_failure, Failure, Follow, InFlight, Statements};
use super::transient;
use crate::bindings::almanac::plugin::types::{Job, Slot};
use crate::db::{Conn, Prepared};
use crate::job::JobEnd;
use crate::plugin::CallError;

const CLAIM: &str = include_str!("claim.sql");
const MARK_FAILED: &str = include_str!("mark_failed.sql");
const CLAIM_ONE: &str = include_str!("claim_one.sql");
const UNCLAIM: &str = include_str!("unclaim.sql");
const ALONE: &str = include_str!("alone.sql");

/// What a committed batch did.
#[derive(Debug, Default, Clone)]
pub struct BatchOutcome {
    pub claimed: usize,
    /// Each job run: its task, how it ended and the time in the plugin.
    pub jobs: Vec<(String, JobEnd, Duration)>,
    /// A cancel request was sent on this connection; replace it after the batch.
    pub retire_connection: bool,
    /// Jobs claimed with others that a crash marked: each runs alone next.
    pub alone: Vec<(String, DateTime<Utc>, String)>,
    /// `batch_time` ended it before every job claimed had run.
    pub cut: bool,
    /// Jobs a deadlock or a serialization failure interrupted.
    pub conflicts: usize,
}

/// Which jobs a batch claims.
pub enum Claim<'a> {
    /// Up to this many of the task's due jobs.
    Due(usize),
    /// One named job of the task (slot, key).
    One(DateTime<Utc>, &'a str),
}

/// The WIT slot of each (task, slot start), computed once: every job of a slot shares it,
/// and computing its end and label costs more than the rest of the claim.
#[derive(Default)]
pub struct SlotCache {
    slots: HashMap<(String, i64, DateTime<Utc>), Slot>,
}

impl SlotCache {
    const CAPACITY: usize = 1024;

    /// The WIT slot of a job keyed under `start`, labelled with its `period` (as the
    /// job row names it: the period it was generated for, under whatever calendar).
    fn get(&mut self, plugin: &crate::plugin::Plugin, start: DateTime<Utc>, period: &str) -> Slot {
        // By digest and revision: a reloaded plugin, or an applied change, may bring
        // another schedule.
        let applied = plugin.applied();
        let key = (plugin.digest.clone(), applied.revision, start);
        if let Some(slot) = self.slots.get(&key).filter(|s| s.label == period) {
            return slot.clone();
        }
        if self.slots.len() >= Self::CAPACITY {
            self.slots.clear();
        }
        let slot = applied.wit_slot(&applied.slot_at(start), period);
        self.slots.insert(key, slot.clone());
        slot
    }
}

/// One transaction in a session of `task`'s login: claim, record the claim, run each
/// job under a savepoint, record its end, commit.
///
/// The host's own statements are pipelined: BEGIN + claim + the first SAVEPOINT in one
/// round trip per batch; after a job that succeeded, its session's reset and the next
/// SAVEPOINT go out unanswered, ahead of the next job's first statement ([`InFlight`]), so
/// a job costs the host no round trip of its own (the statements of the plugin are its
/// own); a failed job's ROLLBACK TO, its record and what follows take one; COMMIT ends the
/// batch. If any of them fails, the error is returned and the connection dropped; the
/// transaction never commits.
pub async fn run_batch(
    conn: &Arc<Conn>,
    backend: &mut claims::Backend,
    context: &Context,
    task: &str,
    claim: Claim<'_>,
    slots: &mut SlotCache,
    hold: &mut claims::Hold,
) -> Result<BatchOutcome, BatchError> {
    // Until it ends well: a session dropped mid-batch (a panic) is closed, never lent to
    // the next batch, whose COMMIT would mark this one's jobs done with half their work.
    conn.in_transaction(true);
    let outcome = transaction(conn, backend, context, task, claim, slots, hold).await;
    if outcome.is_ok() {
        conn.in_transaction(false);
    }
    outcome
}

async fn transaction(
    conn: &Arc<Conn>,
    backend: &mut claims::Backend,
    context: &Context,
    task: &str,
    claim: Claim<'_>,
    slots: &mut SlotCache,
    hold: &mut claims::Hold,
) -> Result<BatchOutcome, BatchError> {
    let options = &context.options;
    let mut outcome = BatchOutcome::default();
    // Prepared before the transaction: a job's error aborts it, and the statements that
    // record the error could not be parsed then.
    let ((claim_due, claim_one, unclaim, failed), interrupted) = futures_util::future::try_join(
        try_join4(Prepared::on(conn, CLAIM), Prepared::on(conn, CLAIM_ONE), Prepared::on(conn, UNCLAIM), Prepared::on(conn, MARK_FAILED)),
        Prepared::on(conn, transient::RECORD),
    )
    .await?;
    let statements = Statements { failed, interrupted, host: &context.host };
    // The jobs are marked done by the plugin loaded now, and run on it: a reload during
    // the batch takes effect with the next one.
    let registry = context.loaded.load_full();
    let plugin = registry.get(task).cloned();
    let digest = plugin.as_ref().map(|p| p.digest.clone()).unwrap_or_default();
    let floor = context.floor.current();
    let claimed = async {
        match claim {
            Claim::Due(size) => claim_due.rows(conn, &[&i32::try_from(size.min(options.batch)).unwrap_or(i32::MAX), &floor, &digest]).await,
            Claim::One(slot, key) => claim_one.rows(conn, &[&slot, &key, &digest]).await,
        }
    };
    // Through a transaction pooler the batch's backend is the one its transaction runs on.
    let who = async {
        match conn.pooled() {
            true => claims::Backend::of(conn).await.map(Some),
            false => Ok(None),
        }
    };
    let (_, rows, ran_on, _) = try_join4(conn.batch_execute("BEGIN"), claimed, who, conn.batch_execute("SAVEPOINT job")).await?;
    if let Some(ran_on) = ran_on {
        *backend = ran_on;
    }
    outcome.claimed = rows.len();
    let mut rows: Vec<Claimed> = rows.iter().map(Claimed::from).collect();
    // The session is the plugin's, and so is what it answers: a plugin that replaced the
    // host's prepared claim on its session must not get another task's job recorded.
    if let Some(other) = rows.iter().find(|r| r.task != task) {
        return Err(BatchError::ConnectionLost(format!("the claim in {task}'s session answered a job of task {:?}; the session is dropped", other.task)));
    }
    // In the claim's order (an UPDATE returns its rows in no particular order).
    rows.sort_by(|a, b| (a.run_after, a.slot, &a.key).cmp(&(b.run_after, b.slot, &b.key)));
    // A job a crash marked runs alone: in a batch of several it waits for its own.
    let (rows, alone): (Vec<Claimed>, Vec<Claimed>) = if rows.len() > 1 { rows.into_iter().partition(|r| r.crashes == 0) } else { (rows, Vec::new()) };
    // The claim marked them done: pending again, as they were, for their own claim.
    for row in &alone {
        unclaim.exec(conn, &[&row.slot, &row.key, &row.last_error, &row.digest]).await?;
    }
    outcome.alone = alone.into_iter().map(|r| (r.task, r.slot, r.key)).collect();
    // A job a crash marked runs alone across all hosts too: a server crash while it runs
    // is then its own (sweep_claims.sql). Another one running, it waits a second.
    if let [row] = rows.as_slice() {
        if row.crashes > 0 && row.crashes < options.poison_after {
            let gate = Prepared::on(conn, ALONE).await?;
            let open: bool = gate.rows(conn, &[&row.slot, &row.key, &row.last_error, &row.digest]).await?.first().is_some_and(|r| r.get(0));
            if !open {
                conn.batch_execute(&COMMIT).await?;
                outcome.claimed = 0;
                return Ok(outcome);
            }
        }
    }
    let Some(plugin) = plugin.filter(|_| !rows.is_empty()) else {
        // Nothing to run, or the plugin went away between the choice and the claim:
        // pending again, as they were, for a host that has it. No plugin ran in this
        // transaction, so the session has nothing to clean: an idle host's poll is four
        // statements, not ten.
        put_back(conn, &unclaim, &rows, false).await?;
        outcome.claimed = 0;
        return Ok(outcome);
    };
    let held = |rows: &[Claimed]| rows.iter().map(|r| claims::Held { task: r.task.clone(), slot: r.slot, key: r.key.clone(), attempts: r.attempts }).collect();
    hold.hold(*backend).await;
    if let Err(e) = context.recorder.record(*backend, held(&rows)).await {
        return Err(BatchError::ConnectionLost(e.to_string()));
    }
    // Invariant at the top of the loop: a savepoint "job" is open and unused (or on its
    // way, in `sent`).
    let started = std::time::Instant::now();
    let mut sent: Option<InFlight> = None;
    for (i, row) in rows.iter().enumerate() {
        // Long enough, or a job's deadline sent a cancel on this connection (which may
        // land late, on the next job's statement: the connection is replaced after the
        // batch): the jobs not started go back pending for the next claim, so the
        // transaction (its locks, VACUUM's horizon) stays short.
        if i > 0 && (started.elapsed() >= options.batch_time || outcome.retire_connection) {
            InFlight::answer(sent.take()).await?;
            // The claim on record shrinks to the jobs that ran first: the sweep must not
            // take the ones put back for jobs this backend was running when it ended.
            if let Err(e) = context.recorder.record(*backend, held(&rows[..i])).await {
                return Err(BatchError::ConnectionLost(e.to_string()));
            }
            put_back(conn, &unclaim, &rows[i..], true).await?;
            outcome.claimed = i;
            outcome.cut = true;
            break;
        }
        let follow = if i + 1 == rows.len() { Follow::Commit } else { Follow::Savepoint };
        let job = Job {
            task: row.task.clone(),
            slot: slots.get(&plugin, row.slot, &row.period),
            key: row.key.clone(),
            attempt: u32::try_from(row.attempts).unwrap_or(0) + 1,
            payload: row.payload.clone(),
        };
        let span = tracing::info_span!("job", task = %row.task, slot = %job.slot.label, key = %crate::text::printable(&row.key), attempt = job.attempt);
        let run = if row.crashes >= options.poison_after {
            InFlight::answer(sent.take()).await?;
            poisoned(conn, &statements, &plugin, row, follow).instrument(span).await?
        } else {
            let (run, next) = run_job(conn, &statements, &plugin, &job, (row.slot, row.transients), options, (sent.take(), follow)).instrument(span).await?;
            sent = next;
            run
        };
        outcome.retire_connection |= run.cancelled;
        outcome.conflicts += usize::from(run.conflict);
        outcome.jobs.push((row.task.clone(), run.end, run.elapsed));
    }
    Ok(outcome)
}

/// Claimed jobs a batch does not run: pending again, exactly as they were, then COMMIT
/// (the open savepoint commits with it), and the session cleaned if a plugin ran in it.
async fn put_back(conn: &Arc<Conn>, unclaim: &Prepared, rows: &[Claimed], ran: bool) -> Result<(), BatchError> {
    // Sent together, answered together: one round trip.
    let params: Vec<[&dyn crate::db::Param; 4]> = rows.iter().map(|r| [&r.slot as &dyn crate::db::Param, &r.key, &r.last_error, &r.digest]).collect();
    futures_util::future::try_join_all(params.iter().map(|p| unclaim.exec(conn, p))).await?;
    conn.batch_execute(if ran { &COMMIT } else { "COMMIT" }).await?;
    if !rows.is_empty() {
        tracing::debug!(jobs = rows.len(), "jobs put back for the next claim");
    }
    Ok(())
}

/// Run one claimed job in the open savepoint (the one `before` is still answering, if
/// any) and send `follow` (the next SAVEPOINT, or COMMIT): its done mark is the claim's.
/// A failure is recorded in the same round trip. The next savepoint is returned unanswered.
async fn run_job(
    conn: &Arc<Conn>,
    statements: &Statements<'_>,
    plugin: &crate::plugin::Plugin,
    job: &Job,
    (slot, transients): (DateTime<Utc>, i32),
    options: &Options,
    (before, follow): (Option<InFlight>, Follow),
) -> Result<(JobRun, Option<InFlight>), BatchError> {
    let key = &job.key;
    let started = std::time::Instant::now();
    // The savepoint's answer is read while the plugin runs: left unread, its chunks fill
    // the connection's response channel and stop it reading the plugin's answers too.
    let (called, before) = futures_util::join!(plugin.run(conn, job), InFlight::answer(before));
    let elapsed = started.elapsed();
    let cancelled = called.ending.cancel_sent;
    before?;
    match called.result {
        Ok(()) => {
            // The savepoint is not released: the next one nests in it, and COMMIT ends
            // them all (a released subtransaction stays in the backend's subtransaction
            // cache until then anyway).
            let sql = match called.ending.used {
                true => follow.after_call(),
                false => follow.sql(),
            };
            tracing::debug!(?elapsed, "job done");
            let done = JobRun { end: JobEnd::Done, elapsed, cancelled, conflict: false };
            match follow {
                Follow::Savepoint => Ok((done, Some(InFlight::send(conn, sql).await))),
                Follow::Commit => {
                    conn.batch_execute(sql).await?;
                    Ok((done, None))
                }
            }
        }
        Err(CallError::ConnectionLost(why)) if transient::of_call(&called.ending, None) => Err(BatchError::Dropped(why)),
        Err(CallError::ConnectionLost(why)) => Err(BatchError::ConnectionLost(why)),
        Err(e) => {
            let transient = transient::of_call(&called.ending, Some(&e));
            let (give_up, delay) = match transient {
                true => transient::next(transients, options.transient_retries),
                false => {
                    let give_up = !e.retryable() || job.attempt >= plugin.spec.max_attempts;
                    (give_up, crate::backoff::delay(options.retry_base, options.retry_max, job.attempt))
                }
            };
            let message = crate::text::clip(e.to_string(), crate::text::MAX_STORED);
            let failure = Failure { message: &message, give_up, delay, digest: &plugin.digest, cancelled, transient };
            record_failure(conn, statements, (slot, key), failure, follow).await?;
            if give_up {
                tracing::warn!(error = %crate::text::printable(&message), "job failed for good");
            } else if transient {
                tracing::info!(error = %crate::text::printable(&message), retry_in = ?delay, "job interrupted by a transient error; not counted as an attempt");
            } else {
                tracing::info!(error = %crate::text::printable(&message), retry_in = ?delay, "job attempt failed");
            }
            let end = if give_up { JobEnd::Failed } else { JobEnd::Retried };
            Ok((JobRun { end, elapsed, cancelled, conflict: transient && transient::conflict_of_call(&called.ending) }, None))
        }
    }
}
