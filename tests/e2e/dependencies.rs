//! Dependencies between scheduled tasks of one period (`after = [...]`): a task's jobs of
//! a period are claimed only once the tasks it comes after have settled that period, as
//! the claim itself checks (V25); `slots` and `plan` say so.
use std::time::Duration;

use crate::support::{almanac, plugin_dir, workspace, HostProc, ProjectClusters, TestDb};

const SLOT: &str = "2026-01-01T00:00:00Z";

#[tokio::test(flavor = "multi_thread")]
async fn a_task_runs_a_periods_jobs_only_after_the_task_it_comes_after() {
    let db = TestDb::new().await;
    db.sleeper(0.0).await;
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("almanac.toml");
    // Both start before their 2026 slot: their schedulers handle the period at once.
    let start = "start_at = \"2025-12-31T00:00:00Z\"\n";
    std::fs::write(&config, format!("[tasks.fixture-sleeper]\n{start}[tasks.fixture-gate]\n{start}after = [\"fixture-sleeper\"]\n")).unwrap();
    let config = config.display().to_string();
    let plugins = plugin_dir(&["fixture_sleeper", "fixture_gate", "fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &config]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task IN ('fixture-sleeper', 'fixture-gate', 'fixture-permanent')", 3, Duration::from_secs(30))
        .await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE task = 'fixture-gate' AND after = '{fixture-sleeper}'").await, 1);
    db.client.batch_execute("INSERT INTO fixture_gate VALUES (1, 0)").await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.slots WHERE period = '2026' AND status IN ('generated', 'empty')", 2, Duration::from_secs(30)).await;

    // The roll-up is held: its job of 2026 waits, and so does the gate's of 2026.
    let (code, out, err) = almanac(&db.url, &["hold", "fixture-sleeper", "--reason", "roll-up late"]);
    assert_eq!(code, 0, "{out}{err}");
    for (task, key) in [("fixture-sleeper", "s1"), ("fixture-gate", "g1")] {
        db.client.execute("SELECT almanac.enqueue($1, $2::text::timestamptz, $3)", &[&task, &SLOT, &key]).await.unwrap();
    }
    // A job of a task without dependencies, enqueued after them, runs through: the
    // workers have polled since, and the gate's job is still pending.
    db.client.execute("SELECT almanac.enqueue('fixture-permanent', $1::text::timestamptz, 'p1')", &[&SLOT]).await.unwrap();
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'p1' AND status = 'failed'", 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'g1' AND status = 'pending' AND attempts = 0").await, 1);
    let (code, out, err) = almanac(&db.url, &["slots", "fixture-gate", "--from", "2026-01-01", "--to", "2026-01-02"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("runs after: fixture-sleeper") && out.contains("its jobs wait for fixture-sleeper"), "{out}");
    let (code, out, err) = almanac(&db.url, &["plan", "fixture-gate", "--slot", SLOT, "--plugins", &plugins.path().display().to_string(), "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("runs after fixture-sleeper in period 2026: its jobs would wait"), "{out}");

    // Released, the roll-up runs, then the gate.
    let (code, out, err) = almanac(&db.url, &["release", "fixture-sleeper"]);
    assert_eq!(code, 0, "{out}{err}");
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'g1' AND status = 'done'", 1, Duration::from_secs(30)).await;
    let order = "SELECT (SELECT completed_at FROM almanac.jobs WHERE key = 's1') < (SELECT completed_at FROM almanac.jobs WHERE key = 'g1')";
    assert!(db.client.query_one(order, &[]).await.unwrap().get::<_, bool>(0), "the gate ran after the roll-up");
    let (_, out, _) = almanac(&db.url, &["slots", "fixture-gate", "--from", "2026-01-01", "--to", "2026-01-02"]);
    assert!(!out.contains("its jobs wait"), "{out}");
    host.stop().await;

    // after is part of the applied schedule: a file without it disagrees until applied.
    let (code, out, err) = almanac(&db.url, &["apply", "--plugins", &plugins.path().display().to_string(), "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fixture-gate: would change: after \"[fixture-sleeper]\" -> \"[]\""), "{out}");
    // Periods are matched by name: a task waits only for one of its own period unit.
    let other = files.path().join("minutely.toml");
    std::fs::write(&other, "[tasks.fixture-minutely]\nafter = [\"fixture-gate\"]\n").unwrap();
    let folder = plugin_dir(&["fixture_minutely"]);
    let (code, out, err) =
        almanac(&db.url, &["apply", "--plugins", &folder.path().display().to_string(), "--config", &other.display().to_string(), "--dry-run"]);
    assert!(
        code == 1 && err.contains("\"fixture-minutely\" comes after \"fixture-gate\", whose periods are a year's while its own are a slot's"),
        "{out}{err}"
    );
    // A task no host registered, and a circle, are refused too.
    for (toml, refusal) in [
        ("[tasks.fixture-sleeper]\nafter = [\"no-such-task\"]\n", "\"fixture-sleeper\" comes after \"no-such-task\", which no host has registered"),
        ("[tasks.fixture-sleeper]\nafter = [\"fixture-gate\"]\n", "\"fixture-sleeper\" comes after \"fixture-gate\", which comes after \"fixture-sleeper\""),
    ] {
        std::fs::write(&other, toml).unwrap();
        let folder = plugin_dir(&["fixture_sleeper"]);
        let (code, out, err) =
            almanac(&db.url, &["apply", "--plugins", &folder.path().display().to_string(), "--config", &other.display().to_string(), "--dry-run"]);
        assert!(code == 1 && err.contains(refusal), "{out}{err}");
    }
}

/// A plugin enqueues jobs of another task inside its job's transaction (WIT 0.4.0
/// `jobs.enqueue`): a declared task gets one job per identity, an undeclared one is
/// refused by the database, and a job that fails after enqueueing leaves nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_enqueues_only_what_it_declares_and_only_if_its_job_commits() {
    let db = TestDb::new().await;
    db.sleeper(0.0).await;
    let plugins = plugin_dir(&["fixture_enqueuer", "fixture_gate", "fixture_sleeper"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task IN ('fixture-enqueuer', 'fixture-gate', 'fixture-sleeper')", 3, Duration::from_secs(30))
        .await;
    db.client.batch_execute("INSERT INTO fixture_gate VALUES (1, 0)").await.unwrap();
    // The grant is the database's: one row for the enqueuer's role, naming fixture-gate.
    let role = almanac::access::role_name("fixture-enqueuer", &db.name);
    assert_eq!(db.count(&format!("SELECT count(*) FROM almanac.enqueue_grants WHERE grantee = '{role}' AND task = 'fixture-gate'")).await, 1);
    // `clients` says whose it is, and it is not the operator's to revoke.
    let (code, out, err) = almanac(&db.url, &["clients"]);
    assert!(code == 0 && out.contains(&format!("{role}: fixture-gate (plugin fixture-enqueuer, as its describe() declares)")), "{out}{err}");
    let (code, out, err) = almanac(&db.url, &["clients", "revoke", &role, "fixture-gate"]);
    assert!(code == 1 && err.contains("is the role of plugin fixture-enqueuer") && err.contains("ship a version that no longer declares it"), "{out}{err}");
    let (code, out, err) = almanac(&db.url, &["clients", "revoke", "nobody", "fixture-gate"]);
    assert!(code == 1 && err.contains("nobody was not given fixture-gate: nothing revoked"), "{out}{err}");
    // A dry run enqueues as the job would, and keeps nothing.
    let (code, out, err) =
        almanac(&db.url, &["try", "fixture-enqueuer", "--slot", SLOT, "--key", "declared", "--plugins", &plugins.path().display().to_string()]);
    assert!(code == 0 && out.contains("outcome: ok"), "{out}{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-gate'").await, 0);
    db.enqueue("fixture-enqueuer", SLOT, &["declared", "undeclared", "then-fail"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-enqueuer' AND status IN ('done', 'failed')", 3, Duration::from_secs(30)).await;
    // The declared one: done, and its gate job ran with the payload given.
    db.wait_count(
        "SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-gate' AND key = 'from-declared' AND status = 'done' AND payload->>'from' = 'declared'",
        1,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-enqueuer' AND key = 'declared' AND status = 'done'").await, 1);
    // The undeclared one: refused by the database, naming the declaration.
    let error: String = db.client.query_one("SELECT last_error FROM almanac.jobs WHERE key = 'undeclared'", &[]).await.unwrap().get(0);
    assert!(error.contains("42501") && error.contains("may not enqueue into task \"fixture-sleeper\": declare it in describe() (enqueues)"), "{error}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE task = 'fixture-sleeper'").await, 0);
    // The failed one: its enqueue rolled back with it.
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'then-fail' AND status = 'failed'").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = 'rolled-back'").await, 0);
    host.stop().await;
}

/// The test harnesses (almanac-testing, Rust and Python) register a folder's tasks as a
/// deploy does (`apply`, the task it comes after first): a plugin's enqueue lands where
/// `jobs` shows it, and `plan` says whom a task's jobs wait for.
#[test]
fn the_harnesses_show_what_a_plugin_enqueued_and_whom_a_task_waits_for() {
    let project = tempfile::tempdir().unwrap();
    let _cluster = ProjectClusters(vec![project.path().to_owned()]);
    let plugins = project.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for name in ["fixture_enqueuer", "fixture_gate", "fixture_sleeper"] {
        let built = workspace().join(format!("target/wasm/wasm32-wasip2/release/{name}.wasm"));
        std::fs::copy(&built, plugins.join(format!("{name}.wasm"))).unwrap();
    }
    // fixture-gate sorts first, and comes after fixture-sleeper.
    std::fs::write(project.path().join("almanac.toml"), "[tasks.fixture-gate]\nafter = [\"fixture-sleeper\"]\n").unwrap();

    let harness = almanac_testing::Almanac::with_plugins(project.path(), &plugins);
    let applied = harness.apply();
    assert!(applied.ok && applied.report.contains("fixture-gate: registered"), "{applied}");
    let tried = harness.run("fixture-enqueuer", SLOT, "declared");
    assert!(tried.ok && tried.report.contains(r#"enqueue "fixture-gate" slot 2026-01-01T00:00:00Z key "from-declared" payload"#), "{tried}");
    let jobs = harness.jobs("fixture-gate");
    let seen: Vec<_> = jobs.iter().map(|j| (j[0].as_str(), j[1].as_str(), j[2].as_str(), j[4].as_str())).collect();
    assert_eq!(seen, [("2026-01-01 00:00:00+00", "from-declared", r#"{"from": "declared"}"#, "pending")]);
    let planned = harness.plan("fixture-gate", SLOT);
    assert!(planned.ok && planned.report.contains("runs after fixture-sleeper in period 2026: its jobs would wait"), "{planned}");

    // The Python harness, on the same project, in a database of its own.
    let script = format!(
        "from almanac_testing import Almanac\n\
         a = Almanac(plugins='plugins')\n\
         applied = a.apply()\n\
         assert applied.ok, applied.report\n\
         tried = a.run('fixture-enqueuer', '{SLOT}', 'declared')\n\
         assert tried.ok, tried.report\n\
         print([row[:3] + row[4:] for row in a.jobs('fixture-gate')])\n\
         print(a.plan('fixture-gate', '{SLOT}').report)\n"
    );
    let out = std::process::Command::new(workspace().join(".venv/bin/python"))
        .args(["-c", &script])
        .env("PYTHONPATH", workspace().join("guest-sdk/testing"))
        .env("ALMANAC", crate::support::almanac_bin())
        .current_dir(project.path())
        .output()
        .unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    assert!(report.starts_with(r#"[['2026-01-01 00:00:00+00', 'from-declared', '{"from": "declared"}', 'pending']]"#), "{report}");
    assert!(report.contains("runs after fixture-sleeper in period 2026: its jobs would wait"), "{report}");
}
