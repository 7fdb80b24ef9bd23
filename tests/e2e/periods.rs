//! One business period, one effect (migration V11): a job's identity is (task, period,
//! key). For each kind of schedule change — time of day, day of month, weekday, zone,
//! catch-up policy — a task runs periods under the old calendar, the change is applied
//! while a host runs, then a backfill over the whole range, a catch-up after an outage
//! spanning the change and enqueues of old periods (SQL and CLI) add nothing: every
//! (period, account) ran once, and its outbox message has one key across the change.
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::support::{plugin_dir, HostProc, TestDb};

const TASK: &str = "points-notify";
const ACCOUNTS: i64 = 3;

fn almanac(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    crate::support::almanac(&db.url, args)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The slot starts of the task's stored schedule in [from, to), as `almanac slots` lists them.
fn slots(db: &TestDb, from: &str, to: &str) -> Vec<DateTime<Utc>> {
    let (code, out, err) = almanac(db, &["slots", TASK, "--from", from, "--to", to, "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["start"].as_str().unwrap().parse().unwrap()).collect()
}

async fn generated(db: &TestDb) -> Vec<(String, i64)> {
    let rows = db.client.query("SELECT period, revision FROM almanac.slots WHERE task = $1 AND status = 'generated' ORDER BY period", &[&TASK]).await.unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// Wait until the stored cursor has reached `through` and every job is done.
async fn caught_up(db: &TestDb, through: DateTime<Utc>) {
    let sql = format!(
        "SELECT (EXISTS (SELECT 1 FROM almanac.schedules WHERE task = '{TASK}' AND generated_through >= '{}')
                 AND NOT EXISTS (SELECT 1 FROM almanac.jobs WHERE status <> 'done'))::int::bigint",
        through.to_rfc3339()
    );
    db.wait_count(&sql, 1, Duration::from_secs(60)).await;
}

/// Every period generated once, each of its accounts' jobs run once, one message each.
async fn one_effect_per_period(db: &TestDb, periods: &[(String, i64)]) {
    let n = periods.len() as i64;
    let twice = "SELECT count(*) FROM (SELECT period, key FROM almanac.jobs GROUP BY 1, 2 HAVING count(*) > 1) t";
    assert_eq!(db.count(twice).await, 0, "a (period, key) with two jobs");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'done' AND attempts = 1").await, n * ACCOUNTS);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, n * ACCOUNTS);
    assert_eq!(db.count("SELECT count(*) FROM notify_ledger").await, n * ACCOUNTS);
    assert_eq!(db.count(&format!("SELECT count(*) FROM accounts WHERE points = {}", 10 * n)).await, ACCOUNTS);
    // The receiver's key names the period, so it is the same whatever instant ran it.
    let keys: Vec<String> = db.client.query("SELECT key FROM almanac.outbox ORDER BY key", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let mut want: Vec<String> = periods.iter().flat_map(|(p, _)| (1..=ACCOUNTS).map(move |a| format!("{TASK}/{p}/{a}"))).collect();
    want.sort();
    assert_eq!(keys, want);
}

/// The scenario for one change: `old` and `new` are the task's lines in almanac.toml.
async fn no_period_twice_across(old: &str, new: &str, hours_back: i64, min_periods: usize) {
    let moves_calendar = old.lines().filter(|l| !l.starts_with("catch_up")).ne(new.lines().filter(|l| !l.starts_with("catch_up")));
    let db = TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let dir = tempfile::tempdir().unwrap();
    let start = (Utc::now() - chrono::Duration::hours(hours_back)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let head = format!("[tasks.{TASK}]\nstart_at = \"{start}\"\nhorizon = \"400d\"\n");
    let (old_file, new_file) = (write(&dir, "old.toml", &format!("{head}{old}")), write(&dir, "new.toml", &format!("{head}{new}")));
    let plugins = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let folder = plugins.path().display().to_string();

    // The old calendar catches up from start_at.
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &old_file]);
    db.wait_count(&format!("SELECT count(*) FROM almanac.schedules WHERE task = '{TASK}'"), 1, Duration::from_secs(60)).await;
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let old_slots = slots(&db, &start, &now);
    assert!(old_slots.len() >= min_periods, "{old}: {} slots since {start}", old_slots.len());
    caught_up(&db, *old_slots.last().unwrap()).await;
    let before = generated(&db).await;
    assert!(before.len() >= min_periods && before.iter().all(|(_, r)| *r == 1), "{before:?}");

    // The change, applied while the host runs; the host follows it.
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &new_file, "--reason", "moved"]);
    assert_eq!(code, 0, "{out}{err}");
    host.wait_log("schedule changed; this host follows it", Duration::from_secs(30)).await;

    // A backfill over the whole range under the new calendar: every period is there.
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (code, out, err) = almanac(&db, &["backfill", TASK, "--from", &start, "--to", &now, "--plugins", &folder, "--config", &new_file]);
    assert_eq!(code, 0, "{err}");
    // Periods the old calendar generated that the new one has a slot of in the range are
    // passed over, each named with its revision (a period only one of the calendars
    // reaches, at the range's edges, may be new or absent).
    let (_, listed, _) = almanac(&db, &["slots", TASK, "--from", &start, "--to", &now, "--json"]);
    let reached: Vec<String> = listed.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["period"].as_str().unwrap().to_owned()).collect();
    let overlap: Vec<&String> = before.iter().map(|(p, _)| p).filter(|p| reached.contains(p)).collect();
    assert!(overlap.len() + 1 >= before.len(), "{new}: the new calendar reaches {reached:?} of {before:?}");
    for period in overlap {
        assert_eq!(out.matches(&format!("{period} (revision 1)")).count(), 1, "{new}: {period} passed over once, whatever its slots: {out}");
    }

    // An outage spanning the change: the cursor back where the old calendar started,
    // a host with the new file catches up.
    host.stop().await;
    let (code, _, err) = almanac(&db, &["cursor", TASK, "--to", &start, "--reason", "outage"]);
    assert_eq!(code, 0, "{err}");
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &new_file]);
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let new_slots = slots(&db, &start, &now);
    caught_up(&db, *new_slots.last().unwrap()).await;

    // Old periods enqueued again: at the new calendar's instant (SQL) and the old (CLI).
    let again: bool = db.client.query_one(&format!("SELECT almanac.enqueue('{TASK}', $1, '1')"), &[&new_slots[0]]).await.unwrap().get(0);
    assert!(!again, "the SQL enqueue of an old period at the new instant created a job");
    let (_, out, err) = almanac(&db, &["enqueue", TASK, "--slot", &old_slots[0].to_rfc3339(), "--key", "2"]);
    assert_eq!(out.trim(), "already present (no-op)", "{err}");
    host.stop().await;

    // The old periods kept their revision; any other is one only the new calendar
    // reached. Each ran once for each account.
    let after = generated(&db).await;
    for period in &before {
        assert!(after.contains(period), "{period:?} not kept as generated under revision 1: {after:?}");
    }
    one_effect_per_period(&db, &after).await;
    // `status` says how many periods ran under a calendar since changed.
    let (_, out, _) = almanac(&db, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(out.lines().find(|l| l.contains(TASK)).unwrap()).unwrap();
    let older = if moves_calendar { before.len() as i64 } else { 0 };
    assert_eq!(status["older_calendar"].as_i64(), Some(older), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_monthly_task_moved_to_another_hour_bills_no_month_twice() {
    let tz = "zone = \"Europe/Berlin\"\n";
    no_period_twice_across(&format!("cron = \"0 9 1 * *\"\n{tz}"), &format!("cron = \"0 10 1 * *\"\n{tz}"), 100 * 24, 3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_monthly_task_moved_to_another_day_bills_no_month_twice() {
    let tz = "zone = \"Europe/Berlin\"\n";
    no_period_twice_across(&format!("cron = \"0 9 1 * *\"\n{tz}"), &format!("cron = \"0 9 2 * *\"\n{tz}"), 100 * 24, 3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_weekly_task_moved_to_another_weekday_runs_no_week_twice() {
    let tz = "zone = \"Europe/Berlin\"\n";
    no_period_twice_across(&format!("cron = \"0 9 * * MON\"\n{tz}"), &format!("cron = \"0 9 * * WED\"\n{tz}"), 30 * 24, 4).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daily_task_moved_to_another_zone_runs_no_day_twice() {
    no_period_twice_across("cron = \"0 12 * * *\"\nzone = \"Europe/Berlin\"\n", "cron = \"0 12 * * *\"\nzone = \"America/New_York\"\n", 6 * 24, 5).await;
}

/// Every slot its own period (an hourly task): a zone moved by whole hours names each
/// instant anew (`…T09:00+01:00` becomes `…T08:00+00:00`), and an instant the ledger
/// holds stays the period it was.
#[tokio::test(flavor = "multi_thread")]
async fn an_hourly_task_moved_to_another_zone_runs_no_hour_twice() {
    no_period_twice_across("cron = \"0 * * * *\"\nzone = \"Europe/Berlin\"\n", "cron = \"0 * * * *\"\nzone = \"Europe/London\"\n", 8, 6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daily_task_with_another_catch_up_policy_runs_no_day_twice() {
    let cron = "cron = \"30 6 * * *\"\nzone = \"Asia/Tokyo\"\n";
    no_period_twice_across(&format!("{cron}catch_up = \"all\"\n"), &format!("{cron}catch_up = \"latest\"\n"), 6 * 24, 5).await;
}

/// A change of period unit is a new identity space: refused without --period-from, and
/// with one inside the old unit's last period; recorded with it. Instants before that
/// day keep the old unit's periods, after it the new unit's.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_of_period_unit_needs_its_first_day() {
    use chrono::Datelike;
    let db = TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let dir = tempfile::tempdir().unwrap();
    let start = (Utc::now() - chrono::Duration::days(70)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let head = format!("[tasks.{TASK}]\nstart_at = \"{start}\"\nhorizon = \"400d\"\ncron = \"0 9 1 * *\"\nzone = \"UTC\"\n");
    let monthly = write(&dir, "monthly.toml", &head);
    let daily = write(&dir, "daily.toml", &format!("{head}period = \"day\"\n"));
    let plugins = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let folder = plugins.path().display().to_string();
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &monthly]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &daily]);
    assert_eq!(code, 1);
    assert!(err.contains("the period changes from month to day") && err.contains("--period-from YYYY-MM-DD"), "{err}");
    let cursor: DateTime<Utc> = db.client.query_one("SELECT generated_through FROM almanac.schedules", &[]).await.unwrap().get(0);
    let month_end = cursor.date_naive().with_day(1).unwrap().checked_add_months(chrono::Months::new(1)).unwrap();
    let (code, _, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &daily, "--period-from", &cursor.date_naive().to_string()]);
    assert!(code == 1 && err.contains(&format!("the new unit may start on {month_end} at the earliest")), "{err}");
    let from = month_end.to_string();
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &daily, "--period-from", &from]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("period \"month\" -> \"day\""), "{out}");
    let after: serde_json::Value = db.client.query_one("SELECT after FROM almanac.changes ORDER BY id DESC LIMIT 1", &[]).await.unwrap().get(0);
    assert_eq!((after["period_from"].as_str(), after["period_before"].as_str()), (Some(from.as_str()), Some("month")));
    // Before that day an instant is the old unit's month, from it on a day.
    let early = cursor + chrono::Duration::hours(1);
    let late: DateTime<Utc> = format!("{from}T12:00:00Z").parse().unwrap();
    for at in [early, late] {
        let made: bool = db.client.query_one(&format!("SELECT almanac.enqueue('{TASK}', $1, '1', off_calendar => true)"), &[&at]).await.unwrap().get(0);
        assert!(made);
    }
    let periods: Vec<String> = db.client.query("SELECT period FROM almanac.jobs ORDER BY slot", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(periods, vec![early.format("%Y-%m").to_string(), from.clone()]);
}

/// A backfill obeys the horizon it documents, and names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_backfill_past_the_horizon_is_refused() {
    let db = TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "a.toml", &format!("[tasks.{TASK}]\ncron = \"0 9 1 * *\"\nzone = \"Europe/Berlin\"\n"));
    let plugins = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let folder = plugins.path().display().to_string();
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &file]);
    assert_eq!(code, 0, "{out}{err}");
    let from = (Utc::now() - chrono::Duration::days(340)).date_naive().to_string();
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (code, out, err) = almanac(&db, &["backfill", TASK, "--from", &from, "--to", &now, "--plugins", &folder, "--config", &file]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("past points-notify's backfill horizon of 30d"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 0);

    // Within the horizon, with ./almanac.toml read as every other command reads it: run
    // elsewhere, the plugin's own schedule disagrees with the stored one and is refused.
    let from = (Utc::now() - chrono::Duration::days(20)).date_naive().to_string();
    let backfill = |cwd: &std::path::Path| {
        let out = std::process::Command::new(crate::support::almanac_bin())
            .args(["backfill", TASK, "--from", &from, "--to", &now, "--plugins", &folder])
            .env("DATABASE_URL", &db.url)
            .current_dir(cwd)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, _, err) = backfill(elsewhere.path());
    assert!(code == Some(1) && err.contains("this folder and file say cron \"0 0 * * *\""), "{err}");
    std::fs::copy(&file, dir.path().join("almanac.toml")).unwrap();
    let (code, out, err) = backfill(dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("periods generated"), "{out}");
}

/// The default period unit in SQL (for schedules inserted by hand, and the rows V11
/// found) says what the host's says: the cases of calendar::period's unit test.
#[tokio::test(flavor = "multi_thread")]
async fn the_database_derives_the_same_default_period() {
    let db = TestDb::new().await;
    let cases = [
        ("0 9 1 * *", "month"),
        ("0 0 9 1 * *", "month"),
        ("0 9 1 */3 *", "quarter"),
        ("0 9 1 1,4,7,10 *", "quarter"),
        ("0 9 15 6 *", "year"),
        ("0 9 * * MON", "week"),
        ("0 9 * * 1", "week"),
        ("0 9 * * 1-5", "day"),
        ("0 9 * * *", "day"),
        ("0 9 1,15 * *", "day"),
        ("*/15 * * * *", "slot"),
    ];
    for (cron, want) in cases {
        let got: String = db.client.query_one("SELECT almanac.default_period($1)", &[&cron]).await.unwrap().get(0);
        assert_eq!(got, want, "{cron}");
    }
    // Labels in SQL as the host names them (calendar::period, and the slot labels of
    // calendar's tests): ISO weeks across a year, a quarter in the zone, both copies of a
    // repeated hour told apart by their offsets.
    let cases = [
        ("week", "UTC", "2027-01-01T09:00:00Z", "2026-W53"),
        ("quarter", "Europe/Berlin", "2026-09-30T22:30:00Z", "2026-Q4"),
        ("month", "Asia/Shanghai", "2026-11-30T16:00:00Z", "2026-12"),
        ("slot", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-01T01:30-04:00"),
        ("slot", "America/New_York", "2026-11-01T06:30:00Z", "2026-11-01T01:30-05:00"),
        ("slot", "Asia/Kolkata", "2026-11-01T05:30:15Z", "2026-11-01T11:00:15+05:30"),
        ("slot", "UTC", "2026-12-03T10:11:12.5Z", "2026-12-03T10:11:12.500+00:00"),
        ("slot", "UTC", "2026-12-03T10:11:12.000250Z", "2026-12-03T10:11:12.000250+00:00"),
    ];
    for (unit, zone, at, want) in cases {
        let at: DateTime<Utc> = at.parse().unwrap();
        let got: String = db.client.query_one("SELECT almanac.period_label($1, $2, $3)", &[&unit, &zone, &at]).await.unwrap().get(0);
        assert_eq!(got, want, "{unit} {zone} {at}");
    }
}

/// Migration V11 on a database the bug had already hit: November generated under two
/// instants (09:00 and, after a move, 10:00 Berlin), one of its second jobs still
/// pending. The upgrade names every job's period, keeps one ledger row per period, and
/// discards the pending duplicate instead of paying it; a host then runs nothing twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_v10_database_upgrades_to_periods_losing_and_rerunning_nothing() {
    let admin = crate::support::connect(&crate::support::cluster().url("postgres")).await;
    let name = format!("periods_v10_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let url = crate::support::cluster().url(&name);
    let (code, out, err) = crate::support::almanac(&url, &["migrate", "--to", "10"]);
    assert_eq!((code, out.trim()), (0, "10 migration(s) applied"), "{err}");
    let db = TestDb { name: name.clone(), client: crate::support::connect(&url).await, url };
    db.accounts(2).await;
    db.client
        .batch_execute(
            "INSERT INTO almanac.schedules (task, cron, zone, generated_through)
             VALUES ('points-notify', '0 10 1 * *', 'Europe/Berlin', '2026-12-01T09:00:00Z');
             INSERT INTO almanac.changes (task, revision, action, after, origin, at)
             VALUES ('points-notify', 1, 'register', '{\"cron\": \"0 9 1 * *\", \"zone\": \"Europe/Berlin\"}', 'test', '2026-01-01');
             INSERT INTO almanac.slots (task, slot, status, jobs, generated_at) VALUES
               ('points-notify', '2026-11-01T08:00:00Z', 'generated', 2, '2026-11-01T08:00:00Z'),
               ('points-notify', '2026-12-01T08:00:00Z', 'generated', 2, '2026-12-01T08:00:00Z'),
               ('points-notify', '2026-11-01T09:00:00Z', 'generated', 2, '2026-12-02T08:00:00Z');
             INSERT INTO almanac.jobs (task, slot, key, status, attempts) VALUES
               ('points-notify', '2026-11-01T08:00:00Z', '1', 'done', 1), ('points-notify', '2026-11-01T08:00:00Z', '2', 'done', 1),
               ('points-notify', '2026-12-01T08:00:00Z', '1', 'done', 1), ('points-notify', '2026-12-01T08:00:00Z', '2', 'pending', 0),
               ('points-notify', '2026-11-01T09:00:00Z', '1', 'done', 1), ('points-notify', '2026-11-01T09:00:00Z', '2', 'pending', 0);",
        )
        .await
        .unwrap();
    let (code, out, err) = crate::support::almanac(&db.url, &["migrate"]);
    assert_eq!((code, out.trim()), (0, crate::support::migrations_applied_after(10).as_str()), "{err}");
    let jobs: Vec<(String, String, String)> = db
        .client
        .query("SELECT period, key, status FROM almanac.jobs ORDER BY slot, key", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let job = |p: &str, k: &str, s: &str| (p.to_owned(), k.to_owned(), s.to_owned());
    assert_eq!(
        jobs,
        vec![
            job("2026-11", "1", "done"),
            job("2026-11", "2", "done"),
            // The bug's second November, already paid for account 1; account 2's would
            // have paid twice.
            job("2026-11", "1", "done"),
            job("2026-11", "2", "discarded"),
            job("2026-12", "1", "done"),
            job("2026-12", "2", "pending"),
        ]
    );
    let ledger: Vec<(String, DateTime<Utc>, i64)> = db
        .client
        .query("SELECT period, slot, revision FROM almanac.slots ORDER BY period", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    assert_eq!(ledger, vec![("2026-11".into(), at("2026-11-01T08:00:00Z"), 1), ("2026-12".into(), at("2026-12-01T08:00:00Z"), 1)]);
    db.counts_agree().await;
    // November at the new calendar's instant is November: nothing new.
    let again: bool =
        db.client.query_one("SELECT almanac.enqueue('points-notify', '2026-11-01T09:00:00Z', '2', off_calendar => true)", &[]).await.unwrap().get(0);
    assert!(!again);

    // A host runs December's pending job and nothing else.
    let plugins = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "a.toml", "[tasks.points-notify]\ncron = \"0 10 1 * *\"\nzone = \"Europe/Berlin\"\n");
    let mut host = HostProc::spawn(&db, plugins.path(), &["--config", &file]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 5, Duration::from_secs(60)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'pending'").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM notify_ledger").await, 1, "only December's account 2 ran");
    db.counts_agree().await;
}

/// A forgotten task's ledger stays as evidence; registering the task again with another
/// period unit would leave every period it ran unrecognised, so it is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_forgotten_task_comes_back_only_with_its_period_unit() {
    let db = TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let dir = tempfile::tempdir().unwrap();
    let head = format!("[tasks.{TASK}]\ncron = \"0 9 1 * *\"\nzone = \"UTC\"\n");
    let monthly = write(&dir, "monthly.toml", &head);
    let daily = write(&dir, "daily.toml", &format!("{head}period = \"day\"\n"));
    let plugins = plugin_dir(&["points_notify"]);
    db.configured_topic("points-awarded").await;
    let folder = plugins.path().display().to_string();
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &monthly]);
    assert_eq!(code, 0, "{out}{err}");
    let made: bool =
        db.client.query_one(&format!("SELECT almanac.enqueue('{TASK}', '2026-11-01T09:00:00Z', '1', off_calendar => true)"), &[]).await.unwrap().get(0);
    assert!(made);
    let (code, _, err) = almanac(&db, &["forget", TASK, "--discard-pending", "--reason", "retired"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &daily]);
    assert_eq!(code, 1);
    assert!(err.contains("it was forgotten with periods of a month (the latest \"2026-11\")") && err.contains("Declare period = \"month\""), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules").await, 0);
    let (code, out, err) = almanac(&db, &["apply", "--plugins", &folder, "--config", &monthly]);
    assert_eq!(code, 0, "{out}{err}");
    let again: bool =
        db.client.query_one(&format!("SELECT almanac.enqueue('{TASK}', '2026-11-20T00:00:00Z', '1', off_calendar => true)"), &[]).await.unwrap().get(0);
    assert!(!again, "November's key 1 is still November's");
}
