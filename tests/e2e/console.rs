//! The console of `almanac run --listen`, in a real Chromium driven through WebDriver:
//! signing in with a token, acting on what it shows, and what it refuses (a viewer's
//! action, a request without the session's CSRF token, one without a token at all).
//! Screenshots land in target/screenshots (artefacts of the run).
use std::time::Duration;

use crate::support::browser::Browser;
use crate::support::{almanac, plugin_dir, HostProc, TestDb};

/// `almanac token create`, as an operator runs it; the token it printed.
fn token(db: &TestDb, name: &str, role: &str) -> String {
    let (code, out, err) = almanac(&db.url, &["token", "create", "--name", name, "--role", role]);
    assert_eq!(code, 0, "token create: {err}");
    assert!(err.contains("shown once"), "{err}");
    out.trim().to_owned()
}

const FAILED_ROW: &str = "#failures tr[data-task='daily-points']";
const TASK_ROW: &str = "#tasks tr[data-task='daily-points']";

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_signs_in_retries_a_failed_job_and_holds_a_task_in_the_browser() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    // A rule the job breaks (it adds 10 points) until an operator lifts it.
    db.client.batch_execute("ALTER TABLE accounts ADD CONSTRAINT cap CHECK (points < 10)").await.unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token", "--retry-base", "10ms"]);
    let base = format!("http://{}", host.listen_addr().await);
    let alice = token(&db, "alice", "operator");
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 1, Duration::from_secs(60)).await;

    let browser = Browser::start().await;
    browser.goto(&base).await;
    // Nothing is shown without signing in: the page sends the browser to the form.
    browser.find("#token").await;
    assert!(browser.url().await.ends_with("/login"), "{}", browser.url().await);
    browser.screenshot("console-sign-in").await;
    browser.type_into("#token", "alm_not_a_token").await;
    browser.click("#sign-in").await;
    browser.wait_text(".note", "a wrong token is refused", |t| t.contains("Unknown or revoked token")).await;
    browser.type_into("#token", &alice).await;
    browser.click("#sign-in").await;
    browser.wait_text("#who", "signed in", |t| t == "alice (operator)").await;

    // The failed job, with its Retry beside it; the rule lifted, a click makes it done.
    let retry = format!("{FAILED_ROW} button[data-action='retry']");
    browser.find(&retry).await;
    browser.screenshot("console-overview").await;
    // On the calendar, its day in the task's zone (Shanghai: 16:00 UTC is midnight the
    // next day) is failed; clicked, it lists the job; the job's page has its attempt.
    browser.goto(&format!("{base}/#task=daily-points&month=2026-03")).await;
    let day = "#cal-grid button[data-day='2026-03-02']";
    browser.wait_text(day, "the failed day", |t| t.contains("1 failed")).await;
    // The year strip says March failed, its worst; February is before the task's first period.
    browser.wait_text("#cal-year button[data-month='2026-03']", "March on the year strip", |t| t == "Mar").await;
    let states =
        browser.run_async("arguments[0](Array.from(document.querySelectorAll('#cal-year button')).slice(1, 3).map(b => b.dataset.state).join(' '))").await;
    assert_eq!(states.as_str(), Some("before failed"), "February and March");
    assert_eq!(browser.text("#cal-grid button[data-day='2026-03-01']").await, "01", "the day before is no period of the task's yet");
    let shown = browser.run_async("arguments[0](document.getElementById('range-form').offsetParent !== null)").await;
    assert_eq!(shown.as_bool(), Some(false), "an operator is offered no backfill or cursor move");
    browser.run_async("document.getElementById('calendar-section').scrollIntoView(); arguments[0]()").await;
    browser.screenshot("console-calendar").await;
    browser.click(day).await;
    browser.click("#jobs tr[data-key='1']").await;
    browser.wait_text("#attempts", "the job's attempt", |t| t.contains("error") && t.contains("violates check constraint \"cap\"")).await;
    // Made by this host (its heartbeat's id), with the plugin's digest.
    let made = "SELECT h.id, a.plugin_digest FROM almanac.attempts a JOIN almanac.hosts h ON h.id = a.host";
    let (ran_by, digest): (String, String) = db.client.query_one(made, &[]).await.map(|r| (r.get(0), r.get(1))).unwrap();
    let attempt = browser.text("#attempts tbody tr").await;
    assert!(attempt.contains(&ran_by) && attempt.contains(&digest[..12]), "{attempt}");
    browser.screenshot("console-job").await;
    db.client.batch_execute("ALTER TABLE accounts DROP CONSTRAINT cap").await.unwrap();
    browser.click(&retry).await;
    browser.wait_text("#notice", "the retry is confirmed", |t| t.contains("1 failed job(s) of daily-points back to pending")).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 1, Duration::from_secs(30)).await;
    browser.wait_text(FAILED_ROW, "the job shows done", |t| t.contains("done since")).await;
    browser.wait_text(day, "the day turns done", |t| t.contains("1/1 done")).await;
    assert_eq!(db.count("SELECT points FROM accounts WHERE id = 1").await, 10);

    // Held from the page: a job enqueued now waits, marked held, until released.
    browser.click(&format!("{TASK_ROW} button[data-action='hold']")).await;
    browser.wait_text("#notice", "the hold is confirmed", |t| t.contains("daily-points held")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points' AND held").await, 1);
    db.enqueue("daily-points", "2026-03-02T16:00:00Z", &["2"]).await;
    browser.wait_text(TASK_ROW, "the task shows held with its job pending", |t| t.contains("held: no job of it starts")).await;
    browser.screenshot("console-held").await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE key = '2' AND status = 'pending'").await, 1);
    browser.click(&format!("{TASK_ROW} button[data-action='release']")).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'done'", 2, Duration::from_secs(30)).await;

    // Each action recorded with who took it and from where.
    let recorded = db
        .count(
            "SELECT count(*) FROM almanac.changes WHERE action IN ('retry', 'hold', 'release')
             AND origin = 'console alice (session) from 127.0.0.1'",
        )
        .await;
    assert_eq!(recorded, 3, "log:\n{}", host.log());
    // At a phone's width the page stays within the screen (wide tables scroll inside
    // their sections).
    browser.resize(390, 844).await;
    browser.goto(&format!("{base}/")).await;
    browser.find(&format!("{TASK_ROW} button[data-action='hold']")).await;
    let width = browser.run_async("arguments[0](document.documentElement.scrollWidth - window.innerWidth)").await;
    assert!(width.as_i64().is_some_and(|w| w <= 0), "the page is wider than the phone by {width}");
    browser.screenshot("console-phone").await;
    // And in the page's change history, newest first.
    browser
        .wait_text("#changes tbody tr", "the release on top of the history", |t| t.contains("release") && t.contains("console alice (session) from 127.0.0.1"))
        .await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_viewer_sees_no_action_and_requests_without_token_or_csrf_are_refused() {
    let db = TestDb::new().await;
    let plugins = plugin_dir(&["fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token"]);
    let base = format!("http://{}", host.listen_addr().await);
    let victor = token(&db, "victor", "viewer");
    let alice = token(&db, "alice", "operator");
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["k1"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 1, Duration::from_secs(60)).await;

    let browser = Browser::start().await;
    browser.sign_in(&base, &victor, "victor (viewer)").await;
    browser.find("#failures tr[data-task='fixture-permanent']").await;
    assert!(browser.find_all("button[data-action]").await.is_empty(), "a viewer is offered no action");
    // Asked anyway, from the viewer's own session with its CSRF token: refused.
    let answer = browser
        .run_async(
            "const done = arguments[0];
             fetch('/api/session').then(r => r.json()).then(s => fetch('/api/actions/retry', {method: 'POST',
               headers: {'content-type': 'application/json', 'x-csrf-token': s.csrf}, body: JSON.stringify({task: 'fixture-permanent'})}))
             .then(r => r.text().then(t => done(r.status + ' ' + t)))",
        )
        .await;
    assert_eq!(answer.as_str().unwrap().trim(), "403 victor (viewer) may not retry");

    // The sign-in's answer is a redirect whose cookie the test reads.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let retry = format!("{base}/api/actions/retry");
    let body = r#"{"task": "fixture-permanent"}"#;
    let send = |request: reqwest::RequestBuilder, body: &'static str| async move {
        let response = request.header("content-type", "application/json").body(body).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    // No token: nothing shown, nothing done.
    assert_eq!(send(http.post(&retry), body).await.0, 401);
    assert_eq!(http.get(format!("{base}/api/overview")).send().await.unwrap().status().as_u16(), 401);
    assert_eq!(http.get(format!("{base}/metrics")).send().await.unwrap().status().as_u16(), 401);
    // A page reached over plain HTTP at a name that is not loopback: the browser would drop
    // the Secure cookie, so the sign-in says why instead of leading back to itself.
    let port = base.rsplit(':').next().unwrap();
    let far = format!("console.example:{port}");
    let sign_in_from = |scheme: &str| {
        http.post(format!("{base}/login")).header("host", &far).header("origin", format!("{scheme}://{far}")).form(&[("token", alice.as_str())]).send()
    };
    let refused = sign_in_from("http").await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    assert!(refused.headers().get("set-cookie").is_none());
    assert!(refused.text().await.unwrap().contains("plain HTTP"));
    // The same behind a proxy that terminates TLS: signed in.
    let proxied = sign_in_from("https").await.unwrap();
    assert_eq!(proxied.status().as_u16(), 303);
    assert!(proxied.headers()["set-cookie"].to_str().unwrap().starts_with("__Host-almanac_session="));
    // An operator's browser session without its CSRF token (a forged cross-site form).
    let signed = http.post(format!("{base}/login")).form(&[("token", alice.as_str())]).send().await.unwrap();
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-almanac_session="), "{cookie}");
    let attributes = signed.headers()["set-cookie"].to_str().unwrap().to_owned();
    for needed in ["; Path=/", "; HttpOnly", "; Secure", "; SameSite=Strict"] {
        assert!(attributes.contains(needed), "{attributes}");
    }
    assert!(!attributes.contains("Domain"), "{attributes}");
    let (status, text) = send(http.post(&retry).header("cookie", &cookie), body).await;
    assert_eq!((status, text.trim()), (403, "missing or wrong CSRF token (X-CSRF-Token)"));
    let (status, _) = send(http.post(&retry).header("cookie", &cookie).header("x-csrf-token", "0".repeat(64)), body).await;
    assert_eq!(status, 403);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'").await, 1, "nothing was retried");
    // The same token as Bearer (no cookie rides along by itself): a preview, then the retry.
    let bearer = format!("Bearer {alice}");
    let (status, text) = send(http.post(&retry).header("authorization", &bearer), r#"{"task": "fixture-permanent", "preview": true}"#).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""changed":1"#) && text.contains(r#""preview":true"#), "{text}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'").await, 1, "a preview changes nothing");
    let (status, text) = send(http.post(&retry).header("authorization", &bearer), body).await;
    assert_eq!(status, 200, "{text}");
    // Retried, it fails again; then a discard by filter: every job of the task, with a reason.
    db.enqueue("fixture-permanent", "2026-01-01T00:00:00Z", &["k2", "k3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 3, Duration::from_secs(60)).await;
    // Slots and ranges as the CLI reads them, by the task's calendar (UTC here): a date too.
    let (status, text) =
        send(http.post(&retry).header("authorization", &bearer), r#"{"task": "fixture-permanent", "slot": "2026-01-01", "preview": true}"#).await;
    assert!(status == 200 && text.contains(r#""changed":3"#), "{status} {text}");
    let (status, text) =
        send(http.post(&retry).header("authorization", &bearer), r#"{"task": "fixture-permanent", "from": "2026-01-02", "preview": true}"#).await;
    assert!(status == 200 && text.contains(r#""changed":0"#), "{status} {text}");
    let (status, text) =
        send(http.post(&retry).header("authorization", &bearer), r#"{"task": "fixture-permanent", "slot": "yesterday", "preview": true}"#).await;
    assert!(status == 400 && text.starts_with(r#"slot: "yesterday" is not an instant"#), "{status} {text}");
    let discard = format!("{base}/api/actions/discard");
    let (status, text) = send(http.post(&discard).header("authorization", &bearer), r#"{"task": "fixture-permanent", "all": true}"#).await;
    assert_eq!((status, text.trim()), (400, "a discard needs a reason (recorded on each one and with the change)"));
    // Confirmed for two, while three match now: nothing is done.
    let stale = r#"{"task": "fixture-permanent", "all": true, "reason": "accounts closed for good", "expect": 2}"#;
    let (status, text) = send(http.post(&discard).header("authorization", &bearer), stale).await;
    assert_eq!((status, text.trim()), (409, "3 would change now, not the 2 the confirmation showed: nothing was done; look again and confirm anew"));
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'discarded'").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM almanac.changes WHERE action = 'discard'").await, 0, "not recorded either");
    let all = r#"{"task": "fixture-permanent", "all": true, "reason": "accounts closed for good", "expect": 3}"#;
    let (status, text) = send(http.post(&discard).header("authorization", &bearer), all).await;
    assert!(status == 200 && text.contains(r#""changed":3"#), "{status} {text}");
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'discarded'").await, 3);
    db.assert_counters_agree().await;
    let (status, _) =
        send(http.post(format!("{base}/api/actions/hold")).header("authorization", &bearer), r#"{"task": "fixture-permanent", "preview": true}"#).await;
    assert_eq!(status, 400, "a hold has no preview, and is not taken for one");
    assert_eq!(db.count("SELECT count(*) FROM almanac.schedules WHERE held").await, 0);
    // A sign-in posted from another site's page is refused.
    let forged = http.post(format!("{base}/login")).header("sec-fetch-site", "cross-site").form(&[("token", alice.as_str())]).send().await.unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    // Revoked, the token and its sessions sign in no more (believed a few seconds at most).
    let (code, _, err) = almanac(&db.url, &["token", "revoke", "alice"]);
    assert_eq!(code, 0, "{err}");
    crate::support::wait_for("the revoked token refused", Duration::from_secs(10), || async {
        http.get(format!("{base}/api/session")).header("authorization", &bearer).send().await.unwrap().status().as_u16() == 401
    })
    .await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_circuit_and_a_paused_topic_are_acted_on_from_the_incidents() {
    let db = TestDb::new().await;
    db.configured_topic("payments").await;
    // The circuit a failing receiver opened (as the dispatcher leaves it), and one
    // delivery waiting behind it.
    db.client
        .batch_execute(
            "UPDATE almanac.outbox_topics SET failures = 5, opened_at = now(), open_until = now() + interval '1 hour',
                 last_error = 'connection refused' WHERE topic = 'payments'",
        )
        .await
        .unwrap();
    let plugins = plugin_dir(&["fixture_permanent"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token"]);
    let base = format!("http://{}", host.listen_addr().await);
    let olga = token(&db, "olga", "operator");
    let browser = Browser::start().await;
    browser.sign_in(&base, &olga, "olga (operator)").await;

    let incident = "#incidents tbody tr";
    browser.wait_text(incident, "the open circuit first", |t| t.contains("circuit open") && t.contains("payments") && t.contains("connection refused")).await;
    browser.screenshot("console-incidents").await;
    browser.click("#incidents button[data-action='outbox-deliver-now']").await;
    browser.wait_text("#notice", "deliver-now confirmed", |t| t.contains("its circuit is closed")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_topics WHERE topic = 'payments' AND open_until IS NULL AND failures = 0").await, 1);
    browser.wait_text("#incidents", "no incident left", |t| t.contains("Nothing needs you.")).await;

    // Paused from the outbox table (a reason asked for), resumed from the incident.
    browser.click("#outbox tr[data-topic='payments'] button[data-action='outbox-pause']").await;
    browser.answer_dialog(Some("receiver maintenance")).await;
    browser.wait_text("#notice", "pause confirmed", |t| t.contains("outbox topic payments paused")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_topics WHERE topic = 'payments' AND paused").await, 1);
    browser.click("#incidents button[data-action='outbox-resume']").await;
    browser.wait_text("#notice", "resume confirmed", |t| t.contains("outbox topic payments resumed")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.outbox_topics WHERE topic = 'payments' AND paused").await, 0);
    let recorded = db.count("SELECT count(*) FROM almanac.changes WHERE topic = 'payments' AND origin = 'console olga (session) from 127.0.0.1'").await;
    assert_eq!(recorded, 3, "deliver-now, pause, resume recorded; log:\n{}", host.log());

    // Messages listed by topic and state, every text set as text: a key and an error with
    // markup in them show as written, and no element is made of either.
    db.client
        .batch_execute(
            "INSERT INTO almanac.outbox (topic, key, payload, content_type, status, attempts, last_error)
             VALUES ('payments', '<img src=x id=planted>', '\\x7b7d', 'application/json', 'dead', 3,
                     '<script>document.title = \"owned\"</script>')",
        )
        .await
        .unwrap();
    browser.find("#messages-topic option[value='payments']").await;
    browser
        .run_async("document.getElementById('messages-topic').value = 'payments'; document.getElementById('messages-status').value = 'dead'; arguments[0]()")
        .await;
    browser.click("#messages-filter button[type='submit']").await;
    browser.wait_text("#messages tbody", "the dead message, as text", |t| t.contains("<img src=x id=planted>") && t.contains("<script>document.title")).await;
    assert!(browser.find_all("#planted").await.is_empty(), "no element is made of a key");
    assert_ne!(browser.run_async("arguments[0](document.title)").await.as_str(), Some("owned"));
    host.stop().await;
}

/// A discard by filter, clicked: a calendar day's jobs listed, then discarded together
/// after a prompt for the reason and a confirmation with their count; the next day's job
/// is left alone.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_discards_a_days_jobs_by_filter_in_the_browser() {
    let db = TestDb::new().await;
    db.accounts(3).await;
    db.client.batch_execute("ALTER TABLE accounts ADD CONSTRAINT cap CHECK (points < 10)").await.unwrap();
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token"]);
    let base = format!("http://{}", host.listen_addr().await);
    let alice = token(&db, "alice", "operator");
    // Two jobs of 2 March (Shanghai) and one of 3 March, each failing for good.
    db.enqueue("daily-points", "2026-03-01T16:00:00Z", &["1", "2"]).await;
    db.enqueue("daily-points", "2026-03-02T16:00:00Z", &["3"]).await;
    db.wait_count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed'", 3, Duration::from_secs(60)).await;

    let browser = Browser::start().await;
    browser.sign_in(&base, &alice, "alice (operator)").await;
    browser.goto(&format!("{base}/#task=daily-points&month=2026-03")).await;
    let day = "#cal-grid button[data-day='2026-03-02']";
    browser.wait_text(day, "the failed day", |t| t.contains("2 failed")).await;
    browser.click(day).await;
    browser.wait_text("#jobs tbody", "the day's jobs", |t| t.matches("failed").count() == 2).await;
    browser.click("#jobs-act button[data-action='discard']").await;
    let asked = browser.answer_dialog(Some("accounts closed for good")).await;
    assert_eq!(asked, "Why discard the pending and failed jobs of daily-points on 2026-03-02? (recorded)");
    let confirm = browser.answer_dialog(None).await;
    assert_eq!(confirm, "Discard 2 pending or failed job(s) of daily-points on 2026-03-02?");
    browser.wait_text("#notice", "the discard is confirmed", |t| t.contains("2 job(s) of daily-points discarded")).await;
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'discarded' AND key IN ('1', '2')").await, 2);
    assert_eq!(db.count("SELECT count(*) FROM almanac.jobs WHERE status = 'failed' AND key = '3'").await, 1, "the next day's job is left alone");
    let recorded = "SELECT count(*) FROM almanac.changes WHERE action = 'discard' AND reason = 'accounts closed for good'
                    AND origin = 'console alice (session) from 127.0.0.1' AND (after->>'jobs')::int = 2 AND after->>'from' IS NOT NULL";
    assert_eq!(db.count(recorded).await, 1);
    db.assert_counters_agree().await;
    host.stop().await;
}
