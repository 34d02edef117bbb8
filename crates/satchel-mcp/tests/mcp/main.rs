//! MCP both ways against the official SDKs and local servers for faults:
//! Satchel's server (stdio and HTTP) and its client of mcp.json's servers.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

mod client;
mod everything;
#[path = "../support/everything_http.rs"]
mod everything_http;
mod faults;
#[path = "../../../satchel-agent/tests/support/peers.rs"]
mod peers_dir;
mod server;
