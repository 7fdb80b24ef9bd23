//! Failover: hosts given both nodes of a pg_auto_failover formation (a libpq multi-host
//! URL with `target_session_attrs=read-write`) follow a planned switchover and a primary
//! SIGKILLed mid-run, with no host restarted: every account paid once, every outbox
//! message delivered, no job failed, and no commit acknowledged before the kill lost.
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::reliability::latest_daily_slot;
use crate::support::failover::{Formation, DB};
use crate::support::receiver::{answer, Receiver};
use crate::support::{almanac, connect, plugin_dir, HostProc, TestDb};

/// `sql` (one bigint and the server's now()) on a fresh connection to whichever node takes
/// writes; None while there is none.
async fn ask(url: &str, sql: &str) -> Option<(i64, chrono::DateTime<chrono::Utc>)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.ok()?;
    tokio::spawn(conn);
    let row = client.query_one(sql, &[]).await.ok()?;
    Some((row.get(0), row.get(1)))
}

const DONE: &str = "SELECT count(*), now() FROM almanac.jobs WHERE status = 'done'";

/// Wait until at least `want` jobs are done; when they were. On a timeout, the hosts'
/// logs since `since` say what they were doing.
async fn done_at_least(url: &str, want: i64, timeout: Duration, hosts: &[HostProc]) -> Instant {
    let deadline = Instant::now() + timeout;
    loop {
        if ask(url, DONE).await.is_some_and(|(n, _)| n >= want) {
            return Instant::now();
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> =
                hosts.iter().map(|h| h.log().lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")).collect();
            panic!("fewer than {want} jobs done after {timeout:?} (last: {:?}); the hosts' last lines:\n{}", ask(url, DONE).await, logs.join("\n----\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hosts_follow_a_switchover_and_a_killed_primary_paying_every_account_once() {
    const ACCOUNTS: i64 = 2000;
    const DAYS: i64 = 6;
    let total = ACCOUNTS * DAYS;
    let mut formation = Formation::start().await;
    let url = formation.url();
    let (code, _, err) = almanac(&url, &["migrate"]);
    assert_eq!(code, 0, "{err}");
    let db = TestDb { name: DB.into(), client: connect(&url).await, url: url.clone() };
    db.accounts(ACCOUNTS).await;
    let cursor = latest_daily_slot(&db).await - chrono::Duration::days(DAYS);
    db.schedule("points-notify", "0 0 * * *", "Asia/Shanghai", cursor).await;
    let receiver = Receiver::start(Arc::new(|_, _| answer(200, "ok"))).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("almanac.toml");
    std::fs::write(
        &config,
        format!("[outbox.topics.points-awarded]\nsink = \"webhook\"\nurl = \"{}\"\ntimeout = \"5s\"\nmax_attempts = 100\n", receiver.url()),
    )
    .unwrap();
    let plugins = plugin_dir(&["points_notify"]);
    let config = config.display().to_string();
    let args =
        ["--workers", "2", "--batch", "8", "--config", &config, "--outbox-poll-interval", "50ms", "--outbox-retry-base", "50ms", "--outbox-retry-max", "1s"];
    let started = Instant::now();
    let mut hosts: Vec<HostProc> = (0..3).map(|_| HostProc::spawn_url(&url, plugins.path(), &args, &[])).collect();
    let pids: Vec<i32> = hosts.iter().map(HostProc::pid).collect();

    // A planned switchover at a fifth of the backlog: node_2 takes over, node_1 follows.
    let first = done_at_least(&url, 1, Duration::from_secs(60), &hosts).await;
    let fifth = done_at_least(&url, total / 5, Duration::from_secs(120), &hosts).await;
    let (before, _) = ask(&url, DONE).await.expect("the primary answers");
    let rate_before = before as f64 / fifth.duration_since(first).as_secs_f64();
    let switched = Instant::now();
    formation.switchover();
    formation.wait_states("the switchover", &[("node_2", "primary"), ("node_1", "secondary")], Duration::from_secs(60)).await;
    let (n, _) = ask(&url, DONE).await.expect("node_2 answers");
    let resumed = done_at_least(&url, n + 1, Duration::from_secs(60), &hosts).await.duration_since(switched);

    // node_2 SIGKILLed at half the backlog, keeper and postgres together.
    done_at_least(&url, total / 2, Duration::from_secs(120), &hosts).await;
    let (acknowledged, kill_time) = ask(&url, DONE).await.expect("node_2 answers");
    let killed = Instant::now();
    formation.kill(1);
    let failed_over = done_at_least(&url, acknowledged + 1, Duration::from_secs(120), &hosts).await;
    let recovery = failed_over.duration_since(killed);
    // Alone, it reports wait_primary (a primary without a standby: commits do not wait).
    formation.wait_states("node_1 promoted", &[("node_1", "wait_primary")], Duration::from_secs(60)).await;
    // Every commit acknowledged before the kill is on the new primary (synchronous
    // replication): the done count of jobs that committed by then did not go down.
    let kept = format!("SELECT count(*), now() FROM almanac.jobs WHERE status = 'done' AND completed_at <= '{}'", kill_time.to_rfc3339());
    let (survived, _) = ask(&url, &kept).await.expect("node_1 answers");
    assert!(survived >= acknowledged, "{acknowledged} jobs were done before the kill, {survived} after it");
    let promoted = killed.elapsed();
    // The old primary comes back as a standby.
    formation.rejoin(1);
    formation.wait_states("node_2 rejoining as a standby", &[("node_2", "secondary"), ("node_1", "primary")], Duration::from_secs(90)).await;

    let rejoined = killed.elapsed();
    let end = done_at_least(&url, total, Duration::from_secs(180), &hosts).await;
    let rate_after = (total - acknowledged) as f64 / end.duration_since(failed_over).as_secs_f64();
    let delivered = "SELECT count(*), now() FROM almanac.outbox WHERE status = 'delivered'";
    let deadline = Instant::now() + Duration::from_secs(120);
    while ask(&url, delivered).await.is_none_or(|(n, _)| n < total) {
        assert!(Instant::now() < deadline, "not every message delivered: {:?}", ask(&url, delivered).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (i, host) in hosts.iter_mut().enumerate() {
        assert!(host.is_running() && host.pid() == pids[i], "host {i} ended; log:\n{}", host.log());
    }
    let client = connect(&url).await;
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0, "none failed or pending");
    assert_eq!(count("SELECT count(*) FROM almanac.jobs").await, total);
    assert_eq!(count("SELECT count(*) FROM accounts WHERE points <> 10 * 6").await, 0, "every account paid once a day");
    assert_eq!(count("SELECT count(*) FROM notify_ledger").await, total);
    assert_eq!(count("SELECT count(*) FROM almanac.outbox").await, total);
    let keys: HashSet<String> = receiver.requests().into_iter().filter_map(|r| r.idempotency_key).collect();
    assert_eq!(keys.len() as i64, total, "every message reached the receiver under its key");
    let crashes = count("SELECT count(*) FROM almanac.jobs WHERE crashes > 0").await;
    assert_eq!(crashes, 0, "a failover is no job's crash");
    eprintln!(
        "failover: {total} jobs in {:.0} s; {rate_before:.0} jobs/s before, {rate_after:.0} jobs/s after; \
         switchover: first job done {:.1} s after it began; SIGKILL of the primary: first job done on the new primary {:.1} s later \
         (promoted at {:.1} s, old primary a standby again at {:.1} s); {} jobs interrupted",
        started.elapsed().as_secs_f64(),
        resumed.as_secs_f64(),
        recovery.as_secs_f64(),
        promoted.as_secs_f64(),
        rejoined.as_secs_f64(),
        count("SELECT count(*) FROM almanac.jobs WHERE transients > 0").await
    );
    for host in &mut hosts {
        host.stop().await;
    }
}
