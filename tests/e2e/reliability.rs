//! Faults below the plugin: a COMMIT whose acknowledgement is lost (or that never
//! arrives), a database that is down at start or goes away, statements stuck on a row
//! lock, SIGTERM with work in flight, and hosts and the server killed at random while a
//! backlog drains. Each test that stops or crashes PostgreSQL gets a cluster of its own.
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use almanac::calendar::Schedule;
use chrono::{DateTime, Utc};
use rand::Rng;

use crate::support::private::PrivateCluster;
use crate::support::{connect, plugin_dir, wait_for, HostProc, TestDb};

use crate::support::proxy::{Cut, Proxy};

const RECONNECT: &str = "worker lost its database connection, reconnecting";

async fn sleeper_job(db: &TestDb, key: &str) -> (String, i64, i64) {
    let row = db
        .client
        .query_one(
            "SELECT j.status, j.attempts::bigint, coalesce(e.runs, 0)::bigint
             FROM almanac.jobs j LEFT JOIN fixture_sleeper_effects e ON e.key = j.key
             WHERE j.task = 'fixture-sleeper' AND j.key = $1",
            &[&key],
        )
        .await
        .unwrap_or_else(|e| panic!("job {key}: {e}"));
    (row.get(0), row.get(1), row.get(2))
}

async fn enqueue_sleeper(db: &TestDb, key: &str) {
    db.client.execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-sleeper', '2026-01-01T00:00:00Z', $1)", &[&key]).await.unwrap();
}

fn done(task: &str, key: &str) -> String {
    format!("SELECT count(*) FROM almanac.jobs WHERE task = '{task}' AND key = '{key}' AND status = 'done'")
}

async fn lost_commit(cut: Cut) {
    let pg = PrivateCluster::start(true).await;
    let db = pg.db().await;
    // The plugin's setup creates these too; the row must exist before the first job.
    db.client
        .batch_execute(
            "CREATE TABLE fixture_sleeper_effects (key text PRIMARY KEY, runs int NOT NULL);
             CREATE TABLE fixture_sleeper_control (seconds float8 NOT NULL);
             INSERT INTO fixture_sleeper_control VALUES (0);",
        )
        .await
        .unwrap();
    enqueue_sleeper(&db, "k1").await;
    let proxy = Proxy::start(pg.cluster.port, cut).await;
    let plugins = plugin_dir(&["fixture_sleeper"]);
    let mut host = HostProc::spawn_url(&pg.tcp_url(proxy.port), plugins.path(), &["--workers", "2"], &[]);
    wait_for("the proxy to cut the connection at the job's COMMIT", Duration::from_secs(30), || async { proxy.fired() }).await;
    host.wait_log(RECONNECT, Duration::from_secs(30)).await;
    db.wait_count(&done("fixture-sleeper", "k1"), 1, Duration::from_secs(30)).await;
    match cut {
        Cut::AfterCommit => {
            // A later job done proves the workers reconnected and claimed again since
            // the cut: had the host taken k1 for unfinished, it would have re-run it.
            enqueue_sleeper(&db, "k2").await;
            db.wait_count(&done("fixture-sleeper", "k2"), 1, Duration::from_secs(30)).await;
        }
        Cut::BeforeCommit => {
            assert!(proxy.armed() >= 2, "the job ran again on a new connection (armed: {})", proxy.armed());
        }
    }
    assert_eq!(sleeper_job(&db, "k1").await, ("done".into(), 1, 1), "k1: (status, attempts, committed runs)");
    assert!(host.is_running(), "the host survived the cut; log:\n{}", host.log());
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_whose_acknowledgement_is_lost_stays_done_and_is_not_run_again() {
    lost_commit(Cut::AfterCommit).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_that_never_reaches_the_server_runs_the_job_again_with_one_effect() {
    lost_commit(Cut::BeforeCommit).await;
}

async fn enqueue_points(db: &TestDb, key: &str) {
    db.client.execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ('daily-points', '2026-03-07T16:00:00Z', $1)", &[&key]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_down_at_start_and_gone_while_idle_is_waited_for() {
    let pg = PrivateCluster::start(false).await;
    let mut db = pg.db().await;
    db.accounts(3).await;
    pg.stop_server("fast");
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn_url(&pg.url(), plugins.path(), &[], &[]);
    host.wait_log("database unavailable", Duration::from_secs(20)).await;
    assert!(host.is_running(), "the host waits for the database; log:\n{}", host.log());

    pg.start_server();
    host.wait_log("plugin loaded", Duration::from_secs(30)).await;
    db.client = connect(&db.url).await;
    enqueue_points(&db, "1").await;
    db.wait_count(&done("daily-points", "1"), 1, Duration::from_secs(30)).await;

    let unavailable = |log: &str| log.matches("database unavailable").count();
    let before = unavailable(&host.log());
    pg.stop_server("fast");
    wait_for("the host to notice the database went away", Duration::from_secs(20), || async {
        let log = host.log();
        unavailable(&log) > before || log.contains("lost its database connection")
    })
    .await;
    assert!(host.is_running(), "the host waits for the database again; log:\n{}", host.log());

    pg.start_server();
    db.client = connect(&db.url).await;
    enqueue_points(&db, "2").await;
    db.wait_count(&done("daily-points", "2"), 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 10 AND id IN (1, 2)").await, 2);
    assert!(host.is_running());
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_stuck_on_a_row_lock_fail_at_their_deadline_without_leaking_connections() {
    const WORKERS: i64 = 4;
    const JOBS: i64 = 200;
    let db = TestDb::new().await;
    db.client
        .batch_execute(&format!(
            "CREATE TABLE fixture_locked (id int PRIMARY KEY, n int NOT NULL);
             INSERT INTO fixture_locked VALUES (1, 0);
             INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'fixture-locker', '2026-01-01T00:00:00Z', 'k' || g FROM generate_series(1, {JOBS}) g;"
        ))
        .await
        .unwrap();
    let holder = connect(&db.url).await;
    holder.batch_execute("BEGIN; SELECT n FROM fixture_locked WHERE id = 1 FOR UPDATE").await.unwrap();

    let plugins = plugin_dir(&["fixture_locker"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", &WORKERS.to_string()]);
    let connections = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'almanac'";
    // Host transactions go idle between statements for microseconds; one idle for a
    // second while its row lock is held elsewhere was left behind.
    let stuck = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'almanac'
                 AND state = 'idle in transaction' AND state_change < now() - interval '1 second'";
    // The pool holds workers + 4, plus the listener's own connection.
    let most_allowed = WORKERS + 5;
    // 200 deadlines of 200 ms on 4 workers take about 10 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    // A backend outlives its closed connection by a moment (and a connection that carried
    // a cancel is replaced after its batch), so a short excursion over the bound is not a
    // leak; a full second over it (20 samples in a row) is.
    let mut over = 0;
    loop {
        let finished = db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'").await;
        let open = db.count(connections).await;
        over = if open > most_allowed { over + 1 } else { 0 };
        assert!(over < 20, "{open} host connections, at most {most_allowed}; log:\n{}", host.log());
        assert_eq!(db.count(stuck).await, 0, "a host connection sits idle in transaction; log:\n{}", host.log());
        if finished == JOBS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of {JOBS} jobs finished; workers reconnected {} times (host log below)",
            host.log().matches(RECONNECT).count()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadlined = db
        .count(
            "SELECT count(*) FROM almanac.jobs WHERE status = 'failed' AND attempts = 1
             AND last_error = 'plugin exceeded its deadline of 200ms'",
        )
        .await;
    if deadlined != JOBS {
        let other: String = db
            .client
            .query_one(
                "SELECT string_agg(DISTINCT format('%s after %s attempt(s), %s crash(es): %s', status, attempts, crashes, coalesce(last_error, '')), '; ')
                 FROM almanac.jobs",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        panic!("{deadlined} of {JOBS} jobs failed at their deadline; seen: {other}; log:\n{}", host.log());
    }
    // Idle workers open a transaction per poll, so one may be caught in the middle;
    // a leaked one never clears.
    db.wait_count(&stuck.replace("AND state_change < now() - interval '1 second'", ""), 0, Duration::from_secs(5)).await;
    wait_for(&format!("at most {most_allowed} host connections after the run"), Duration::from_secs(5), || async {
        db.count(connections).await <= most_allowed
    })
    .await;
    assert!(host.is_running(), "log:\n{}", host.log());

    holder.batch_execute("ROLLBACK").await.unwrap();
    db.client.batch_execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-locker', '2026-01-01T00:00:00Z', 'after')").await.unwrap();
    db.wait_count(&done("fixture-locker", "after"), 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT n::bigint FROM fixture_locked WHERE id = 1").await, 1, "only the last job's update committed");
    host.stop().await;
}

/// A sleeper job `k1` and a host on it, with the plugin asleep inside the job.
async fn host_mid_sleep(db: &TestDb, seconds: f64, grace: &str) -> (HostProc, tempfile::TempDir) {
    db.sleeper(seconds).await;
    enqueue_sleeper(db, "k1").await;
    let plugins = plugin_dir(&["fixture_sleeper"]);
    let host = HostProc::spawn(db, plugins.path(), &["--workers", "1", "--shutdown-grace", grace]);
    let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                    AND state = 'active' AND query LIKE 'SELECT pg_sleep%'";
    db.wait_count(sleeping, 1, Duration::from_secs(30)).await;
    (host, plugins)
}

/// Locks held in the test's database by any backend but the test's own.
const OTHERS_LOCKS: &str = "SELECT count(*) FROM pg_locks l
    WHERE l.pid <> pg_backend_pid()
      AND (l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           OR l.pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database()))";

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_an_in_flight_job_commit_within_the_grace() {
    let db = TestDb::new().await;
    let (mut host, _plugins) = host_mid_sleep(&db, 2.0, "20s").await;
    let signalled = Instant::now();
    host.signal(libc::SIGTERM);
    let status = host.wait(Duration::from_secs(20)).await;
    assert!(status.success(), "exit {status}; log:\n{}", host.log());
    assert!(signalled.elapsed() < Duration::from_secs(20), "exited within the grace");
    assert_eq!(sleeper_job(&db, "k1").await, ("done".into(), 1, 1), "the in-flight job committed");
    // The host's backends end a moment after its sockets close.
    db.wait_count(OTHERS_LOCKS, 0, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_past_the_grace_abandons_the_job_and_releases_its_lock() {
    let db = TestDb::new().await;
    let (mut host, _plugins) = host_mid_sleep(&db, 600.0, "1s").await;
    host.signal(libc::SIGTERM);
    let status = host.wait(Duration::from_secs(3)).await;
    assert!(status.success(), "exit {status}; log:\n{}", host.log());
    // The server notices the closed connection within client_connection_check_interval
    // (1 s), ends the sleep and rolls the job back.
    wait_for("the abandoned job's row lock to be released", Duration::from_secs(10), || async {
        db.client.query("SELECT 1 FROM almanac.jobs WHERE key = 'k1' FOR UPDATE NOWAIT", &[]).await.is_ok()
    })
    .await;
    assert_eq!(sleeper_job(&db, "k1").await, ("pending".into(), 0, 0), "the job is untouched");
    assert_eq!(db.count("SELECT count(*) FROM fixture_sleeper_effects").await, 0);
}

/// The newest daily-points slot (00:00 Asia/Shanghai) that has started, by the server's
/// clock.
pub(crate) async fn latest_daily_slot(db: &TestDb) -> DateTime<Utc> {
    let now: DateTime<Utc> = db.client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    Schedule::new("0 0 * * *", "Asia/Shanghai")
        .unwrap()
        .slots_after(now - chrono::Duration::days(2))
        .take_while(|s| s.start <= now)
        .last()
        .expect("a midnight in the last two days")
        .start
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_host_kills_and_two_server_crashes_pay_every_account_exactly_once() {
    const ACCOUNTS: i64 = 2000;
    const DAYS: i64 = 10;
    const KILLS: usize = 30;
    let pg = PrivateCluster::start(false).await;
    let mut db = pg.db().await;
    db.accounts(ACCOUNTS).await;
    let cursor = latest_daily_slot(&db).await - chrono::Duration::days(DAYS);
    db.client
        .execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('daily-points', '0 0 * * *', 'Asia/Shanghai', $1)",
            &[&cursor],
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let url = pg.url();
    let spawn = || HostProc::spawn_url(&url, plugins.path(), &["--workers", "2", "--batch", "4"], &[]);
    let mut hosts: Vec<HostProc> = (0..3).map(|_| spawn()).collect();
    let mut killed = Vec::new();
    for kill in 1..=KILLS {
        // The chaos schedule itself, not a wait for anything.
        tokio::time::sleep(Duration::from_millis(rand::rng().random_range(500..=2000))).await;
        let victim = rand::rng().random_range(0..hosts.len());
        let mut host = std::mem::replace(&mut hosts[victim], spawn());
        let exited_alone = !host.is_running();
        host.signal(libc::SIGKILL);
        let status = host.wait(Duration::from_secs(10)).await;
        assert!(
            !exited_alone && status.signal() == Some(libc::SIGKILL),
            "host #{kill} exited on its own ({status}) before it was killed; log:\n{}",
            host.log()
        );
        killed.push(host);
        if kill % 10 == 0 && kill < KILLS {
            pg.restart_immediate();
        }
    }
    // The test's own connection did not survive the server crashes.
    db.client = connect(&url).await;
    let total = ACCOUNTS * DAYS;
    // On a timeout, say where the missing jobs stand and what holds them.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await < total {
        if std::time::Instant::now() > deadline {
            let show = |sql: &'static str| {
                let client = &db.client;
                async move { client.query(sql, &[]).await.unwrap().iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>() }
            };
            eprintln!("not done: {:?}", show("SELECT key || ' ' || slot || ' ' || status || ' attempts ' || attempts || ' crashes ' || crashes || ' ' || coalesce(last_error, '-') || ' due in ' || (run_after - now())::text FROM almanac.jobs WHERE status <> 'done'").await);
            eprintln!("claims: {:?}", show("SELECT row_to_json(c)::text FROM almanac.claims c").await);
            eprintln!("sessions: {:?}", show("SELECT coalesce(usename::text, '') || ' ' || coalesce(application_name, '') || ' ' || coalesce(state, '') || ' ' || left(coalesce(query, ''), 80) FROM pg_stat_activity WHERE datname = current_database()").await);
            let logs: Vec<String> = hosts.iter().map(HostProc::log).collect();
            panic!("timed out after 90s: not every job is done; the running hosts' logs:\n{}", logs.join("\n----\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, total);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0, "none pending or failed");
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'").await, DAYS);
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10 * 10").await, 0, "every account +100 points");
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, total);
    db.assert_counters_agree().await;

    let logs: Vec<String> = killed.iter().chain(hosts.iter()).map(HostProc::log).collect();
    for log in &logs {
        // A host panic starts a line; a plugin's is quoted inside its job's error.
        assert!(!log.lines().any(|l| l.starts_with("thread '")), "a host panicked; log:\n{log}");
    }
    assert!(
        logs.iter().any(|l| l.contains("database unavailable") || l.contains("lost its database connection")),
        "some host saw a server crash and reconnected"
    );
    for host in &mut hosts {
        host.stop().await;
    }
}

/// A batch starts no job after `--batch-time`: the jobs it claimed and did not start go
/// back pending, as they were (no attempt counted), and the next batch runs them. The
/// batch's transaction, its locks and VACUUM's horizon stay short.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_past_its_time_puts_back_the_jobs_it_did_not_start() {
    let db = TestDb::new().await;
    db.sleeper(0.4).await;
    let keys: Vec<String> = (1..=7).map(|n| format!("k{n}")).collect();
    db.enqueue("fixture-sleeper", "2026-03-01T16:00:00Z", &keys.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let plugins = plugin_dir(&["fixture_sleeper"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "1", "--batch", "4", "--batch-time", "700ms"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 7, Duration::from_secs(60)).await;
    host.stop().await;
    db.counts_agree().await;
    // completed_at is the committing transaction's start. The claims grow 1, 2, 4 while
    // they come back full; the batch of four starts no third job after 0.8 s (> 0.7 s),
    // puts two back and the next claim, halved, takes them.
    let sizes: String = db
        .client
        .query_one("SELECT string_agg(n::text, ',' ORDER BY at) FROM (SELECT completed_at at, count(*) n FROM almanac.jobs GROUP BY 1) b", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sizes, "1,2,2,2", "batches; log:\n{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE attempts = 1 AND last_error IS NULL").await, 7);
    assert_eq!(db.count("SELECT sum(runs) FROM fixture_sleeper_effects").await, 7, "each job ran once");
}
