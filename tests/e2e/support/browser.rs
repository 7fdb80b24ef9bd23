//! A real Chromium, driven through ChromeDriver's WebDriver protocol (W3C): the console's
//! tests sign in, click and read what a person would. Debian's `chromium` and
//! `chromium-driver` (`scripts/bootstrap.sh --need-browser`).
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One ChromeDriver, one headless browser session; both end when dropped.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        let port = crate::support::private::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is not installed: run `bash scripts/bootstrap.sh --need-browser`");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::Builder::new().prefix("almanac-chromium-").tempdir().unwrap();
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            "unhandledPromptBehavior": "ignore",
        }}});
        let answer = post(&http, &format!("{base}/session"), &capabilities).await;
        let session = format!("{base}/session/{}", answer["sessionId"].as_str().expect("a WebDriver session"));
        Browser { driver, http, session, _profile: profile }
    }

    async fn call(&self, path: &str, body: Value) -> Value {
        post(&self.http, &format!("{}/{path}", self.session), &body).await
    }

    async fn get(&self, path: &str) -> Value {
        let response = self.http.get(format!("{}/{path}", self.session)).send().await.expect("WebDriver answers");
        let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        body["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.call("url", json!({ "url": url })).await;
    }

    pub async fn url(&self) -> String {
        self.get("url").await.as_str().unwrap_or_default().to_owned()
    }

    /// The elements `css` selects now.
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let found = self.call("elements", json!({"using": "css selector", "value": css})).await;
        found.as_array().map(|a| a.iter().filter_map(|e| e[ELEMENT].as_str().map(str::to_owned)).collect()).unwrap_or_default()
    }

    /// The first element `css` selects, waited for (the page draws every few seconds).
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(first) = self.find_all(css).await.into_iter().next() {
                return first;
            }
            assert!(Instant::now() < deadline, "no element {css:?} within 20 s at {}", self.url().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        // The page redraws its tables every 3 s: an element found just before is gone.
        for _ in 0..5 {
            let element = self.find(css).await;
            let answer = self.call(&format!("element/{element}/click"), json!({})).await;
            if answer.get("error").is_none() {
                return;
            }
        }
        panic!("could not click {css:?}");
    }

    /// Replace the value of the field `css` with `text`, typed.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.call(&format!("element/{element}/clear"), json!({})).await;
        self.call(&format!("element/{element}/value"), json!({ "text": text })).await;
    }

    /// The text of the first element `css` selects ("" if none).
    pub async fn text(&self, css: &str) -> String {
        let Some(element) = self.find_all(css).await.into_iter().next() else { return String::new() };
        self.get(&format!("element/{element}/text")).await.as_str().unwrap_or_default().to_owned()
    }

    /// Wait until the text of `css` satisfies `ok`; returns it.
    pub async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.text(css).await;
            if ok(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "{what}: {css:?} says {text:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sign in to the console at `base` with `token`, as the page's form does; `who` is how
    /// the page then names the caller ("alice (operator)").
    pub async fn sign_in(&self, base: &str, token: &str, who: &str) {
        self.goto(&format!("{base}/login")).await;
        self.type_into("#token", token).await;
        self.click("#sign-in").await;
        self.wait_text("#who", "signed in", |t| t == who).await;
    }

    /// Answer the page's open confirm() or prompt() (`text` typed into a prompt first);
    /// returns what the dialog asked.
    pub async fn answer_dialog(&self, text: Option<&str>) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let asked = loop {
            let asked = self.get("alert/text").await;
            if asked.get("error").is_none() {
                break asked.as_str().unwrap_or_default().to_owned();
            }
            assert!(Instant::now() < deadline, "no dialog opened within 20 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if let Some(text) = text {
            self.call("alert/text", json!({ "text": text })).await;
        }
        self.call("alert/accept", json!({})).await;
        asked
    }

    /// Run `script` in the page (WebDriver's execute/async: `arguments[0]` is the callback).
    pub async fn run_async(&self, script: &str) -> Value {
        self.call("execute/async", json!({"script": script, "args": []})).await
    }

    /// Resize the window (a phone's width, say).
    pub async fn resize(&self, width: u32, height: u32) {
        self.call("window/rect", json!({"width": width, "height": height})).await;
    }

    /// Save what the browser shows as target/screenshots/NAME.png (an artefact of the run).
    pub async fn screenshot(&self, name: &str) {
        let png = self.get("screenshot").await;
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap_or_default()).expect("a PNG in base64");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let response = http.post(url).header("content-type", "application/json").body(serde_json::to_vec(body).unwrap()).send().await.expect("WebDriver answers");
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    body["value"].clone()
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; killing the driver first would orphan it.
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async { reqwest::Client::new().delete(&session).send().await.ok() })
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
