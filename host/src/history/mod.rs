//! The job history: `almanac.jobs` in month partitions of slot (migration V9), and the
//! outbox's in month partitions of creation (V13). Partitions are made ahead of need by
//! running hosts and by backfill; the counters beside the rows (`almanac.job_counts`,
//! `almanac.delivered_counts`: deltas appended where jobs and messages change) are folded
//! here; claims look from a floor ([`ClaimFloor`]); `prune` drops whole months outside
//! every task's backfill horizon instead of deleting rows.
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_postgres::Client;

use crate::db::Sql;

const ENSURE: &str = include_str!("ensure.sql");
const AHEAD: &str = include_str!("ahead.sql");
const FOLD: &str = include_str!("fold.sql");
const PARTITIONS: &str = include_str!("partitions.sql");
const DROP_PARTITION: &str = include_str!("drop_partition.sql");
const PRUNE_DEFAULT: &str = include_str!("prune_default.sql");
const OUTBOX_PARTITIONS: &str = include_str!("outbox_partitions.sql");
const DROP_OUTBOX_PARTITION: &str = include_str!("drop_outbox_partition.sql");
const PRUNE_OUTBOX_DEFAULT: &str = include_str!("prune_outbox_default.sql");
const OUTSIDE: &str = include_str!("outside.sql");
const FLOOR: &str = include_str!("floor.sql");
const WIDEST_HORIZON: &str = include_str!("widest_horizon.sql");

/// Creating or dropping a partition locks almanac.jobs; behind a long transaction it
/// gives up after this long (and is tried again later) rather than queue every claim
/// behind it.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '2s'";
/// How often a running host checks its partitions ahead (a month is made a month before
/// it starts) and folds the counters.
const ENSURE_EVERY: Duration = Duration::from_secs(600);
const FOLD_EVERY: Duration = Duration::from_secs(5);

/// Run `sql` in a transaction of its own under [`LOCK_TIMEOUT`].
async fn locked<T>(
    client: &Client,
    sql: &str,
    params: &[&dyn crate::db::Param],
    read: impl Fn(&tokio_postgres::Row) -> T,
) -> Result<Vec<T>, tokio_postgres::Error> {
    client.batch_execute(&format!("BEGIN; {LOCK_TIMEOUT}")).await?;
    match client.rows(sql, params).await {
        Ok(rows) => {
            client.batch_execute("COMMIT").await?;
            Ok(rows.iter().map(read).collect())
        }
        Err(e) => {
            client.batch_execute("ROLLBACK").await?;
            Err(e)
        }
    }
}

/// The month partitions covering `[from, to]`, created where missing; a backfill calls
/// this before it generates. Months outside the window the database keeps partitions
/// for (5 years back, 2 ahead) stay in the default partition.
pub async fn ensure(client: &Client, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), tokio_postgres::Error> {
    locked(client, ENSURE, &[&from, &to], |_| ()).await.map(drop)
}

/// What the scheduler does between rounds: partitions ahead every [`ENSURE_EVERY`],
/// counters folded every [`FOLD_EVERY`]. A failure is logged and tried again later:
/// neither is needed for a job to run (an insert without its month lands in the default
/// partition; unfolded counts are still summed).
#[derive(Default)]
pub struct Upkeep {
    ensured: Option<Instant>,
    folded: Option<Instant>,
}

impl Upkeep {
    pub async fn run(&mut self, client: &Client) {
        let due = |at: Option<Instant>, every: Duration| at.is_none_or(|t| t.elapsed() >= every);
        if due(self.ensured, ENSURE_EVERY) {
            self.ensured = Some(Instant::now());
            if let Err(e) = locked(client, AHEAD, &[], |_| ()).await {
                tracing::warn!("could not create the job history's partitions ahead (tried again in 10 minutes): {}", crate::db::error_chain(&e));
            }
        }
        if due(self.folded, FOLD_EVERY) {
            self.folded = Some(Instant::now());
            if let Err(e) = locked(client, FOLD, &[], |_| ()).await {
                tracing::warn!("could not fold the job and message counters: {}", crate::db::error_chain(&e));
            }
        }
    }
}

/// How often an executor asks where its claims look from.
pub const FLOOR_EVERY: Duration = Duration::from_secs(5);

/// Where an executor's claims look from: the start of the oldest month partition that
/// may hold a pending job (`almanac.claim_floor()`: last month, or an older one that
/// holds one), written into the claim's text so its plan names only the partitions from
/// there on. Asked every [`FLOOR_EVERY`] by whichever worker claims first after that; a
/// job inserted into a month older than the floor (a backfill, an enqueue of an old slot)
/// is claimed once the floor is asked again, within that time.
#[derive(Default)]
pub struct ClaimFloor {
    /// The last answer, and when it was asked for.
    state: std::sync::Mutex<(Option<DateTime<Utc>>, Option<Instant>)>,
}

impl ClaimFloor {
    /// The last floor known, without asking (None until first known: no floor).
    pub fn current(&self) -> Option<DateTime<Utc>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// Whether it is time to ask again.
    pub fn stale(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1.is_none_or(|at| at.elapsed() >= FLOOR_EVERY)
    }

    /// The floor to claim from (None until first known: no floor).
    pub async fn get(&self, client: &impl Sql) -> Result<Option<DateTime<Utc>>, tokio_postgres::Error> {
        let (known, ask) = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let ask = state.1.is_none_or(|at| at.elapsed() >= FLOOR_EVERY);
            if ask {
                state.1 = Some(Instant::now());
            }
            (state.0, ask)
        };
        if !ask {
            return Ok(known);
        }
        let floor: DateTime<Utc> = client.one(FLOOR, &[]).await?.get(0);
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 = Some(floor);
        Ok(Some(floor))
    }
}

/// Jobs whose slot lies outside every month partition (bounded count).
pub async fn outside(client: &impl Sql) -> Result<i64, tokio_postgres::Error> {
    Ok(client.one(OUTSIDE, &[]).await?.get(0))
}

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error(
        "refusing to prune: {} is inside the backfill horizon of task {task} ({}); done jobs younger than the \
         horizon are the dedupe evidence a backfill relies on. Nothing was deleted.",
        crate::task::format_duration(*.older_than), crate::task::format_duration(*.horizon)
    )]
    InsideHorizon { older_than: Duration, task: String, horizon: Duration },
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// What a prune did to one history (the jobs', the outbox's).
#[derive(Debug, Default)]
pub struct Months {
    /// Month partitions dropped, with the rows of history each held (done jobs,
    /// delivered messages).
    pub dropped: Vec<(String, i64)>,
    /// Month partitions wholly older than the cut that hold rows still to act on (jobs
    /// pending or failed; messages pending or dead).
    pub kept: Vec<String>,
    /// Month partitions that stayed because a lock was not granted in time.
    pub busy: Vec<String>,
    /// Rows of history deleted from the default partition.
    pub deleted: u64,
}

/// What a prune did.
#[derive(Debug, Default)]
pub struct Pruned {
    pub jobs: Months,
    pub outbox: Months,
}

/// Drop the month partitions wholly older than `older_than` (a partition straddling the
/// cut is kept whole until it is wholly outside; one holding a job still to run, or a
/// message still to deliver or dead, is kept and reported), and delete the default
/// partitions' done and discarded jobs and delivered messages older than it in bounded
/// batches: the jobs by slot, the outbox by the messages' creation. Refuses, deleting
/// nothing, if that reaches inside any task's backfill horizon (a job inside it may run
/// again, and publish again: the outbox keeps the evidence as long as the jobs do).
pub async fn prune(client: &Client, older_than: Duration) -> Result<Pruned, PruneError> {
    let widest = client.opt(WIDEST_HORIZON, &[]).await?;
    if let Some(row) = widest {
        let horizon = Duration::from_secs_f64(row.get::<_, f64>(1).max(0.0));
        if older_than < horizon {
            return Err(PruneError::InsideHorizon { older_than, task: row.get(0), horizon });
        }
    }
    let cut = crate::db::server_now(client)
        .await?
        .checked_sub_signed(chrono::Duration::from_std(older_than).unwrap_or(chrono::Duration::MAX))
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    Ok(Pruned {
        jobs: prune_months(client, [PARTITIONS, DROP_PARTITION, PRUNE_DEFAULT], cut).await?,
        outbox: prune_months(client, [OUTBOX_PARTITIONS, DROP_OUTBOX_PARTITION, PRUNE_OUTBOX_DEFAULT], cut).await?,
    })
}

/// One history's prune: its partitions (oldest first), how one is dropped, and one
/// bounded batch of its default partition's deletes.
async fn prune_months(client: &Client, [partitions, drop, default]: [&str; 3], cut: DateTime<Utc>) -> Result<Months, tokio_postgres::Error> {
    let mut months = Months::default();
    for row in client.rows(partitions, &[]).await? {
        let (name, next): (String, DateTime<Utc>) = (row.get(0), row.get(2));
        if next > cut {
            break;
        }
        match locked(client, drop, &[&name], |r| r.get::<_, Option<i64>>(0)).await {
            Ok(dropped) => match dropped.first().copied().flatten() {
                Some(n) => months.dropped.push((name, n)),
                None => months.kept.push(name),
            },
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => months.busy.push(name),
            Err(e) => return Err(e),
        }
    }
    loop {
        let n: i64 = client.one(default, &[&cut]).await?.get(0);
        months.deleted += n as u64;
        if n == 0 {
            return Ok(months);
        }
    }
}
