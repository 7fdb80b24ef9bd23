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
