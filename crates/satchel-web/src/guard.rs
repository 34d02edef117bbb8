//! Who may use the web view, checked on every request before any handler:
//!
//! - **Host**: the `Host` header must name this server (its address, or
//!   `localhost` on loopback, or a name allowed with `--allow-host`), so a
//!   page on another site cannot reach it by DNS rebinding.
//! - **Token**: off loopback every request needs the token, as a bearer
//!   header or the cookie that `/?token=...` sets (HttpOnly, SameSite=Strict).
//! - **Cross-site writes**: a request that changes something (anything but
//!   GET and HEAD) must come from this origin (`Origin` equal to the page's)
//!   and carry `X-Satchel-Request: 1`, which a cross-site form cannot send and
//!   a cross-site script can only send after a preflight that is never
//!   granted.
//! - Every answer forbids framing, sniffing and scripts from elsewhere
//!   (`Content-Security-Policy`), and sends no referrer.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The checks' configuration.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Where the server listens.
    pub addr: SocketAddr,
    /// Required off loopback.
    pub token: Option<String>,
    /// Extra host names accepted in `Host` (a reverse proxy's).
    pub allowed_hosts: Vec<String>,
}

/// The cookie that carries the token for a browser.
pub const TOKEN_COOKIE: &str = "satchel_token";

/// The header a write must carry.
pub const WRITE_HEADER: &str = "x-satchel-request";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

impl Guard {
    /// The `host[:port]` values `Host` may hold.
    fn hosts(&self) -> Vec<String> {
        let port = self.addr.port();
        let mut names = vec![self.addr.to_string()];
        if self.addr.ip().is_loopback() {
            names.extend([
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]);
        }
        for name in &self.allowed_hosts {
            names.push(name.clone());
            names.push(format!("{name}:{port}"));
        }
        names
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        self.hosts()
            .iter()
            .any(|name| name.eq_ignore_ascii_case(host))
    }

    fn token_given<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Vec<&'a str> {
        let mut given = Vec::new();
        if let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
        {
            given.push(bearer.trim());
        }
        for cookie in headers.get_all(header::COOKIE) {
            let Ok(cookie) = cookie.to_str() else {
                continue;
            };
            for pair in cookie.split(';') {
                if let Some(value) = pair.trim().strip_prefix(&format!("{TOKEN_COOKIE}=")) {
                    given.push(value);
                }
            }
        }
        if let Some(query) = query {
            for pair in query.split('&') {
                if let Some(value) = pair.strip_prefix("token=") {
                    given.push(value);
                }
            }
        }
        given
    }

    fn write_ok(&self, headers: &HeaderMap) -> bool {
        let origin_ok = headers
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            // https when a reverse proxy terminates TLS in front.
            .and_then(|origin| {
                origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
            })
            .is_some_and(|origin| {
                self.hosts()
                    .iter()
                    .any(|name| name.eq_ignore_ascii_case(origin))
            });
        let marked = headers
            .get(WRITE_HEADER)
            .is_some_and(|value| value.as_bytes() == b"1");
        origin_ok && marked
    }
}

/// Compares secrets in time that does not depend on where they differ.
fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(serde_json::json!({"error": why}))).into_response()
}

/// The middleware: every check, then the handler, then the headers every
/// answer carries.
pub async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let headers = request.headers();
    if !guard.host_ok(headers) {
        tracing::warn!(host = ?headers.get(header::HOST), "refused a request for another host");
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer for that host",
        );
    }
    let mut set_cookie = None;
    if let Some(token) = &guard.token {
        let query = request.uri().query();
        let given = Guard::token_given(headers, query);
        if !given.iter().any(|value| same(value, token)) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "a token is required: open the URL satchel web printed",
            );
        }
        // A token in the URL becomes a cookie, so links work without it.
        if query.is_some_and(|q| q.contains("token=")) {
            set_cookie = Some(format!(
                "{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            ));
        }
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) && !guard.write_ok(headers) {
        tracing::warn!(method = %request.method(), "refused a write without this origin and the request header");
        return refuse(StatusCode::FORBIDDEN, "writes must come from this page");
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(cookie) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}
