//! daily-points against a real PostgreSQL, as its author tests it: `cargo test -p
//! daily-points` builds the component and runs plan and run the way a host does.
use almanac_testing::Almanac;

#[test]
fn every_account_gets_its_points_once_per_day() {
    let almanac = Almanac::new();
    almanac.sql(
        "CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL);
                 INSERT INTO accounts VALUES (1, 0), (2, 5)",
    );
    let plan = almanac.plan("daily-points", "2026-01-01");
    assert_eq!(plan.keys, ["1", "2"], "{plan}");
    for key in ["1", "2", "2"] {
        let tried = almanac.run("daily-points", "2026-01-01", key);
        assert!(tried.ok, "{tried}");
    }
    assert_eq!(almanac.query("SELECT id, points FROM accounts ORDER BY id"), [["1", "10"], ["2", "15"]]);
    let tried = almanac.run("daily-points", "2026-01-01", "not-a-number");
    assert!(!tried.ok && tried.report.contains("invalid digit"), "{tried}");
}

/// A test's own settings, as `[tasks.daily-points.settings]` would give them; the test
/// above, without any, runs beside it on the plugin's default.
#[test]
fn the_points_come_from_the_tests_settings() {
    let mut almanac = Almanac::new();
    almanac.sql("CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL); INSERT INTO accounts VALUES (1, 0)");
    almanac.settings("daily-points", &[("points", "25")]);
    let tried = almanac.run("daily-points", "2026-01-01", "1");
    assert!(tried.ok, "{tried}");
    almanac.settings("daily-points", &[("points", "7")]);
    let tried = almanac.run("daily-points", "2026-01-02", "1");
    assert!(tried.ok, "{tried}");
    assert_eq!(almanac.query("SELECT points FROM accounts"), [["32"]]);
    // A setting the plugin does not take is the configuration's error, as in a host.
    almanac.settings("daily-points", &[("pionts", "1")]);
    let tried = almanac.run("daily-points", "2026-01-03", "1");
    assert!(!tried.ok && tried.report.contains("pionts"), "{tried}");
}
