//! Signing in with a token to a browser session, signing out, and what the page asks
//! first: who it is signed in as and what it may do.
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Form, Json};
use serde::{Deserialize, Serialize};

use crate::http::auth::{self, Refusal};
use crate::http::observed::Observed;
use crate::operators::{Action, Identity};

/// The sign-in page, with `message` (text, escaped) above the form.
fn page(status: StatusCode, message: &str) -> Response {
    let escaped = crate::text::html_escape(message);
    (status, Html(crate::dashboard::LOGIN.replace("<!--message-->", &escaped))).into_response()
}

/// The form; a session cookie the browser still holds is dropped (it led here, so it
/// no longer signs in).
pub async fn form() -> Response {
    ([(header::SET_COOKIE, auth::session_cookie(None))], page(StatusCode::OK, "")).into_response()
}

#[derive(Deserialize)]
pub struct SignInForm {
    token: String,
}

pub async fn sign_in(
    State(observed): State<Arc<Observed>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let address = peer.ip();
    if auth::cross_site(&headers) {
        return page(StatusCode::FORBIDDEN, "A sign-in from another site is refused.");
    }
    if auth::insecure_origin(&headers) {
        return page(
            StatusCode::BAD_REQUEST,
            "This page came over plain HTTP to an address that is not loopback, where a browser drops the session's Secure cookie: a sign-in would only lead back here. Reach the console over HTTPS (a proxy that terminates TLS) or at 127.0.0.1 / localhost.",
        );
    }
    if !observed.gate.may_try(address) {
        return page(StatusCode::TOO_MANY_REQUESTS, "Too many failed sign-ins from this address: wait a minute.");
    }
    let Some(client) = observed.client().await else {
        return page(StatusCode::SERVICE_UNAVAILABLE, "The database does not answer; try again.");
    };
    let token = form.token.trim();
    let found = match crate::operators::is_token(token) {
        true => crate::operators::verify(&**client, token).await,
        false => Ok(None),
    };
    let identity = match found {
        Ok(Some(identity)) => identity,
        Ok(None) => {
            observed.gate.failed(address);
            tracing::warn!(%address, "console sign-in refused: unknown or revoked token");
            return page(StatusCode::UNAUTHORIZED, "Unknown or revoked token.");
        }
        Err(e) => return page(StatusCode::SERVICE_UNAVAILABLE, &crate::db::error_chain(&e)),
    };
    match crate::operators::open_session(&**client, &identity, &address.to_string(), auth::SESSION_LASTS).await {
        Ok(opened) => {
            tracing::info!(name = %identity.name, role = identity.role.as_str(), %address, "console sign-in");
            ([(header::SET_COOKIE, auth::session_cookie(Some(&opened.cookie)))], Redirect::to("/")).into_response()
        }
        Err(e) => page(StatusCode::SERVICE_UNAVAILABLE, &crate::db::error_chain(&e)),
    }
}

pub async fn sign_out(State(observed): State<Arc<Observed>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    let caller = match observed.caller(&headers, peer.ip()).await {
        Ok(caller) => caller,
        Err(refused) => return refused.into_response(),
    };
    if !auth::same_origin(&caller, &headers) || auth::cross_site(&headers) {
        return Refusal::Forbidden("missing or wrong CSRF token".into()).into_response();
    }
    if let (Some(cookie), Some(client)) = (auth::cookie(&headers, auth::COOKIE), observed.client().await) {
        let _ = crate::operators::close_session(&**client, cookie).await;
        observed.gate.forget(cookie);
    }
    ([(header::SET_COOKIE, auth::session_cookie(None))], StatusCode::NO_CONTENT).into_response()
}

/// Who the page is signed in as, what it may do, and its CSRF token.
#[derive(Serialize)]
pub struct Session {
    #[serde(flatten)]
    identity: Identity,
    /// How: `session`, `token`, `proxy` or `loopback` (not signed in).
    via: &'static str,
    /// The actions its buttons may take (none when the listener is --read-only).
    actions: Vec<Action>,
    read_only: bool,
    csrf: Option<String>,
}

pub async fn session(State(observed): State<Arc<Observed>>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    match observed.caller(&headers, peer.ip()).await {
        Ok(caller) => {
            let read_only = observed.access.read_only;
            let actions = if read_only { Vec::new() } else { caller.identity.actions() };
            Json(Session { identity: caller.identity, via: caller.via, actions, read_only, csrf: caller.csrf }).into_response()
        }
        Err(refused) => refused.into_response(),
    }
}
