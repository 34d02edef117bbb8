//! The host: a project opened once (its settings and policy, the
//! database, memory, the tools with the MCP servers' imports, the
//! hot-reloaded agent.json) serving many conversations at once, each with
//! its own consent channel and event stream. Every front end (the REPL,
//! one-shot runs, `mcp serve`, and the Telegram and web front ends) starts
//! here; none wires the store, the tools or the agent itself.
//!
//! The host never reads the process environment: the binary passes the
//! variables ([`HostOptions::env`]) and the user's directories
//! ([`HostPaths`]), so a test or an embedding program decides every one.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use satchel_host::{ConversationOptions, Host, HostOptions};
//!
//! let host = Host::open(HostOptions { root: "/work/project".into(), ..HostOptions::default() })?;
//! let mut agent = host
//!     .conversation(ConversationOptions {
//!         source: satchel_store::AuditSource::Repl,
//!         caller: None,
//!         memory_namespace: None,
//!         consent: Arc::new(satchel_tools::NonInteractive),
//!         display: satchel_tools::Style::Markdown,
//!         resume: None,
//!     })
//!     .await?;
//! # let _ = &mut agent;
//! host.close().await;
//! # Ok(())
//! # }
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod audit;
mod call_hooks;
mod conversation;
mod file_watch;
mod hooks;
mod host;
pub mod loaders;
pub mod memory;
pub mod model;
pub mod otel;
mod paths;
mod project_context;
pub mod resources;
pub mod sampling;
pub mod store;
pub mod trust;

pub use audit::AuditObserver;
pub use conversation::ConversationOptions;
pub use host::{
    Host, HostOptions, PROJECT_TOOLS, config_paths, memory_config, read_settings, refused,
    tools_configurer,
};
pub use memory::LazyMemory;
pub use paths::HostPaths;
pub use satchel_memory::ModelFetcher;
pub use store::LazyStore;
