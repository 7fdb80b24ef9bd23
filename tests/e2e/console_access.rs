//! Signing in behind an authenticating proxy (`--sign-in header`), and what the JSON
//! API answers a typo or a contradiction, against a real host.
use std::time::Duration;

use crate::support::{almanac, plugin_dir, HostProc, TestDb};

/// The proxy names who signed in there: a user it lets through who has no token here is
/// refused, and never counted as a guess of the proxy's address (all its users share it).
#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_user_without_a_token_is_refused_without_locking_out_the_others() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "header", "--trusted-header", "X-Forwarded-User"]);
    let base = format!("http://{}", host.listen_addr().await);
    let (code, _, err) = almanac(&db.url, &["token", "create", "--name", "alice", "--role", "operator"]);
    assert_eq!(code, 0, "{err}");
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    let http = reqwest::Client::new();
    let ask = |user: Option<String>| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let mut request = http.get(format!("{base}/api/session"));
            if let Some(user) = user {
                request = request.header("x-forwarded-user", user);
            }
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, text) = ask(Some("alice".into())).await;
    assert!(status == 200 && text.contains(r#""name":"alice""#), "{status} {text}");
    // More unknown users than the sign-in limit allows failures (10 a minute per address).
    for n in 0..15 {
        let (status, text) = ask(Some(format!("mallory{n}"))).await;
        assert_eq!((status, text.trim()), (403, format!("mallory{n} has no token here: `almanac token create --name mallory{n} --role ROLE`").as_str()));
    }
    let (status, text) = ask(Some("alice".into())).await;
    assert_eq!(status, 200, "alice is still let in: {text}");
    assert_eq!(ask(None).await.0, 401, "no header, no one");
    host.stop().await;
}

/// A typo in a task is named, as the CLI names it, rather than answered "0 jobs"; `all`
/// beside a key is a contradiction, refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_of_no_task_is_404_and_a_discard_of_all_and_a_key_is_400() {
    let db = TestDb::new().await;
    db.accounts(1).await;
    let plugins = plugin_dir(&["daily_points"]);
    let mut host = HostProc::spawn(&db, plugins.path(), &["--listen", "127.0.0.1:0", "--sign-in", "token"]);
    let base = format!("http://{}", host.listen_addr().await);
    let (code, token, err) = almanac(&db.url, &["token", "create", "--name", "olga", "--role", "operator"]);
    assert_eq!(code, 0, "{err}");
    db.wait_count("SELECT count(*) FROM almanac.schedules WHERE task = 'daily-points'", 1, Duration::from_secs(60)).await;
    let http = reqwest::Client::new();
    let send = |action: &str, body: &str| {
        let request = http
            .post(format!("{base}/api/actions/{action}"))
            .header("authorization", format!("Bearer {}", token.trim()))
            .header("content-type", "application/json")
            .body(body.to_owned());
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, text) = send("retry", r#"{"task": "daily-pionts"}"#).await;
    assert_eq!((status, text.trim()), (404, r#"no task "daily-pionts""#));
    let (status, text) = send("discard", r#"{"task": "daily-pionts", "key": "1", "reason": "typo"}"#).await;
    assert_eq!((status, text.trim()), (404, r#"no task "daily-pionts""#));
    // A task with nothing to retry is no typo.
    let (status, text) = send("retry", r#"{"task": "daily-points"}"#).await;
    assert!(status == 200 && text.contains(r#""changed":0"#), "{status} {text}");
    let (status, text) = send("discard", r#"{"task": "daily-points", "all": true, "key": "1", "reason": "closed"}"#).await;
    assert_eq!((status, text.trim()), (400, "all takes every pending and failed job of the task: no slot, key or range with it"));
    // A date is read as the CLI reads it (midnight in the task's zone); what is no instant
    // is refused with the forms it may take.
    let (status, text) = send("discard", r#"{"task": "daily-points", "from": "2026-03-01", "to": "2026-04-01T00:00:00Z", "reason": "closed"}"#).await;
    assert!(status == 200 && text.contains(r#""changed":0"#), "{status} {text}");
    let (status, text) = send("discard", r#"{"task": "daily-points", "from": "March", "reason": "closed"}"#).await;
    assert!(status == 400 && text.contains("give RFC 3339"), "{status} {text}");
    let (status, text) = send("retry", r#"{"task": "daily-points", "slot": " "}"#).await;
    assert_eq!((status, text.trim()), (400, "slot is empty: leave it out to take every slot"));
    host.stop().await;
}
