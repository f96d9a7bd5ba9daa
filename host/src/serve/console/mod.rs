//! The web console, served by `weir serve` at `/` on the API's own listener:
//! one page and its script and style, embedded in the binary (nothing to
//! install, nothing fetched at run time, no build step). The page is a
//! client of the HTTP API: it reads and changes through the same `/v1`
//! routes as the CLI, with a session cookie in place of the token
//! ([`sessions`]), so a tenant sees exactly what its token sees and every
//! check the API makes holds for the console too. Whatever it shows it
//! writes as text (never as markup), under a Content-Security-Policy that
//! runs no script but its own.

pub mod sessions;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::App;
use super::auth::{holder, refuse, token_sha256};
use super::error::{ApiError, ApiResult};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// Only the console's own script and style, nothing framed, nothing sent elsewhere.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub fn router() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(|| async { asset(INDEX, "text/html; charset=utf-8") }))
        .route("/console/app.js", get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/console/style.css", get(|| async { asset(STYLE, "text/css; charset=utf-8") }))
        .route("/console/session", get(session).post(sign_in).delete(sign_out))
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

/// What the page learns of its session: who it acts for, its CSRF token, how long it may idle.
fn described(app: &App, who: &Option<String>, csrf: &str) -> serde_json::Value {
    json!({
        "admin": who.is_none(),
        "tenant": who,
        "csrf": csrf,
        "idle_seconds": app.sessions.idle().as_secs(),
    })
}

/// `POST /console/session {"token": …}`: a session for a usable token, in a cookie.
async fn sign_in(State(app): State<Arc<App>>, parts: Parts, Json(body): Json<SignIn>) -> ApiResult<Response> {
    let sha = token_sha256(body.token.trim());
    let who = holder(&app, &sha).map_err(|e| refuse(&app, &parts, e, None))?;
    let (id, csrf) = app.sessions.open(sha);
    app.audit.record("console.sign-in", json!({ "tenant": who, "admin": who.is_none() }));
    let cookie = sessions::set_cookie(&id, app.config.tls.is_some());
    let mut response = Json(described(&app, &who, &csrf)).into_response();
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).expect("hex"));
    Ok(response)
}

/// `GET /console/session`: the request's session, if it still has one.
async fn session(State(app): State<Arc<App>>, parts: Parts) -> ApiResult<Json<serde_json::Value>> {
    let session = app.sessions.of(&parts)?.ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    // Its token revoked or expired since: the session ends with it.
    let who = holder(&app, &session.token_sha256).inspect_err(|_| app.sessions.close(&parts))?;
    Ok(Json(described(&app, &who, &session.csrf)))
}

/// `DELETE /console/session` (with its CSRF token): signs out.
async fn sign_out(State(app): State<Arc<App>>, parts: Parts) -> ApiResult<Response> {
    let session = app.sessions.of(&parts)?.ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    app.sessions.close(&parts);
    let who = holder(&app, &session.token_sha256).ok().flatten();
    app.audit.record("console.sign-out", json!({ "tenant": who }));
    let mut response = StatusCode::NO_CONTENT.into_response();
    let cookie = sessions::clear_cookie(app.config.tls.is_some());
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).expect("ascii"));
    Ok(response)
}
