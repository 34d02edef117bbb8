//! [`McpError`]: what can go wrong setting up MCP serving and clients.
//!
//! Failures of single tool calls are not errors here: they are `isError`
//! outputs, on both sides.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why an MCP server or client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// `serve --http` on an address other people can reach, without a token.
    /// Produced before binding; not retryable without configuration.
    #[error(
        "{addr} is not a loopback address: give a bearer token (--token or SATCHEL_MCP_TOKEN) to serve on it"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A bearer token that cannot work (empty, or not a valid header value).
    #[error("the bearer token must be non-empty visible ASCII without spaces")]
    InvalidToken,
    /// An `--allow-origin` value that is not `scheme://host[:port]`.
    #[error("`{0}` is not an origin (expected scheme://host[:port], e.g. https://app.example.com)")]
    InvalidOrigin(String),
    /// Binding the HTTP listener failed (address in use, permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// The transport failed while serving.
    #[error("MCP serving failed: {0}")]
    Serve(String),
    /// An `mcp.json` file that could not be read (other than missing).
    #[error("{path}: cannot read: {source}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}
