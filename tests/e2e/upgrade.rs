//! Upgrading a plugin without a restart: a new version that only adds a setting with a
//! default loads by itself (the stored settings take the default, recorded) with no
//! ERROR line; a file whose settings differ from the applied ones is refused at WARN with
//! the difference named first until `almanac apply`, and the running host then loads the
//! waiting version by itself. And a reload reads the configuration file as it is on disk
//! now.
use std::time::Duration;

use crate::support::{almanac, built_plugins, plugin_dir, HostProc, TestDb};

/// Put `fixture` in place of the folder's fixture_settings.wasm, renamed into place as a
/// deploy does; `build` is appended as a custom section, so that one version can be
/// deployed again as a new file (as a rebuild would).
fn deploy(plugins: &std::path::Path, fixture: &str, build: u8) {
    let next = plugins.join("next.tmp");
    let mut bytes = std::fs::read(built_plugins().join(fixture)).unwrap();
    // Custom section (id 0), 6 bytes: the name "test" (length 4), then the build number.
    bytes.extend_from_slice(&[0, 6, 4, b't', b'e', b's', b't', build]);
    std::fs::write(&next, bytes).unwrap();
    std::fs::rename(&next, plugins.join("fixture_settings.wasm")).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_that_adds_a_setting_loads_by_itself_and_a_changed_setting_after_apply() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_settings"]);
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.fixture-settings.settings]\napi-key = \"k1\"\n").unwrap();
    let config = config.display().to_string();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &config, "--listen", "127.0.0.1:0"]);
    let base = format!("http://{}", host.listen_addr().await);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'fixture-settings'", 1, Duration::from_secs(30)).await;
    let (code, out, err) = almanac(&db.url, &["status"]);
    assert_eq!(code, 0, "nothing refused yet:\n{out}{err}");
    assert!(!out.contains("refused deploy"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("fixture-settings ") && l.contains("(on demand)")), "no cursor for an on-demand task:\n{out}");
    let (_, out, _) = almanac(&db.url, &["schedules", "--json"]);
    let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!((line["cron"].as_str(), line["cursor"].is_null(), line["next_slot"].is_null()), (Some("(on demand)"), true, true), "{out}");

    // Version 0.2.0 adds `farewell` (default "bye"): one step, no apply, no ERROR.
    deploy(plugins.path(), "fixture_settings_v2.wasm", 1);
    host.wait_log("task=fixture-settings version=0.2.0", Duration::from_secs(30)).await;
    assert!(!host.log().contains("ERROR"), "{}", host.log());
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE task = 'fixture-settings' AND settings->>'farewell' = 'bye'").await, 1);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM almanac.changes WHERE task = 'fixture-settings' AND action = 'settings' AND reason LIKE '%\"farewell\" at their defaults'"
        )
        .await,
        1
    );
    db.enqueue("fixture-settings", "2026-03-07T16:00:00Z", &["after-upgrade"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'after-upgrade' AND status = 'done'", 1, Duration::from_secs(30)).await;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(plugins.path().join("fixture_settings.wasm")).unwrap()));
    assert_eq!(db.count(&format!("SELECT count(*) FROM almanac.jobs WHERE key = 'after-upgrade' AND plugin_digest = '{digest}'")).await, 1, "run by 0.2.0");
    let (code, out, err) = almanac(&db.url, &["status"]);
    assert_eq!(code, 0, "{out}{err}");

    // The configuration file on disk, not the one read at start: a changed greeting
    // disagrees with the applied settings. Refused (a WARN naming the difference and
    // the command), the running version keeps serving.
    std::fs::write(&config, "[tasks.fixture-settings.settings]\napi-key = \"k1\"\ngreeting = \"hi\"\n").unwrap();
    deploy(plugins.path(), "fixture_settings_v2.wasm", 2);
    host.wait_log("plugin not reloaded", Duration::from_secs(30)).await;
    let log = host.log();
    let line = log.lines().find(|l| l.contains("plugin not reloaded")).unwrap();
    let difference = "task \"fixture-settings\" differs from the schedule every host runs by: setting greeting \"hello\" -> \"hi\" (stored -> here)";
    assert!(line.contains(difference), "the difference comes first:\n{line}");
    assert!(line.contains(" WARN ") && line.contains("`almanac apply`"), "a WARN that names the command:\n{line}");
    assert!(line.contains("version 0.2.0"), "and which version keeps serving:\n{line}");
    assert!(!host.log().contains("ERROR"), "{}", host.log());

    // The refused deploy is where operators look: status (failing), the dashboard, a metric.
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys WHERE task = 'fixture-settings'", 1, Duration::from_secs(30)).await;
    let (code, out, err) = almanac(&db.url, &["status"]);
    assert_eq!(code, 1, "a deploy that did not take fails status:\n{out}{err}");
    let refused = out.lines().find(|l| l.starts_with("refused deploy: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(refused.contains("fixture_settings.wasm") && refused.contains("task fixture-settings"), "{refused}");
    assert!(refused.contains("version 0.2.0") && refused.contains("keeps serving"), "{refused}");
    assert!(refused.contains(difference), "{refused}");
    let overview: serde_json::Value = serde_json::from_str(&reqwest::get(format!("{base}/api/overview")).await.unwrap().text().await.unwrap()).unwrap();
    let shown = &overview["refused_deploys"][0];
    assert_eq!(shown["task"], "fixture-settings", "{overview}");
    assert_eq!(shown["stale"], false, "{overview}");
    assert!(shown["reason"].as_str().unwrap().contains(difference), "{overview}");
    assert!(shown["serving"].as_str().unwrap().starts_with("0.2.0 ("), "{overview}");
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "almanac_plugins_refused 1"), "{metrics}");
    assert!(metrics.lines().any(|l| l == "almanac_plugin_load_failures_total 1"), "{metrics}");

    // The deploy's second step: apply the folder as it is now. The running host follows.
    let (code, out, err) = almanac(&db.url, &["apply", "--plugins", &plugins.path().display().to_string(), "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("greeting"), "{out}");
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys", 0, Duration::from_secs(30)).await;
    db.enqueue("fixture-settings", "2026-03-07T16:00:00Z", &["after-apply"]).await;
    db.wait_count("SELECT count(*) FROM fixture_settings_seen WHERE key = 'after-apply' AND greeting = 'hi'", 1, Duration::from_secs(30)).await;
    assert!(host.is_running(), "no restart");
    let (code, out, err) = almanac(&db.url, &["status"]);
    assert_eq!(code, 0, "{out}{err}");
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "almanac_plugins_refused 0"), "{metrics}");

    // A host that stops takes its refusals with it: nobody would retry them.
    std::fs::write(&config, "[tasks.fixture-settings.settings]\napi-key = \"k1\"\ngreeting = \"hey\"\n").unwrap();
    deploy(plugins.path(), "fixture_settings_v2.wasm", 3);
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys", 1, Duration::from_secs(30)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.refused_deploys").await, 0);
}

/// A refusal recorded by a host that was killed goes stale instead of failing `status`
/// for good; the host's next start replaces it.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_hosts_refusal_goes_stale_and_its_restart_replaces_it() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points"]);
    std::fs::write(plugins.path().join("broken.wasm"), b"not a component").unwrap();
    let mut host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys WHERE file LIKE '%broken.wasm' AND task IS NULL", 1, Duration::from_secs(30)).await;
    let (code, out, _) = almanac(&db.url, &["status"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("broken.wasm on ") && out.contains("nothing of it serves"), "{out}");
    host.signal(libc::SIGKILL);
    host.wait(Duration::from_secs(10)).await;
    // Its last word was three heartbeats ago.
    let aged = db.count("WITH aged AS (UPDATE almanac.refused_deploys SET seen_at = now() - interval '4 minutes' RETURNING 1) SELECT count(*) FROM aged").await;
    assert_eq!(aged, 1);
    let (code, out, _) = almanac(&db.url, &["status"]);
    assert_eq!(code, 0, "a stale refusal does not fail status:\n{out}");
    assert!(out.contains("STALE: its host has not reported since"), "{out}");
    // The restarted host records the file afresh.
    let _host = HostProc::spawn(&db, plugins.path(), &[]);
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys WHERE seen_at > now() - interval '1 minute'", 1, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.refused_deploys").await, 1);
}

/// File names are whoever deployed them's: names that are not UTF-8 (two that read the
/// same as text), a name with an escape sequence and a newline. Each is recorded, printed
/// as one line of text, and listed by `status --json`; a host pointed at its folder
/// through a link replaces its own rows; a row nobody has seen for a day is forgotten.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_file_names_are_recorded_one_row_each_and_printed_as_text() {
    use std::os::unix::ffi::OsStrExt;
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points"]);
    for name in [&b"odd\xff.wasm"[..], b"odd\xfe.wasm", b"evil\x1b[2J\nhost ok.wasm"] {
        std::fs::write(plugins.path().join(std::ffi::OsStr::from_bytes(name)), b"not a component").unwrap();
    }
    // Another host's refusal, unseen for two days: retired long ago.
    db.client
        .batch_execute(
            "INSERT INTO almanac.refused_deploys (host, dir, file, digest, reason, refused_at, seen_at)
             VALUES ('retired', '/gone', '/gone/old.wasm', 'd', 'r', now() - interval '3 days', now() - interval '2 days')",
        )
        .await
        .unwrap();
    let link = tempfile::tempdir().unwrap();
    let through = link.path().join("plugins");
    std::os::unix::fs::symlink(plugins.path(), &through).unwrap();
    let mut host = HostProc::spawn(&db, &through, &[]);
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys", 3, Duration::from_secs(30)).await;
    let files = db.client.query("SELECT file FROM almanac.refused_deploys ORDER BY file", &[]).await.unwrap();
    let files: Vec<String> = files.iter().map(|r| r.get(0)).collect();
    let dir = plugins.path().canonicalize().unwrap().display().to_string();
    assert_eq!(files, [format!("{dir}/evil\x1b[2J\nhost ok.wasm"), format!("{dir}/odd\u{fffd}.wasm"), format!("{dir}/odd\u{fffd}.wasm (2)")]);

    assert!(!host.log().lines().any(|l| l.starts_with("host ok.wasm")), "a file name forged a log line:\n{}", host.log());
    let (code, out, _) = almanac(&db.url, &["status"]);
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains('\x1b'), "an escape sequence reached the terminal:\n{out}");
    let refused: Vec<&str> = out.lines().filter(|l| l.starts_with("refused deploy: ")).collect();
    assert_eq!(refused.len(), 3, "one line each:\n{out}");
    assert!(refused.iter().any(|l| l.contains("evil\\x1b[2J\\nhost ok.wasm")), "{out}");

    let (code, out, _) = almanac(&db.url, &["status", "--json"]);
    assert_eq!(code, 1, "{out}");
    let deploys: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|v| v["refused_deploy"] == true).collect();
    assert_eq!(deploys.len(), 3, "{out}");
    assert!(deploys.iter().all(|d| d["stale"] == false && d["task"].is_null() && d["reason"].as_str().unwrap().contains("not a WebAssembly file")));

    // Restarted on the folder's own path: the same rows, not a second set.
    host.signal(libc::SIGKILL);
    host.wait(Duration::from_secs(10)).await;
    db.client.batch_execute("UPDATE almanac.refused_deploys SET seen_at = now() - interval '5 minutes'").await.unwrap();
    let host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0"]);
    db.wait_count("SELECT count(*) FROM almanac.refused_deploys WHERE seen_at > now() - interval '1 minute'", 3, Duration::from_secs(30)).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.refused_deploys").await, 3);

    // Many refusals on other hosts: the dashboard shows the first 50 and says how many.
    db.client
        .batch_execute(
            "INSERT INTO almanac.refused_deploys (host, dir, file, digest, reason)
             SELECT 'many', '/p', '/p/' || i || '.wasm', 'd', 'r' FROM generate_series(1, 60) i",
        )
        .await
        .unwrap();
    let base = format!("http://{}", host.listen_addr().await);
    let overview: serde_json::Value = serde_json::from_str(&reqwest::get(format!("{base}/api/overview")).await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(overview["refused_deploys"].as_array().unwrap().len(), 50);
    assert_eq!(overview["refused_deploys_total"], 63);
}
