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
