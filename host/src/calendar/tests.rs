use super::*;
use chrono::SecondsFormat;
use std::time::{Duration, Instant};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("test instant").with_timezone(&Utc)
}

fn sched(cron: &str, zone: &str) -> Schedule {
    Schedule::new(cron, zone).expect("test schedule")
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn starts(s: &Schedule, after: &str, n: usize) -> Vec<String> {
    s.slots_after(utc(after)).take(n).map(|slot| rfc(slot.start)).collect()
}

const NY: &str = "America/New_York";
const LON: &str = "Europe/London";
const LH: &str = "Australia/Lord_Howe";
const SH: &str = "Asia/Shanghai";

/// (zone, cron, after, expected starts). Worked out from the offsets by hand:
/// New York EST -5 / EDT -4, London GMT / BST +1, Lord Howe +10:30 / +11, Shanghai +8.
#[rustfmt::skip]
const CASES: &[(&str, &str, &str, &[&str])] = &[
    // New York spring forward 2026-03-08: 02:00-03:00 EST does not exist.
    (NY, "30 2 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
    (NY, "30 1 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T06:30:00Z", "2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z"]),
    (NY, "0 0 * * *", "2026-03-06T12:00:00Z", &["2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"]),
    (NY, "*/30 * * * *", "2026-03-08T04:59:00Z", &["2026-03-08T05:00:00Z", "2026-03-08T05:30:00Z", "2026-03-08T06:00:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"]),
    (NY, "30 */2 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T05:30:00Z", "2026-03-08T08:30:00Z"]),
    (NY, "0,30 2,3 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:00:00Z"]),
    // New York fall back 2026-11-01: 01:00-02:00 happens in EDT, then again in EST.
    (NY, "30 2 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]),
    (NY, "30 1 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
    (NY, "30 1 * * *", "2026-11-01T05:45:00Z", &["2026-11-02T06:30:00Z"]),
    (NY, "0 0 * * *", "2026-10-30T12:00:00Z", &["2026-10-31T04:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"]),
    (NY, "*/30 * * * *", "2026-11-01T03:59:00Z", &["2026-11-01T04:00:00Z", "2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"]),
    (NY, "*/30 * * * *", "2026-11-01T05:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z"]),
    (NY, "*/30 * * * *", "2026-11-01T05:45:00Z", &["2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
    (NY, "*/30 * * * *", "2026-11-01T06:10:00Z", &["2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
    (NY, "30 1-23/2 * * *", "2026-11-01T04:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T08:30:00Z"]),
    (NY, "30 1-3 * * *", "2026-11-01T04:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T07:30:00Z", "2026-11-01T08:30:00Z"]),
    // London 2026-03-29: 01:00-02:00 GMT does not exist; 2026-10-25: 01:00-02:00 twice.
    (LON, "30 2 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T02:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T01:30:00Z"]),
    (LON, "30 1 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
    (LON, "0 0 * * *", "2026-03-27T12:00:00Z", &["2026-03-28T00:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z"]),
    (LON, "*/30 * * * *", "2026-03-28T23:59:00Z", &["2026-03-29T00:00:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]),
    (LON, "30 2 * * *", "2026-10-23T12:00:00Z", &["2026-10-24T01:30:00Z", "2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"]),
    (LON, "30 1 * * *", "2026-10-23T12:00:00Z", &["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
    (LON, "0 0 * * *", "2026-10-23T12:00:00Z", &["2026-10-23T23:00:00Z", "2026-10-24T23:00:00Z", "2026-10-26T00:00:00Z"]),
    (LON, "*/30 * * * *", "2026-10-24T22:59:00Z", &["2026-10-24T23:00:00Z", "2026-10-24T23:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"]),
    // Lord Howe 2026-04-05: 01:30-02:00 twice (+11, then +10:30).
    (LH, "30 2 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T15:30:00Z", "2026-04-04T16:00:00Z", "2026-04-05T16:00:00Z"]),
    (LH, "30 1 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T14:30:00Z", "2026-04-04T14:30:00Z", "2026-04-05T15:00:00Z"]),
    (LH, "0 0 * * *", "2026-04-03T00:00:00Z", &["2026-04-03T13:00:00Z", "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z"]),
    (LH, "*/30 * * * *", "2026-04-04T13:50:00Z", &["2026-04-04T14:00:00Z", "2026-04-04T14:30:00Z", "2026-04-04T15:00:00Z", "2026-04-04T15:30:00Z"]),
    // Lord Howe 2026-10-04: 02:00-02:30 does not exist.
    (LH, "30 2 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T16:00:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:30:00Z"]),
    (LH, "0 2 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T15:30:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"]),
    (LH, "30 1 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T15:00:00Z", "2026-10-03T15:00:00Z", "2026-10-04T14:30:00Z"]),
    (LH, "0 0 * * *", "2026-10-02T00:00:00Z", &["2026-10-02T13:30:00Z", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"]),
    (LH, "*/30 * * * *", "2026-10-03T14:20:00Z", &["2026-10-03T14:30:00Z", "2026-10-03T15:00:00Z", "2026-10-03T15:30:00Z", "2026-10-03T16:00:00Z"]),
    // Shanghai has no DST, so the other zones' transition days are ordinary.
    (SH, "30 2 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T18:30:00Z", "2026-03-08T18:30:00Z"]),
    (SH, "30 1 * * *", "2026-10-31T00:00:00Z", &["2026-10-31T17:30:00Z", "2026-11-01T17:30:00Z"]),
    (SH, "0 0 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T16:00:00Z", "2026-03-08T16:00:00Z"]),
    (SH, "*/30 * * * *", "2026-11-01T05:50:00Z", &["2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"]),
    ("UTC", "0 12 * * *", "2026-03-08T12:00:00Z", &["2026-03-09T12:00:00Z"]),
    // Six fields, seconds first; the hour is the third field.
    (SH, "*/20 * * * * *", "2026-01-01T00:00:00Z", &["2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"]),
    (NY, "15 30 2 * * *", "2026-03-07T00:00:00Z", &["2026-03-07T07:30:15Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:15Z"]),
    (NY, "0 */30 2 * * *", "2026-03-08T05:00:00Z", &["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"]),
    (NY, "0 */30 * * * *", "2026-11-01T05:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z"]),
    // Day-of-month OR day-of-week: the 10th (a Tuesday) or any Friday (6th, 13th).
    (SH, "0 0 10 * 5", "2026-03-01T00:00:00Z", &["2026-03-05T16:00:00Z", "2026-03-09T16:00:00Z", "2026-03-12T16:00:00Z"]),
];

#[test]
fn occurrences_across_transitions() {
    for (zone, cron, after, expected) in CASES {
        assert_eq!(starts(&sched(cron, zone), after, expected.len()), *expected, "{cron:?} in {zone} after {after}");
    }
}

#[test]
fn chained_next_after_matches_iterator() {
    let cases = [
        (NY, "*/30 * * * *", "2026-11-01T03:00:00Z"),
        (LH, "*/10 * * * *", "2026-04-04T13:00:00Z"),
        (NY, "*/20 * * * *", "2026-03-08T05:00:00Z"),
        (LON, "30 1 * * *", "2026-10-20T00:00:00Z"),
    ];
    for (zone, cron, after) in cases {
        let s = sched(cron, zone);
        let all: Vec<Slot> = s.slots_after(utc(after)).take(30).collect();
        let mut prev = utc(after);
        for expected in &all {
            let got = s.next_after(prev).expect("next slot");
            assert_eq!(&got, expected, "{cron:?} in {zone} after {prev}");
            prev = got.start;
        }
        for pair in all.windows(2) {
            assert!(pair[0].start < pair[1].start && pair[0].end == pair[1].start, "{cron:?} in {zone}: {pair:?}");
        }
    }
}

/// Minute-by-minute restatement of the rules, for minute-aligned patterns: an instant
/// fires if its wall time matches (first copy only unless real-time), or, for a
/// fixed-hour schedule, if a matching wall time was skipped just before it.
fn brute_force(s: &Schedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let matches = |n: NaiveDateTime| s.cron.is_time_matching(&Utc.from_utc_datetime(&n)).expect("match");
    let wall = |t: DateTime<Utc>| t.with_timezone(&s.zone).naive_local();
    let minute = TimeDelta::minutes(1);
    // A local day none of whose minutes exists never happened: nothing on it fires.
    let mut days: std::collections::HashMap<NaiveDate, bool> = std::collections::HashMap::new();
    let mut happened = |day: NaiveDate| {
        *days.entry(day).or_insert_with(|| {
            (0..1440).any(|m| s.zone.from_local_datetime(&(day.and_hms_opt(0, 0, 0).expect("midnight") + TimeDelta::minutes(m))).earliest().is_some())
        })
    };
    let mut out = Vec::new();
    let mut t = from;
    while t < to {
        let first_copy = s.zone.from_local_datetime(&wall(t)).earliest() == Some(t.with_timezone(&s.zone));
        let mut fires = matches(wall(t)) && (s.real_time || first_copy);
        let mut skipped = wall(t - minute) + minute;
        while !s.real_time && skipped < wall(t) {
            fires |= matches(skipped) && happened(skipped.date());
            skipped += minute;
        }
        if fires {
            out.push(t);
        }
        t += minute;
    }
    out
}

/// (zone, year, offset changes that year): 2026 for the zones of the hand-written tables
/// and some odd ones, and the years of the edges this calendar has to get right: Samoa's
/// lost day (2011), São Paulo's midnight DST (2018), Morocco's Ramadan suspensions of
/// +01 (2026), and Tehran's last DST year before the rule was abolished (2022, 2023).
const TRANSITION_YEARS: &[(&str, i32, usize)] = &[
    (NY, 2026, 2),
    (LON, 2026, 2),
    (LH, 2026, 2),
    (SH, 2026, 0),
    ("America/Havana", 2026, 2),
    ("Antarctica/Troll", 2026, 2),
    ("Pacific/Chatham", 2026, 2),
    ("Asia/Tehran", 2026, 0),
    ("Pacific/Apia", 2011, 3),
    ("America/Sao_Paulo", 2018, 2),
    ("Africa/Casablanca", 2026, 2),
    ("Asia/Tehran", 2022, 2),
    ("Asia/Tehran", 2023, 0),
];

#[test]
fn agrees_with_brute_force_around_every_transition() {
    let crons = ["*/30 * * * *", "30 2 * * *", "30 1 * * *", "0 0 * * *", "*/7 1-3 * * *"];
    let crons: Vec<&str> = crons.into_iter().chain(["15 */2 * * *", "45 0-3 * * 0", "0 * * * *", "0,30 2,3 * * *"]).collect();
    let hour = TimeDelta::hours(1);
    for &(zone, year, count) in TRANSITION_YEARS {
        let year_start = utc(&format!("{year}-01-01T00:00:00Z"));
        let tz = sched("* * * * *", zone).zone();
        let offset = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
        let transitions: Vec<DateTime<Utc>> = (0..24 * 365).map(|h| year_start + hour * h).filter(|&t| offset(t) != offset(t + hour)).collect();
        assert_eq!(transitions.len(), count, "{zone} {year}: {transitions:?}");
        for &cron in &crons {
            let s = sched(cron, zone);
            for &t in transitions.iter().chain([year_start + TimeDelta::days(40)].iter()) {
                let (from, to) = (t - TimeDelta::days(1), t + TimeDelta::days(1));
                let slots = s.slots_after(from - TimeDelta::seconds(1));
                let got: Vec<_> = slots.map(|slot| slot.start).take_while(|&x| x < to).collect();
                assert_eq!(got, brute_force(&s, from, to), "{cron:?} in {zone} around {t}");
            }
        }
    }
}

#[test]
fn daily_slot_lengths() {
    let cases = [
        (NY, "2026-03-08T05:00:00Z", 23 * 60),
        (NY, "2026-11-01T04:00:00Z", 25 * 60),
        (NY, "2026-03-07T05:00:00Z", 24 * 60),
        (LON, "2026-03-29T00:00:00Z", 23 * 60),
        (LON, "2026-10-24T23:00:00Z", 25 * 60),
        (LH, "2026-04-04T13:00:00Z", 24 * 60 + 30),
        (LH, "2026-10-03T13:30:00Z", 23 * 60 + 30),
        (SH, "2026-03-07T16:00:00Z", 24 * 60),
    ];
    for (zone, start, minutes) in cases {
        let s = sched("0 0 * * *", zone);
        let slot = s.next_after(utc(start) - TimeDelta::seconds(1)).expect("daily slot");
        assert_eq!(rfc(slot.start), start, "{zone}");
        assert_eq!((slot.end - slot.start).num_minutes(), minutes, "{zone} {start}");
        assert_eq!(s.slot_at(utc(start)), slot);
    }
}

#[test]
fn labels() {
    let label = |cron: &str, zone: &str, after: &str| sched(cron, zone).next_after(utc(after)).expect("slot").label;
    assert_eq!(label("0 0 * * *", NY, "2026-03-07T12:00:00Z"), "2026-03-08");
    // Once a day: the label names the day, wherever a gap moved the occurrence.
    assert_eq!(label("30 2 * * *", NY, "2026-03-07T12:00:00Z"), "2026-03-08");
    assert_eq!(label("30 2 * * *", LH, "2026-03-07T00:00:00Z"), "2026-03-08");
    assert_eq!(label("15 30 2 * * *", LH, "2026-03-07T00:00:00Z"), "2026-03-08");
    assert_eq!(label("0 2 * * *", LH, "2026-10-03T00:00:00Z"), "2026-10-04");
    assert_eq!(label("0 12 * * *", "UTC", "2026-01-01T00:00:00Z"), "2026-01-01");
    assert_eq!(label("0 0 L * *", "UTC", "2026-01-01T00:00:00Z"), "2026-01-31");
    let lh: Vec<String> = sched("*/30 * * * *", LH).slots_after(utc("2026-04-04T13:50:00Z")).take(4).map(|s| s.label).collect();
    assert_eq!(lh, ["2026-04-05T01:00+11:00", "2026-04-05T01:30+11:00", "2026-04-05T01:30+10:30", "2026-04-05T02:00+10:30"]);
    // Havana repeats 00:00-01:00 on 2026-11-01 (CDT -4, then CST -5).
    let cu: Vec<String> = sched("0 * * * *", "America/Havana").slots_after(utc("2026-11-01T03:30:00Z")).take(3).map(|s| s.label).collect();
    assert_eq!(cu, ["2026-11-01T00:00-04:00", "2026-11-01T00:00-05:00", "2026-11-01T01:00-05:00"]);
    let slot = sched("0 0 * * *", SH).slot_at(utc("2026-03-07T16:00:00Z"));
    assert_eq!(slot.local_start(chrono_tz::Asia::Shanghai).to_rfc3339(), "2026-03-08T00:00:00+08:00");
}

/// Samoa moved from UTC-10 to UTC+14 at the end of 2011-12-29: 2011-12-30 never happened
/// there, so no schedule has a slot on it (not even at the first instant after the gap,
/// which belongs to 2011-12-31).
#[test]
fn a_day_that_never_happened_has_no_slot() {
    const APIA: &str = "Pacific/Apia";
    let slots = |cron: &str, after: &str, n: usize| -> Vec<(String, String)> {
        sched(cron, APIA).slots_after(utc(after)).take(n).map(|s| (rfc(s.start), s.label)).collect()
    };
    let noon = [
        ("2011-12-28T22:00:00Z", "2011-12-28"),
        ("2011-12-29T22:00:00Z", "2011-12-29"),
        ("2011-12-30T22:00:00Z", "2011-12-31"),
        ("2011-12-31T22:00:00Z", "2012-01-01"),
    ];
    let want = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
    assert_eq!(slots("0 12 * * *", "2011-12-28T12:00:00Z", 4), want(&noon));
    // Midnight of the 31st exists (+14:00); midnight of the 30th does not, nor any other time that day.
    let midnight = [("2011-12-29T10:00:00Z", "2011-12-29"), ("2011-12-30T10:00:00Z", "2011-12-31"), ("2011-12-31T10:00:00Z", "2012-01-01")];
    assert_eq!(slots("0 0 * * *", "2011-12-29T00:00:00Z", 3), want(&midnight));
    let half_hours = [
        ("2011-12-30T09:30:00Z", "2011-12-29T23:30-10:00"),
        ("2011-12-30T10:00:00Z", "2011-12-31T00:00+14:00"),
        ("2011-12-30T10:30:00Z", "2011-12-31T00:30+14:00"),
    ];
    assert_eq!(slots("*/30 * * * *", "2011-12-30T09:00:00Z", 3), want(&half_hours));
    assert_eq!(sched("0 12 30 12 *", APIA).next_after(utc("2011-12-01T00:00:00Z")).map(|s| rfc(s.start)), Some("2012-12-29T22:00:00Z".into()));
}

/// In São Paulo DST began at midnight on 2018-11-04: the day's midnight slot fires at 01:00
/// -02:00 and is still named 2018-11-04, like every other day of the schedule.
#[test]
fn a_daily_slot_moved_by_a_gap_keeps_its_days_name() {
    let got: Vec<(String, String, String)> =
        sched("0 0 * * *", "America/Sao_Paulo").slots_after(utc("2018-11-02T00:00:00Z")).take(4).map(|s| (rfc(s.start), s.label.clone(), s.length())).collect();
    let want = [
        ("2018-11-02T03:00:00Z", "2018-11-02", "1d"),
        ("2018-11-03T03:00:00Z", "2018-11-03", "1d"),
        ("2018-11-04T03:00:00Z", "2018-11-04", "23h"),
        ("2018-11-05T02:00:00Z", "2018-11-05", "1d"),
    ];
    assert_eq!(got, want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())));
}

/// The label's form comes from the schedule, not from the instant.
#[test]
fn one_schedule_one_label_form() {
    let labels: Vec<String> = sched("*/15 * * * *", "UTC").slots_after(utc("2026-12-02T23:44:00Z")).take(3).map(|s| s.label).collect();
    assert_eq!(labels, ["2026-12-02T23:45+00:00", "2026-12-03T00:00+00:00", "2026-12-03T00:15+00:00"]);
    for (cron, daily) in [("0 0 * * *", true), ("30 2 * * 1", true), ("0 0 L * *", true), ("0 0,12 * * *", false), ("0 * * * *", false), ("*/5 9 * * *", false)]
    {
        assert_eq!(sched(cron, "UTC").daily, daily, "{cron}");
    }
}

#[test]
fn lengths_are_days_hours_minutes() {
    let length = |cron: &str, after: &str| sched(cron, "UTC").next_after(utc(after)).expect("slot").length();
    assert_eq!(length("0 0 L * *", "2026-01-01T00:00:00Z"), "28d");
    assert_eq!(length("0 0 L * *", "2026-02-01T00:00:00Z"), "31d");
    assert_eq!(length("*/15 * * * *", "2026-02-01T00:00:00Z"), "15m");
    assert_eq!(sched("0 0 * * *", NY).next_after(utc("2026-10-31T12:00:00Z")).expect("slot").length(), "1d 1h");
    assert_eq!(sched("0 0 * * *", LH).next_after(utc("2026-10-03T00:00:00Z")).expect("slot").length(), "23h 30m");
    assert_eq!(sched("0 0 30 2 *", "UTC").slot_at(utc("2026-01-01T00:00:00Z")).length(), "-");
}

#[test]
fn slot_at_any_instant() {
    let s = sched("0 0 * * *", NY);
    let slot = s.slot_at(utc("2026-03-08T12:34:56Z"));
    assert_eq!(rfc(slot.start), "2026-03-08T12:34:56Z");
    assert_eq!(rfc(slot.end), "2026-03-09T04:00:00Z");
    assert_eq!(slot.label, "2026-03-08T08:34:56-04:00");
    let frac = s.slot_at(utc("2026-03-08T12:00:00.250Z"));
    assert_eq!(frac.label, "2026-03-08T08:00:00.250-04:00");
}

#[test]
fn never_matching_pattern_ends_promptly() {
    let started = Instant::now();
    for cron in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 0 30 2 *", ",,, * * * *", "0 , * * *"] {
        let s = sched(cron, NY);
        assert_eq!(s.next_after(utc("2026-01-01T00:00:00Z")), None, "{cron}");
        assert_eq!(s.slots_after(utc("2026-01-01T00:00:00Z")).count(), 0);
        assert_eq!(s.slot_at(utc("2026-01-01T00:00:00Z")).end, OPEN_END);
    }
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(rfc(OPEN_END), "9999-12-31T23:59:59Z");
}

#[test]
fn extreme_instants_do_not_panic() {
    for zone in ["Pacific/Kiritimati", "Pacific/Pago_Pago", NY, "UTC"] {
        let s = sched("*/30 * * * *", zone);
        assert_eq!(s.next_after(DateTime::<Utc>::MAX_UTC), None);
        let _ = s.slot_at(DateTime::<Utc>::MAX_UTC);
        let _ = s.slot_at(DateTime::<Utc>::MIN_UTC);
        let _ = s.next_after(DateTime::<Utc>::MIN_UTC);
    }
    let first = sched("0 0 * * *", "UTC").next_after(DateTime::<Utc>::MIN_UTC).expect("croner starts at year 1");
    assert_eq!(rfc(first.start), "0001-01-01T00:00:00Z");
}

#[test]
fn errors() {
    let bad_cron = [
        "",
        "   ",
        "garbage",
        "61 * * * *",
        "* 24 * * *",
        "0 0 32 * *",
        "0 0 * 13 *",
        "0 0 * * 8",
        "* * * *",
        "* * * * * * *",
        "*/0 * * * *",
        "5-1 * * * *",
        "99999999999 * * * *",
        "- * * * *",
        "*/ * * * *",
        "1-/2 * * * *",
        "0 0 1#9 * *",
        "0 0 * * 1#6",
        "🙂 * * * *",
        "@never",
        "0 ? * * *",
        "L * * * *",
        "0 0 W * *",
        "0 0 * * #",
    ];
    for cron in bad_cron {
        match Schedule::new(cron, "UTC") {
            Err(e @ CalendarError::Cron { .. }) => {
                assert!(e.to_string().starts_with(&format!("invalid cron expression {cron:?}: ")), "{e}")
            }
            Ok(s) => panic!("{cron:?} was accepted as {s:?}"),
            Err(e) => panic!("{cron:?} gave {e:?}"),
        }
    }
    let e = Schedule::new("0 0 * * *", "Mars/Olympus").expect_err("bad zone");
    assert_eq!(e.to_string(), "unknown time zone \"Mars/Olympus\" (expected an IANA name such as Asia/Shanghai)");
    assert!(matches!(Schedule::new("0 0 * * *", ""), Err(CalendarError::Zone(_))));
    let e = Schedule::new("61 * * * *", "UTC").expect_err("bad cron").to_string();
    assert!(e.starts_with("invalid cron expression \"61 * * * *\": ") && e.len() > 35, "{e}");
    let ok = sched("@hourly", "UTC");
    assert!(ok.real_time && ok.cron() == "@hourly" && ok.zone() == chrono_tz::UTC);
}

#[test]
fn real_time_rule_reads_the_hour_field() {
    let cases = [("* * * * *", true), ("0 */2 * * *", true), ("0 1-23/2 * * *", true), ("0 0 * * * *", true), ("@hourly", true)];
    let fixed = ["0 2 * * *", "0 1-3 * * *", "0 1,13 * * *", "*/5 2 * * *", "0 * 2 * * *", "@daily"].map(|c| (c, false));
    for (cron, real) in cases.into_iter().chain(fixed) {
        assert_eq!(sched(cron, NY).real_time, real, "{cron}");
    }
}

#[test]
fn per_minute_month_is_fast_and_complete() {
    // New York local months: March loses the hour 02:00-03:00, November repeats 01:00-02:00.
    let months = [("2026-03-01T05:00:00Z", "2026-04-01T04:00:00Z", 31 * 1440 - 60), ("2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z", 30 * 1440 + 60)];
    for (from, to, expected) in months {
        let s = sched("* * * * *", NY);
        let started = Instant::now();
        let (from, to) = (utc(from) - TimeDelta::seconds(1), utc(to));
        let slots: Vec<Slot> = s.slots_after(from).take_while(|slot| slot.start < to).collect();
        let elapsed = started.elapsed();
        assert_eq!(slots.len(), expected);
        assert!(slots.windows(2).all(|w| w[1].start - w[0].start == TimeDelta::minutes(1) && w[0].end == w[1].start));
        let limit = Duration::from_secs(if cfg!(debug_assertions) { 30 } else { 1 });
        assert!(elapsed < limit, "{} slots took {elapsed:?}", slots.len());
    }
}

#[test]
fn process_time_zone_is_ignored() {
    let run = || {
        let mut out: Vec<Slot> = sched("*/30 * * * *", NY).slots_after(utc("2026-11-01T03:59:00Z")).take(8).collect();
        out.extend(sched("0 0 * * *", LON).slots_after(utc("2026-03-27T12:00:00Z")).take(3));
        out.push(sched("30 1 * * *", LH).slot_at(utc("2026-04-04T14:30:00Z")));
        out
    };
    let baseline = run();
    assert_eq!((rfc(baseline[4].start), rfc(baseline[10].start)), ("2026-11-01T06:00:00Z".into(), "2026-03-29T23:00:00Z".into()));
    let saved = std::env::var_os("TZ");
    for tz in ["Asia/Tokyo", "America/Los_Angeles", "UTC", "Australia/Lord_Howe", "Europe/London"] {
        std::env::set_var("TZ", tz);
        assert_eq!(run(), baseline, "TZ={tz}");
    }
    match saved {
        Some(v) => std::env::set_var("TZ", v),
        None => std::env::remove_var("TZ"),
    }
}

#[test]
fn instants_and_slots_parse_in_every_form_almanac_prints() {
    let shanghai: Tz = SH.parse().unwrap();
    let at = |text: &str| parse_instant(text, shanghai).map(rfc);
    assert_eq!(at("2026-03-08"), Ok("2026-03-07T16:00:00Z".into()));
    assert_eq!(at("2026-03-08T02:30:00-05:00"), Ok("2026-03-08T07:30:00Z".into()));
    assert_eq!(at("2026-10-01T09:00+02:00"), Ok("2026-10-01T07:00:00Z".into()));
    assert_eq!(at("2026-10-01 07:00:00"), Ok("2026-10-01T07:00:00Z".into()));
    assert_eq!(at("2026-10-01 07:00"), Ok("2026-10-01T07:00:00Z".into()));
    // Midnight does not exist in Havana on 2026-03-08: the day starts at 01:00 CDT.
    assert_eq!(parse_instant("2026-03-08", "America/Havana".parse().unwrap()).map(rfc), Ok("2026-03-08T05:00:00Z".into()));
    // Operator input of any size or shape is refused, not a panic or a long search.
    for odd in ["", " ", "2026-13-01", "2026-02-30", "+275760-09-13", "9".repeat(1 << 20).as_str(), "2026-01-01T25:00+00:00"] {
        assert!(at(odd).is_err(), "{:?}", &odd[..odd.len().min(20)]);
    }
    assert_eq!(sched("0 9 * * *", SH).parse_slot("4999-12-31").map(rfc), Ok("4999-12-31T01:00:00Z".into()));
    let refused = at("yesterday").unwrap_err();
    assert!(refused.contains("RFC 3339") && refused.contains("2026-10-01 07:00:00") && refused.contains("slot label"), "{refused}");
    // A date names the day's slot of a daily schedule, wherever in the day it starts.
    assert_eq!(sched("0 9 * * *", SH).parse_slot("2026-10-01").map(rfc), Ok("2026-10-01T01:00:00Z".into()));
    assert_eq!(sched("*/15 * * * *", SH).parse_slot("2026-10-01").map(rfc), Ok("2026-09-30T16:00:00Z".into()));
}
