"""daily-points-py against a real PostgreSQL, as its author tests it: `pytest` builds the
component (the repository's build-plugins.sh) and runs plan and run the way a host does."""
from almanac_testing import Almanac


def test_every_account_gets_its_points_once_per_day():
    almanac = Almanac(build=["bash", "../../scripts/build-plugins.sh"], plugins="../../target/wasm/wasm32-wasip2/release/daily_points_py.wasm")
    almanac.sql("""CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL);
                   INSERT INTO accounts VALUES (1, 0), (2, 5)""")
    plan = almanac.plan("daily-points", "2026-01-01")
    assert plan.keys == ["1", "2"], plan.report
    for key in ["1", "2", "2"]:
        tried = almanac.run("daily-points", "2026-01-01", key)
        assert tried.ok, tried.report
    assert almanac.query("SELECT id, points FROM accounts ORDER BY id") == [["1", "10"], ["2", "15"]]
    tried = almanac.run("daily-points", "2026-01-01", "not-a-number")
    assert not tried.ok and "invalid literal" in tried.report, tried.report


def test_the_points_come_from_the_tests_settings():
    almanac = Almanac(build=["bash", "../../scripts/build-plugins.sh"], plugins="../../target/wasm/wasm32-wasip2/release/daily_points_py.wasm")
    almanac.sql("CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL); INSERT INTO accounts VALUES (1, 0)")
    tried = almanac.settings("daily-points", {"points": "25"}).run("daily-points", "2026-01-01", "1")
    assert tried.ok, tried.report
    assert almanac.query("SELECT points FROM accounts") == [["25"]]
    almanac.settings("daily-points", {"pionts": "1"})
    tried = almanac.run("daily-points", "2026-01-02", "1")
    assert not tried.ok and "pionts" in tried.report, tried.report
