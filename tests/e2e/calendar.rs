//! Which period: downtime and catch-up policies, time-zone independence, backfill,
//! configuration errors. Real hosts, real PostgreSQL.
use std::time::Duration;

use almanac::calendar::Schedule;
use chrono::{DateTime, Utc};

use crate::support::{almanac_bin, plugin_dir, HostProc, TestDb};

fn shanghai_midnights() -> Schedule {
    Schedule::new("0 0 * * *", "Asia/Shanghai").unwrap()
}

/// The newest daily slot that has started, by the database's clock.
async fn latest_slot(db: &TestDb) -> DateTime<Utc> {
    let now: DateTime<Utc> = db.client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let schedule = shanghai_midnights();
    schedule.slots_after(now - chrono::Duration::days(2)).take_while(|s| s.start <= now).last().expect("a midnight in the last two days").start
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_days_of_downtime_catch_up_as_the_policy_says() {
    let plugins = plugin_dir(&["daily_points"]);
    let mut runs = Vec::new();
    for (policy, generated) in [("all", 10), ("latest", 1), ("window=3d", 3)] {
        let db = TestDb::new().await;
        db.accounts(2).await;
        let latest = latest_slot(&db).await;
        db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", latest - chrono::Duration::days(10)).await;
        // As the first host to load it registered it: with the file's policy.
        db.client.execute("UPDATE almanac.schedules SET catch_up = $1", &[&policy]).await.unwrap();
        let config = config_file(&format!("[tasks.daily-points]\ncatch_up = \"{policy}\"\n"));
        let host = HostProc::spawn(&db, plugins.path(), &["--config", config.path().to_str().unwrap()]);
        runs.push((policy, generated, db, host, config, latest));
    }
    for (policy, generated, db, mut host, _config, latest) in runs {
        db.wait_count("SELECT count(*) FROM almanac.slots", 10, Duration::from_secs(30)).await;
        db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 2 * generated, Duration::from_secs(30)).await;
        let got = db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated'").await;
        assert_eq!(got, generated, "{policy}: generated slots");
        assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 2 * generated, "{policy}: jobs");
        let cursor: DateTime<Utc> = db.client.query_one("SELECT generated_through FROM almanac.schedules", &[]).await.unwrap().get(0);
        assert_eq!(cursor, latest, "{policy}: cursor");
        // The newest slots are the generated ones; every skip says why.
        let newest: DateTime<Utc> = db.client.query_one("SELECT min(slot) FROM almanac.slots WHERE status = 'generated'", &[]).await.unwrap().get(0);
        assert_eq!(newest, latest - chrono::Duration::days(generated - 1), "{policy}");
        let unexplained = db.count("SELECT count(*) FROM almanac.slots WHERE status = 'skipped' AND reason IS NULL").await;
        assert_eq!(unexplained, 0);
        if policy == "latest" {
            let reason: String = db.client.query_one("SELECT min(reason) FROM almanac.slots WHERE status = 'skipped'", &[]).await.unwrap().get(0);
            assert_eq!(reason, "catch-up latest: a newer slot is due");
        }
        assert_eq!(db.client.query_one("SELECT count(*) FROM accounts WHERE points <> $1", &[&(10 * generated)]).await.unwrap().get::<_, i64>(0), 0);
        host.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slots_do_not_depend_on_the_process_or_session_time_zone() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    db.client.batch_execute(&format!("ALTER DATABASE {} SET timezone TO 'Pacific/Kiritimati'", db.name)).await.unwrap();
    let latest = latest_slot(&db).await;
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", latest - chrono::Duration::days(3)).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn_with_env(&db, plugins.path(), &[], &[("TZ", "America/Los_Angeles"), ("PGTZ", "Asia/Kolkata")]);
    db.wait_count("SELECT count(*) FROM almanac.slots", 3, Duration::from_secs(30)).await;
    host.stop().await;
    let stored: Vec<DateTime<Utc>> = db.client.query("SELECT slot FROM almanac.slots ORDER BY slot", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let expected: Vec<DateTime<Utc>> = (0..3).rev().map(|d| latest - chrono::Duration::days(d)).collect();
    assert_eq!(stored, expected);
    // Shanghai midnight is 16:00 UTC the day before, whatever the zones around it.
    assert!(stored.iter().all(|t| t.format("%H:%M:%S").to_string() == "16:00:00"), "{stored:?}");

    // The preview says the same under any TZ.
    let preview = |tz: &str| {
        let out = std::process::Command::new(almanac_bin())
            .args(["slots", "--cron", "30 2 * * *", "--zone", "America/New_York", "--from", "2026-03-07", "--to", "2026-03-10", "--json"])
            .env("TZ", tz)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let reference = preview("UTC");
    assert_eq!(preview("Asia/Tokyo"), reference);
    assert_eq!(preview("America/New_York"), reference);
    assert_eq!(
        reference.lines().next().unwrap(),
        r#"{"start":"2026-03-07T07:30:00Z","end":"2026-03-08T07:00:00Z","local":"2026-03-07T02:30:00-05:00","label":"2026-03-07","period":"2026-03-07"}"#
    );
    // 02:30 does not exist on 2026-03-08: the slot is the first instant after the gap,
    // and it is still that day's slot.
    assert_eq!(
        reference.lines().nth(1).unwrap(),
        r#"{"start":"2026-03-08T07:00:00Z","end":"2026-03-09T06:30:00Z","local":"2026-03-08T03:00:00-04:00","label":"2026-03-08","period":"2026-03-08"}"#
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_day_that_never_happened_has_no_slot_and_lengths_read_as_days() {
    let slots = |args: &[&str]| {
        let out = std::process::Command::new(almanac_bin()).arg("slots").args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // Samoa skipped 2011-12-30: four slots for five calendar days, none for 2011-12-30,
    // which is named as outside the calendar.
    let apia = slots(&["--cron", "0 12 * * *", "--zone", "Pacific/Apia", "--from", "2011-12-28", "--to", "2012-01-02"]);
    let want = "\
LOCAL (Pacific/Apia)         UTC                       LENGTH  PERIOD (day)
2011-12-28 12:00:00 -10:00   2011-12-28 22:00:00Z          1d  2011-12-28
2011-12-29 12:00:00 -10:00   2011-12-29 22:00:00Z          1d  2011-12-29
2011-12-31 12:00:00 +14:00   2011-12-30 22:00:00Z          1d  2011-12-31
2012-01-01 12:00:00 +14:00   2011-12-31 22:00:00Z          1d  2012-01-01
outside the calendar (no slot, so no jobs): 2011-12-30
";
    assert_eq!(apia, want);
    let months = slots(&["--cron", "0 0 L * *", "--zone", "UTC", "--from", "2026-01-01", "--to", "2026-04-01"]);
    let lengths: Vec<&str> = months.lines().skip(1).map(|l| l.split_whitespace().nth(5).unwrap()).collect();
    assert_eq!(lengths, ["28d", "31d", "30d"], "{months}");
}

#[tokio::test(flavor = "multi_thread")]
async fn backfill_generates_a_range_once() {
    let db = TestDb::new().await;
    db.accounts(4).await;
    let plugins = plugin_dir(&["daily_points"]);
    let backfill = || {
        let out = std::process::Command::new(almanac_bin())
            .args(["backfill", "daily-points", "--from", "2026-03-01", "--to", "2026-03-04", "--plugins"])
            .arg(plugins.path())
            .env("DATABASE_URL", &db.url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        backfill().trim(),
        "backfill daily-points [2026-02-28T16:00:00Z .. 2026-03-03T16:00:00Z): 3 periods generated, 12 new jobs, 0 already present; 0 periods passed over"
    );
    assert_eq!(
        backfill().lines().next().unwrap(),
        "backfill daily-points [2026-02-28T16:00:00Z .. 2026-03-03T16:00:00Z): 0 periods generated, 0 new jobs, 0 already present; 3 periods passed over"
    );
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 12);
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated' AND reason = 'backfill' AND jobs = 4").await, 3);
    // A backfill generates a range; it does not make the task scheduled, so a failed one
    // (here: a range reaching into the future) leaves nothing behind either.
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules").await, 0);
    let failed = std::process::Command::new(almanac_bin())
        .args(["backfill", "daily-points", "--from", "2026-03-01", "--to", "2099-01-01", "--plugins"])
        .arg(plugins.path())
        .env("DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(!failed.status.success() && String::from_utf8_lossy(&failed.stderr).contains("is in the future"));
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules").await, 0, "no schedule row left behind");
}

#[tokio::test(flavor = "multi_thread")]
async fn configuration_mistakes_stop_the_start_and_name_the_line() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["daily_points"]);
    let cases = [
        (
            "[tasks.daily-points]\ncron = \"0 0 * * *\"\n\n[tasks.nope]\npaused = true\n",
            ":4: unknown task \"nope\" (loaded: daily-points; no host has registered it)",
        ),
        ("[tasks.daily-points]\nzone = \"Asia/Shanghai\"\ncron = \"0 25 * * *\"\n", ":3: invalid cron expression \"0 25 * * *\""),
        ("[tasks.daily-points]\nzone = \"Mars/Olympus\"\n", ":2: unknown time zone \"Mars/Olympus\""),
        ("[tasks.daily-points]\ncatch_up = \"sometimes\"\n", ":2: catch_up \"sometimes\": expected all, latest or window=<duration>"),
        ("[tasks.daily-points]\ncolour = \"red\"\n", ": TOML parse error at line 2, column 1"),
    ];
    for (text, expected) in cases {
        let config = config_file(text);
        let mut host = HostProc::spawn(&db, plugins.path(), &["--config", config.path().to_str().unwrap()]);
        let status = host.wait(Duration::from_secs(30)).await;
        assert!(!status.success());
        let log = host.log();
        let wanted = format!("error: {}{expected}", config.path().display());
        assert!(log.contains(&wanted), "want {wanted:?} in:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn schedules_can_be_listed_previewed_paused_and_resumed() {
    let db = TestDb::new().await;
    db.schedule("daily-points", "0 0 * * *", "Asia/Shanghai", "2026-03-01T16:00:00Z".parse().unwrap()).await;
    let almanac = |args: &[&str]| {
        let (code, stdout, stderr) = crate::support::almanac(&db.url, args);
        (code == 0, stdout, stderr)
    };
    assert_eq!(
        almanac(&["pause", "daily-points"]).1.trim(),
        "daily-points paused: no new slots are generated; jobs already generated or enqueued still run (`almanac hold daily-points` stops them)"
    );
    let (ok, listed, _) = almanac(&["schedules", "--json"]);
    assert!(ok);
    let line: serde_json::Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(line["paused"], true);
    assert_eq!(line["cursor"], "2026-03-01T16:00:00Z");
    assert_eq!(line["next_slot"], "2026-03-02T16:00:00Z");
    assert_eq!(line["next_slot_local"], "2026-03-03T00:00:00+08:00");
    assert_eq!(almanac(&["resume", "daily-points"]).1.trim(), "daily-points resumed: its slots are generated again, catching up per its policy");
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE paused").await, 0);
    let (ok, _, err) = almanac(&["pause", "nope"]);
    assert!(!ok);
    assert!(err.contains("no schedule for task \"nope\" (known: daily-points)"), "{err}");
    // A task's preview uses its schedule as stored.
    let (ok, preview, _) = almanac(&["slots", "daily-points", "--from", "2026-03-08", "--to", "2026-03-10", "--json"]);
    assert!(ok);
    let starts: Vec<String> = preview.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["start"].as_str().unwrap().to_owned()).collect();
    assert_eq!(starts, ["2026-03-07T16:00:00Z", "2026-03-08T16:00:00Z"]);
}
