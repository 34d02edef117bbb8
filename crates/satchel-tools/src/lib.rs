//! Tools: the [`Tool`] trait, the validating [`Registry`], configuration,
//! and Satchel's built-in tools.
//!
//! A call flows `Registry::call` → lookup → schema validation → `Tool::run`
//! → [`ToolOutput`](satchel_core::ToolOutput). Every failure on that path
//! (unknown name, invalid input, a tool's own error, a panic) comes back as
//! an output with `is_error` set and a message the model can act on; the
//! caller never sees a Rust error or a panic.
//!
//! What does not live here: running processes (that is `satchel-exec`),
//! talking to models, storing anything (the audit trail plugs in through
//! [`CallObserver`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod bash;
pub mod config;
pub mod external;
pub mod format;
mod live;
mod observer;
mod registry;
mod tool;
mod validation;

pub use config::{ExternalConfig, Settings, ToolsConfig};
pub use format::Style;
pub use live::{LiveRegistry, RefreshReport, RejectedTool};
pub use observer::{CallObserver, CallSource, observed_call};
pub use registry::{Registry, RegistryError};
pub use tool::{Tool, ToolContext, ToolError, ToolLevel, ToolSource};
pub use validation::SchemaViolation;

/// A registry holding every built-in tool.
pub fn builtin_registry() -> Result<Registry, RegistryError> {
    let mut registry = Registry::new();
    registry.register(bash::BashTool::new())?;
    Ok(registry)
}
