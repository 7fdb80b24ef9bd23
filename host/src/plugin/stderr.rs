//! A plugin's stderr: the first [`Stderr::CAPACITY`] bytes a call writes, kept for the
//! message of a trap (a Rust panic's text). What does not fit is dropped, never refused:
//! writing to stderr must not fail a job. A reused instance's guest holds its stream
//! handles across calls, so the buffer they share is cleared for each call instead of
//! replaced.
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Clone, Default)]
pub struct Stderr(Arc<Mutex<Vec<u8>>>);

impl Stderr {
    /// Bytes kept per call.
    pub const CAPACITY: usize = 8 * 1024;

    pub fn contents(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forget what earlier calls wrote.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn keep(&self, bytes: &[u8]) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = Self::CAPACITY.saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for Stderr {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Stderr {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Stderr {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(Self::CAPACITY)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Stderr {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Stderr {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_drops_the_rest_and_clears_for_the_next_call() {
        let stderr = Stderr::default();
        let mut stream = stderr.p2_stream();
        for _ in 0..5 {
            stream.write(Bytes::from(vec![b'x'; 2000])).expect("a full stderr never refuses a write");
        }
        assert_eq!(stderr.contents().len(), Stderr::CAPACITY);
        stderr.clear();
        stream.write(Bytes::from_static(b"panicked")).unwrap();
        assert_eq!(stderr.contents(), b"panicked");
    }
}
