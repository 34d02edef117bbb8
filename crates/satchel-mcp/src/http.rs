//! Streamable HTTP serving: rmcp's `StreamableHttpService` under `/mcp` in
//! an axum router, with the checks the MCP specification asks of a server
//! that may be reached from a browser.
//!
//! - Loopback is the default; any other address needs a bearer token, or
//!   [`bind`] refuses to start ([`McpError::TokenRequired`]). With a token,
//!   every request must carry `Authorization: Bearer <token>` (401 otherwise).
//! - `Origin`: a request that carries one must come from localhost or
//!   loopback (any port, http or https) or from an origin allowed
//!   explicitly; others get 403 (the specification's DNS-rebinding guidance).
//! - `Host`: on loopback only loopback names are accepted (403 otherwise);
//!   off loopback any host is, since the token guards the door.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{McpError, SatchelServer};

/// The path the MCP endpoint is served at.
pub const ENDPOINT: &str = "/mcp";

/// Origins always allowed: pages served from this machine.
const LOCAL_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// Where and how to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The address to listen on; port 0 picks a free one.
    pub addr: SocketAddr,
    /// Bearer token every request must carry; required off loopback.
    pub token: Option<String>,
    /// Browser origins allowed besides localhost and loopback, e.g.
    /// `https://app.example.com` (a missing port means the scheme's default;
    /// `:*` allows any).
    pub allowed_origins: Vec<String>,
}

/// A listener bound and checked, ready to serve.
pub struct BoundHttp {
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
}

/// Checks `options`, binds the listener and builds the router; nothing is
/// served until [`BoundHttp::serve`].
pub async fn bind(
    server: SatchelServer,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<BoundHttp, McpError> {
    let loopback = options.addr.ip().is_loopback();
    let token = match &options.token {
        Some(token) if valid_token(token) => Some(token.clone()),
        Some(_) => return Err(McpError::InvalidToken),
        None if loopback => None,
        None => return Err(McpError::TokenRequired { addr: options.addr }),
    };
    let origins = allowed_origins(&options.allowed_origins)?;

    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(shutdown.child_token());
    if !loopback {
        config = config.disable_allowed_hosts();
    }
    let service: StreamableHttpService<SatchelServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
    let mut router = Router::new().nest_service(ENDPOINT, service);
    if let Some(token) = token {
        let expected: Arc<str> = format!("Bearer {token}").into();
        router = router.layer(middleware::from_fn_with_state(expected, require_token));
    }
    let listener = TcpListener::bind(options.addr)
        .await
        .map_err(|source| McpError::Bind {
            addr: options.addr,
            source,
        })?;
    Ok(BoundHttp {
        listener,
        router,
        shutdown,
    })
}

impl BoundHttp {
    /// The address actually bound (the port, when 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, McpError> {
        self.listener.local_addr().map_err(|source| McpError::Bind {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })
    }

    /// Serves until the shutdown token fires.
    ///
    /// # Caveats
    /// On shutdown, open sessions are closed and in-flight calls are
    /// cancelled with them (their process groups are stopped).
    pub async fn serve(self) -> Result<(), McpError> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(self.shutdown.cancelled_owned())
            .await
            .map_err(|error| McpError::Serve(error.to_string()))
    }
}

/// Visible ASCII, no spaces: what fits in a header and survives copying.
fn valid_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// The local origins plus the user's, each checked for `scheme://host`.
fn allowed_origins(extra: &[String]) -> Result<Vec<String>, McpError> {
    let mut origins: Vec<String> = LOCAL_ORIGINS.iter().map(|o| (*o).to_owned()).collect();
    for origin in extra {
        let trimmed = origin.trim_end_matches('/');
        let valid = trimmed.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
        });
        if !valid {
            return Err(McpError::InvalidOrigin(origin.clone()));
        }
        origins.push(trimmed.to_owned());
    }
    Ok(origins)
}

/// 401 unless the request carries the expected `Authorization` header.
async fn require_token(State(expected): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if constant_time_eq(given, expected.as_bytes()) {
        return next.run(request).await;
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"missing or wrong bearer token"}}"#,
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"satchel\""),
    );
    response
}

/// Compares without leaking, through timing, how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(index).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"Bearer abc", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer ab", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abcd", b"Bearer abc"));
        assert!(!constant_time_eq(b"", b"Bearer abc"));
        assert!(valid_token("s3cr3t-token"));
        assert!(!valid_token(""));
        assert!(!valid_token("has space"));
    }

    #[test]
    fn origins_must_be_scheme_and_host() {
        let origins = allowed_origins(&["https://app.example.com/".into()]).unwrap();
        assert_eq!(
            origins.last().map(String::as_str),
            Some("https://app.example.com")
        );
        assert!(allowed_origins(&["app.example.com".into()]).is_err());
        assert!(allowed_origins(&["https://app.example.com/path".into()]).is_err());
    }
}
