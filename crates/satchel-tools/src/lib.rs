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
//! talking to models, storing anything (the audit trail plugs in through
//! [`CallObserver`]; the `code`, `memory` and `conversation` tools reach the
//! store through handles their host passes in [`BuiltinDeps`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

pub mod bash;
pub mod code;
pub mod config;
pub mod config_schema;
pub mod conversation;
mod dispatch;
pub mod external;
pub mod format;
mod live;
pub mod memory;
mod observer;
pub mod policy;
mod registry;
pub mod sandbox;
pub mod search;
mod tool;
pub mod usage;
mod validation;

pub use config::{ExternalConfig, Settings, ToolsConfig};
pub use dispatch::{
    Consent, ConsentAnswer, Dispatched, NonInteractive, RememberingConsent, UserInitiated, dispatch,
};
pub use format::Style;
pub use live::{LiveRegistry, RefreshReport, RejectedTool};
pub use observer::{CallObserver, CallSource, not_recorded, observed_dispatch};
pub use registry::{Registry, RegistryError};
pub use tool::{CallTrace, Tool, ToolContext, ToolError, ToolLevel, ToolSource};
pub use validation::SchemaViolation;

/// What built-in tools need from their host.
#[derive(Clone, Default)]
pub struct BuiltinDeps {
    /// Where the `code` tool traces runs and keeps jobs.
    pub code_store: Option<Arc<dyn code::CodeStoreHandle>>,
    /// The model-backed code generator, when a model is configured.
    pub model_generator: Option<Arc<dyn code::CodeGenerator>>,
    /// Where the `code` tool reports its background jobs.
    pub code_jobs: code::JobTracker,
    /// Where the `memory` tool finds its memory; without one it answers
    /// every call with an error saying memory is unavailable.
    pub memory: Option<Arc<dyn memory::MemoryHandle>>,
    /// Where the `conversation` tool reads the record.
    pub records: Option<Arc<dyn conversation::RecordsHandle>>,
}

/// Every built-in tool, built once; share them between registries so their
/// state (search cache, running jobs) is shared too.
pub fn builtin_tools(deps: &BuiltinDeps) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(bash::BashTool::new()),
        Arc::new(
            code::CodeTool::with_jobs(
                deps.code_store.clone(),
                deps.model_generator.clone(),
                deps.code_jobs.clone(),
            )
            .with_memory(deps.memory.clone()),
        ),
        Arc::new(conversation::ConversationTool::new(deps.records.clone())),
        Arc::new(memory::MemoryTool::new(deps.memory.clone())),
        Arc::new(search::SearchTool::new(Arc::new(
            search::MemoryCache::default(),
        ))),
    ]
}

/// A registry holding every built-in tool, with no host dependencies.
pub fn builtin_registry() -> Result<Registry, RegistryError> {
    let mut registry = Registry::new();
    for tool in builtin_tools(&BuiltinDeps::default()) {
        registry.register_builtin(tool)?;
    }
    Ok(registry)
}
