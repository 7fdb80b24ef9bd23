//! Business calendars: holiday calendars from iCalendar files, business-day rules and roll
//! conventions, checked against an independent oracle and through a real host.
use std::process::Command;

use crate::support::{almanac_bin, workspace};

/// `almanac slots` against tests/calendars/oracle.py (numpy's busday_offset, dateutil's
/// rrule, zoneinfo; its own iCalendar reading) over ten years: three calendars and their
/// union, every roll convention on the 1st, 25th and 31st, six business-day rules, and
/// every business day; a Friday-Saturday weekend with closed days beside Asia/Jerusalem's
/// fall-back (an ambiguous 01:30), a bridge day, a cancelled event, EXDATE, RDATE and a
/// moved occurrence.
#[test]
fn slots_agree_with_an_independent_oracle_over_ten_years() {
    let root = workspace();
    let out = Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/calendars/oracle.py"))
        .arg(almanac_bin())
        .output()
        .expect("run the oracle (scripts/bootstrap.sh --need-python installs numpy)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("88 cases") && text.contains(" 0 mismatch(es)"), "{text}");
}

fn slots(args: &[&str]) -> (bool, String) {
    let out = Command::new(almanac_bin()).arg("slots").args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_first_business_day_skips_holidays_and_says_why() {
    let berlin = workspace().join("tests/calendars/de-be.ics");
    let berlin = berlin.to_str().unwrap();
    let common = ["--cron", "0 6 * * *", "--zone", "Europe/Berlin", "--calendar", berlin, "--from", "2026-01-01", "--to", "2027-01-01"];
    let (ok, text) = slots(&[&common[..], &["--business-day", "1"]].concat());
    assert!(ok, "{text}");
    // Twelve months, one slot each, none on a holiday.
    assert_eq!(text.lines().filter(|l| l.starts_with("2026-")).count(), 12, "{text}");
    assert!(text.contains("2026-01-02 06:00:00 +01:00"), "{text}");
    assert!(text.contains("2026-05-04 06:00:00 +02:00"), "{text}");
    assert!(text.contains("2026-01-01 Thursday   holiday: Neujahr (de-be): slot on 2026-01-02"), "{text}");
    assert!(text.contains("calendars: de-be (version "), "{text}");
    // The 25th rolled back over a weekend stays December's.
    let (ok, text) = slots(&[&["--cron", "0 9 25 * *", "--roll", "preceding", "--json"][..], &common[2..]].concat());
    assert!(ok, "{text}");
    let december: serde_json::Value = text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).find(|l| l["period"] == "2026-12").unwrap();
    assert_eq!(december["business"]["date"], "2026-12-24", "{text}");
    assert_eq!(december["business"]["nominal"], "2026-12-25", "{text}");
    assert_eq!(december["business"]["business_day_of_month"], 18, "{text}");
    assert_eq!(december["business"]["last_business_day_of_month"], false, "{text}");
}

#[test]
fn cron_day_forms_that_do_not_know_holidays_are_refused_with_the_rule_to_use() {
    let berlin = workspace().join("tests/calendars/de-be.ics");
    let base = ["--zone", "Europe/Berlin", "--calendar", berlin.to_str().unwrap(), "--from", "2026-01-01", "--to", "2026-03-01"];
    for (cron, extra, says) in [
        ("0 6 LW * *", &[][..], "use business_day = 1 (first business day), -1 (last)"),
        ("0 6 1W * *", &[][..], "L, W and # days do not know the holidays"),
        ("0 6 * * 5L", &[][..], "L, W and # days do not know the holidays"),
        ("0 6 1 * *", &["--business-day", "1"][..], "the cron gives only the time, once a day"),
        ("0 * * * *", &["--roll", "following"][..], "needs a cron that fires once a day"),
        ("0 6 * * *", &["--roll", "nearest"][..], "expected following, modified-following, preceding, modified-preceding or skip"),
        ("0 6 * * *", &["--business-day", "0"][..], "give 1 for the first, -1 for the last"),
        ("0 6 * * *", &["--business-day", "24"][..], "within the days such a period has"),
        ("0 6 * * *", &["--weekend", "mon,tue,wed,thu,fri,sat,sun", "--business-day", "1"][..], "no day would ever be a business day"),
        ("0 6 * * *", &["--weekend", "caturday"][..], "expected weekday names"),
    ] {
        let (ok, text) = slots(&[&["--cron", cron][..], &base[..], extra].concat());
        assert!(!ok && text.contains(says), "{cron} {extra:?}: {text}");
    }
    let broken = tempfile::Builder::new().suffix(".ics").tempfile().unwrap();
    std::fs::write(broken.path(), "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20260101\nRRULE:FREQ=SOMETIMES\nSUMMARY:x\nEND:VEVENT\nEND:VCALENDAR\n")
        .unwrap();
    let (ok, text) =
        slots(&["--cron", "0 6 * * *", "--zone", "UTC", "--calendar", broken.path().to_str().unwrap(), "--from", "2026-01-01", "--to", "2026-02-01"]);
    assert!(!ok && text.contains("RRULE \"FREQ=SOMETIMES\""), "{text}");
}

const ACCOUNTS: i64 = 2;

/// What the task's stored schedule lists in [from, to): (start, period, business date).
fn listed(db: &crate::support::TestDb, from: &str, to: &str) -> Vec<(String, String, chrono::NaiveDate)> {
    let (code, out, err) = crate::support::almanac(&db.url, &["slots", "daily-points", "--from", from, "--to", to, "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let date = v["business"]["date"].as_str()?.parse().unwrap();
            Some((v["start"].as_str()?.to_owned(), v["period"].as_str()?.to_owned(), date))
        })
        .collect()
}

/// "First business day of the month, Europe/Berlin, de-be" through a year of catch-up:
/// every month exactly one period, none empty, none on a closed day. Then a holiday added
/// by `apply` on a day already generated moves that month's slot, and a backfill over
/// the year runs nothing twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_year_of_first_business_days_catches_up_once_and_a_calendar_change_runs_nothing_twice() {
    use std::time::Duration;

    use almanac::calendar::source::CalendarSource;
    use chrono::Utc;

    let db = crate::support::TestDb::new().await;
    db.accounts(ACCOUNTS).await;
    let dir = tempfile::tempdir().unwrap();
    let ics = workspace().join("tests/calendars/de-be.ics");
    let start = (Utc::now() - chrono::Duration::days(366)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let config = |extra: &str| {
        format!(
            "[tasks.daily-points]\nstart_at = \"{start}\"\nhorizon = \"400d\"\ncatch_up = \"all\"\ncron = \"0 6 * * *\"\nzone = \"Europe/Berlin\"\n\
             calendar = \"de-be\"\nbusiness_day = 1\n\n[calendars.de-be]\nics = \"{}\"\n{extra}",
            ics.display()
        )
    };
    let old = dir.path().join("old.toml");
    std::fs::write(&old, config("")).unwrap();
    let plugins = crate::support::plugin_dir(&["daily_points"]);
    let mut host = crate::support::HostProc::spawn(&db, plugins.path(), &["--config", old.to_str().unwrap()]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points' AND business IS NOT NULL", 1, Duration::from_secs(60)).await;
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let slots = listed(&db, &start, &now);
    assert!((12..=13).contains(&slots.len()), "{slots:?}");
    let want = slots.len() as i64 * ACCOUNTS;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", want, Duration::from_secs(120)).await;

    // One period a month, each with every account's job, none on a closed day.
    let berlin =
        CalendarSource { name: "de-be".into(), weekend: "sat,sun".into(), ics: Some(std::fs::read_to_string(&ics).unwrap()), dates: vec![] }.build().unwrap();
    let rows =
        db.client.query("SELECT period, (slot AT TIME ZONE 'Europe/Berlin')::date, count(*) FROM almanac.jobs GROUP BY 1, 2 ORDER BY 1", &[]).await.unwrap();
    assert_eq!(rows.len(), slots.len(), "one instant per period: {rows:?}");
    for (row, (_, period, date)) in rows.iter().zip(&slots) {
        let (p, d, n): (String, chrono::NaiveDate, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((&p, &d, n), (period, date, ACCOUNTS));
        assert!(berlin.closed(d).is_none(), "{p} ran on a closed day {d}: {:?}", berlin.closed(d));
        assert_eq!(d.format("%Y-%m").to_string(), p, "the first business day is in its own month");
    }
    let generated = db.count("SELECT count(*) FROM almanac.slots WHERE task = 'daily-points' AND status = 'generated'").await;
    assert_eq!(generated, slots.len() as i64);
    // The SQL enqueue checks slots against the business calendar: the cron's 06:00 on a
    // day that is not a month's first business day is refused, a slot of it is a no-op.
    let (newest_start, _, newest_slot_day) = slots.last().unwrap().clone();
    let next_day = (newest_start.parse::<chrono::DateTime<Utc>>().unwrap() + chrono::Duration::days(1)).to_rfc3339();
    let refused = db.client.query_one("SELECT almanac.enqueue('daily-points', $1::text::timestamptz, '1')", &[&next_day]).await.unwrap_err();
    assert_eq!(refused.code(), Some(&tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE), "{refused:?} ({newest_slot_day} + 1 day)");
    let again: bool = db.client.query_one("SELECT almanac.enqueue('daily-points', $1::text::timestamptz, '1')", &[&newest_start]).await.unwrap().get(0);
    assert!(!again, "a period's job exists already");

    // A holiday added on the newest generated day: that month's slot moves to the next
    // business day, and nothing of the year runs again.
    let (_, newest_period, newest_day) = slots.last().unwrap().clone();
    let new = dir.path().join("new.toml");
    std::fs::write(&new, config(&format!("dates = [\"{newest_day} Betriebsruhe\"]\n"))).unwrap();
    let folder = plugins.path().display().to_string();
    let (code, out, err) = crate::support::almanac(&db.url, &["apply", "--plugins", &folder, "--config", new.to_str().unwrap(), "--reason", "closed"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("business"), "the change names the calendar: {out}");
    assert!(out.contains("periods whose slot moves") && out.contains(&format!("    {newest_period}: ")), "{out}");
    host.wait_log("schedule changed; this host follows it", Duration::from_secs(30)).await;
    let moved = listed(&db, &start, &Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let month = moved.iter().find(|(_, p, _)| *p == newest_period);
    assert!(month.is_none_or(|(_, _, d)| *d > newest_day), "{newest_period} still on {newest_day}: {moved:?}");
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (code, out, err) = crate::support::almanac(
        &db.url,
        &["backfill", "daily-points", "--from", &start, "--to", &now, "--plugins", &folder, "--config", new.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}{err}");
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, want, "a job was added: {out}");
    let (_, status, _) = crate::support::almanac(&db.url, &["status"]);
    assert!(status.contains(&format!("    calendar changed: {} period(s) were generated under an older calendar", slots.len())), "{status}");
    assert_eq!(db.count("SELECT count(*) FROM (SELECT period, key FROM almanac.jobs GROUP BY 1, 2 HAVING count(*) > 1) t").await, 0);
    assert_eq!(db.count(&format!("SELECT count(*) FROM accounts WHERE points = {}", 10 * slots.len())).await, ACCOUNTS, "every account credited once a month");
}

/// A period whose plan returned no keys is `empty` in the ledger, not a quiet success:
/// `status` names it and exits 1 for a task that expects jobs (a business-day rule's
/// default), and a backfill once the data is there plans it again.
#[tokio::test(flavor = "multi_thread")]
async fn a_period_that_produced_nothing_is_recorded_empty_and_fails_status() {
    use std::time::Duration;

    use chrono::Utc;

    let db = crate::support::TestDb::new().await;
    db.accounts(0).await;
    let dir = tempfile::tempdir().unwrap();
    let start = (Utc::now() - chrono::Duration::days(95)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let ics = workspace().join("tests/calendars/de-be.ics");
    // A second calendar listing this year only: a warning, at start and in status.
    let year = chrono::Datelike::year(&Utc::now());
    let file = dir.path().join("almanac.toml");
    let text = format!(
        "[tasks.daily-points]\nstart_at = \"{start}\"\nhorizon = \"400d\"\ncatch_up = \"all\"\ncron = \"0 6 * * *\"\nzone = \"Europe/Berlin\"\n\
         calendar = [\"de-be\", \"firm\"]\nbusiness_day = -1\n\n[calendars.de-be]\nics = \"{}\"\n\n[calendars.firm]\ndates = [\"{year}-01-02 Inventur\"]\n",
        ics.display()
    );
    std::fs::write(&file, text).unwrap();
    let plugins = crate::support::plugin_dir(&["daily_points"]);
    // No accounts: every month's plan returns no keys.
    let mut host = crate::support::HostProc::spawn(&db, plugins.path(), &["--config", file.to_str().unwrap()]);
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    let months = listed(&db, &start, &Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).len() as i64;
    assert!((3..=4).contains(&months), "{months}");
    db.wait_count("SELECT count(*) FROM almanac.slots WHERE status = 'empty'", months, Duration::from_secs(60)).await;
    host.wait_log(&format!("calendar ending: firm lists dated holidays only through {year}-12-31"), Duration::from_secs(10)).await;
    host.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status <> 'empty'").await, 0);
    let (code, out, err) = crate::support::almanac(&db.url, &["status"]);
    assert_eq!(code, 1, "status must fail on a missed period: {out}{err}");
    assert!(out.contains(&format!("calendar: firm lists dated holidays only through {year}-12-31: extend it")), "{out}");
    assert!(out.contains(&format!("empty: {months} period(s) whose plan returned no keys")) && out.contains("the task expects jobs in every period"), "{out}");
    let (_, slots, _) = crate::support::almanac(&db.url, &["slots", "daily-points", "--from", &start, "--to", &Utc::now().to_rfc3339()]);
    assert_eq!(slots.matches("empty: its plan returned no keys").count() as i64, months, "{slots}");

    // The accounts arrive; a backfill plans the empty months again.
    db.client.batch_execute("INSERT INTO accounts VALUES (1, 0), (2, 0)").await.unwrap();
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let folder = plugins.path().display().to_string();
    let (code, out, err) = crate::support::almanac(
        &db.url,
        &["backfill", "daily-points", "--from", &start, "--to", &now, "--plugins", &folder, "--config", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots WHERE status = 'generated' AND jobs = 2").await, months, "{out}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 2 * months);
    let (code, out, err) = crate::support::almanac(&db.url, &["status"]);
    assert!(!out.contains("empty:"), "{out}{err}");
    assert_eq!(code, 0, "no period is empty any more: {out}");
}

/// `resume --dry-run` lists what a resume, or a host coming back, would do now under the
/// task's catch-up policy, and changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn resume_dry_run_lists_what_the_policy_would_generate_and_changes_nothing() {
    use chrono::Utc;

    let db = crate::support::TestDb::new().await;
    // Five midnights are due after the cursor, whatever the time of day.
    let now = Utc::now();
    let midnight = now.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    db.schedule("daily-points", "0 0 * * *", "UTC", midnight - chrono::Duration::days(5) + chrono::Duration::hours(1)).await;
    // A 50-hour window holds the midnights less than 50 hours old.
    let in_window = (0..5).filter(|k| now - (midnight - chrono::Duration::days(*k)) < chrono::Duration::hours(50)).count();
    for (policy, generated, skipped) in [("latest", 1, 4), ("window=50h", in_window, 5 - in_window), ("all", 5, 0)] {
        db.client.execute("UPDATE almanac.schedules SET catch_up = $1, paused = true", &[&policy]).await.unwrap();
        let (code, out, err) = crate::support::almanac(&db.url, &["resume", "daily-points", "--dry-run"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.contains(&format!("would generate {generated} period(s), skip {skipped} by the policy, pass over 0; nothing was changed")),
            "{policy}: {out}"
        );
        assert_eq!(out.matches("  skipped: catch-up").count(), skipped, "{policy}: {out}");
    }
    assert_eq!(db.count("SELECT count(*) FROM almanac.slots").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE paused").await, 1, "still paused");
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes").await, 0, "nothing recorded");
}

/// A host whose clock jumps — stopped by SIGSTOP for several periods, then continued —
/// catches up by its policy's cap, as a host coming back from an outage: with `latest`,
/// the newest due period is generated and the ones it slept through are skipped, each
/// recorded with the reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_stopped_for_several_periods_catches_up_by_its_policy_cap() {
    use std::time::Duration;

    use chrono::{DateTime, Utc};

    let db = crate::support::TestDb::new().await;
    db.accounts(1).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("almanac.toml");
    std::fs::write(&file, "[tasks.daily-points]\ncron = \"*/2 * * * * *\"\nzone = \"UTC\"\ncatch_up = \"latest\"\n").unwrap();
    let plugins = crate::support::plugin_dir(&["daily_points"]);
    let mut host = crate::support::HostProc::spawn(&db, plugins.path(), &["--config", file.to_str().unwrap()]);
    db.wait_count("SELECT least(count(*), 2) FROM almanac.slots WHERE status = 'generated'", 2, Duration::from_secs(60)).await;
    let now = "SELECT now()";
    let stopped: DateTime<Utc> = db.client.query_one(now, &[]).await.unwrap().get(0);
    host.signal(libc::SIGSTOP);
    // The outage itself: five periods of two seconds pass while the host is frozen.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let continued: DateTime<Utc> = db.client.query_one(now, &[]).await.unwrap().get(0);
    host.signal(libc::SIGCONT);
    let after = format!("SELECT least(count(*), 1) FROM almanac.slots WHERE status = 'generated' AND slot > '{}'", continued.to_rfc3339());
    db.wait_count(&after, 1, Duration::from_secs(30)).await;
    host.stop().await;
    // The periods that fell due while it was frozen (a margin of one period each side).
    let asleep = format!(
        "SELECT status, coalesce(reason, '') FROM almanac.slots WHERE slot > '{}' AND slot < '{}' ORDER BY slot",
        (stopped + chrono::Duration::seconds(2)).to_rfc3339(),
        (continued - chrono::Duration::seconds(2)).to_rfc3339()
    );
    let rows: Vec<(String, String)> = db.client.query(&asleep, &[]).await.unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    assert!(rows.len() >= 3, "the frozen periods are all in the ledger: {rows:?}");
    assert!(rows.iter().all(|(s, r)| s == "skipped" && r.contains("catch-up latest")), "slept-through periods are skipped by the cap: {rows:?}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status <> 'done'").await, 0);
}

/// Plugins see their slot's business day (`business::today()` in the Rust SDK): the day it
/// is for, the business day it runs on, its place in the month and the calendars'
/// versions — the same facts `almanac slots` prints. A rolled slot reports its nominal day.
#[tokio::test(flavor = "multi_thread")]
async fn plugins_see_the_business_day_of_their_slot() {
    use std::time::Duration;

    use almanac::calendar::source::{BusinessSource, CalendarSource};
    use almanac::calendar::Schedule;
    use chrono::Utc;

    let db = crate::support::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let ics = workspace().join("tests/calendars/de-be.ics");
    let start = Utc::now() - chrono::Duration::days(100);
    let file = dir.path().join("almanac.toml");
    let text = format!(
        "[tasks.fixture-business-day]\nstart_at = \"{}\"\nhorizon = \"400d\"\ncatch_up = \"all\"\ncron = \"0 6 25 * *\"\n\
         calendar = \"de-be\"\nroll = \"preceding\"\n\n[calendars.de-be]\nics = \"{}\"\n",
        start.to_rfc3339(),
        ics.display()
    );
    std::fs::write(&file, text).unwrap();
    let source = BusinessSource {
        calendars: vec![CalendarSource { name: "de-be".into(), weekend: "sat,sun".into(), ics: Some(std::fs::read_to_string(&ics).unwrap()), dates: vec![] }],
        business_day: None,
        of: None,
        roll: Some("preceding".into()),
    };
    let version = format!("de-be@{}", source.build().unwrap().calendars()[0].version());
    let schedule = Schedule::new("0 6 25 * *", "Europe/Berlin").unwrap().with_business(&source).unwrap();
    let want: Vec<_> = schedule.slots_after(start).take_while(|s| s.start <= Utc::now()).collect();
    assert!(want.len() >= 3, "{want:?}");
    let plugins = crate::support::plugin_dir(&["fixture_business_day"]);
    let mut host = crate::support::HostProc::spawn(&db, plugins.path(), &["--config", file.to_str().unwrap()]);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", want.len() as i64, Duration::from_secs(60)).await;
    host.stop().await;
    let rows = db.client.query("SELECT period, nominal, date, day_of_month, last_of_month, calendars FROM business_days ORDER BY period", &[]).await.unwrap();
    assert_eq!(rows.len(), want.len());
    for (row, slot) in rows.iter().zip(&want) {
        let facts = slot.business.as_ref().unwrap();
        let got: (String, String, String, i64, bool, String) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5));
        let expected = (
            facts.nominal.format("%Y-%m").to_string(),
            facts.nominal.to_string(),
            facts.date.to_string(),
            i64::from(facts.business_day_of_month),
            facts.last_business_day_of_month,
            version.clone(),
        );
        assert_eq!(got, expected);
        assert!(got.1.ends_with("-25"), "{got:?}");
    }
}
