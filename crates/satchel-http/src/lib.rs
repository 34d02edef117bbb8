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

use std::sync::{Arc, Mutex, PoisonError};

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
///
/// Made once per process and cloned (a clone shares the verifier): the
/// platform verifier reads and parses the system's whole certificate store,
/// milliseconds of CPU, and a host builds clients per conversation (its
/// model, `fetch`, `search`), so 100 Telegram chats opening at once parsed
/// it hundreds of times. A failure is not kept: the next call tries again.
pub fn tls_config(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, HttpSetupError> {
    static SHARED: Mutex<Option<rustls::ClientConfig>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut tls = match shared.as_ref() {
        Some(tls) => tls.clone(),
        None => {
            let tls = new_tls_config()?;
            *shared = Some(tls.clone());
            tls
        }
    };
    drop(shared);
    tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(tls)
}

/// How many times [`new_tls_config`] ran: once per process.
static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn new_tls_config() -> Result<rustls::ClientConfig, HttpSetupError> {
    MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpSetupError(e.to_string()))?
        .with_platform_verifier()
        .map_err(|e| HttpSetupError(e.to_string()))?
        .with_no_client_auth())
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

    /// The verifier is made once (the certificate store is parsed once),
    /// and each config keeps the protocols it was asked for.
    #[test]
    fn configs_share_one_verifier_and_keep_their_own_protocols() {
        let h1 = tls_config(&[b"http/1.1"]).unwrap();
        let h2 = tls_config(&[b"h2"]).unwrap();
        assert_eq!(h1.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert_eq!(h2.alpn_protocols, vec![b"h2".to_vec()]);
        for _ in 0..10 {
            client_builder().unwrap().build().unwrap();
        }
        assert_eq!(MADE.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

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
