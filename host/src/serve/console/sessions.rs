//! The console's sessions: a token (a tenant's, or the admin's) exchanged
//! once for a random session id the browser holds in an `HttpOnly` cookie.
//! The token itself is never stored in the page; the session keeps only its
//! sha256, so every request is authorized as that token's would be (a token
//! revoked or expired ends its sessions at once). A change (any method but
//! GET and HEAD) also needs the session's CSRF token in `X-CSRF-Token`,
//! which only the console's own script can read. Sessions end on sign-out,
//! after [`ServeConfig::console_idle`](super::super::ServeConfig) without a
//! request, and after [`LONGEST`] whatever happens. They live in this node's
//! memory: a restart signs everyone out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};

use crate::serve::auth::{constant_time_eq, token_sha256};
use crate::serve::error::ApiError;

/// The session cookie's name.
pub const COOKIE: &str = "weir_session";
/// The header a change carries its session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The longest a session lasts, however busy.
pub const LONGEST: Duration = Duration::from_secs(12 * 3600);

/// A signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// The sha256 of the token it was opened with.
    pub token_sha256: String,
    pub csrf: String,
    opened: Instant,
    last_used: Instant,
}

/// This node's sessions, by the sha256 of their id.
pub struct Sessions {
    idle: Duration,
    open: Mutex<HashMap<String, Session>>,
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    hex::encode(bytes)
}

/// The session id a request's cookie holds, if it has one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

impl Sessions {
    pub fn new(idle: Duration) -> Self {
        Self { idle, open: Mutex::new(HashMap::new()) }
    }

    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Opens a session for a token already checked; returns its id and CSRF token.
    pub fn open(&self, token_sha256: String) -> (String, String) {
        let (id, csrf) = (random_hex(), random_hex());
        let now = Instant::now();
        let session = Session { token_sha256, csrf: csrf.clone(), opened: now, last_used: now };
        let mut open = self.open.lock().expect("sessions");
        open.retain(|_, s| !self.ended(s, now));
        open.insert(self::token_sha256(&id), session);
        (id, csrf)
    }

    fn ended(&self, s: &Session, now: Instant) -> bool {
        now.duration_since(s.last_used) > self.idle || now.duration_since(s.opened) > LONGEST
    }

    /// The session a request comes with: `None` without a session cookie; an
    /// error when it has ended, or when a change lacks its CSRF token.
    pub fn of(&self, parts: &Parts) -> Result<Option<Session>, ApiError> {
        let Some(id) = cookie(&parts.headers) else { return Ok(None) };
        let now = Instant::now();
        let mut open = self.open.lock().expect("sessions");
        let key = token_sha256(id);
        let session = match open.get_mut(&key) {
            Some(s) if !self.ended(s, now) => s,
            _ => {
                open.remove(&key);
                return Err(ApiError::unauthorized(
                    "the console session has ended (signed out, idle too long, or the server restarted): sign in again",
                ));
            }
        };
        if !matches!(parts.method, Method::GET | Method::HEAD) {
            let sent = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
            if !constant_time_eq(sent, &session.csrf) {
                return Err(ApiError::forbidden(format!(
                    "a change made with a console session needs its CSRF token in the {CSRF_HEADER} header"
                )));
            }
        }
        session.last_used = now;
        Ok(Some(session.clone()))
    }

    /// Ends the request's session, if it has one.
    pub fn close(&self, parts: &Parts) {
        if let Some(id) = cookie(&parts.headers) {
            self.open.lock().expect("sessions").remove(&token_sha256(id));
        }
    }
}

/// The `Set-Cookie` value for a new session (`Secure` when served over HTTPS).
pub fn set_cookie(id: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict{secure}")
}

/// The `Set-Cookie` value that removes it.
pub fn clear_cookie(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    fn parts(method: &str, cookie: Option<&str>, csrf: Option<&str>) -> Parts {
        let mut request = Request::builder().method(method).uri("/v1/publishers");
        if let Some(id) = cookie {
            request = request.header(header::COOKIE, format!("other=1; {COOKIE}={id}"));
        }
        if let Some(csrf) = csrf {
            request = request.header(CSRF_HEADER, csrf);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn a_session_reads_freely_changes_with_its_csrf_token_and_ends_idle_or_closed() {
        let sessions = Sessions::new(Duration::from_millis(200));
        let (id, csrf) = sessions.open("sha".into());
        assert!(sessions.of(&parts("GET", None, None)).unwrap().is_none());
        assert_eq!(sessions.of(&parts("GET", Some(&id), None)).unwrap().unwrap().token_sha256, "sha");
        assert_eq!(sessions.of(&parts("POST", Some(&id), None)).unwrap_err().status, 403);
        assert_eq!(sessions.of(&parts("POST", Some(&id), Some("wrong"))).unwrap_err().status, 403);
        assert!(sessions.of(&parts("POST", Some(&id), Some(&csrf))).unwrap().is_some());
        assert_eq!(sessions.of(&parts("GET", Some("made-up"), None)).unwrap_err().status, 401);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(sessions.of(&parts("GET", Some(&id), None)).unwrap_err().status, 401);
        let (id, _) = sessions.open("sha".into());
        sessions.close(&parts("GET", Some(&id), None));
        assert_eq!(sessions.of(&parts("GET", Some(&id), None)).unwrap_err().status, 401);
    }
}
