//! Upgrading a plugin without a restart: a new version that adds a setting is refused by
//! hot reload with the difference named first; `almanac apply` stores the new settings,
//! and the running host then loads the waiting version by itself. And a reload reads the
//! configuration file as it is on disk now.
use std::time::Duration;

use crate::support::{almanac, built_plugins, plugin_dir, HostProc, TestDb};

#[tokio::test(flavor = "multi_thread")]
async fn a_version_that_adds_a_setting_loads_after_apply_without_a_restart() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_settings"]);
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.fixture-settings.settings]\napi-key = \"k1\"\n").unwrap();
    let config = config.display().to_string();
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &config]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'fixture-settings'", 1, Duration::from_secs(30)).await;

    // The new version replaces the file (renamed into place, as a deploy does).
    let next = plugins.path().join("next.tmp");
    std::fs::copy(built_plugins().join("fixture_settings_v2.wasm"), &next).unwrap();
    std::fs::rename(&next, plugins.path().join("fixture_settings.wasm")).unwrap();
    host.wait_log("plugin not reloaded", Duration::from_secs(30)).await;
    let log = host.log();
    let line = log.lines().find(|l| l.contains("plugin not reloaded")).unwrap();
    let difference = "task \"fixture-settings\" differs from the schedule every host runs by: setting farewell (none) -> \"bye\" (stored -> here)";
    assert!(line.contains(difference), "the difference comes first:\n{line}");
    assert!(line.contains("version 0.0.0"), "and which version keeps serving:\n{line}");

    // The deploy's second step: apply the folder as it is now. The running host follows.
    let (code, out, err) = almanac(&db.url, &["apply", "--plugins", &plugins.path().display().to_string(), "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("farewell"), "{out}");
    host.wait_log("task=fixture-settings version=0.2.0", Duration::from_secs(30)).await;
    db.enqueue("fixture-settings", "2026-03-07T16:00:00Z", &["after-upgrade"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE key = 'after-upgrade' AND status = 'done'", 1, Duration::from_secs(30)).await;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(std::fs::read(built_plugins().join("fixture_settings_v2.wasm")).unwrap()));
    assert_eq!(db.count(&format!("SELECT count(*) FROM almanac.jobs WHERE key = 'after-upgrade' AND plugin_digest = '{digest}'")).await, 1, "run by 0.2.0");
    assert!(host.is_running(), "no restart");

    // The configuration file on disk, not the one read at start: a changed greeting that
    // disagrees with the stored settings is refused naming that difference, then applied.
    std::fs::write(&config, "[tasks.fixture-settings.settings]\napi-key = \"k1\"\ngreeting = \"hi\"\n").unwrap();
    std::fs::copy(built_plugins().join("fixture_settings.wasm"), plugins.path().join("fixture_settings.wasm.tmp")).unwrap();
    std::fs::rename(plugins.path().join("fixture_settings.wasm.tmp"), plugins.path().join("fixture_settings.wasm")).unwrap();
    host.wait_log("setting greeting \"hello\" -> \"hi\"", Duration::from_secs(30)).await;
    host.stop().await;
}
