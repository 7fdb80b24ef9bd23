//! A year of history (migration V9): jobs live in month partitions of `almanac.jobs`;
//! slots far outside them wait in the default partition; `prune` drops whole months
//! outside the backfill horizon while a host runs; a populated V4 database upgrades in
//! place without losing or re-running a job.
use std::time::Duration;

use crate::support::{almanac, almanac_bin, cluster, connect, plugin_dir, HostProc, TestDb};

const DONE: &str = "SELECT count(*) FROM almanac.jobs WHERE status = 'done'";

/// Jobs per partition, as "partition:count" sorted by partition.
async fn placement(db: &TestDb, filter: &str) -> Vec<String> {
    let sql = format!("SELECT tableoid::regclass::text || ':' || count(*) FROM almanac.jobs WHERE {filter} GROUP BY tableoid ORDER BY 1");
    db.client.query(&sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

/// `almanac status --json`'s done count of `task`.
fn status_done(db: &TestDb, task: &str) -> i64 {
    let (_, out, err) = almanac(&db.url, &["status", "--json"]);
    out.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|s| s["task"] == task)
        .unwrap_or_else(|| panic!("{task} in status: {out}{err}"))["done"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_land_in_their_month_and_far_slots_wait_in_the_default_partition() {
    let db = TestDb::new().await;
    db.client.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    db.accounts(3).await;
    let plugins = plugin_dir(&["daily_points"]);
    // A backfill across a month boundary (slots are 00:00 in Asia/Shanghai, 16:00Z the day
    // before): 2026-05-31T16:00Z and 2026-06-01T16:00Z.
    let out = std::process::Command::new(almanac_bin())
        .args(["backfill", "daily-points", "--from", "2026-06-01", "--to", "2026-06-03", "--plugins"])
        .arg(plugins.path())
        .env("DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(placement(&db, "true").await, ["almanac.jobs_2026_05:3", "almanac.jobs_2026_06:3"]);

    // A host back after months of downtime generates every missed day, each into its month.
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('daily-points', '0 0 * * *', 'Asia/Shanghai', '2026-06-01T16:00:00Z')",
        )
        .await
        .unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    let days = db.count("SELECT floor(extract(epoch FROM now() - '2026-06-02T16:00:00Z'::timestamptz) / 86400)::bigint + 1").await;
    db.wait_count(DONE, 6 + 3 * days, Duration::from_secs(120)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs_default").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 6 + 3 * days, "each job paid once");
    let months = db.count("SELECT count(DISTINCT tableoid)::bigint FROM almanac.jobs").await;
    assert!(months >= 7, "June to December at least: {:?}", placement(&db, "true").await);
    assert_eq!(status_done(&db, "daily-points"), 6 + 3 * days, "the done count is kept, not counted");

    // Slots far in the past and future go to the default partition and are reported; one
    // a few months ahead goes to its month.
    let enqueue = |slot: &str, key: &str| format!("SELECT almanac.enqueue('daily-points', '{slot}', '{key}', off_calendar => true)::int::bigint");
    assert_eq!(db.count(&enqueue("2015-01-01T00:00:00Z", "1")).await, 1);
    assert_eq!(db.count(&enqueue("2099-01-01T00:00:00Z", "2")).await, 1);
    let soon = db.count(&enqueue("2026-06-01T16:00:00Z", "1")).await;
    assert_eq!(soon, 0, "the identity exists in its month partition: a no-op");
    assert_eq!(placement(&db, "slot < '2020-01-01' OR slot > '2090-01-01'").await, ["almanac.jobs_default:2"]);
    let (_, status, _) = almanac(&db.url, &["status"]);
    assert!(
        status.contains("history: 2 job(s) with slots outside the month partitions (more than 5 years back or 2 years ahead) wait in almanac.jobs_default"),
        "{status}"
    );
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE slot = '2015-01-01T00:00:00Z' AND status = 'done'", 1, Duration::from_secs(30)).await;

    // A month beyond the three made ahead lands in the default too, and moves into its
    // partition when that month is made.
    let later = "date_trunc('month', now()) + interval '10 months'";
    db.client
        .batch_execute(&format!(
            "INSERT INTO almanac.jobs (task, slot, key, run_after) VALUES ('daily-points', {later} + interval '1 day', 'later', {later} + interval '1 day')"
        ))
        .await
        .unwrap();
    assert_eq!(placement(&db, "key = 'later'").await, ["almanac.jobs_default:1"]);
    let made: String = db.client.query_one(&format!("SELECT almanac.add_job_partition({later})"), &[]).await.unwrap().get(0);
    assert_eq!(placement(&db, "key = 'later'").await, [format!("almanac.{made}:1")]);
    host.stop().await;
    db.counts_agree().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_drops_exactly_the_months_outside_the_horizon_while_a_host_runs() {
    let db = TestDb::new().await;
    db.client.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    db.accounts(3).await;
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('daily-points', '0 0 * * *', 'Asia/Shanghai', now() - interval '1 day');
             -- Months 11 to 7 back, each with three jobs on its 15th; the 9th back also
             -- holds a job that failed for good, which no prune may take.
             SELECT almanac.add_job_partition(date_trunc('month', now()) - make_interval(months => m)) FROM generate_series(7, 11) m;
             INSERT INTO almanac.jobs (task, slot, key)
             SELECT 'daily-points', date_trunc('month', now()) - make_interval(months => m) + interval '14 days', k::text
             FROM generate_series(7, 11) m, generate_series(1, 3) k;
             INSERT INTO almanac.jobs (task, slot, key, status, completed_at, last_error)
             VALUES ('daily-points', date_trunc('month', now()) - interval '9 months' + interval '14 days', 'broken', 'failed', now(), 'gave up');",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    // 15 old jobs and today's 3.
    db.wait_count(DONE, 18, Duration::from_secs(60)).await;
    assert_eq!(status_done(&db, "daily-points"), 18);
    let before: Vec<String> =
        db.client.query("SELECT partition::text FROM almanac.job_partitions ORDER BY first", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();

    let (code, _, err) = almanac(&db.url, &["prune", "--older-than", "10d"]);
    assert_eq!(code, 1);
    assert!(err.contains("refusing to prune: 10d is inside the backfill horizon of task daily-points (30d)"), "{err}");

    // 150 days back: months 11, 10, 8 and 7 are wholly older and go; month 9 holds a failed
    // job and stays whole; the host keeps running jobs meanwhile.
    let mut months = Vec::new();
    for m in [11, 10, 9, 8, 7] {
        months.push(db_name(&db, &format!("SELECT 'almanac.jobs_' || to_char(date_trunc('month', now()) - interval '{m} months', 'YYYY_MM')")).await);
    }
    let [m11, m10, m9, m8, m7] = <[String; 5]>::try_from(months).unwrap();
    db.client
        .batch_execute("SELECT almanac.enqueue_many('daily-points', date_trunc('hour', now()), array_agg((1000 + k)::text), off_calendar => true) FROM generate_series(1, 200) k")
        .await
        .unwrap();
    let (code, out, err) = almanac(&db.url, &["prune", "--older-than", "150d"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "pruned slots older than 150d: 4 month partition(s) dropped (12 done job(s)), 0 done or discarded job(s) deleted from the default partition"
        ),
        "{out}"
    );
    for name in [&m11, &m10, &m8, &m7] {
        assert!(out.contains(&format!("  dropped {name} (3 done job(s))")), "{name}: {out}");
    }
    assert!(out.contains(&format!("  kept {m9}: it holds jobs still to run (pending or failed)")), "{out}");
    let after: Vec<String> =
        db.client.query("SELECT partition::text FROM almanac.job_partitions ORDER BY first", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let want: Vec<String> = before.iter().filter(|p| ![&m11, &m10, &m8, &m7].contains(p)).cloned().collect();
    assert_eq!(after, want);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'broken'").await, 1);
    db.wait_count(DONE, 18 - 12 + 200, Duration::from_secs(60)).await;
    assert_eq!(status_done(&db, "daily-points"), 18 - 12 + 200);

    // Outside the horizon, the dedupe evidence is gone with its month: the identity can be
    // enqueued again (into the default partition); inside it, it is a no-op.
    let again = db
        .count("SELECT almanac.enqueue('daily-points', date_trunc('month', now()) - interval '11 months' + interval '14 days', '1', off_calendar => true)::int::bigint")
        .await;
    assert_eq!(again, 1);
    let kept = db
        .count("SELECT almanac.enqueue('daily-points', date_trunc('month', now()) - interval '9 months' + interval '14 days', '1', off_calendar => true)::int::bigint")
        .await;
    assert_eq!(kept, 0);
    host.stop().await;
    db.counts_agree().await;
}

async fn db_name(db: &TestDb, sql: &str) -> String {
    db.client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_populated_v4_database_upgrades_in_place_losing_and_rerunning_nothing() {
    let admin = connect(&cluster().url("postgres")).await;
    let name = format!("v4_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let url = cluster().url(&name);
    let (code, out, err) = almanac(&url, &["migrate", "--to", "4"]);
    assert_eq!((code, out.trim()), (0, "4 migration(s) applied"), "{err}");
    let db = TestDb { name: name.clone(), client: connect(&url).await, url };
    db.client.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    db.accounts(3).await;
    // The V4 schema as a host of that time left it: a year of done days, a failed job with
    // its attempt history, pending jobs of today, a slot far in the past.
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('daily-points', '0 0 * * *', 'Asia/Shanghai', date_trunc('day', now() + interval '8 hours') - interval '8 hours' - interval '1 day');
             INSERT INTO almanac.jobs (task, slot, key, status, attempts, completed_at, plugin_digest)
             SELECT 'daily-points', date_trunc('day', now()) - make_interval(days => d) - interval '8 hours', k::text, 'done', 1, now(), 'v4'
             FROM generate_series(2, 366) d, generate_series(1, 3) k;
             INSERT INTO almanac.jobs (task, slot, key, status, attempts, completed_at, last_error)
             VALUES ('daily-points', '2026-02-01T16:00:00Z', 'broken', 'failed', 3, now(), 'gave up');
             INSERT INTO almanac.attempts (task, slot, key, attempt, error)
             SELECT 'daily-points', '2026-02-01T16:00:00Z', 'broken', a, 'gave up' FROM generate_series(1, 3) a;
             INSERT INTO almanac.jobs (task, slot, key, payload) VALUES ('daily-points', '2016-01-01T00:00:00Z', '1', '{\"n\": 1}');
             INSERT INTO almanac.outbox (topic, key, payload, content_type, task, status, created_at, dispatched_at)
             VALUES ('points', 'old', 'a', 'text/plain', 'daily-points', 'delivered', now() - interval '3 months', now() - interval '3 months'),
                    ('points', 'dead', 'b', 'text/plain', 'daily-points', 'dead', now() - interval '2 months', NULL),
                    ('points', 'new', 'c', 'text/plain', 'daily-points', 'pending', now(), NULL);",
        )
        .await
        .unwrap();
    let fingerprint = "SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s', task, slot, key, status, attempts, payload, last_error), ',' ORDER BY task, slot, key)) FROM almanac.jobs";
    let before: String = db_name(&db, fingerprint).await;
    let messages = "SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s', id, topic, key, payload, status, created_at, dispatched_at), ',' ORDER BY id)) FROM almanac.outbox";
    let messages_before: String = db_name(&db, messages).await;
    let (code, out, err) = almanac(&db.url, &["migrate"]);
    assert_eq!((code, out.trim()), (0, crate::support::migrations_applied_after(4).as_str()), "{err}");
    let after: String = db_name(&db, fingerprint).await;
    assert_eq!(before, after, "every row kept as it was");
    // V13: the outbox in month partitions, every message as it was, counted as before.
    assert_eq!(messages_before, db_name(&db, messages).await, "every message kept as it was");
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_default").await, 0, "each message in its month");
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_partitions").await, 4, "three months ago, two, this and next");
    assert_eq!(db.count("SELECT (sum(pending) * 100 + sum(dead) * 10 + sum(delivered))::bigint FROM almanac.outbox_counts").await, 111);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs_default").await, 1, "2016 is outside the month partitions");
    assert!(db.count("SELECT count(*) FROM almanac.job_partitions").await >= 13);
    assert_eq!(db.count("SELECT coalesce(sum(done), 0)::bigint FROM almanac.job_counts").await, 365 * 3);
    assert_eq!(db.count("SELECT count(*) FROM almanac.attempts WHERE key = 'broken'").await, 3);
    // V11: every job names its period, the business day in the task's zone.
    let unnamed = "SELECT count(*) FROM almanac.jobs WHERE period IS DISTINCT FROM to_char(slot AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM-DD')";
    assert_eq!(db.count(unnamed).await, 0);

    // A host on the upgraded database runs the two pending jobs (today's slot is generated
    // by its scheduler) and nothing done before.
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count(DONE, 365 * 3 + 1 + 3, Duration::from_secs(60)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE plugin_digest = 'v4' AND attempts = 1 AND status = 'done'").await, 365 * 3);
    assert_eq!(db.count("SELECT count(*) FROM points_ledger").await, 4, "today's 3 and the 2016 one, nothing else");
    assert_eq!(status_done(&db, "daily-points"), 365 * 3 + 4);
    host.stop().await;
    db.counts_agree().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_cannot_become_due_does_not_pin_the_claim_floor() {
    let db = TestDb::new().await;
    let floor = "SELECT (almanac.claim_floor() = date_trunc('month', now(), 'UTC') - interval '1 month')::int::bigint";
    assert_eq!(db.count(floor).await, 1, "last month with nothing pending");
    // A client's row of slot year 1 that runs in year 9999 is in the default partition.
    db.client
        .batch_execute("INSERT INTO almanac.jobs (task, slot, key, run_after) VALUES ('daily-points', '0001-01-01T00:00:00Z', 'far', '9999-01-01T00:00:00Z')")
        .await
        .unwrap();
    assert_eq!(db.count(floor).await, 1, "a job due in 9999 leaves the floor where it was");
    // The same slot due now moves the floor to its month.
    db.client.batch_execute("UPDATE almanac.jobs SET run_after = now() WHERE key = 'far'").await.unwrap();
    assert_eq!(db.count("SELECT (almanac.claim_floor() = '0001-01-01T00:00:00Z')::int::bigint").await, 1);
}
