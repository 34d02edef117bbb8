//! Tools: the [`Tool`] trait, the validating [`Registry`], configuration,
//! and Satchel's built-in tools.
//!
//! A call flows [`dispatch`] → lookup → schema validation → policy (and
//! consent) → rate limits → `Tool::run` → [`ToolOutput`](satchel_core::ToolOutput). Every failure on that path
//! (unknown name, invalid input, a tool's own error, a panic) comes back as
//! an output with `is_error` set and a message the model can act on; the
//! caller never sees a Rust error or a panic.
//!
//! What does not live here: running processes (that is `satchel-exec`),
//! talking to models, storing anything (the `memory` tool works through the
//! [`satchel_memory::Memory`] its caller puts in the [`ToolContext`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

pub mod bash;
pub mod config;
mod dispatch;
pub mod external;
pub mod format;
mod live;
pub mod memory;
pub mod policy;
mod registry;
pub mod search;
mod tool;
mod validation;

pub use config::{ExternalConfig, Settings, ToolsConfig};
pub use dispatch::{
    Consent, ConsentAnswer, Dispatched, NonInteractive, RememberingConsent, UserInitiated, dispatch,
};
pub use format::Style;
pub use live::{LiveRegistry, RefreshReport};
pub use registry::{Registry, RegistryError};
pub use tool::{Tool, ToolContext, ToolError, ToolLevel, ToolSource};
pub use validation::SchemaViolation;

/// A registry holding every built-in tool.
pub fn builtin_registry() -> Result<Registry, RegistryError> {
    let mut registry = Registry::new();
    registry.register(bash::BashTool::new())?;
    registry.register(memory::MemoryTool::new())?;
    registry.register(search::SearchTool::new(Arc::new(
        search::MemoryCache::default(),
    )))?;
    Ok(registry)
}
