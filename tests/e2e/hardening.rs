//! The attack review, replayed: fixture-attacker runs the SQL and the misbehaviour its
//! job's payload names, beside daily-points. Every attack ends as a recorded failed
//! attempt or a clear refusal, nothing outside the plugin's own table changes, the host
//! stays small and keeps serving, and a job that kills its host is failed after three
//! crashes instead of taking down host after host.
use std::time::Duration;

use serde_json::json;

use crate::support::{plugin_dir, HostProc, TestDb};

const NEVER: &str = "is never available to plugins (it runs SQL given as text, changes the host's session, or reaches outside the job)";

const ATTACKER: &str = "fixture-attacker";
/// fixture-attacker's steps, from a plugin declaring the functions the escapes use.
const CALLER: &str = "fixture-caller";

/// Enqueue one job of `task` (fixture-attacker or fixture-caller) per (key, steps), in
/// order (one slot per job, so a single worker runs them in this order).
pub async fn enqueue_attacks(db: &TestDb, task: &str, attacks: &[(&str, serde_json::Value)]) {
    for (i, (key, steps)) in attacks.iter().enumerate() {
        db.client
            .execute(
                "INSERT INTO almanac.jobs (task, slot, key, payload)
                 VALUES ($4, timestamptz '2026-01-01T00:00:00Z' + make_interval(days => $1), $2, $3)",
                &[&(i as i32), key, steps, &task],
            )
            .await
            .unwrap();
    }
}

/// The stored outcome of one attack of `task`: (status, last_error).
pub async fn outcome(db: &TestDb, task: &str, key: &str) -> (String, String) {
    let row = db.client.query_one("SELECT status, coalesce(last_error, '') FROM almanac.jobs WHERE task = $1 AND key = $2", &[&task, &key]).await.unwrap();
    (row.get(0), row.get(1))
}

async fn wait_settled(db: &TestDb, task: &str, n: i64) {
    let sql = format!("SELECT count(*) FROM almanac.jobs WHERE task = '{task}' AND status <> 'pending'");
    db.wait_count(&sql, n, Duration::from_secs(90)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_in_text_and_role_escapes_change_nothing() {
    role_escapes("1").await;
}

/// The same attacks in one batch: a task's jobs follow one another in one transaction of
/// its session, and still no job's session settings reach the next.
#[tokio::test(flavor = "multi_thread")]
async fn sql_in_text_and_role_escapes_change_nothing_in_one_batch() {
    role_escapes("32").await;
}

/// The user's own functions fixture-caller declares (the policy cannot see into them):
/// one changes the session's role, one its settings, one reports them; one makes the
/// session's role the session user's and runs any SQL given, so the caller *does* reach
/// set_config('role', 'none'); one (SECURITY DEFINER) takes every advisory key a host
/// once used, and holds them for the seconds it is given.
pub async fn caller_functions(db: &TestDb) {
    db.client
        .batch_execute(
            "CREATE FUNCTION public.escape_role() RETURNS text LANGUAGE sql AS $$ SELECT set_config('role', 'none', false) $$;
             CREATE FUNCTION public.run_as_none(sql text) RETURNS text LANGUAGE plpgsql AS $$
                 DECLARE r text;
                 BEGIN
                     PERFORM set_config('role', 'none', true);
                     EXECUTE sql INTO r;
                     RETURN coalesce(r, '') || ' as ' || current_user || '/' || session_user;
                 END $$;
             CREATE FUNCTION public.widen_session() RETURNS text LANGUAGE sql
                 AS $$ SELECT set_config('work_mem', '2GB', false) || set_config('statement_timeout', '0', false) $$;
             CREATE FUNCTION public.show_session() RETURNS text LANGUAGE sql
                 AS $$ SELECT current_setting('work_mem') || ' ' || current_setting('statement_timeout') $$;
             CREATE FUNCTION public.hold_host_keys(seconds float8) RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
                 BEGIN
                     -- The migration key, the history months', the outbox months', the
                     -- counters' fold, and an outbox identity's: session and transaction.
                     PERFORM pg_advisory_lock(k) FROM unnest(ARRAY[x'00616c6d616e6163'::bigint,
                         hashtext('almanac.add_job_partition')::bigint, hashtext('almanac.add_outbox_partition')::bigint,
                         hashtext('almanac.fold_counts')::bigint, hashtextextended('points' || E'\n' || 'k', 0)]) k;
                     PERFORM pg_advisory_xact_lock(k) FROM unnest(ARRAY[hashtext('almanac.add_job_partition')::bigint,
                         hashtext('almanac.fold_counts')::bigint]) k;
                     PERFORM pg_sleep(seconds);
                     RETURN 'held';
                 END $$;",
        )
        .await
        .unwrap();
}

async fn role_escapes(batch: &str) {
    let db = TestDb::new().await;
    db.accounts(3).await;
    caller_functions(&db).await;
    let forged = "INSERT INTO almanac.jobs (task, slot, key) VALUES ('daily-points', '2026-03-01T16:00:00Z', '1')";
    // With its role reset the session is still the plugin's login, a member of the
    // plugin's role alone: schema almanac, the host's sequences, another plugin's table
    // and the host's backends stay out of reach.
    let role = almanac::access::role_name(CALLER, &db.name);
    // Every statement below is a SELECT the refusal happens inside of.
    let denied = |what: &str| {
        let message = format!("permission denied for {what}");
        format!("database error 42501: {message} ({})", almanac::db::refusal::plugin_hint(&message, "SELECT", &role))
    };
    let escaped = denied("schema almanac");
    let escape = |sql: &str| json!([{"query": format!("SELECT public.run_as_none('{}')", sql.replace('\'', "''"))}]);
    let refusals: Vec<(&str, serde_json::Value, String)> = vec![
        (
            "ts-stat",
            json!([{"query": "SELECT * FROM ts_stat('SELECT to_tsvector(set_config(''role'', ''none'', true))')"}]),
            format!("refused: function ts_stat {NEVER}"),
        ),
        (
            "ts-rewrite",
            json!([{"query": "SELECT ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, ''b''::tsquery')"}]),
            format!("refused: function ts_rewrite {NEVER}"),
        ),
        (
            "query-to-xml",
            json!([{"query": "SELECT query_to_xml('UPDATE accounts SET points = 0 RETURNING 1', true, true, '')"}]),
            format!("refused: function query_to_xml {NEVER}"),
        ),
        ("terminate", json!([{"query": "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"}]), format!("refused: function pg_terminate_backend {NEVER}")),
        ("advisory-lock", json!([{"query": "SELECT pg_advisory_lock(1)"}]), format!("refused: function pg_advisory_lock {NEVER}")),
        ("notify", json!([{"query": "SELECT pg_notify('almanac_jobs', '')"}]), format!("refused: function pg_notify {NEVER}")),
        ("set-config", json!([{"query": "SELECT set_config('statement_timeout', '0', false)"}]), format!("refused: function set_config {NEVER}")),
        (
            "unlisted",
            json!([{"query": "SELECT pg_backend_pid()"}]),
            "refused: function pg_backend_pid is not on the host's allowlist (built-in functions for math, text, date/time, JSON, arrays and \
             aggregates are; a function of the database is when the plugin declares it in `calls` and calls it as declared, with its schema)"
                .into(),
        ),
        ("escape-then-forge", json!([{"execute": "SELECT public.escape_role()"}, {"execute": forged}]), escaped.clone()),
        ("none-forge", escape(forged), escaped.clone()),
        ("none-read-settings", escape("SELECT count(*)::text FROM almanac.schedules"), escaped.clone()),
        ("none-enqueue", escape("SELECT almanac.enqueue_many('daily-points', '2026-03-02T16:00:00Z', ARRAY['1','2'])::text"), escaped.clone()),
        ("none-setval", escape("SELECT setval('almanac.outbox_id_seq', 1000000)::text"), escaped.clone()),
        ("none-other-plugin", escape("SELECT count(*)::text FROM points_ledger"), denied("table points_ledger")),
    ];
    let mut attacks: Vec<(&str, serde_json::Value)> = refusals.iter().map(|(k, s, _)| (*k, s.clone())).collect();
    attacks.push(("widen-session", json!([{"execute": "SELECT public.widen_session()"}])));
    // These succeed, harmlessly: the role they reach is the login's own, and the session
    // lock they take ends with the transaction's session clean-up.
    attacks.push(("swallowed-escape", json!([{"swallow": "SELECT public.escape_role()"}, {"execute": "UPDATE fixture_caller_effects SET note = current_user || '/' || session_user WHERE key = 'swallowed-escape'"}])));
    attacks.push((
        "none-terminate",
        json!([{"execute": "UPDATE fixture_caller_effects SET note = public.run_as_none('SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)::text FROM pg_stat_activity WHERE usename::text NOT LIKE ''almanac_login_%'' AND backend_type = ''client backend''') WHERE key = 'none-terminate'"}]),
    ));
    attacks.push(("none-advisory-lock", json!([{"execute": "UPDATE fixture_caller_effects SET note = public.run_as_none('SELECT pg_advisory_lock(4242)::text') WHERE key = 'none-advisory-lock'"}])));
    attacks.push(("show-session", json!([{"execute": "UPDATE fixture_caller_effects SET note = public.show_session() WHERE key = 'show-session'"}])));
    enqueue_attacks(&db, CALLER, &attacks).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_caller"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", "1", "--batch", batch]);
    wait_settled(&db, CALLER, attacks.len() as i64).await;
    wait_settled(&db, "daily-points", 3).await;
    host.stop().await;

    for (key, _, error) in &refusals {
        assert_eq!(outcome(&db, CALLER, key).await, ("failed".to_owned(), error.clone()), "attack {key}");
    }
    for key in ["widen-session", "show-session", "swallowed-escape", "none-advisory-lock", "none-terminate"] {
        assert_eq!(outcome(&db, CALLER, key).await.0, "done", "{key}");
    }
    let note = |key: &'static str| {
        let client = &db.client;
        async move { client.query_one("SELECT note FROM fixture_caller_effects WHERE key = $1", &[&key]).await.unwrap().get::<_, String>(0) }
    };
    let login = almanac::login::login_name(CALLER, &db.name);
    assert_eq!(note("swallowed-escape").await, format!("{login}/{login}"), "RESET ROLE lands on the plugin's own login");
    assert_eq!(note("none-advisory-lock").await, format!(" as {login}/{login}"));
    assert_eq!(note("none-terminate").await, format!("false as {login}/{login}"), "no backend but its own may be signalled");
    assert_eq!(db.count("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242").await, 0, "no session lock outlived its job");
    assert_eq!(db.count("SELECT last_value FROM almanac.outbox_id_seq").await, 1, "the host's sequence did not move");
    // What one job set through a function did not reach the next one on the connection.
    let note: String = db.client.query_one("SELECT note FROM fixture_caller_effects WHERE key = 'show-session'", &[]).await.unwrap().get(0);
    assert_eq!(note, "4MB 5min", "the host's own settings, not the previous job's");
    assert_eq!(db.count("SELECT count(*) FROM fixture_caller_effects").await, 5, "failed attacks left no row");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, attacks.len() as i64 + 3, "no forged job");
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 10").await, 3, "daily-points paid each account once");
    let owner: String = db.client.query_one("SELECT tableowner::text FROM pg_tables WHERE tablename = 'fixture_caller_effects'", &[]).await.unwrap().get(0);
    assert_eq!(owner, role, "setup ran as the plugin's own role");
}

/// The host's peak resident memory so far, in bytes.
fn peak_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_results_statements_errors_and_logs_fail_alone_and_the_host_stays_small() {
    // What each part of the host may hold at once: its own baseline (~35 MiB measured),
    // per worker a guest's memory and a result of the same size (2 x 64 MiB), per parser
    // thread one statement's parse (~80 MiB measured at the 256 KiB limit).
    const WORKERS: u64 = 2;
    const RSS_BOUND: u64 = (64 << 20) + WORKERS * (2 * (64 << 20)) + 2 * (96 << 20);
    let db = TestDb::new().await;
    db.accounts(3).await;
    // What the book tells operators to set; the private cluster sets 1GB.
    db.client.batch_execute(&format!("ALTER DATABASE {} SET temp_file_limit = '64MB'", db.name)).await.unwrap();
    let chain = format!("SELECT 1{}", " + 1".repeat(5_000));
    let array = format!("SELECT ARRAY[{}1]", "1,".repeat(120_000));
    let attacks = vec![
        ("big-result", json!([{"query": "SELECT g, repeat('x', 1000) FROM generate_series(1, 1000000) g"}])),
        ("deep-chain", json!([{"query": chain}])),
        ("huge-array", json!([{"query": array}])),
        (
            "temp-files",
            json!([{"query": "WITH RECURSIVE r(n, pad) AS (SELECT 1, repeat('x', 1000) UNION ALL SELECT n + 1, pad FROM r WHERE n < 10000000) SELECT count(*) FROM r"}]),
        ),
        ("big-error", json!([{"error": 30 << 20}])),
        ("log-flood", json!([{"log": 100_000}])),
    ];
    enqueue_attacks(&db, ATTACKER, &attacks).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_attacker"]);
    let workers = WORKERS.to_string();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--workers", &workers, "--listen", "127.0.0.1:0"]);
    let addr = host.listen_addr().await;
    wait_settled(&db, "fixture-attacker", attacks.len() as i64).await;
    wait_settled(&db, "daily-points", 3).await;
    let overview = reqwest::get(format!("http://{addr}/api/overview")).await.unwrap().text().await.unwrap();
    let peak = peak_rss(host.pid());
    host.stop().await;

    let (status, error) = outcome(&db, ATTACKER, "big-result").await;
    assert_eq!(
        (status.as_str(), error.as_str()),
        (
            "failed",
            "database error 54000: refused: the query's rows exceed 64 MiB, the plugin's memory limit; read in pages (ORDER BY ... LIMIT) or aggregate in SQL"
        )
    );
    for key in ["deep-chain", "huge-array"] {
        let (status, error) = outcome(&db, ATTACKER, key).await;
        assert!(status == "failed" && error.starts_with("refused: the statement has "), "{key}: {status} {error}");
    }
    let (status, error) = outcome(&db, ATTACKER, "temp-files").await;
    assert_eq!((status.as_str(), error.as_str()), ("failed", "database error 53400: temporary file size exceeds temp_file_limit (65536kB)"));
    let (status, error) = outcome(&db, ATTACKER, "big-error").await;
    assert_eq!(status, "failed");
    assert!(error == format!("{}… (cut: {} bytes in all)", "E".repeat(4096), 30 << 20), "the error is stored clipped, saying so: {}", &error[4000..]);
    assert_eq!(outcome(&db, ATTACKER, "log-flood").await.0, "done");
    let log = host.log();
    let flood = log.lines().filter(|l| l.contains("llllllll")).count();
    assert_eq!(flood, almanac::capability::log::MAX_BYTES / 1024, "the log budget of one call ({} KiB) held", almanac::capability::log::MAX_BYTES >> 10);
    assert!(log.contains("log budget of this call spent"), "{log}");
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 10").await, 3, "daily-points kept serving");
    assert!(overview.len() < 64 << 10, "/api/overview is bounded: {} bytes", overview.len());
    eprintln!("host peak RSS across the oversized attacks: {} MiB (bound {} MiB)", peak >> 20, RSS_BOUND >> 20);
    assert!(peak < RSS_BOUND, "host peak RSS {} MiB is over the bound of {} MiB", peak >> 20, RSS_BOUND >> 20);
}

/// In flight = claimed (row locked by a host) and not finished.
async fn in_flight(db: &TestDb, task: &str) -> i64 {
    let pending = db.count(&format!("SELECT count(*) FROM almanac.jobs WHERE task = '{task}' AND status = 'pending'")).await;
    let free =
        db.count(&format!("SELECT count(*) FROM (SELECT 1 FROM almanac.jobs WHERE task = '{task}' AND status = 'pending' FOR KEY SHARE SKIP LOCKED) f")).await;
    pending - free
}

#[tokio::test(flavor = "multi_thread")]
async fn spinning_guests_yield_their_threads_and_their_timeout_is_capped() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let spin = json!([{"spin": true}]);
    enqueue_attacks(&db, ATTACKER, &[("spin-1", spin.clone()), ("spin-2", spin.clone())]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_attacker"]);
    // Two runtime threads, both of which the two spinning guests would hold if they
    // did not yield.
    let mut host = HostProc::spawn(&db, plugins.path(), &["--threads", "2", "--workers", "4", "--max-timeout", "4s", "--listen", "127.0.0.1:0"]);
    let addr = host.listen_addr().await;
    crate::support::wait_for("both spinners in flight", Duration::from_secs(60), || async { in_flight(&db, "fixture-attacker").await == 2 }).await;
    let health = reqwest::get(format!("http://{addr}/healthz")).await.unwrap().text().await.unwrap();
    assert_eq!(health, "ok\n");
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done'", 3, Duration::from_secs(30)).await;
    assert_eq!(in_flight(&db, "fixture-attacker").await, 2, "the health check and three jobs were served while both guests spun");
    wait_settled(&db, "fixture-attacker", 2).await;
    for key in ["spin-1", "spin-2"] {
        assert_eq!(outcome(&db, ATTACKER, key).await, ("failed".to_owned(), "plugin exceeded its deadline of 4s".to_owned()), "{key}");
    }
    assert!(host.log().contains("declares a timeout longer than the host allows"), "{}", host.log());
    // SIGTERM while a guest spins: the host ends within its grace period.
    enqueue_attacks(&db, ATTACKER, &[("spin-3", spin)]).await;
    crate::support::wait_for("a spinner in flight", Duration::from_secs(30), || async { in_flight(&db, "fixture-attacker").await == 1 }).await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_that_inherits_from_the_hosts_tables_is_refused() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_badsetup"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 3, Duration::from_secs(60)).await;
    host.wait_log("refused in setup: INHERITS ties the table to another one; a plugin's tables stand alone", Duration::from_secs(30)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'fixture_badsetup_jobs'").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_kills_its_host_is_failed_after_three_crashes_and_its_batch_survives() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    db.sleeper(600.0).await;
    // One slot; batches are per task, so the sleeper runs in a batch of its own and the
    // three daily-points jobs in theirs.
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    db.enqueue("fixture-sleeper", "2026-03-01T16:00:00Z", &["poison"]).await;
    let plugins = plugin_dir(&["daily_points", "fixture_sleeper"]);
    let sleeping = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND state = 'active' AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
        db.name
    );
    // The sleeper stands for a job that kills its host: each host that runs it is killed.
    for _crash in 1..=3 {
        let mut host = HostProc::spawn(&db, plugins.path(), &["--batch", "4", "--workers", "1"]);
        db.wait_count(&sleeping, 1, Duration::from_secs(60)).await;
        host.signal(libc::SIGKILL);
        host.wait(Duration::from_secs(10)).await;
        db.wait_count(&sleeping, 0, Duration::from_secs(30)).await;
    }
    let mut host = HostProc::spawn(&db, plugins.path(), &["--batch", "4", "--workers", "1"]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'", 4, Duration::from_secs(60)).await;
    host.stop().await;
    db.counts_agree().await;
    let row = db.client.query_one("SELECT status, crashes, attempts, last_error FROM almanac.jobs WHERE key = 'poison'", &[]).await.unwrap();
    let (status, crashes, attempts, error): (String, i32, i32, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!((status.as_str(), crashes, attempts), ("failed", 3, 4));
    assert!(
        error.starts_with(
            "not run again: the host or the database server running it ended 3 times before the job did (last: the host running it ended before the job did ("
        ),
        "{error}"
    );
    let crash_attempts =
        db.count("SELECT count(*) FROM almanac.attempts WHERE key = 'poison' AND error LIKE 'the host running it ended before the job did%'").await;
    assert_eq!(crash_attempts, 3, "each crash while it ran alone is an attempt");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'daily-points' AND status = 'done'").await, 3, "the other task's jobs ran");
    assert_eq!(db.count("SELECT count(*) FROM accounts WHERE points = 10").await, 3, "each account paid once");
    assert_eq!(db.count("SELECT count(*) FROM fixture_sleeper_effects").await, 0, "every run of the poison rolled back");
    let held = "SELECT count(*) FROM almanac.claims c, unnest(c.tasks, c.slots, c.keys) k(task, slot, key)
                JOIN almanac.jobs j USING (task, slot, key) WHERE j.status = 'pending'";
    assert_eq!(db.count(held).await, 0, "no claim left behind names a job still to run");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_whose_plan_keeps_failing_does_not_starve_the_others() {
    let db = TestDb::new().await;
    db.client.batch_execute("CREATE TABLE fixture_badplan_mode (mode text NOT NULL); INSERT INTO fixture_badplan_mode VALUES ('huge-key')").await.unwrap();
    // fixture-badplan sorts first, and fails on every tick; fixture-minutely has 10,000
    // missed minutes to catch up (157 ticks of at most 64 slots).
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through) VALUES
               ('fixture-badplan', '* * * * *', 'UTC', date_trunc('minute', now()) - interval '5 minutes'),
               ('fixture-minutely', '* * * * *', 'UTC', date_trunc('minute', now()) - interval '10000 minutes')",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["fixture_badplan", "fixture_minutely"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    // At least: the clock may pass a minute boundary meanwhile.
    crate::support::wait_for("fixture-minutely caught up", Duration::from_secs(120), || async {
        db.count("SELECT count(*) FROM almanac.slots WHERE task = 'fixture-minutely'").await >= 10_000
    })
    .await;
    host.stop().await;
    let log = host.log();
    assert!(log.contains("returned a key of 10485760 bytes; the limit is 1024"), "{log}");
    assert!(!log.contains("lost its database connection"), "a plan's fault is not a lost connection:\n{log}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-badplan'").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_own_tables_keep_their_owners_rights_across_restarts() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_attacker"]);
    let owner_may = format!(
        "SELECT has_table_privilege('{}', 'fixture_attacker_effects', 'TRUNCATE, REFERENCES')::int::bigint",
        almanac::access::role_name(ATTACKER, &db.name)
    );
    // Each start sets the plugin up again (setup, then its grants).
    for _ in 0..2 {
        let mut host = HostProc::spawn(&db, plugins.path(), &[]);
        host.wait_log("plugin loaded", Duration::from_secs(60)).await;
        host.stop().await;
        assert_eq!(db.count(&owner_may).await, 1, "the table its setup created is the plugin's own, all rights");
    }
}

/// Text a plugin or a client controls (a database error quoting the plugin's value, a
/// job key) reaches the operator with its control characters escaped: no ESC sequence in
/// `almanac status`, `almanac jobs` or the host's log, no forged line.
#[tokio::test(flavor = "multi_thread")]
async fn control_characters_from_plugins_never_reach_a_terminal_raw() {
    let db = TestDb::new().await;
    let key = "k\u{1b}]0;owned\u{7}\nFORGED key line";
    let steps = json!([{"query": "SELECT E'\\x1b[2J\\r\\nFORGED error line'::int"}]);
    enqueue_attacks(&db, ATTACKER, &[(key, steps)]).await;
    let plugins = plugin_dir(&["fixture_attacker"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    wait_settled(&db, "fixture-attacker", 1).await;
    host.stop().await;
    let (status, error) = outcome(&db, ATTACKER, key).await;
    assert_eq!(status, "failed");
    assert!(error.contains('\u{1b}'), "stored as it was: {error:?}");
    let (_, status_out, _) = crate::support::almanac(&db.url, &["status"]);
    let (code, jobs_out, jobs_err) = crate::support::almanac(&db.url, &["jobs", "--task", "fixture-attacker"]);
    assert_eq!(code, 0, "{jobs_err}");
    for (what, text) in [("status", status_out), ("jobs", jobs_out), ("the host's log", host.log())] {
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'), "{what}: {text:?}");
        assert!(!text.lines().any(|l| l.starts_with("FORGED")), "{what}: {text}");
        assert!(text.contains("\\x1b"), "{what} shows the escape: {text}");
    }
}
