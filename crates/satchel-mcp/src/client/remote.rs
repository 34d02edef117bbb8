//! [`Remote`]: a connection to a streamable-HTTP MCP server, with OAuth.
//!
//! rmcp's transport sends the stored token (refreshing it shortly before
//! it expires, and once more when the server rejects it) and hands back the
//! server's `WWW-Authenticate` challenge when that is not enough. What to
//! do then is decided here: a 401 authorizes (again), a 403
//! `insufficient_scope` steps up to the union of the granted and the
//! challenged scopes, at most [`scopes::MAX_ROUNDS`] times per operation,
//! and not at all when the server challenges for scopes already held.
//! The new tokens go into the same transport, so a session survives.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::{ClientInitializeError, Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{AuthClient, WWWAuthenticateParams};
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ServiceError};

use super::oauth::scopes::{self, Rounds};
use super::oauth::{Authorizer, OAuthError};

/// How the MCP lifecycle starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lifecycle {
    /// `server/discover`, falling back to `initialize` for older servers.
    #[default]
    Auto,
    /// The 2025-11-25 `initialize` handshake and a session.
    Initialize,
    /// 2026-07-28: `server/discover`, then self-contained requests.
    Discover,
}

impl Lifecycle {
    /// The lifecycle for a protocol version name (`2025-11-25`, `2026-07-28`,
    /// `auto`); `None` for anything else.
    pub fn for_version(version: &str) -> Option<Lifecycle> {
        match version {
            "auto" => Some(Lifecycle::Auto),
            v if v.len() == 10 && v.as_bytes()[4] == b'-' => {
                Some(if ProtocolVersion::V_2026_07_28.as_str() <= v {
                    Lifecycle::Discover
                } else {
                    Lifecycle::Initialize
                })
            }
            _ => None,
        }
    }

    fn mode(self) -> ClientLifecycleMode {
        let preferred: Vec<ProtocolVersion> = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .rev()
            .cloned()
            .collect();
        match self {
            Lifecycle::Auto => ClientLifecycleMode::Auto {
                preferred_versions: preferred,
                legacy_version: None,
            },
            Lifecycle::Initialize => ClientLifecycleMode::Initialize,
            Lifecycle::Discover => ClientLifecycleMode::Discover {
                preferred_versions: preferred,
            },
        }
    }
}

/// Where and how to connect.
#[derive(Debug, Clone, Default)]
pub struct RemoteConfig {
    /// The endpoint URL.
    pub url: String,
    /// Headers sent with every request. An `Authorization` header turns
    /// OAuth off: the server gets that header and nothing else.
    pub headers: BTreeMap<String, String>,
    /// How the lifecycle starts.
    pub lifecycle: Lifecycle,
}

impl RemoteConfig {
    /// Whether the headers carry their own `Authorization`.
    pub fn has_authorization_header(&self) -> bool {
        self.headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"))
    }
}

/// Why a remote server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A configured header that is not valid HTTP.
    #[error("header `{0}`: {1}")]
    Header(String, String),
    /// The server needs authorization that could not be had.
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The MCP handshake failed.
    #[error("{}", connect_words(url, error))]
    Connect {
        /// The endpoint.
        url: String,
        /// What rmcp said.
        error: Box<ClientInitializeError>,
    },
    /// A request failed.
    #[error("{}", super::describe::service(.0))]
    Service(#[from] ServiceError),
}

/// Why the handshake with `url` failed, naming the URL once.
fn connect_words(url: &str, error: &ClientInitializeError) -> String {
    let words = super::describe::initialize(error);
    if words.contains(url) {
        words
    } else {
        format!("cannot connect to {url}: {words}")
    }
}

impl RemoteError {
    /// Whether a person must log in (`satchel mcp login`).
    pub fn needs_login(&self) -> bool {
        matches!(self, RemoteError::OAuth(OAuthError::NeedsLogin(_)))
    }
}

/// A live connection to a remote server.
pub struct Remote<H: ClientHandler> {
    running: RunningService<RoleClient, H>,
    auth: Option<(AuthClient<reqwest::Client>, Authorizer)>,
    url: String,
}

impl<H: ClientHandler + Clone> Remote<H> {
    /// Connects to `config.url` and completes the lifecycle, authorizing
    /// with `authorizer` when the server asks (no authorizer, or an
    /// `Authorization` header: no OAuth).
    pub async fn connect(
        handler: H,
        config: &RemoteConfig,
        authorizer: Option<Authorizer>,
    ) -> Result<Remote<H>, RemoteError> {
        crate::ensure_crypto_provider();
        let mut transport_config =
            StreamableHttpClientTransportConfig::with_uri(config.url.as_str())
                .custom_headers(header_map(&config.headers)?);
        transport_config.retry_config = Arc::new(BriefResume);
        let authorizer = authorizer.filter(|_| !config.has_authorization_header());
        let Some(authorizer) = authorizer else {
            let transport = StreamableHttpClientTransport::from_config(transport_config);
            let running = handler
                .serve_with_lifecycle(transport, config.lifecycle.mode())
                .await
                .map_err(|error| RemoteError::Connect {
                    url: config.url.clone(),
                    error: Box::new(error),
                })?;
            return Ok(Remote {
                running,
                auth: None,
                url: config.url.clone(),
            });
        };
        let manager = authorizer.restore().await?;
        let auth = AuthClient::new(reqwest::Client::new(), manager);
        let mut rounds = Rounds::default();
        loop {
            let transport =
                StreamableHttpClientTransport::with_client(auth.clone(), transport_config.clone());
            match handler
                .clone()
                .serve_with_lifecycle(transport, config.lifecycle.mode())
                .await
            {
                Ok(running) => {
                    return Ok(Remote {
                        running,
                        auth: Some((auth, authorizer)),
                        url: config.url.clone(),
                    });
                }
                Err(error) => {
                    let Some(challenge) = error.auth_challenge().map(str::to_owned) else {
                        return Err(RemoteError::Connect {
                            url: config.url.clone(),
                            error: Box::new(error),
                        });
                    };
                    reauthorize(&auth, &authorizer, &config.url, &challenge, &mut rounds).await?;
                }
            }
        }
    }
}

impl<H: ClientHandler> Remote<H> {
    /// The peer to send requests through.
    pub fn peer(&self) -> &Peer<RoleClient> {
        self.running.peer()
    }

    /// Runs `op`; when the server answers it with an authorization
    /// challenge, authorizes (or steps up) and runs it again.
    pub async fn with_auth<T, F, Fut>(&self, op: F) -> Result<T, RemoteError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let mut rounds = Rounds::default();
        loop {
            match op(self.peer().clone()).await {
                Ok(value) => return Ok(value),
                Err(error) => self.recover(error, &mut rounds).await?,
            }
        }
    }

    /// Calls a tool, answering the server's SEP-2322 input requests
    /// (`input_required`) through the handler, with
    /// [`Remote::with_auth`]'s authorization.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, RemoteError> {
        let mut rounds = Rounds::default();
        loop {
            match self.running.call_tool(params.clone()).await {
                Ok(result) => return Ok(result),
                Err(error) => self.recover(error, &mut rounds).await?,
            }
        }
    }

    /// Authorizes after `error` when a challenge caused it; else `error`.
    async fn recover(&self, error: ServiceError, rounds: &mut Rounds) -> Result<(), RemoteError> {
        let (Some(challenge), Some((auth, authorizer))) = (service_challenge(&error), &self.auth)
        else {
            return Err(error.into());
        };
        reauthorize(auth, authorizer, &self.url, &challenge, rounds).await?;
        Ok(())
    }

    /// The running service, for callers that supervise it.
    pub fn into_running(self) -> RunningService<RoleClient, H> {
        self.running
    }

    /// Ends the connection (closing a 2025-11-25 session).
    pub async fn close(self) {
        let _ = self.running.cancel().await;
    }
}

/// Waits between tries to resume a broken event stream: the server gets
/// about 2 s to come back, then the stream is given up and a call waiting
/// on it ends (rmcp's default tries for ever, doubling the wait, so a call
/// to a server that died waited for its timeout).
const RESUME_DELAYS: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_millis(1000),
];

/// rmcp's retry policy for event streams: [`RESUME_DELAYS`], then stop.
#[derive(Debug)]
struct BriefResume;

impl SseRetryPolicy for BriefResume {
    fn retry(&self, times: usize) -> Option<Duration> {
        RESUME_DELAYS.get(times).copied()
    }
}

/// Authorizes again after `challenge`, into `auth`'s manager, spending
/// one of `rounds`.
async fn reauthorize(
    auth: &AuthClient<reqwest::Client>,
    authorizer: &Authorizer,
    url: &str,
    challenge: &str,
    rounds: &mut Rounds,
) -> Result<(), OAuthError> {
    let base = url::Url::parse(url).map_err(rmcp::transport::auth::AuthError::from)?;
    let params = WWWAuthenticateParams::parse(challenge, &base);
    let granted = authorizer.store.record()?.granted_scopes();
    let wanted = params.scope.as_deref().unwrap_or_default();
    let scopes = if params.is_insufficient_scope() {
        if !scopes::adds_scopes(&granted, wanted) {
            return Err(OAuthError::GaveUp(format!(
                "{url} refuses for want of scope `{wanted}`, which Satchel already holds; authorizing again cannot help"
            )));
        }
        Some(scopes::union(&granted, wanted))
    } else if granted.is_empty() {
        None
    } else {
        Some(scopes::union(&granted, wanted))
    };
    if !rounds.take() {
        return Err(OAuthError::GaveUp(format!(
            "{url} still refuses after {} authorizations",
            rounds.spent()
        )));
    }
    let manager = authorizer.authorize(Some(challenge), scopes).await?;
    *auth.auth_manager.lock().await = manager;
    Ok(())
}

/// The `WWW-Authenticate` challenge behind a failed request, if that is
/// why it failed.
pub fn service_challenge(error: &ServiceError) -> Option<String> {
    challenge_in(error).or_else(|| match error {
        ServiceError::TransportSend(dynamic) => challenge_in(dynamic.error.as_ref()),
        _ => None,
    })
}

/// The challenge of the first authorization error in `error`'s chain.
fn challenge_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(error);
    while let Some(current) = source {
        if let Some(e) = current.downcast_ref::<AuthRequiredError>() {
            return Some(e.www_authenticate_header.clone());
        }
        if let Some(e) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(e.www_authenticate_header.clone());
        }
        source = current.source();
    }
    None
}

/// Configured headers as HTTP headers.
fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<HeaderName, HeaderValue>, RemoteError> {
    let mut map = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|e| RemoteError::Header(name.clone(), e.to_string()))?;
        // The value is never echoed: it may be a token.
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| RemoteError::Header(name.clone(), "not a valid header value".into()))?;
        map.insert(header, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_follows_the_protocol_version() {
        assert_eq!(
            Lifecycle::for_version("2025-11-25"),
            Some(Lifecycle::Initialize)
        );
        assert_eq!(
            Lifecycle::for_version("2026-07-28"),
            Some(Lifecycle::Discover)
        );
        assert_eq!(Lifecycle::for_version("auto"), Some(Lifecycle::Auto));
        assert_eq!(Lifecycle::for_version("latest"), None);
    }

    #[test]
    fn bad_header_values_are_named_but_not_echoed() {
        let headers: BTreeMap<String, String> =
            [("X-Key".to_owned(), "secret\nvalue".to_owned())].into();
        let error = header_map(&headers).unwrap_err().to_string();
        assert!(error.contains("X-Key"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }
}
