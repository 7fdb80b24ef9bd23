//! A minimal HTTP/1.1 receiver on 127.0.0.1 for outbox deliveries: it records each
//! request and answers as the test's policy says.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the receiver read it, and what it answered.
#[derive(Debug, Clone)]
pub struct Received {
    pub idempotency_key: Option<String>,
    pub content_type: Option<String>,
    /// The `Almanac-Task` header: the task whose job published the message.
    pub task: Option<String>,
    pub body: Vec<u8>,
    /// The status sent, or None if the connection was dropped without an answer.
    pub answered: Option<u16>,
}

/// How the receiver answers request number `n` (1-based), given the request: a status
/// and body, or nothing (the connection is dropped) when the future yields None.
pub type Policy = Arc<dyn Fn(usize, &Received) -> BoxFuture<'static, Option<(u16, String)>> + Send + Sync>;

/// A minimal HTTP/1.1 server: one request per connection, `Connection: close`.
pub struct Receiver {
    addr: SocketAddr,
    https: bool,
    log: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start(policy: Policy) -> Receiver {
        Receiver::start_with(policy, None).await
    }

    /// Over TLS, presenting `cert` (PEM, the leaf first) with `key`; its URL names
    /// `localhost`.
    pub async fn start_https(policy: Policy, cert: &str, key: &str) -> Receiver {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<Vec<_>, _>>().expect("cert");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        Receiver::start_with(policy, Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await
    }

    async fn start_with(policy: Policy, tls: Option<tokio_rustls::TlsAcceptor>) -> Receiver {
        let https = tls.is_some();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let addr = listener.local_addr().unwrap();
        let log: Arc<Mutex<Vec<Received>>> = Arc::default();
        let seen = Arc::new(AtomicUsize::new(0));
        let task = {
            let log = log.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (log, seen, policy, tls) = (log.clone(), seen.clone(), policy.clone(), tls.clone());
                    tokio::spawn(async move {
                        match tls {
                            // A failed handshake (the client refused the certificate) is no request.
                            Some(tls) => {
                                if let Ok(stream) = tls.accept(stream).await {
                                    serve(stream, log, seen, policy).await
                                }
                            }
                            None => serve(stream, log, seen, policy).await,
                        }
                    });
                }
            })
        };
        Receiver { addr, https, log, task }
    }

    pub fn url(&self) -> String {
        match self.https {
            true => format!("https://localhost:{}/hook", self.addr.port()),
            false => format!("http://{}/hook", self.addr),
        }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, log: Arc<Mutex<Vec<Received>>>, seen: Arc<AtomicUsize>, policy: Policy) {
    let Some(request) = read_request(&mut stream).await else { return };
    let index = {
        let mut log = log.lock().unwrap();
        log.push(request.clone());
        log.len() - 1
    };
    let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
    let Some((status, body)) = policy(n, &request).await else { return };
    let response = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    if stream.write_all(response.as_bytes()).await.is_ok() && stream.flush().await.is_ok() {
        log.lock().unwrap()[index].answered = Some(status);
    }
    let _ = stream.shutdown().await;
}

async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut headers = HashMap::new();
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        idempotency_key: headers.get("idempotency-key").cloned(),
        content_type: headers.get("content-type").cloned(),
        task: headers.get("almanac-task").cloned(),
        body: buf[head_end..head_end + length].to_vec(),
        answered: None,
    })
}

pub fn answer(status: u16, body: &str) -> BoxFuture<'static, Option<(u16, String)>> {
    let body = body.to_owned();
    Box::pin(async move { Some((status, body)) })
}
