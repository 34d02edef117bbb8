//! The satchel binary end to end: every command run as a user would run it,
//! against real peers (a model server, MCP SDKs, the sandbox) and local servers
//! for faults. One test binary (a binary per file linked everything each time).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

#[path = "../../../satchel-agent/tests/support/fake_model.rs"]
mod fake_model;
#[path = "../../../satchel-agent/tests/support/peers.rs"]
mod peers_dir;
mod support;

mod agent;
mod background;
mod cassette;
mod chat;
mod cli;
mod config_fails_closed;
mod edit_forms;
mod files;
mod first_hour;
mod hooks;
mod hostile;
mod http_abuse;
mod install;
mod instructions;
mod local_servers;
mod mcp_client;
mod mcp_serve;
mod mcp_sessions;
mod memory;
mod model_server;
mod otel;
mod peers;
mod prompt;
mod sandbox;
mod schemas;
mod store;
mod telegram;
mod trust;
