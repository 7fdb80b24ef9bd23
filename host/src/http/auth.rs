//! Who is asking the listener: a token (`Authorization: Bearer`, for the JSON API and
//! Prometheus), a browser session a sign-in with a token opened (an HttpOnly, Secure,
//! SameSite=Strict cookie, and a CSRF token every action sends), a trusted header set by
//! an authenticating proxy, or, on a loopback listener without sign-in, a viewer.
//! What each may do is `operators::Identity::may`.
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::operators::Identity;

/// How the listener signs people in (`almanac run --sign-in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignIn {
    /// Nobody signs in: every visitor is a viewer (a loopback listener only); a token
    /// still signs in to act.
    None,
    /// A token (`almanac token create`) signs in; nothing is shown without one.
    Token,
    /// An authenticating proxy (oauth2-proxy) names the user in a header
    /// (`--trusted-header`); the name is a token's, whose role it gets.
    Header,
}

/// The listener's rules of access.
#[derive(Debug, Clone)]
pub struct Access {
    pub sign_in: SignIn,
    /// The header an authenticating proxy names the user in (`SignIn::Header`).
    pub trusted_header: Option<String>,
    /// No action, whoever asks.
    pub read_only: bool,
}

impl Access {
    /// Sign-in is required off loopback: a listener anyone on the network can reach must
    /// not show keys and errors, or act, for whoever asks.
    pub fn check(&self, addr: SocketAddr) -> Result<(), String> {
        if self.sign_in == SignIn::None && !addr.ip().is_loopback() {
            return Err(format!(
                "--listen {addr} is not a loopback address and --sign-in none would show every job's key and error to anyone who can reach it: \
                 use --sign-in token (`almanac token create`) or --sign-in header behind an authenticating proxy"
            ));
        }
        if self.sign_in == SignIn::Header && self.trusted_header.is_none() {
            return Err("--sign-in header needs --trusted-header NAME (the header the proxy names the user in, e.g. X-Forwarded-Email)".into());
        }
        Ok(())
    }
}

/// The cookie a browser session is kept in. `__Host-`: a browser takes it only when it is
/// `Secure`, for `Path=/` and without a `Domain`, so a neighbouring subdomain (or a
/// plain-HTTP page of the same name) cannot plant a session of its own choosing on an
/// operator's browser.
pub const COOKIE: &str = "__Host-almanac_session";
/// How long a browser session lasts.
pub const SESSION_LASTS: Duration = Duration::from_secs(12 * 3600);
/// How long a looked-up token or session is believed (a revocation takes this long).
const BELIEVED: Duration = Duration::from_secs(5);
/// Failed sign-ins (bad tokens, Bearer or form, unknown sessions) allowed per address per
/// [`FAILURE_WINDOW`]. Per address only: a limit for all would let anyone lock everyone
/// out. (Behind a proxy every request comes from the proxy's address.)
const FAILURES_PER_ADDRESS: usize = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failures remembered at most (an address-rotating flood must not grow them without end).
const FAILURES_KEPT: usize = 100_000;
/// Entries the lookup cache holds before it is emptied (random tokens must not grow it).
const CACHE_MOST: usize = 10_000;

/// Who asked, and how: a session's CSRF token, which cookie-borne requests must repeat.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Identity,
    pub csrf: Option<String>,
    /// How they signed in, for the record of what they did.
    pub via: &'static str,
}

impl Caller {
    /// `console NAME (via) from ADDRESS`: the origin recorded in almanac.changes.
    pub fn origin(&self, address: IpAddr) -> String {
        format!("console {} ({}) from {address}", self.identity.name, self.via)
    }
}

/// What a token, session or proxy's name was found to be.
pub type Found = Option<(Identity, Option<String>)>;

/// Looked-up tokens and sessions, and failed sign-ins per address.
#[derive(Default)]
pub struct Gate {
    cache: std::sync::Mutex<HashMap<String, (Instant, Found)>>,
    failures: std::sync::Mutex<VecDeque<(Instant, IpAddr)>>,
}

impl Gate {
    pub fn cached(&self, key: &str) -> Option<Found> {
        let cache = self.cache.lock().expect("auth cache");
        cache.get(key).filter(|(at, _)| at.elapsed() < BELIEVED).map(|(_, found)| found.clone())
    }

    pub fn remember(&self, key: String, found: Found) {
        let mut cache = self.cache.lock().expect("auth cache");
        if cache.len() >= CACHE_MOST {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), found));
    }

    /// Forget a session at once (sign-out).
    pub fn forget(&self, cookie: &str) {
        self.cache.lock().expect("auth cache").remove(&format!("s:{}", crate::operators::digest(cookie)));
    }

    /// Whether `address` may try to sign in now.
    pub fn may_try(&self, address: IpAddr) -> bool {
        let mut failures = self.failures.lock().expect("sign-in failures");
        while failures.front().is_some_and(|(at, _)| at.elapsed() > FAILURE_WINDOW) {
            failures.pop_front();
        }
        failures.iter().filter(|(_, a)| *a == address).count() < FAILURES_PER_ADDRESS
    }

    pub fn failed(&self, address: IpAddr) {
        let mut failures = self.failures.lock().expect("sign-in failures");
        if failures.len() >= FAILURES_KEPT {
            failures.pop_front();
        }
        failures.push_back((Instant::now(), address));
    }
}

/// Why a request is refused.
#[derive(Debug)]
pub enum Refusal {
    /// Not signed in (or a bad token): 401.
    SignIn,
    /// Too many failed sign-ins from here: 429.
    TooMany,
    /// Signed in, not allowed: 403.
    Forbidden(String),
    /// The database does not answer: 503.
    Unavailable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::SignIn => {
                (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "sign in: a token from `almanac token create`\n").into_response()
            }
            Refusal::TooMany => (StatusCode::TOO_MANY_REQUESTS, "too many failed sign-ins from this address; wait a minute\n").into_response(),
            Refusal::Forbidden(why) => (StatusCode::FORBIDDEN, format!("{why}\n")).into_response(),
            Refusal::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "the database does not answer\n").into_response(),
        }
    }
}

/// The value of cookie `name` in `headers`.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether a request that changes something may be trusted to come from the console's own
/// page: a session's requests repeat its CSRF token in `X-CSRF-Token`; a proxy's
/// (its cookie rides along by itself too) come from the console's origin, which a
/// custom header proves (a cross-site page cannot send one without CORS, never
/// granted). A Bearer token rides on no request by itself.
pub fn same_origin(caller: &Caller, headers: &HeaderMap) -> bool {
    let sent = headers.get("x-csrf-token").and_then(|v| v.to_str().ok());
    match (&caller.csrf, caller.via) {
        (Some(csrf), _) => sent.is_some_and(|s| constant_time_eq(s.as_bytes(), csrf.as_bytes())),
        (None, "token") => true,
        (None, _) => sent.is_some(),
    }
}

/// Whether a browser says the request comes from another site (`Sec-Fetch-Site`, else an
/// `Origin` that is not this `Host`): refused on sign-in and sign-out (a forged sign-in
/// would put the victim in the forger's session) and on every action.
pub fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return !matches!(site, "same-origin" | "none");
    }
    match (text(header::ORIGIN), text(header::HOST)) {
        (Some(origin), Some(host)) => origin.split_once("://").map(|(_, h)| h) != Some(host),
        _ => false,
    }
}

/// Whether the browser will not keep the session's `Secure` cookie: its page (as its
/// `Origin` says, whatever `Host` a proxy forwarded) is plain HTTP on a name that is not
/// loopback, where browsers keep `Secure` cookies all the same (`localhost`, names under
/// `.localhost`, loopback addresses). A sign-in would only lead back to itself.
pub fn insecure_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return false };
    let origin = origin.to_ascii_lowercase();
    let Some(host) = origin.strip_prefix("http://") else { return false };
    let name = host_name(host).trim_end_matches('.');
    !(loopback_name(name) || name.ends_with(".localhost"))
}

/// Whether the request names a loopback host: without sign-in, a page elsewhere whose
/// name was rebound to 127.0.0.1 (DNS rebinding) must not read what the console shows.
pub fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
    loopback_name(host_name(host))
}

/// The name in `host[:port]`; an IPv6 address without its brackets.
fn host_name(host: &str) -> &str {
    match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    }
}

fn loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The cookie that keeps a session (or, `None`, ends it).
pub fn session_cookie(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{COOKIE}={v}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}", SESSION_LASTS.as_secs()),
        None => format!("{COOKIE}=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_off_loopback_requires_sign_in() {
        let none = Access { sign_in: SignIn::None, trusted_header: None, read_only: false };
        assert!(none.check("127.0.0.1:9187".parse().unwrap()).is_ok());
        assert!(none.check("[::1]:9187".parse().unwrap()).is_ok());
        assert!(none.check("0.0.0.0:9187".parse().unwrap()).unwrap_err().contains("--sign-in token"));
        let token = Access { sign_in: SignIn::Token, ..none.clone() };
        assert!(token.check("0.0.0.0:9187".parse().unwrap()).is_ok());
        let header = Access { sign_in: SignIn::Header, ..none };
        assert!(header.check("0.0.0.0:9187".parse().unwrap()).unwrap_err().contains("--trusted-header"));
    }

    #[test]
    fn failed_sign_ins_are_limited_per_address() {
        let gate = Gate::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..FAILURES_PER_ADDRESS {
            assert!(gate.may_try(a));
            gate.failed(a);
        }
        assert!(!gate.may_try(a));
        assert!(gate.may_try(b));
    }

    #[test]
    fn cross_site_requests_and_foreign_hosts_are_told_apart() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(!cross_site(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(cross_site(&headers(&[("origin", "https://evil.example"), ("host", "127.0.0.1:9187")])));
        assert!(!cross_site(&headers(&[("origin", "http://127.0.0.1:9187"), ("host", "127.0.0.1:9187")])));
        assert!(!cross_site(&headers(&[])), "curl sends neither");
        assert!(loopback_host(&headers(&[("host", "127.0.0.1:9187")])));
        assert!(loopback_host(&headers(&[("host", "[::1]:9187")])));
        assert!(loopback_host(&headers(&[("host", "localhost")])));
        assert!(!loopback_host(&headers(&[("host", "rebound.example:9187")])));
    }

    #[test]
    fn a_plain_http_page_off_loopback_cannot_keep_a_session() {
        let headers = |origin: &str, host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, origin.parse().unwrap());
            h.insert(header::HOST, host.parse().unwrap());
            h
        };
        assert!(insecure_origin(&headers("http://10.0.0.5:9187", "10.0.0.5:9187")));
        assert!(insecure_origin(&headers("HTTP://console.example", "console.example")));
        assert!(insecure_origin(&headers("http://10.0.0.5", "127.0.0.1:9187")), "a plain proxy that forwards to loopback");
        assert!(!insecure_origin(&headers("https://console.example", "console.example")), "behind a TLS proxy");
        assert!(!insecure_origin(&headers("http://127.0.0.1:9187", "127.0.0.1:9187")));
        assert!(!insecure_origin(&headers("http://localhost:9187", "localhost:9187")));
        assert!(!insecure_origin(&headers("http://localhost:5173", "10.0.0.5:9187")), "a dev proxy that rewrites Host");
        assert!(!insecure_origin(&headers("http://console.localhost", "console.localhost")));
        assert!(!insecure_origin(&headers("http://localhost.:9187", "localhost.:9187")));
        assert!(!insecure_origin(&headers("http://[::1]:9187", "[::1]:9187")));
        assert!(!insecure_origin(&headers("null", "10.0.0.5:9187")), "an opaque origin: not known");
        assert!(!insecure_origin(&HeaderMap::new()), "no Origin: not known");
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; almanac_session=old; __Host-almanac_session=abc; b=2".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), Some("abc"), "the name before __Host- is no session");
        assert_eq!(cookie(&headers, "c"), None);
    }
}
