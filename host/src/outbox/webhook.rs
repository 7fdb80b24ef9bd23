//! The HTTP webhook sink: `POST <url>` with the payload as the body and the headers
//! `Idempotency-Key: <topic>/<key>` and `Content-Type: <the message's content type>`.
//!
//! 2xx is delivered. 408 and 429 and every other status, a timeout or a connection
//! failure is worth another try; any other 4xx says the receiver will never take this
//! message, so it is dead at once with `HTTP <status>: <first 200 bytes of the body>`.
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderValue, CONTENT_TYPE};

use super::sink::{Sink, SinkError};
use super::{DispatchError, Message};

/// Bytes of an error response's body kept in `last_error`.
pub const BODY_EXCERPT: usize = 200;

pub struct Webhook {
    client: reqwest::Client,
    url: reqwest::Url,
    timeout: Duration,
}

impl Webhook {
    pub fn new(url: &str, timeout: Duration) -> Result<Webhook, DispatchError> {
        let url = reqwest::Url::parse(url).map_err(|e| DispatchError::Sink(format!("url {url:?}: {e}")))?;
        let client = reqwest::Client::builder()
            // A redirected POST turns into a GET on most servers; a webhook that moved is
            // a configuration error to see in last_error, not something to follow.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(concat!("almanac/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| DispatchError::Sink(crate::db::error_chain(&e)))?;
        Ok(Webhook { client, url, timeout })
    }

    async fn post(&self, message: &Message) -> Result<(), SinkError> {
        let content_type = HeaderValue::from_str(&message.content_type)
            .map_err(|_| SinkError { retryable: false, message: format!("content type {:?} is not a valid header value", message.content_type), status: None })?;
        let response = self
            .client
            .post(self.url.clone())
            // Covers connecting, sending and reading the response, body included.
            .timeout(self.timeout)
            .header("Idempotency-Key", message.idempotency_key())
            .header(CONTENT_TYPE, content_type)
            .body(message.payload.clone())
            .send()
            .await
            .map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let code = status.as_u16();
        let body = excerpt(response).await;
        let permanent = status.is_client_error() && code != 408 && code != 429;
        Err(SinkError { retryable: !permanent, message: format!("HTTP {code}: {body}"), status: Some(code) })
    }

    fn transport_error(&self, e: &reqwest::Error) -> SinkError {
        if e.is_timeout() {
            return SinkError::retryable(format!("no response within {:?} from {}", self.timeout, self.url));
        }
        // reqwest's own Display is only "error sending request for url (...)"; the cause
        // (connection refused, reset, ...) is further down the chain.
        SinkError::retryable(crate::db::error_chain(e))
    }
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
    fn deliver<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.post(message))
    }
}
