//! The console's backfill and cursor move, each after a preview listing its periods, an
//! admin's and not an operator's; and the charts, drawn from the per-minute counters, that
//! show what ran. In a real Chromium (WebDriver), against a real host.
use std::time::Duration;

use crate::support::browser::Browser;
use crate::support::{almanac, plugin_dir, HostProc, TestDb};

fn token(db: &TestDb, name: &str, role: &str) -> String {
    let (code, out, err) = almanac(&db.url, &["token", "create", "--name", name, "--role", role]);
    assert_eq!(code, 0, "token create: {err}");
    out.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_backfills_three_days_after_their_preview_and_the_chart_counts_them() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    let plugins = plugin_dir(&["daily_points"]);
    // Its points read from the host's environment: a secret, which the console shows as
    // a digest only.
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("almanac.toml");
    std::fs::write(&config, "[tasks.daily-points.settings]\npoints = \"env:CONSOLE_TEST_POINTS\"\n").unwrap();
    let mut host = HostProc::spawn_with_env(
        &db,
        plugins.path(),
        &["--listen", "127.0.0.1:0", "--sign-in", "token", "--config", config.to_str().unwrap()],
        &[("CONSOLE_TEST_POINTS", "10")],
    );
    let base = format!("http://{}", host.listen_addr().await);
    let root = token(&db, "root", "admin");
    let olga = token(&db, "olga", "operator");
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    // Three whole days before today in the task's zone (its cursor is now: none of them
    // was generated).
    let day = |back: i32| {
        let db = &db;
        async move {
            let row = db.client.query_one(&format!("SELECT to_char((now() AT TIME ZONE 'Asia/Shanghai')::date - {back}, 'YYYY-MM-DD')"), &[]).await.unwrap();
            row.get::<_, String>(0)
        }
    };
    let (from, to) = (day(3).await, day(0).await);

    let browser = Browser::start().await;
    browser.sign_in(&base, &root, "root (admin)").await;
    browser.goto(&format!("{base}/#task=daily-points")).await;
    let plugin = browser.wait_text("#plugins tr[data-task='daily-points']", "the plugin's row", |t| t.contains("accounts (writes)")).await;
    assert!(plugin.contains("points = secret sha256:") && !plugin.contains("= 10"), "{plugin}");
    browser.type_into("#range-from", &from).await;
    browser.type_into("#range-to", &to).await;
    browser.type_into("#range-reason", "the outage of last week").await;
    browser.click("#backfill-preview").await;
    browser.wait_text("#range-what", "the preview", |t| t.contains("would consider 3 period(s): 3 new, 0 in the ledger already")).await;
    assert_eq!(browser.find_all("#range-periods tbody tr[data-period]").await.len(), 3);
    browser.run_async("document.getElementById('range-preview').scrollIntoView(); arguments[0]()").await;
    browser.screenshot("console-backfill-preview").await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 0, "a preview generates nothing");
    browser.click("#range-go").await;
    browser.wait_text("#notice", "the backfill's outcome", |t| t.contains("backfill of daily-points: 3 period(s) generated (0 empty), 9 new job(s)")).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 9, Duration::from_secs(60)).await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM almanac.changes WHERE action = 'backfill' AND reason = 'the outage of last week'
             AND origin = 'console root (session) from 127.0.0.1' AND (after->>'generated')::int = 3"
        )
        .await,
        1,
        "log:\n{}",
        host.log()
    );
    // Previewed again, every period is in the ledger: nothing would be generated twice.
    browser.click("#backfill-preview").await;
    browser.wait_text("#range-what", "the second preview", |t| t.contains("0 new, 3 in the ledger already")).await;
    browser.wait_text("#range-periods tbody", "periods passed over", |t| t.matches("passed over (generated)").count() == 3).await;
    browser.click("#range-cancel").await;

    // The chart of the last hour counts the nine jobs, from the counters.
    let http = reqwest::Client::new();
    let bearer = format!("Bearer {root}");
    let chart = http.get(format!("{base}/api/chart.svg?task=daily-points&span=hour")).header("authorization", &bearer).send().await.unwrap();
    assert_eq!(chart.headers()["content-type"], "image/svg+xml");
    let svg = chart.text().await.unwrap();
    assert!(svg.contains("daily-points, last hour: 9 done, 0 failed"), "{svg}");
    let shown = browser.run_async("const i = document.getElementById('task-chart'); arguments[0](i.complete ? i.naturalWidth : -1)").await;
    assert!(shown.as_i64().is_some_and(|w| w > 0), "the chart image is drawn in the page: {shown}");
    let (status, text) = {
        let r = http.get(format!("{base}/api/chart.svg?task=daily-points&span=week")).header("authorization", &bearer).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!((status, text.trim()), (400, "a chart's span is hour or day"));
    // Hostile or malformed parameters: refused with a reason, or answered as text; SQL in
    // a name is a value, never a statement.
    let get = {
        let (http, bearer, base) = (http.clone(), bearer.clone(), base.clone());
        move |path: String| {
            let (http, bearer, url) = (http.clone(), bearer.clone(), format!("{base}{path}"));
            async move {
                let r = http.get(url).header("authorization", &bearer).send().await.unwrap();
                (r.status().as_u16(), r.text().await.unwrap())
            }
        }
    };
    let (status, text) = get("/api/calendar?task=daily-points&month=garbage".into()).await;
    assert_eq!((status, text.trim()), (400, r#"a month is YYYY-MM and a year 1970 to 9999, not "garbage""#));
    assert_eq!(get("/api/year?task=daily-points&year=99999".into()).await.0, 400);
    assert_eq!(get("/api/messages?status=gone".into()).await.0, 400);
    assert_eq!(get(format!("/api/year?task=no-such-task&year={}", &from[..4])).await.0, 404);
    let hostile = "x'); DROP TABLE accounts; --<script>";
    let (status, svg) = get(format!(
        "/api/chart.svg?task={}&span=day",
        hostile.replace(' ', "%20").replace(';', "%3B").replace('<', "%3C").replace('>', "%3E").replace('\'', "%27")
    ))
    .await;
    assert_eq!(status, 200, "{svg}");
    assert!(svg.contains("x&#39;); DROP TABLE accounts; --&lt;script&gt;, last day: 0 done, 0 failed") && !svg.contains("<script"), "{svg}");
    assert_eq!(db.count("SELECT count(*) FROM accounts").await, 3, "the accounts are still there");

    // An operator may not backfill or move a cursor; the page offers neither.
    let send = |action: &'static str, token: String, body: String| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let r = http
                .post(format!("{base}/api/actions/{action}"))
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let range = format!(r#"{{"task": "daily-points", "from": "{from}", "to": "{to}"}}"#);
    let (status, text) = send("backfill", olga.clone(), range.clone()).await;
    assert_eq!((status, text.trim()), (403, "olga (operator) may not backfill"));
    // A range in the future, or past the horizon, is refused with the CLI's words.
    let ahead = format!(r#"{{"task": "daily-points", "from": "{to}", "to": "2999-01-01"}}"#);
    let (status, text) = send("backfill", root.clone(), ahead).await;
    assert!(status == 400 && text.contains("in the future"), "{status} {text}");
    let (status, text) = send("backfill", root.clone(), r#"{"task": "daily-points", "from": "2001-01-01", "to": "2001-01-05"}"#.into()).await;
    assert!(status == 400 && text.contains("backfill horizon"), "{status} {text}");

    // The cursor moved back to the range's start: previewed, the two later periods are in
    // the ledger (passed over, not generated twice) and today's is new; then moved and
    // recorded, and the scheduler catches up with today's alone.
    browser.type_into("#range-to", &from).await;
    browser.click("#cursor-preview").await;
    browser.wait_text("#range-what", "the cursor's preview", |t| t.contains("moved back") && t.contains("3 started period(s) again (1 new;")).await;
    browser.click("#range-go").await;
    browser.wait_text("#notice", "the cursor moved", |t| t.contains("daily-points: cursor")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE action = 'cursor' AND origin LIKE 'console root%'").await, 1);
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 12, Duration::from_secs(60)).await;
    let (status, text) = send("cursor", olga, r#"{"task": "daily-points", "to": "now"}"#.into()).await;
    assert_eq!((status, text.trim()), (403, "olga (operator) may not cursor"));
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs").await, 12, "log:\n{}", host.log());
    host.stop().await;
}

/// A backfill from the console holds one of the listener's two connections while it runs:
/// a second one is refused until it ends, so pages keep the other.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_console_backfill_is_refused_while_one_runs_and_pages_still_load() {
    let db = TestDb::new().await;
    db.accounts(2).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token"]);
    let base = format!("http://{}", host.listen_addr().await);
    let root = token(&db, "root", "admin");
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    let day = |back: i32| format!("(now() AT TIME ZONE 'Asia/Shanghai')::date - {back}");
    let days: (String, String, String) = db
        .client
        .query_one(&format!("SELECT to_char({}, 'YYYY-MM-DD'), to_char({}, 'YYYY-MM-DD'), to_char({}, 'YYYY-MM-DD')", day(6), day(4), day(2)), &[])
        .await
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap();
    let http = reqwest::Client::new();
    let backfill = |from: String, to: String| {
        let (http, base, root) = (http.clone(), base.clone(), root.clone());
        async move {
            let r = http
                .post(format!("{base}/api/actions/backfill"))
                .header("authorization", format!("Bearer {root}"))
                .header("content-type", "application/json")
                .body(format!(r#"{{"task": "daily-points", "from": "{from}", "to": "{to}"}}"#))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    // The ledger locked by another session: the first backfill waits on it, mid-run.
    let locker = crate::support::connect(&db.url).await;
    locker.batch_execute("BEGIN; LOCK almanac.slots IN SHARE ROW EXCLUSIVE MODE").await.unwrap();
    let first = tokio::spawn(backfill(days.0.clone(), days.1.clone()));
    let waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'almanac.slots'::regclass";
    db.wait_count(waiting, 1, Duration::from_secs(30)).await;
    // Without the gate, these would wait on the lock, or for a connection.
    let soon = Duration::from_secs(10);
    let (status, text) = tokio::time::timeout(soon, backfill(days.1.clone(), days.2.clone())).await.expect("the second backfill answers at once");
    assert_eq!((status, text.trim()), (409, "another backfill from the console is running on this host: wait for it to end, or use `almanac backfill`"));
    let overview = http.get(format!("{base}/api/overview")).header("authorization", format!("Bearer {root}")).timeout(soon).send().await.unwrap();
    assert_eq!(overview.status().as_u16(), 200, "a page loads while the backfill waits");
    locker.batch_execute("COMMIT").await.unwrap();
    let (status, text) = first.await.unwrap();
    assert!(status == 200 && text.contains("2 period(s) generated"), "{status} {text}");
    // Its turn over, the next one runs.
    let (status, text) = backfill(days.1, days.2).await;
    assert!(status == 200 && text.contains("2 period(s) generated"), "{status} {text}\nlog:\n{}", host.log());
    host.stop().await;
}
