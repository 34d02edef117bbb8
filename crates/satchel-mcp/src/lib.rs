//! The Model Context Protocol, both ways, over `rmcp`.
//!
//! - [`server`]: [`SatchelServer`] serves a [`LiveRegistry`](satchel_tools::LiveRegistry)'s
//!   tools to any MCP client, over stdio ([`serve_stdio`]) or streamable HTTP
//!   ([`http`]: loopback by default, bearer token off loopback, `Origin`
//!   checks against DNS rebinding).
//! - [`client`]: the servers declared in `.agents/mcp.json` are started and
//!   supervised by a [`McpManager`], and their tools join the registry as
//!   `server__tool`.
//! - [`convert`]: Satchel's tool model to MCP's wire types and back.
//! - [`diagnostic`]: an `echo` tool for latency checks and client debugging.
//! - [`conformance`]: a diagnostic fixture mode for the official MCP
//!   conformance suite (its fixture tools, resources and prompts around
//!   [`SatchelServer`]); not for real clients, and not in the product's
//!   build: only with the `conformance-fixtures` feature, which the tests
//!   turn on (without it, [`conformance::ConformanceServer::new`] says how
//!   to get it).
//!
//! What does not live here: storage (calls reach the audit trail through
//! [`satchel_tools::CallObserver`]), the tools themselves, and printing.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod client;
#[cfg(feature = "conformance-fixtures")]
pub mod conformance;
#[cfg(not(feature = "conformance-fixtures"))]
#[path = "conformance_absent.rs"]
pub mod conformance;
mod consent;
pub mod convert;
pub mod diagnostic;
mod error;
pub mod http;
pub mod resources;
pub mod server;
mod telemetry;

pub use client::{McpManager, ServerState, ServerStatus};
pub use error::McpError;
pub use server::{PerSession, SatchelServer, ServerOptions, SessionEnd, serve_stdio};

/// The handler trait [`serve_stdio`] and [`http::bind`] serve: implemented
/// by [`SatchelServer`] and [`conformance::ConformanceServer`].
pub use rmcp::ServerHandler;

/// Installs ring as the process's TLS crypto provider, once; call it before
/// building any rmcp HTTP client. reqwest is built without a default
/// provider here (aws-lc is slow to build), and panics without one.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err means another thread installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
