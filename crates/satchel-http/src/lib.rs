//! Satchel's HTTP clients, set up in one place: reqwest over rustls with
//! the `ring` crypto provider and the platform's certificate verifier.
//!
//! Every crate that talks HTTP (model providers, search backends, MCP
//! servers) starts from [`client_builder`], so the whole binary links one
//! TLS stack (no aws-lc build) and no process-wide crypto provider has to
//! be installed before a client can be built. [`retry_after`] is the one
//! reader of a server's `Retry-After` those clients share.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod retry_after;

use std::sync::Arc;

use rustls_platform_verifier::BuilderVerifierExt;

pub use retry_after::retry_after;

/// Why a client could not be set up (a broken system certificate store).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up TLS: {0}")]
pub struct HttpSetupError(String);

impl HttpSetupError {
    /// An error with this message (a client that failed to build).
    pub fn from_message(message: String) -> HttpSetupError {
        HttpSetupError(message)
    }
}

/// The TLS configuration every client uses; `alpn` lists the protocols to
/// offer (e.g. `http/1.1`).
pub fn tls_config(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, HttpSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpSetupError(e.to_string()))?
        .with_platform_verifier()
        .map_err(|e| HttpSetupError(e.to_string()))?
        .with_no_client_auth();
    tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(tls)
}

/// A client builder with Satchel's TLS setup and user agent; callers add
/// their own timeouts and headers.
pub fn client_builder() -> Result<reqwest::ClientBuilder, HttpSetupError> {
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config(&[b"http/1.1"])?)
        .user_agent(concat!("satchel/", env!("CARGO_PKG_VERSION"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_builds_without_a_process_wide_provider() {
        assert!(
            client_builder()
                .and_then(|b| b
                    .build()
                    .map_err(|e| HttpSetupError::from_message(e.to_string())))
                .is_ok()
        );
    }
}
