//! TLS to a PostgreSQL server as libpq does it: `sslmode=prefer` (the
//! default) and `require` encrypt without checking who the server is, so a
//! stock server with its self-signed certificate works; `verify-ca` and
//! `verify-full` (in the URL or `PGSSLMODE`) check the certificate against
//! the platform's roots, as Satchel's HTTP clients do.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// The connector for `location`: verifying the server only when asked.
pub(super) fn connector(display: &str, verify: bool) -> Result<MakeRustlsConnect, StoreError> {
    let cannot = |reason: String| StoreError::CannotOpen {
        path: PathBuf::from(display),
        reason,
    };
    if verify {
        let config = satchel_http::tls_config(&[]).map_err(|error| cannot(error.to_string()))?;
        return Ok(MakeRustlsConnect::new(config));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| cannot(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Accepts the server's certificate whoever signed it (libpq's `prefer`
/// and `require`), while still checking that the server holds its key.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
