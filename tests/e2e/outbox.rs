//! The transactional outbox against a real HTTP receiver on 127.0.0.1: messages exist
//! only if their job committed, every one is delivered at least once with a stable
//! `Idempotency-Key`, a host killed between the receiver's 200 and the `delivered`
//! record redelivers, and a permanent refusal is dead until an operator retries it.
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::receiver::{answer, Received, Receiver};
use crate::support::{connect, plugin_dir, wait_for, HostProc, TestDb};

/// An `almanac.toml` in its own folder.
pub(crate) fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix("almanac-config-").tempdir().unwrap();
    let path = dir.path().join("almanac.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// `--config PATH` plus dispatcher settings fast enough for tests.
pub(crate) fn outbox_args(config: &std::path::Path) -> Vec<String> {
    ["--config", config.to_str().unwrap(), "--outbox-poll-interval", "50ms", "--outbox-retry-base", "20ms", "--outbox-retry-max", "200ms"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

pub(crate) fn spawn(db: &TestDb, plugins: &std::path::Path, args: &[String]) -> HostProc {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    HostProc::spawn(db, plugins, &args)
}

pub(crate) fn almanac(db: &TestDb, args: &[&str]) -> (i32, String) {
    let (code, stdout, _) = crate::support::almanac(&db.url, args);
    assert!(code >= 0, "almanac {args:?} was killed");
    (code, stdout)
}

/// `n` points-notify jobs for accounts 1..=n in one slot (2026-03-08 in Shanghai, its
/// period), its schedule registered as a host would.
pub(crate) async fn enqueue_points_notify(db: &TestDb, n: i64) {
    db.accounts(n).await;
    db.schedule("points-notify", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    db.client
        .execute(
            "INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'points-notify', '2026-03-07T16:00:00Z', g::text FROM generate_series(1, $1::bigint) g",
            &[&n],
        )
        .await
        .unwrap();
}

/// points-notify's schedule stays paused so that only the enqueued jobs run.
fn points_config(receiver: &Receiver, timeout: &str) -> String {
    format!(
        "[tasks.points-notify]\npaused = true\n\n[outbox.topics.points-awarded]\nsink = \"webhook\"\nurl = \"{}\"\ntimeout = \"{timeout}\"\nmax_attempts = 30\n",
        receiver.url()
    )
}

const DELIVERED: &str = "SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'";

#[tokio::test(flavor = "multi_thread")]
async fn a_flaky_slow_receiver_gets_every_message_with_one_key_each() {
    let db = TestDb::new().await;
    enqueue_points_notify(&db, 50).await;
    // Every third request fails with a 500; every fifth is held past the sink's timeout
    // (1 s: generous, so a busy machine does not turn a prompt 200 into a timeout) and
    // then dropped unanswered.
    let receiver = Receiver::start(Arc::new(|n, _| {
        if n % 5 == 0 {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                None
            })
        } else if n % 3 == 0 {
            answer(500, "try again later")
        } else {
            answer(200, "ok")
        }
    }))
    .await;
    let (_dir, path) = config(&points_config(&receiver, "1s"));
    let plugins = plugin_dir(&["points_notify"]);
    // Two hosts dispatch side by side, with several workers each, one batching.
    let mut args = outbox_args(&path);
    args.extend(["--outbox-workers", "3"].map(String::from));
    let mut batching = args.clone();
    batching.extend(["--outbox-batch", "4"].map(String::from));
    let mut a = spawn(&db, plugins.path(), &args);
    let mut b = spawn(&db, plugins.path(), &batching);
    db.wait_count(DELIVERED, 50, Duration::from_secs(60)).await;
    a.stop().await;
    b.stop().await;

    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox").await, 50);
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points <> 10").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox WHERE last_error IS NOT NULL OR dispatched_at IS NULL").await, 0);
    assert!(db.count("SELECT count(*) FROM almanac.outbox WHERE attempts > 1").await > 0, "no message needed a retry");

    let requests = receiver.requests();
    assert!(requests.iter().any(|r| r.answered == Some(500)), "no 500 was sent");
    assert!(requests.iter().any(|r| r.answered.is_none()), "no request was held past the timeout");
    // The receiver's dedupe: by Idempotency-Key, every message, each key once.
    let mut by_key: HashMap<String, Vec<&Received>> = HashMap::new();
    for r in &requests {
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(r.task.as_deref(), Some("points-notify"), "the publishing task is named");
        by_key.entry(r.idempotency_key.clone().expect("an Idempotency-Key header")).or_default().push(r);
    }
    let expected: HashSet<String> = db.client.query("SELECT topic || '/' || key FROM almanac.outbox", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(by_key.keys().cloned().collect::<HashSet<_>>(), expected);
    assert_eq!(by_key.len(), 50);
    for (key, deliveries) in &by_key {
        // Without a crash, exactly one attempt per message succeeds: no two hosts
        // delivered one message.
        let accepted = deliveries.iter().filter(|r| r.answered == Some(200)).count();
        assert_eq!(accepted, 1, "{key}: {accepted} accepted deliveries");
        let account = key.rsplit('/').next().unwrap();
        assert_eq!(key, &format!("points-awarded/points-notify/2026-03-08/{account}"));
        let payload: serde_json::Value = serde_json::from_slice(&deliveries[0].body).unwrap();
        assert_eq!(payload["account"].to_string(), account);
        assert_eq!((payload["points"].as_i64(), payload["period"].as_str()), (Some(10), Some("2026-03-08")));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_publishes_then_fails_leaves_no_message_and_its_retry_publishes_one() {
    let db = TestDb::new().await;
    db.client.batch_execute("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-publish-flaky', '2026-01-01T00:00:00Z', 'f1')").await.unwrap();
    let plugins = plugin_dir(&["fixture_publish_flaky"]);
    // Configured on another host, no sink for topic `flaky` here: the message waits, and
    // the host says so once.
    db.configured_topic("flaky").await;
    let (_none, no_sinks) = config("");
    let mut host = spawn(&db, plugins.path(), &outbox_args(&no_sinks));
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done' AND attempts = 2", 1, Duration::from_secs(30)).await;
    let unrouted = "outbox topic \"flaky\" has pending messages but no sink is configured";
    host.wait_log(unrouted, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE key = 'f1' AND attempt = 1").await, 1);
    // Attempt 1 published and failed: its message and its effect rows rolled back.
    // Attempt 2's first publish was new again; its second was the no-op.
    let effects: Vec<(i32, i32, String)> = db
        .client
        .query("SELECT attempt, publish, outcome FROM fixture_publish_flaky_effects ORDER BY attempt, publish", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(effects, vec![(2, 1, "published".to_string()), (2, 2, "already-published".to_string())]);
    let row = db.client.query_one("SELECT topic, key, payload, status, task FROM almanac.outbox", &[]).await.unwrap();
    assert_eq!(row.get::<_, &str>(0), "flaky");
    assert_eq!(row.get::<_, &str>(1), "f1");
    assert_eq!(row.get::<_, &[u8]>(2), br#"{"attempt":2}"#);
    assert_eq!(row.get::<_, &str>(3), "pending");
    assert_eq!(row.get::<_, &str>(4), "fixture-publish-flaky");
    host.stop().await;
    assert_eq!(host.log().matches(unrouted).count(), 1, "the missing sink is reported once");

    // With a sink configured, the waiting message is delivered (the log sink logs it).
    let (_log, log_sink) = config("[outbox.topics.flaky]\nsink = \"log\"\n");
    let mut host = spawn(&db, plugins.path(), &outbox_args(&log_sink));
    db.wait_count(DELIVERED, 1, Duration::from_secs(30)).await;
    host.wait_log(r#"outbox message: {"attempt":2}"#, Duration::from_secs(10)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox").await, 1);
    let (code, out) = almanac(&db, &["status", "--json"]);
    assert_eq!(code, 0);
    let status: serde_json::Value = serde_json::from_str(out.lines().find(|l| l.contains("fixture-publish-flaky")).unwrap()).unwrap();
    assert_eq!((status["outbox_pending"].as_i64(), status["outbox_dead"].as_i64(), status["outbox_delivered"].as_i64()), (Some(0), Some(0), Some(1)));
}

/// A topic belongs to the tasks almanac.toml names as its publishers, else to the first
/// task that published on it: another task's publish fails its attempt, and nothing is
/// written (a plugin once published on another's topic with its future key).
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_belongs_to_its_publishers() {
    let db = TestDb::new().await;
    let job = |key: &str| format!("INSERT INTO almanac.jobs (task, slot, key) VALUES ('fixture-publish-flaky', '2026-01-01T00:00:00Z', '{key}')");
    // A topic no host configured belongs to nobody, and carries nothing: refused.
    db.client.batch_execute(&job("f0")).await.unwrap();
    let plugins = plugin_dir(&["fixture_publish_flaky"]);
    let (_none, none) = config("");
    let mut host = spawn(&db, plugins.path(), &outbox_args(&none));
    let refused = "SELECT count(*) FROM almanac.attempts WHERE key = 'f0' AND error LIKE '%refused: outbox topic flaky is configured on no host, so nothing would deliver it%'";
    db.wait_count(refused, 1, Duration::from_secs(30)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_topics").await, 0, "no task claimed the topic");
    db.client.batch_execute("DELETE FROM almanac.jobs WHERE key = 'f0'").await.unwrap();
    db.client.batch_execute(&job("f1")).await.unwrap();
    let (_bound, bound) = config("[outbox.topics.flaky]\nsink = \"log\"\npublishers = [\"points-notify\"]\n");
    let mut host = spawn(&db, plugins.path(), &outbox_args(&bound));
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'f1' AND status = 'failed'", 1, Duration::from_secs(30)).await;
    host.stop().await;
    let error: String = db.client.query_one("SELECT last_error FROM almanac.jobs WHERE key = 'f1'", &[]).await.unwrap().get(0);
    assert!(error.contains("refused: task fixture-publish-flaky may not publish on outbox topic flaky (its publishers: points-notify)"), "{error}");
    // Claimed first by another task, with nothing in almanac.toml: refused the same way.
    db.client.batch_execute(&format!("UPDATE almanac.outbox_topics SET publishers = ARRAY['someone-else'], configured = false; {}", job("f2"))).await.unwrap();
    let (_open, open) = config("[outbox.topics.flaky]\nsink = \"log\"\n");
    let mut host = spawn(&db, plugins.path(), &outbox_args(&open));
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'f2' AND status = 'failed'", 1, Duration::from_secs(30)).await;
    host.stop().await;
    let error: String = db.client.query_one("SELECT last_error FROM almanac.jobs WHERE key = 'f2'", &[]).await.unwrap().get(0);
    assert!(error.contains("(its publishers: someone-else)"), "{error}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox").await, 0, "nothing was written");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_killed_between_the_200_and_its_record_redelivers_the_same_key() {
    let db = TestDb::new().await;
    enqueue_points_notify(&db, 1).await;
    // The first request is answered only when the test says so.
    let gate = Arc::new(tokio::sync::Notify::new());
    let receiver = {
        let gate = gate.clone();
        Receiver::start(Arc::new(move |n, _| {
            let gate = gate.clone();
            Box::pin(async move {
                if n == 1 {
                    gate.notified().await;
                }
                Some((200, "ok".to_string()))
            })
        }))
        .await
    };
    let (_dir, path) = config(&points_config(&receiver, "30s"));
    let plugins = plugin_dir(&["points_notify"]);
    let mut first = spawn(&db, plugins.path(), &outbox_args(&path));
    wait_for("the first delivery to reach the receiver", Duration::from_secs(30), || async { !receiver.requests().is_empty() }).await;

    // Hold a lock the dispatcher's `delivered` UPDATE needs (SHARE conflicts with its
    // ROW EXCLUSIVE, not with the claim's ROW SHARE), then let the receiver say 200.
    // The UPDATE is sent only after the response was read, so once it waits on the
    // lock the host is exactly between the 2xx and its record.
    let locker = connect(&db.url).await;
    locker.batch_execute("BEGIN; LOCK TABLE almanac.outbox IN SHARE MODE").await.unwrap();
    gate.notify_one();
    let waiting =
        format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND wait_event_type = 'Lock' AND query LIKE '%UPDATE almanac.outbox%'", db.name);
    db.wait_count(&waiting, 1, Duration::from_secs(30)).await;
    assert_eq!(receiver.requests()[0].answered, Some(200));
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10)).await;
    // The host never sent COMMIT; its backend rolls back when it finds the socket closed.
    locker.batch_execute("ROLLBACK").await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'pending' AND attempts = 0", 1, Duration::from_secs(10)).await;

    let mut second = spawn(&db, plugins.path(), &outbox_args(&path));
    db.wait_count(DELIVERED, 1, Duration::from_secs(30)).await;
    second.stop().await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests.iter().all(|r| r.answered == Some(200)));
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
    assert_eq!(requests[0].idempotency_key.as_deref(), Some("points-awarded/points-notify/2026-03-08/1"));
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(db.count("SELECT attempts::bigint FROM almanac.outbox").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_400_is_dead_at_once_with_its_excerpt_until_an_operator_retries_it() {
    let db = TestDb::new().await;
    enqueue_points_notify(&db, 1).await;
    let refuse = Arc::new(AtomicBool::new(true));
    let long_body = format!("invalid notification: {}", "x".repeat(300));
    let receiver = {
        let (refuse, long_body) = (refuse.clone(), long_body.clone());
        Receiver::start(Arc::new(move |_, _| if refuse.load(Ordering::SeqCst) { answer(400, &long_body) } else { answer(204, "") })).await
    };
    let (_dir, path) = config(&points_config(&receiver, "5s"));
    let plugins = plugin_dir(&["points_notify"]);
    let mut host = spawn(&db, plugins.path(), &outbox_args(&path));
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'dead' AND attempts = 1", 1, Duration::from_secs(30)).await;
    let stored: String = db.client.query_one("SELECT last_error FROM almanac.outbox", &[]).await.unwrap().get(0);
    assert_eq!(stored, format!("HTTP 400: {}", &long_body[..200]));

    let (code, out) = almanac(&db, &["outbox", "--status", "dead"]);
    assert_eq!(code, 0);
    assert!(out.contains("points-notify/2026-03-08/1") && out.contains("HTTP 400: invalid notification"), "{out}");
    let (_, out) = almanac(&db, &["outbox", "--status", "dead", "--json"]);
    let listed: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0]["topic"].as_str(), listed[0]["status"].as_str()), (Some("points-awarded"), Some("dead")));
    assert_eq!(listed[0]["last_error"].as_str(), Some(stored.as_str()));
    let (_, out) = almanac(&db, &["outbox", "--status", "pending"]);
    assert_eq!(out.lines().count(), 1, "only the header: {out}");
    // A dead message is something to act on: status says so and exits 1.
    let (code, out) = almanac(&db, &["status", "--json"]);
    assert_eq!(code, 1);
    let status: serde_json::Value = serde_json::from_str(out.lines().find(|l| l.contains("points-notify")).unwrap()).unwrap();
    assert_eq!((status["outbox_dead"].as_i64(), status["failed"].as_i64()), (Some(1), Some(0)));

    // The receiver is fixed; the operator sends the message back.
    refuse.store(false, Ordering::SeqCst);
    let (code, out) = almanac(&db, &["outbox", "retry", "--topic", "points-awarded"]);
    assert_eq!((code, out.trim()), (0, "1 dead message(s) back to pending"));
    db.wait_count(DELIVERED, 1, Duration::from_secs(30)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT attempts::bigint FROM almanac.outbox").await, 1, "retry starts a fresh count of attempts");
    let requests = receiver.requests();
    assert_eq!(requests.iter().map(|r| r.answered).collect::<Vec<_>>(), vec![Some(400), Some(204)]);
    assert_eq!(requests[0].idempotency_key, requests[1].idempotency_key);
    let (code, out) = almanac(&db, &["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("outbox: 0 pending, 0 dead, 1 delivered"), "{out}");
}

/// A year of delivered messages is dropped a month at a time while a dispatcher keeps
/// delivering: the old month goes with its count, a month holding a dead message stays,
/// and every new message is delivered once.
#[tokio::test(flavor = "multi_thread")]
async fn prune_drops_a_month_of_delivered_messages_while_a_dispatcher_runs() {
    const NEW: i64 = 200;
    let db = TestDb::new().await;
    db.accounts(NEW).await;
    db.schedule("points-notify", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    // Two days ago, inside the task's 30-day horizon: its jobs stay whatever prune does.
    db.client
        .execute(
            "INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'points-notify', date_trunc('day', now(), 'Asia/Shanghai') - interval '2 days', g::text FROM generate_series(1, $1::bigint) g",
            &[&NEW],
        )
        .await
        .unwrap();
    // History as a dispatcher left it: 500 messages delivered four months ago (counted),
    // and one dead five months ago.
    db.client
        .batch_execute(
            "SELECT almanac.add_outbox_partition(now() - interval '4 months'), almanac.add_outbox_partition(now() - interval '5 months');
             INSERT INTO almanac.outbox (topic, key, payload, content_type, task, status, attempts, created_at, dispatched_at)
             SELECT 'points-awarded', 'old-' || g, '{}', 'application/json', 'points-notify', 'delivered', 1,
                    now() - interval '4 months', now() - interval '4 months'
             FROM generate_series(1, 500) g;
             INSERT INTO almanac.delivered_counts (task, topic, delivered) VALUES ('points-notify', 'points-awarded', 500);
             INSERT INTO almanac.outbox (topic, key, payload, content_type, task, status, attempts, created_at, last_error)
             VALUES ('points-awarded', 'refused', '{}', 'application/json', 'points-notify', 'dead', 1, now() - interval '5 months', '400');",
        )
        .await
        .unwrap();
    let month = |ago: i32| format!("SELECT 'outbox_' || to_char((now() - interval '{ago} months') AT TIME ZONE 'UTC', 'YYYY_MM')");
    let (old, dead) = (db_text(&db, &month(4)).await, db_text(&db, &month(5)).await);
    let receiver = Receiver::start(Arc::new(|_, _| answer(200, "ok"))).await;
    let (_dir, path) = config(&points_config(&receiver, "5s"));
    let plugins = plugin_dir(&["points_notify"]);
    let mut host = spawn(&db, plugins.path(), &outbox_args(&path));
    let new_delivered = "SELECT count(*) FROM almanac.outbox WHERE status = 'delivered' AND key NOT LIKE 'old-%'";
    wait_for("the dispatcher to deliver a first new message", Duration::from_secs(60), || async { db.count(new_delivered).await > 0 }).await;

    let (code, out) = almanac(&db, &["prune", "--older-than", "60d"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("  dropped almanac.{old} (500 delivered message(s))")), "{out}");
    assert!(out.contains(&format!("  kept almanac.{dead}: it holds messages still to deliver, or dead ones")), "{out}");
    let partitions = "SELECT count(*) FROM almanac.outbox_partitions WHERE partition::text = 'almanac.' || $1";
    assert_eq!(db.client.query_one(partitions, &[&old]).await.unwrap().get::<_, i64>(0), 0, "the old month is gone");
    assert_eq!(db.client.query_one(partitions, &[&dead]).await.unwrap().get::<_, i64>(0), 1);

    db.wait_count(new_delivered, NEW, Duration::from_secs(60)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox WHERE key LIKE 'old-%'").await, 0);
    assert_eq!(db.count("SELECT sum(delivered)::bigint FROM almanac.outbox_counts").await, NEW, "the dropped month left the count");
    assert_eq!(db.count("SELECT sum(dead)::bigint FROM almanac.outbox_counts").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'").await, NEW, "the jobs inside the horizon stay");
    let keys: HashSet<String> = receiver.requests().into_iter().filter_map(|r| r.idempotency_key).collect();
    assert_eq!(keys.len() as i64, NEW, "every new message delivered, each key once");
    assert_eq!(receiver.requests().len() as i64, NEW);
}

async fn db_text(db: &TestDb, sql: &str) -> String {
    db.client.query_one(sql, &[]).await.unwrap().get(0)
}
