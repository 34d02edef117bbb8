//! OAuth 2.1 for remote MCP servers, around rmcp's `auth` module.
//!
//! rmcp discovers the authorization server (protected-resource and
//! authorization-server metadata, the issuer check), registers (client ID
//! metadata document or dynamic registration), builds the PKCE
//! authorization URL, checks `iss`, exchanges the code and refreshes
//! tokens. What it leaves to the application lives here:
//!
//! - [`store`]: where tokens, the registration (with its secret) and the
//!   server's metadata are kept, 0600, locked around a refresh;
//! - [`redirect`]: getting the code back, headless when the server
//!   redirects at once, else through the browser and a loopback listener;
//! - [`scopes`]: what to ask for on a step-up, and when to stop;
//! - [`flow`]: one authorization from a server's challenge to tokens.

pub mod flow;
pub mod redirect;
pub mod scopes;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

pub use flow::Authorizer;
pub use store::{Record, Registration, TokenStore};

/// Who Satchel is to authorization servers, per server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OAuthOptions {
    /// `client_name` for dynamic registration.
    pub client_name: String,
    /// A client ID registered out of band (takes priority over all else).
    pub client_id: Option<String>,
    /// Its secret, for a confidential pre-registered client.
    pub client_secret: Option<String>,
    /// The HTTPS URL of a client ID metadata document Satchel is known
    /// by, used when the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for instead of what the server suggests.
    pub scopes: Vec<String>,
    /// Whether metadata may name authorization servers at private addresses
    /// (e.g. single sign-on inside a company network).
    pub allow_private_network: bool,
}

impl std::fmt::Debug for OAuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthOptions")
            .field("client_name", &self.client_name)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("allow_private_network", &self.allow_private_network)
            .finish()
    }
}

/// Shows the authorization URL to the user (the CLI prints it to stderr
/// and opens the browser).
pub type ShowUrl = Arc<dyn Fn(&str) + Send + Sync>;

/// Whether a person may be asked to log in.
#[derive(Clone)]
pub enum Interaction {
    /// Never: a server that needs authorization is reported as needing
    /// `satchel mcp login` (the background manager).
    Never,
    /// Only if the authorization server redirects at once, without a page
    /// for a person (test servers, some single sign-on setups).
    Headless,
    /// Headless first; else the URL is shown, and a loopback listener
    /// waits up to `wait` for the browser's redirect.
    Browser {
        /// How the URL is shown.
        show: ShowUrl,
        /// How long to wait for the person.
        wait: Duration,
    },
}

impl std::fmt::Debug for Interaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interaction::Never => f.write_str("Never"),
            Interaction::Headless => f.write_str("Headless"),
            Interaction::Browser { wait, .. } => f
                .debug_struct("Browser")
                .field("wait", wait)
                .finish_non_exhaustive(),
        }
    }
}

// No `source`: the message already says it all, and an error chain
// would print it twice.
impl From<rmcp::transport::auth::AuthError> for OAuthError {
    fn from(error: rmcp::transport::auth::AuthError) -> OAuthError {
        OAuthError::Auth(error)
    }
}

impl From<redirect::RedirectError> for OAuthError {
    fn from(error: redirect::RedirectError) -> OAuthError {
        OAuthError::Redirect(error)
    }
}

/// How a [`OAuthError::NeedsLogin`] message starts (the manager reports
/// such a server as needing login rather than failed).
pub const NEEDS_LOGIN: &str = "needs login:";

/// Why a server could not be authorized.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The server needs a login a person must do.
    #[error("needs login: run `satchel mcp login {0}`")]
    NeedsLogin(String),
    /// Authorization failed (discovery, registration, the issuer check,
    /// the code exchange...).
    #[error("OAuth: {0}")]
    Auth(rmcp::transport::auth::AuthError),
    /// The code did not come back.
    #[error("OAuth: {0}")]
    Redirect(redirect::RedirectError),
    /// The server keeps refusing after the allowed authorizations.
    #[error("OAuth: {0}")]
    GaveUp(String),
}
