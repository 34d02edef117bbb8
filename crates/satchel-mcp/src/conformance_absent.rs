//! The conformance fixtures in a build without them (the product's): a
//! [`ConformanceServer`] that cannot be made, so `mcp serve
//! --conformance-fixtures` says how to build them instead of serving. The
//! fixtures (2,700 lines) are in `conformance/`, built with the
//! `conformance-fixtures` feature, which the tests turn on.

use crate::SatchelServer;

/// Never made in this build: [`ConformanceServer::new`] refuses.
#[derive(Clone)]
pub struct ConformanceServer(std::convert::Infallible);

impl ConformanceServer {
    /// Refuses: this build has no fixtures.
    ///
    /// # Errors
    /// Always, saying how to build them.
    pub fn new(_inner: SatchelServer) -> std::io::Result<ConformanceServer> {
        Err(std::io::Error::other(
            "this satchel was built without the conformance fixtures; build it with \
             `cargo build -p satchel-cli --features satchel-mcp/conformance-fixtures`",
        ))
    }
}

impl crate::server::PerSession for ConformanceServer {
    fn for_new_session(&self) -> Self {
        match self.0 {}
    }
}

impl rmcp::ServerHandler for ConformanceServer {}
