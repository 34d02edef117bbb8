//! The tool runtime: the [`Tool`] trait, the validating [`Registry`],
//! configuration, policy and consent, external tools and the
//! [`LiveRegistry`] that watches their directories, and the observer that
//! puts every call on record. Satchel's own tools live in
//! `satchel-builtins`; this crate knows none of them.
//!
//! A call flows [`dispatch`] → lookup → schema validation → policy (and
//! consent) → rate limits → `Tool::run` → [`ToolOutput`](satchel_core::ToolOutput). Every failure on that path
//! (unknown name, invalid input, a tool's own error, a panic) comes back as
//! an output with `is_error` set and a message the model can act on; the
//! caller never sees a Rust error or a panic.
//!
//! What does not live here: running processes (that is `satchel-exec`),
//! talking to models, storing anything (the audit trail plugs in through
//! [`CallObserver`]), the built-in tools and their store and memory
//! handles (`satchel-builtins`).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod config;
pub mod config_schema;
mod dispatch;
pub mod external;
pub mod format;
mod hints;
pub mod hooks;
mod live;
mod observer;
pub mod policy;
pub mod progress;
mod registry;
mod result_cap;
pub mod sandbox;
mod sections;
pub mod skills;
mod tool;
pub mod usage;
mod validation;

pub use config::{ExternalConfig, Settings, ToolsConfig};
pub use dispatch::{
    Consent, ConsentAnswer, Dispatched, NonInteractive, RememberingConsent, Steer, UserInitiated,
    dispatch, dispatch_with,
};
pub use format::Style;
pub use live::{LiveRegistry, RefreshReport, RejectedTool};
pub use observer::{CallObserver, CallSource, not_recorded, observed_dispatch};
pub use registry::{Registry, RegistryError};
pub use sections::{Section, ToolSections};
pub use tool::{CallTrace, Tool, ToolContext, ToolError, ToolLevel, ToolSource};
pub use validation::SchemaViolation;
