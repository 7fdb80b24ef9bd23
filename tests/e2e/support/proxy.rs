//! A TCP relay between a host and PostgreSQL that reads the client's side of the wire
//! protocol, so it can cut one connection at the job's COMMIT.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The server gets the COMMIT; the client never hears back.
    AfterCommit,
    /// The COMMIT is dropped: the server sees the connection end mid-transaction.
    BeforeCommit,
}

/// Startup-phase requests after which another untyped startup message follows.
/// tokio-postgres with NoTls sends neither (sslmode=prefer without a TLS connector
/// skips the request), but a relay that assumed so would misparse everything after.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

/// The host's statements in a plugin's session (host/src/executor/*.sql): the claim, which
/// marks the jobs it claims done, and the others. The first COMMIT after a connection
/// executed the claim and then a statement of the plugin's (the job's first) is that
/// job's; the scheduler's and idle workers' COMMITs are not preceded by both.
const HOST: &[u8] = b"almanac_job.";
const MARK_DONE: &[u8] = b"almanac_job.claim(";

/// A NUL-terminated string at the start of `bytes`.
fn cstr(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

struct State {
    upstream: u16,
    cut: Cut,
    fired: AtomicBool,
    armed: AtomicUsize,
}

pub struct Proxy {
    pub port: u16,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and relay to 127.0.0.1:`upstream`.
    pub async fn start(upstream: u16, cut: Cut) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let state = Arc::new(State { upstream, cut, fired: AtomicBool::new(false), armed: AtomicUsize::new(0) });
        let accept = tokio::spawn({
            let state = state.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(relay(client, state.clone()));
                }
            }
        });
        Proxy { port, state, accept }
    }

    /// The one cut has happened.
    pub fn fired(&self) -> bool {
        self.state.fired.load(Ordering::SeqCst)
    }

    /// Connections that executed the done mark, i.e. ran a job to completion.
    pub fn armed(&self) -> usize {
        self.state.armed.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The length of the first complete message in `buf`, if it holds one. Startup
/// messages have no type byte; every later one is a type byte plus an int32 length
/// that counts itself.
fn message_len(buf: &[u8], startup: bool) -> Option<usize> {
    let head = usize::from(!startup);
    let len = u32::from_be_bytes(buf.get(head..head + 4)?.try_into().ok()?) as usize + head;
    (buf.len() >= len).then_some(len)
}

async fn relay(client: TcpStream, state: Arc<State>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", state.upstream)).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut from_client, to_client) = client.into_split();
    let (from_server, mut to_server) = server.into_split();
    let cut = CancellationToken::new();
    let (stopped_tx, stopped_rx) = oneshot::channel();
    let down = tokio::spawn(downstream(from_server, to_client, cut.clone(), stopped_tx));
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut startup = true;
    // The names the claims (claim.sql, claim_one.sql) were prepared under on this
    // connection, whether one has been executed in this transaction, and whether a
    // plugin's role was set since.
    let mut mark_done: Vec<Vec<u8>> = Vec::new();
    let mut host: Vec<Vec<u8>> = Vec::new();
    let mut claimed = false;
    let mut armed = false;
    let commit = 'relay: loop {
        while let Some(len) = message_len(&buf, startup) {
            let message: Vec<u8> = buf.drain(..len).collect();
            if startup {
                let code = u32::from_be_bytes(message[4..8].try_into().expect("startup code"));
                startup = code == SSL_REQUEST || code == GSSENC_REQUEST;
            } else if message[0] == b'P' && message.windows(HOST.len()).any(|w| w == HOST) {
                // Parse: statement name, then the query.
                let name = cstr(&message[5..]).to_vec();
                if message.windows(MARK_DONE.len()).any(|w| w == MARK_DONE) {
                    mark_done.push(name.clone());
                }
                host.push(name);
            } else if message[0] == b'B' && !armed {
                // Bind: portal name, then statement name.
                let portal = cstr(&message[5..]);
                let statement = cstr(&message[5 + portal.len() + 1..]);
                if claimed && !host.iter().any(|name| name == statement) {
                    armed = true;
                    state.armed.fetch_add(1, Ordering::SeqCst);
                }
                claimed |= mark_done.iter().any(|name| name == statement);
            } else if message[0] == b'Q' && message[5..].starts_with(b"COMMIT") {
                if armed && state.fired.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                    break 'relay Some(message);
                }
                (claimed, armed) = (false, false);
            }
            if to_server.write_all(&message).await.is_err() {
                break 'relay None;
            }
        }
        match from_client.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break None,
            Ok(_) => {}
        }
    };
    if let Some(commit) = commit {
        // Stop relaying to the client before the server can answer a forwarded
        // COMMIT, so the acknowledgement is lost for certain, not by a race.
        cut.cancel();
        let _ = stopped_rx.await;
        drop(from_client);
        if state.cut == Cut::AfterCommit {
            let _ = to_server.write_all(&commit).await;
        }
    }
    // End of input for the server, after everything forwarded.
    let _ = to_server.shutdown().await;
    let _ = down.await;
}

async fn downstream(mut from_server: OwnedReadHalf, mut to_client: OwnedWriteHalf, cut: CancellationToken, stopped: oneshot::Sender<()>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            _ = cut.cancelled() => break,
            read = from_server.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => if to_client.write_all(&buf[..n]).await.is_err() { return },
            },
        }
    }
    drop(to_client);
    let _ = stopped.send(());
    // Read the server's replies until it hangs up: closing a socket with unread
    // data sends a reset, which could beat the COMMIT the server has not read yet.
    let _ = tokio::time::timeout(Duration::from_secs(10), async { while matches!(from_server.read(&mut buf).await, Ok(n) if n > 0) {} }).await;
}
