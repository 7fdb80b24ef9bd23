//! The HTTP webhook sink: `POST <url>` with the payload as the body and the headers
//! `Idempotency-Key: <topic>/<key>`, `Content-Type: <the message's content type>` and
//! `Almanac-Task: <the publishing task>`.
//!
//! 2xx is delivered. 408 and 429 and every other status, a timeout or a connection
//! failure is worth another try; any other 4xx says the receiver will never take this
//! message, so it is dead at once with `HTTP <status>: <first 200 bytes of the body>`.
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderValue, CONTENT_TYPE};

use super::sink::{BuildError, Delivered, Message, Sink, SinkError, REPLY_BODY};

/// Bytes of an error response's body kept in `last_error`.
pub const BODY_EXCERPT: usize = 200;

pub struct Webhook {
    client: reqwest::Client,
    url: reqwest::Url,
    /// The URL without its password, for messages.
    shown: String,
    timeout: Duration,
}

impl Webhook {
    /// A sink posting to `url`; an https receiver must present a certificate from the
    /// Mozilla roots, the OS's store or `ca_file`, for its name.
    pub fn new(url: &str, timeout: Duration, ca_file: Option<&std::path::Path>) -> Result<Webhook, BuildError> {
        let url = reqwest::Url::parse(url).map_err(|e| BuildError(format!("url {:?}: {e}", crate::db::conninfo::redact(url))))?;
        let mut shown = url.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("redacted"));
        }
        let roots = crate::tls::web_roots(ca_file).map_err(|e| BuildError(e.to_string()))?;
        let tls = crate::tls::client_config(&crate::tls::Verify::Full(std::sync::Arc::new(roots)), None).map_err(|e| BuildError(e.to_string()))?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            // A redirected POST turns into a GET on most servers; a webhook that moved is
            // a configuration error to see in last_error, not something to follow.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(concat!("almanac/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| BuildError(crate::db::error_chain(&e)))?;
        Ok(Webhook { client, url, shown: shown.to_string(), timeout })
    }

    async fn post(&self, message: &Message) -> Result<Delivered, SinkError> {
        let content_type = HeaderValue::from_str(&message.content_type).map_err(|_| SinkError {
            retryable: false,
            message: format!("content type {:?} is not a valid header value", message.content_type),
            status: None,
        })?;
        let mut request = self
            .client
            .post(self.url.clone())
            // Covers connecting, sending and reading the response, body included.
            .timeout(self.timeout)
            .header("Idempotency-Key", message.idempotency_key())
            .header(CONTENT_TYPE, content_type);
        // Who published it, so a receiver can check the sender as well as the key.
        if let Some(task) = message.task.as_deref().and_then(|t| HeaderValue::from_str(t).ok()) {
            request = request.header("Almanac-Task", task);
        }
        let response = request.body(message.payload.clone()).send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(answer(response).await);
        }
        let code = status.as_u16();
        let body = excerpt(response).await;
        let permanent = status.is_client_error() && code != 408 && code != 429;
        Err(SinkError { retryable: !permanent, message: format!("HTTP {code}: {body}"), status: Some(code) })
    }

    fn transport_error(&self, e: reqwest::Error) -> SinkError {
        if e.is_timeout() {
            return SinkError::retryable(format!("no response within {:?} from {}", self.timeout, self.shown));
        }
        // reqwest's own Display is only "error sending request for url (...)"; the cause
        // (connection refused, reset, a certificate's problem) is further down the chain.
        // A TLS failure is retryable too: a renewed certificate or a fixed CA heals it.
        // reqwest's message carries the URL as given, password included: name it ourselves.
        SinkError::retryable(format!("{}: {}", self.shown, crate::db::error_chain(&e.without_url())))
    }
}

/// A 2xx response as the topic's reply task gets it: the status, the headers, and the
/// body up to [`REPLY_BODY`] bytes (a body that breaks off is kept as far as it came).
async fn answer(mut response: reqwest::Response) -> Delivered {
    let headers = response.headers().iter().filter_map(|(name, value)| value.to_str().ok().map(|v| (name.as_str().to_owned(), v.to_owned()))).collect();
    let mut delivered = Delivered { status: response.status().as_u16(), headers, body: Vec::new(), truncated: false };
    while let Ok(Some(chunk)) = response.chunk().await {
        delivered.body.extend_from_slice(&chunk);
        if delivered.body.len() > REPLY_BODY {
            delivered.body.truncate(REPLY_BODY);
            delivered.truncated = true;
            break;
        }
    }
    delivered
}

/// The first [`BODY_EXCERPT`] bytes of the body as text, without waiting for the rest.
async fn excerpt(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < BODY_EXCERPT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(BODY_EXCERPT);
    let text = String::from_utf8_lossy(&body);
    // One line, so it reads in `almanac outbox`; a character cut at the limit shows as
    // one replacement character.
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Sink for Webhook {
    fn deliver<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<Delivered, SinkError>> {
        Box::pin(self.post(message))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    use super::*;

    fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    }

    /// A TLS server on loopback presenting a certificate from `ca` for `name`, expired
    /// or not, that answers every request with 200; its port.
    async fn server(ca: &CertifiedIssuer<'static, KeyPair>, name: &str, expired: bool) -> u16 {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &**ca).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    let mut buf = [0u8; 4096];
                    let _ = tls.read(&mut buf).await;
                    let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        port
    }

    async fn deliver(port: u16, ca_file: Option<&std::path::Path>) -> Result<(), SinkError> {
        let hook = Webhook::new(&format!("https://localhost:{port}/hook"), Duration::from_secs(5), ca_file).unwrap();
        let m = Message {
            id: 1,
            topic: "t".into(),
            key: "k".into(),
            payload: vec![],
            content_type: "text/plain".into(),
            attempt: 1,
            task: None,
            created_at: chrono::Utc::now(),
        };
        hook.post(&m).await.map(drop)
    }

    #[tokio::test]
    async fn each_certificate_problem_is_a_retryable_failure_naming_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let ours = ca("our CA");
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ours.pem()).unwrap();

        assert_eq!(deliver(server(&ours, "localhost", false).await, Some(&ca_file)).await, Ok(()), "the private CA is trusted");
        let cases = [
            (server(&ours, "localhost", false).await, None, "unknown issuer"),
            (server(&ca("another CA"), "localhost", false).await, Some(ca_file.as_path()), "unknown issuer"),
            (server(&ours, "localhost", true).await, Some(ca_file.as_path()), "has expired"),
            (server(&ours, "db.example", false).await, Some(ca_file.as_path()), "does not match the host name"),
        ];
        for (port, ca_file, cause) in cases {
            let e = deliver(port, ca_file).await.unwrap_err();
            assert!(e.retryable && e.status.is_none(), "{e:?}");
            assert!(e.message.contains(cause) && e.message.contains("https://localhost:"), "{cause}: {}", e.message);
        }
    }

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        let hook = Webhook::new("https://user:hunter2@localhost:1/hook", Duration::from_secs(1), None).unwrap();
        assert!(!hook.shown.contains("hunter2"), "{}", hook.shown);
    }
}
