//! What an operator sees: `/metrics` after a known run, `/readyz`, the dashboard in a
//! real headless Chromium, and JSON log lines that carry each job's identity.
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::support::{built_plugins, plugin_dir, wait_for, workspace, HostProc, TestDb};

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The value of one sample (`name{labels}`) in a Prometheus exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' '))).map(|value| value.trim().parse().unwrap())
}

fn file_digest(stem: &str) -> String {
    hex::encode(Sha256::digest(std::fs::read(built_plugins().join(format!("{stem}.wasm"))).unwrap()))
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_a_known_run() {
    let db = TestDb::new().await;
    db.accounts(5).await;
    let plugins = plugin_dir(&["daily_points", "fixture_permanent", "fixture_flaky"]);
    // A configured topic nothing is ever published to: its series exist, at 0.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("almanac.toml");
    std::fs::write(&config, "[outbox.topics.audit]\nsink = \"log\"\n").unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--config", config.to_str().unwrap()]);
    let base = format!("http://{}", host.listen_addr().await);
    assert_eq!(get(&format!("{base}/healthz")).await, (200, "ok\n".to_owned()));
    wait_for("/readyz says ready", Duration::from_secs(30), || async { get(&format!("{base}/readyz")).await.0 == 200 }).await;

    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3", "4", "5"]).await;
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["p1", "p2", "p3"]).await;
    // fixture-flaky fails twice (retried), then succeeds.
    db.enqueue("fixture-flaky", "2026-01-01T00:00:00Z", &["f1", "f2"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 7, Duration::from_secs(60)).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 3, Duration::from_secs(60)).await;

    // The database shows a commit a moment before the host has counted it.
    let metrics_url = format!("{base}/metrics");
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let (status, text) = get(&metrics_url).await;
        assert_eq!(status, 200);
        let counted = sample(&text, r#"almanac_jobs_completed_total{task="daily-points"}"#) == Some(5.0)
            && sample(&text, r#"almanac_jobs_completed_total{task="fixture-flaky"}"#) == Some(2.0)
            && sample(&text, r#"almanac_jobs_failed_total{task="fixture-permanent"}"#) == Some(3.0);
        if counted || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let expect = [
        (r#"almanac_outbox_messages{topic="audit",state="pending"}"#, 0.0),
        (r#"almanac_outbox_messages{topic="audit",state="dead"}"#, 0.0),
        (r#"almanac_jobs_completed_total{task="daily-points"}"#, 5.0),
        (r#"almanac_jobs_failed_total{task="daily-points"}"#, 0.0),
        (r#"almanac_jobs_retried_total{task="daily-points"}"#, 0.0),
        (r#"almanac_jobs_completed_total{task="fixture-permanent"}"#, 0.0),
        (r#"almanac_jobs_failed_total{task="fixture-permanent"}"#, 3.0),
        (r#"almanac_jobs_retried_total{task="fixture-permanent"}"#, 0.0),
        (r#"almanac_jobs_completed_total{task="fixture-flaky"}"#, 2.0),
        (r#"almanac_jobs_retried_total{task="fixture-flaky"}"#, 4.0),
        (r#"almanac_jobs_failed_total{task="fixture-flaky"}"#, 0.0),
        (r#"almanac_job_duration_seconds_count{task="daily-points"}"#, 5.0),
        (r#"almanac_job_duration_seconds_count{task="fixture-permanent"}"#, 3.0),
        (r#"almanac_job_duration_seconds_count{task="fixture-flaky"}"#, 6.0),
        (r#"almanac_jobs_pending{task="daily-points"}"#, 0.0),
        (r#"almanac_jobs_pending{task="fixture-flaky"}"#, 0.0),
        ("almanac_plugin_load_failures_total", 0.0),
        ("almanac_database_up", 1.0),
    ];
    for (series, want) in expect {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
    let loaded = format!(r#"almanac_plugin_loaded{{task="daily-points",version="0.1.0",digest="{}"}}"#, file_digest("daily_points"));
    assert_eq!(sample(&text, &loaded), Some(1.0), "{loaded}\n{text}");
    // daily-points fires daily: its lag is under a day (its cursor is the newest slot).
    let lag = sample(&text, r#"almanac_scheduler_lag_seconds{task="daily-points"}"#).expect("lag of daily-points");
    assert!((0.0..86_400.0).contains(&lag), "{lag}");

    // A broken file dropped in is counted as a load failure, and nothing else changes.
    std::fs::write(plugins.path().join("broken.wasm"), b"\0asm not really").unwrap();
    wait_for("the broken plugin counted", Duration::from_secs(30), || async {
        sample(&get(&metrics_url).await.1, "almanac_plugin_load_failures_total") == Some(1.0)
    })
    .await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_waits_for_a_plugin() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&[]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0"]);
    let base = format!("http://{}", host.listen_addr().await);
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    wait_for("/readyz: no plugins loaded", Duration::from_secs(30), || async {
        get(&format!("{base}/readyz")).await == (503, "not ready: no plugins loaded\n".to_owned())
    })
    .await;
    std::fs::copy(built_plugins().join("fixture_flaky.wasm"), plugins.path().join("fixture_flaky.wasm")).unwrap();
    wait_for("/readyz: ready once a plugin is dropped in", Duration::from_secs(30), || async {
        get(&format!("{base}/readyz")).await == (200, "ready: fixture-flaky\n".to_owned())
    })
    .await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_and_metrics_follow_the_database_down_and_up() {
    let pg = crate::support::private::PrivateCluster::start(false).await;
    pg.stop_server("fast");
    let plugins = plugin_dir(&["fixture_flaky"]);
    let mut host = HostProc::spawn_url(&pg.url(), plugins.path(), &["--listen", "127.0.0.1:0"], &[]);
    let base = format!("http://{}", host.listen_addr().await);
    let (ready, metrics) = (format!("{base}/readyz"), format!("{base}/metrics"));
    // Down at start: the process is up, not ready, and says why.
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    let (status, why) = get(&ready).await;
    assert_eq!((status, why.as_str()), (503, "not ready: starting (connecting to the database, loading plugins)\n"));
    assert_eq!(sample(&get(&metrics).await.1, "almanac_database_up"), Some(0.0));

    pg.start_server();
    wait_for("ready once the database is up", Duration::from_secs(60), || async { get(&ready).await.0 == 200 }).await;
    assert_eq!(sample(&get(&metrics).await.1, "almanac_database_up"), Some(1.0));

    pg.stop_server("fast");
    wait_for("not ready while the database is down", Duration::from_secs(60), || async {
        get(&ready).await == (503, "not ready: the database does not answer\n".to_owned())
    })
    .await;
    let text = get(&metrics).await.1;
    assert_eq!(sample(&text, "almanac_database_up"), Some(0.0), "{text}");
    assert_eq!(sample(&text, r#"almanac_jobs_completed_total{task="fixture-flaky"}"#), Some(0.0), "counters are still served:\n{text}");
    assert_eq!(sample(&text, r#"almanac_jobs_pending{task="fixture-flaky"}"#), None, "no database gauges without the database:\n{text}");

    pg.start_server();
    wait_for("ready again", Duration::from_secs(60), || async { get(&ready).await.0 == 200 }).await;
    host.stop().await;
}

/// Headless Chromium, as Debian ships it (`scripts/bootstrap.sh --need-browser`).
fn chromium(args: &[&str], url: &str) -> String {
    let profile = tempfile::Builder::new().prefix("almanac-chromium-").tempdir().unwrap();
    let mut child = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        // Virtual time waits for the page's fetches, then for its script to draw.
        .arg("--virtual-time-budget=10000")
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium is not installed: run `bash scripts/bootstrap.sh --need-browser`");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "chromium exited with {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The texts of the cells of the row of `task` in table `id` of a DOM dump.
fn row(dom: &str, id: &str, task: &str) -> Vec<String> {
    let table = &dom[dom.find(&format!(r#"<table id="{id}">"#)).unwrap_or_else(|| panic!("table {id}"))..];
    let table = &table[..table.find("</table>").unwrap()];
    let start = table.find(&format!(r#"<tr data-task="{task}">"#)).unwrap_or_else(|| panic!("no row {task} in {id}: {table}"));
    let tr = &table[start..];
    let tr = &tr[..tr.find("</tr>").unwrap()];
    tr.split("<td").skip(1).map(|td| text_of(&td[td.find('>').unwrap() + 1..])).collect()
}

/// Markup removed, entities decoded (the few the page can produce).
fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_shows_schedules_counts_failures_and_plugins_in_a_browser() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let plugins = plugin_dir(&["daily_points", "fixture_permanent", "fixture_flaky"]);
    // A deploy that did not take, shown beside what serves.
    std::fs::write(plugins.path().join("broken.wasm"), b"half a file").unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--retry-base", "10ms"]);
    let url = format!("http://{}/", host.listen_addr().await);
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2", "3"]).await;
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["k1", "k2"]).await;
    // Fails twice, then succeeds: one row for the job, not one per attempt.
    db.enqueue("fixture-flaky", "2026-01-01T00:00:00Z", &["f1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'", 6, Duration::from_secs(60)).await;

    let dom = chromium(&["--dump-dom"], &url);
    assert!(dom.contains(r#"<body data-state="ready">"#), "the page's script fetched and drew the data:\n{dom}");
    let points = row(&dom, "tasks", "daily-points");
    assert_eq!(points[..5], ["daily-points", "0", "0", "3", "0"], "pending, running, done, failed: {points:?}");
    let permanent = row(&dom, "tasks", "fixture-permanent");
    assert_eq!(permanent[4], "2", "{permanent:?}");
    assert!(permanent[6].starts_with("account k") && permanent[6].ends_with(" is closed"), "last error: {permanent:?}");

    let schedule = row(&dom, "schedules", "daily-points");
    assert_eq!(schedule[..5], ["daily-points", "0 0 * * *", "Asia/Shanghai", "all", "active"], "{schedule:?}");
    // Midnight in Shanghai, shown in the zone and in UTC.
    assert!(schedule[6].contains("00:00:00 CST (UTC+08:00)") && schedule[6].ends_with("16:00:00 UTC"), "next slot: {schedule:?}");

    let failures = &dom[dom.find(r#"<table id="failures">"#).unwrap()..];
    let failures = &failures[..failures.find("</table>").unwrap()];
    for key in ["k1", "k2"] {
        assert!(text_of(failures).contains(&format!("{key}1failed for goodaccount {key} is closed")), "failure of {key}: {}", text_of(failures));
    }
    assert_eq!(failures.matches("<tr").count(), 4, "a header and one row per job: {}", text_of(failures));
    assert!(text_of(failures).contains("f12done since"), "the flaky job's two failures in one row: {}", text_of(failures));
    let plugin = row(&dom, "plugins", "daily-points");
    // Its limits under its name, then what it declared and the settings it runs with.
    assert_eq!(plugin[..3], ["daily-points5 attempts, 30 s each", "0.1.0", &file_digest("daily_points")], "{plugin:?}");
    assert_eq!(plugin[4..], ["accounts (writes), points_ledger (writes)", "points = 10", "built-ins only"], "{plugin:?}");
    let refused = row(&dom, "refused", "");
    assert!(refused[3].contains("broken.wasm") && refused[4] == "nothing" && !refused[5].is_empty(), "{refused:?}");

    // Kept for people: target/test-artifacts/dashboard.png.
    let artifacts: PathBuf = workspace().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&["--window-size=1400,1000", &format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot ({} bytes)", png.len());
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn json_log_lines_carry_the_job_identity() {
    let db = TestDb::new().await;
    db.gate().await;
    let plugins = plugin_dir(&["fixture_gate", "fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--log-format", "json"]);
    db.enqueue("fixture-gate", "2026-01-01T00:00:00Z", &["g1"]).await;
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["p1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status <> 'pending'", 2, Duration::from_secs(60)).await;
    host.stop().await;

    let lines: Vec<serde_json::Value> = host.log().lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect();
    let find = |message: &str| lines.iter().find(|l| l["message"] == message).unwrap_or_else(|| panic!("no line {message:?} in:\n{}", host.log())).clone();
    let plugin_line = find("at the gate with key g1");
    assert_eq!(plugin_line["target"], "plugin");
    assert_eq!(plugin_line["level"], "INFO");
    assert_eq!((&plugin_line["plugin"], &plugin_line["task"], &plugin_line["key"]), (&"fixture-gate".into(), &"fixture-gate".into(), &"g1".into()));
    assert_eq!(plugin_line["slot"], plugin_line["span"]["slot"], "{plugin_line}");
    assert!(plugin_line["slot"].as_str().is_some_and(|s| s.starts_with("2026-01-01")), "{plugin_line}");

    let failed = find("job failed for good");
    let span = &failed["span"];
    assert_eq!((&span["task"], &span["key"]), (&"fixture-permanent".into(), &"p1".into()), "{failed}");
    assert!(span["slot"].as_str().is_some_and(|s| s.starts_with("2026-01-01")), "{failed}");
    assert_eq!(failed["error"], "account p1 is closed");
}
