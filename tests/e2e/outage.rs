//! Through a receiver's outage: the topic's circuit opens after a few failures, so the
//! outage costs a few requests; `status` fails and /metrics says so; when a probe gets
//! through, every waiting message goes at once, each key accepted once. And an
//! operator's hands on a topic: pause, discard with a reason, resume, deliver now.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::outbox::{almanac, config, enqueue_points_notify, outbox_args, spawn};
use crate::support::receiver::{answer, Receiver};
use crate::support::{plugin_dir, wait_for, TestDb};

const TOPIC: &str = "points-awarded";

fn topic_config(receiver: &Receiver, extra: &str) -> String {
    format!(
        "[tasks.points-notify]\npaused = true\n\n[outbox.topics.{TOPIC}]\nsink = \"webhook\"\nurl = \"{}\"\ntimeout = \"2s\"\npublishers = [\"points-notify\"]\n{extra}",
        receiver.url()
    )
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' '))).map(|value| value.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_outage_costs_a_few_requests_and_recovery_sends_the_backlog_at_once() {
    let db = TestDb::new().await;
    let down = Arc::new(AtomicBool::new(true));
    let state = down.clone();
    let receiver =
        Receiver::start(Arc::new(move |_, _| if state.load(Ordering::SeqCst) { answer(503, "receiver down for maintenance") } else { answer(200, "ok") }))
            .await;
    let (_dir, path) = config(&topic_config(&receiver, "breaker_after = 3\nbreaker_cooldown = \"1s\"\n"));
    let plugins = plugin_dir(&["points_notify"]);
    // A message that failed waits 30 s before its next try: recovery must not wait it out.
    let mut args = outbox_args(&path);
    args.extend(["--outbox-retry-base", "30s", "--outbox-retry-max", "1h", "--outbox-workers", "3", "--listen", "127.0.0.1:0"].map(String::from));
    enqueue_points_notify(&db, 40).await;
    let mut host = spawn(&db, plugins.path(), &args);
    let base = format!("http://{}", host.listen_addr().await);
    let metrics = format!("{base}/metrics");
    db.wait_count("SELECT count(*) FROM almanac.outbox", 40, Duration::from_secs(60)).await;
    db.wait_count("SELECT count(*) FROM almanac.outbox_topics WHERE opened_at IS NOT NULL", 1, Duration::from_secs(30)).await;
    let opened = Instant::now();
    let at_open = receiver.requests().len();
    // Three probes, one per cooldown, and nothing else.
    wait_for("three probes of the receiver", Duration::from_secs(30), || async { receiver.requests().len() >= at_open + 3 }).await;
    let during = receiver.requests().len();
    let elapsed = opened.elapsed().as_secs_f64();
    eprintln!("{during} requests for 40 messages: {at_open} until the circuit opened, then {} probes in {elapsed:.1} s", during - at_open);
    assert!(
        during <= 7 + elapsed.ceil() as usize,
        "{during} requests for 40 messages in {elapsed:.1} s of an open circuit (3 to 6 to open it with 3 workers, then one probe a second)"
    );
    let (code, out) = almanac(&db, &["status"]);
    assert_eq!(code, 1, "status fails while the circuit is open:\n{out}");
    assert!(out.contains(&format!("outbox topic {TOPIC}: circuit OPEN since")) && out.contains("503"), "{out}");
    let text = reqwest::get(&metrics).await.unwrap().text().await.unwrap();
    let label = format!("{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &format!("almanac_outbox_circuit_open{label}")), Some(1.0), "{text}");
    assert!(sample(&text, &format!("almanac_outbox_delivery_failures{label}")).is_some_and(|n| n >= 3.0), "{text}");
    assert!(sample(&text, &format!("almanac_outbox_oldest_pending_age_seconds{label}")).is_some_and(|s| s > 0.0), "{text}");
    // The dashboard's data says so too, with the receiver's error.
    let overview: serde_json::Value = serde_json::from_str(&reqwest::get(format!("{base}/api/overview")).await.unwrap().text().await.unwrap()).unwrap();
    let topic = overview["topics"].as_array().unwrap().iter().find(|t| t["topic"] == TOPIC).cloned().unwrap_or_default();
    assert_eq!(topic["circuit_open"], true, "{overview}");
    assert!(topic["last_error"].as_str().is_some_and(|e| e.contains("503")), "{overview}");

    down.store(false, Ordering::SeqCst);
    let recovered = Instant::now();
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'", 40, Duration::from_secs(20)).await;
    assert!(recovered.elapsed() < Duration::from_secs(20), "the backlog waited out its backoff");
    let (code, out) = almanac(&db, &["status"]);
    assert_eq!(code, 0, "status passes once the receiver is back:\n{out}");
    host.stop().await;

    let mut accepted: HashMap<String, usize> = HashMap::new();
    for r in receiver.requests().iter().filter(|r| r.answered == Some(200)) {
        *accepted.entry(r.idempotency_key.clone().unwrap()).or_default() += 1;
    }
    assert_eq!(accepted.len(), 40, "every message delivered");
    assert!(accepted.values().all(|n| *n == 1), "each key accepted once: {accepted:?}");
    let log = host.log();
    assert_eq!(log.matches("outbox circuit opened").count(), 1, "{log}");
    assert_eq!(log.matches("outbox circuit closed").count(), 1, "{log}");
    assert!(!log.contains("outbox delivery failed"), "no line per failed attempt:\n{log}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox WHERE status = 'dead'").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_pauses_a_topic_recalls_a_message_and_delivers_one_now() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(Arc::new(|_, _| answer(200, "ok"))).await;
    let (_dir, path) = config(&topic_config(&receiver, ""));
    let plugins = plugin_dir(&["points_notify"]);
    // The plugin's table first (it declares it), then the host; the jobs come once the
    // topic is paused.
    db.accounts(10).await;
    // The schedule its jobs are keyed by (their period, 2026-03-08), registered as
    // enqueue_points_notify registers it.
    db.schedule("points-notify", "0 0 * * *", "Asia/Shanghai", chrono::Utc::now()).await;
    let mut host = spawn(&db, plugins.path(), &outbox_args(&path));
    // The host binds the topic's publishers at start: the topic exists before any message.
    db.wait_count(&format!("SELECT count(*) FROM almanac.outbox_topics WHERE topic = '{TOPIC}'"), 1, Duration::from_secs(30)).await;
    let (code, out) = almanac(&db, &["outbox", "pause", TOPIC, "--reason", "receiver migration"]);
    assert_eq!(code, 0, "{out}");
    let (code, _) = almanac(&db, &["outbox", "pause", "no-such-topic"]);
    assert_eq!(code, 1);
    db.client
        .execute("INSERT INTO almanac.jobs (task, slot, key) SELECT 'points-notify', '2026-03-07T16:00:00Z', g::text FROM generate_series(1, 10) g", &[])
        .await
        .unwrap();
    db.wait_count("SELECT count(*) FROM almanac.outbox", 10, Duration::from_secs(60)).await;
    // Absence takes time to show: twenty of the dispatcher's polls (50 ms each).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(receiver.requests().is_empty(), "a paused topic is not delivered");
    let (_, out) = almanac(&db, &["status"]);
    assert!(out.contains(&format!("outbox topic {TOPIC}: PAUSED (receiver migration); 10 pending")), "{out}");

    let key = |account: i32| format!("points-notify/2026-03-08/{account}");
    // The key as the receiver logs it: the Idempotency-Key, `topic/key`.
    let (code, out) = almanac(&db, &["outbox", "discard", TOPIC, "--key", &format!("{TOPIC}/{}", key(1)), "--reason", "sent by hand"]);
    assert_eq!((code, out.trim()), (0, "1 message(s) of points-awarded discarded"));
    // A recall that matched nothing is not a success.
    for args in [
        &["outbox", "discard", TOPIC, "--key", &key(1), "--reason", "again"][..],
        &["outbox", "discard", TOPIC, "--key", "points-notify/2026-03-08/99", "--reason", "typo"],
        &["outbox", "deliver-now", TOPIC, "--key", "no-such-key"],
        &["outbox", "retry", "--key", &key(3)],
    ] {
        let (code, out, err) = crate::support::almanac(&db.url, args);
        assert_eq!(code, 1, "almanac {args:?} matched nothing:\n{out}{err}");
        assert!(err.contains("matched"), "{err}");
    }
    // Another message waits out a long backoff, as after an outage.
    db.client.execute("UPDATE almanac.outbox SET next_attempt_at = now() + interval '1 hour' WHERE key = $1", &[&key(2)]).await.unwrap();
    let (code, _) = almanac(&db, &["outbox", "resume", TOPIC]);
    assert_eq!(code, 0);
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'", 8, Duration::from_secs(30)).await;
    let (code, out) = almanac(&db, &["outbox", "deliver-now", TOPIC, "--key", &key(2)]);
    assert_eq!((code, out.trim()), (0, "1 pending message(s) of points-awarded due now; its circuit is closed"));
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'", 9, Duration::from_secs(30)).await;
    host.stop().await;

    let row = db
        .client
        .query_one("SELECT status, discarded_reason, discarded_by, dispatched_at IS NOT NULL FROM almanac.outbox WHERE key = $1", &[&key(1)])
        .await
        .unwrap();
    let (status, reason, by, stamped): (String, String, String, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!((status.as_str(), reason.as_str(), stamped), ("discarded", "sent by hand", true));
    assert!(!by.is_empty());
    let keys: Vec<String> = receiver.requests().iter().filter_map(|r| r.idempotency_key.clone()).collect();
    assert_eq!(keys.len(), 9, "{keys:?}");
    assert!(!keys.contains(&format!("{TOPIC}/{}", key(1))), "a discarded message is never delivered");
    let (code, out) = almanac(&db, &["outbox", "--status", "discarded"]);
    assert_eq!(code, 0);
    assert!(out.contains(&key(1)) && out.contains("discarded"), "{out}");
    // Every act is recorded, with who and why, and `almanac changes` reads them.
    let (code, out) = almanac(&db, &["changes", "--topic", TOPIC, "--json"]);
    assert_eq!(code, 0, "{out}");
    let actions: Vec<String> = out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["action"].as_str().unwrap().to_owned()).collect();
    assert_eq!(actions, ["outbox-deliver-now", "outbox-resume", "outbox-discard", "outbox-pause"], "newest first:\n{out}");
    let (code, out) = almanac(&db, &["changes"]);
    assert_eq!(code, 0, "{out}");
    let discard = out.lines().find(|l| l.contains("outbox-discard")).unwrap_or_else(|| panic!("{out}"));
    assert!(discard.contains("sent by hand") && discard.contains("almanac outbox discard on "), "{discard}");
}

/// Call, then record: a topic's reply task gets each delivery's outcome as a job, made in
/// the transaction that marks the message delivered. The receiver makes an invoice per
/// Idempotency-Key and answers a repeat with the same id, as a deduping API does; the
/// host is killed between the receiver's answer and its record, so a message (or two) is
/// delivered, and answered, twice. Every id is stored once.
#[tokio::test(flavor = "multi_thread")]
async fn a_reply_task_stores_each_receivers_id_once_across_a_kill_and_a_second_answer() {
    let db = TestDb::new().await;
    enqueue_points_notify(&db, 3).await;
    let gate = Arc::new(tokio::sync::Notify::new());
    let invoices: Arc<std::sync::Mutex<HashMap<String, String>>> = Arc::default();
    let receiver = {
        let (gate, invoices) = (gate.clone(), invoices.clone());
        Receiver::start(Arc::new(move |n, request| {
            let key = request.idempotency_key.clone().unwrap_or_default();
            let id = {
                let mut invoices = invoices.lock().unwrap();
                let next = format!("inv_{}", invoices.len() + 1);
                invoices.entry(key).or_insert(next).clone()
            };
            let gate = gate.clone();
            Box::pin(async move {
                if n == 1 {
                    gate.notified().await;
                }
                Some((200, format!("{{\"id\":\"{id}\"}}")))
            })
        }))
        .await
    };
    let (_dir, path) = config(&topic_config(&receiver, "reply_task = \"fixture-reply\"\nreply_headers = [\"Content-Length\"]\n"));
    let plugins = plugin_dir(&["points_notify", "fixture_reply"]);
    let mut first = spawn(&db, plugins.path(), &outbox_args(&path));
    wait_for("the first delivery to reach the receiver", Duration::from_secs(30), || async { !receiver.requests().is_empty() }).await;
    // As in outbox.rs: a lock the `delivered` UPDATE waits on holds the host between the
    // receiver's 200 and its record; then it is killed.
    let locker = crate::support::connect(&db.url).await;
    locker.batch_execute("BEGIN; LOCK TABLE almanac.outbox IN SHARE MODE").await.unwrap();
    gate.notify_one();
    let waiting =
        format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND wait_event_type = 'Lock' AND query LIKE '%UPDATE almanac.outbox%'", db.name);
    // At least the gated message's record; another delivered meanwhile may wait too (a
    // CI run saw two), and is then delivered twice as well, which is what this tests.
    wait_for("a delivered message's record to wait on the lock", Duration::from_secs(30), || async { db.count(&waiting).await >= 1 }).await;
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10)).await;
    locker.batch_execute("ROLLBACK").await.unwrap();

    let mut second = spawn(&db, plugins.path(), &outbox_args(&path));
    db.wait_count("SELECT count(*) FROM almanac.outbox WHERE status = 'delivered'", 3, Duration::from_secs(60)).await;

    db.wait_count("SELECT count(*) FROM fixture_reply_ids", 3, Duration::from_secs(60)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-reply' AND status = 'done'", 3, Duration::from_secs(60)).await;
    second.stop().await;

    let requests = receiver.requests();
    let keys: Vec<&str> = requests.iter().filter_map(|r| r.idempotency_key.as_deref()).collect();
    assert!(keys.len() > 3, "one message was delivered twice: {keys:?}");
    let stored: HashMap<String, String> = db
        .client
        .query("SELECT key, id FROM fixture_reply_ids WHERE status = 200 AND location IS NULL", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (format!("{TOPIC}/{}", r.get::<_, String>(0)), r.get(1)))
        .collect();
    assert_eq!(&stored, &*invoices.lock().unwrap(), "each message's invoice id, once");
    // One reply job per message, whatever the receiver was asked.
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-reply'").await, 3);
    let headers: String =
        db.client.query_one("SELECT payload::jsonb->>'headers' FROM almanac.jobs WHERE task = 'fixture-reply' LIMIT 1", &[]).await.unwrap().get(0);
    assert!(headers.contains("content-length"), "the named headers reach the reply: {headers}");
}
