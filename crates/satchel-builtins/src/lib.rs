//! Satchel's built-in tools: `bash`, `code`, `conversation`, `memory`,
//! `search`, the file tools (`read`, `write`, `edit`, `glob`, `grep`),
//! `fetch`, `process` and `skill`, built on the runtime of `satchel-tools`.
//!
//! The tools that keep records (`code`'s traces and jobs, `memory`,
//! `conversation`) reach the store and the memory service through handles
//! their host passes in [`BuiltinDeps`]; without one they answer every call
//! with an error saying what is missing. Their own sections of agent.json
//! (`search`, `code`, `fetch`) are parsed here and carried to each call in
//! [`ToolsConfig::sections`] ([`configure`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use satchel_tools::{Registry, RegistryError, Settings, Tool, ToolsConfig};

pub mod bash;
pub mod code;
pub mod conversation;
pub mod fetch;
pub mod files;
pub mod memory;
pub mod process;
pub mod search;
pub mod skill;

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
    /// What the model last saw of each file, per conversation, shared by
    /// `read`, `write` and `edit` (the stale-file rule).
    pub file_stamps: Arc<files::FileStamps>,
    /// The background processes `bash` starts and `process` manages; the
    /// host ends them with their conversations and at exit.
    pub processes: Arc<satchel_exec::background::ProcessTable>,
    /// Where the `skill` tool finds skills.
    pub skills: satchel_tools::skills::SkillDirs,
}

/// Every built-in tool, built once; share them between registries so their
/// state (search cache, running jobs) is shared too.
pub fn builtin_tools(deps: &BuiltinDeps) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(bash::BashTool::with_processes(deps.processes.clone())),
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
        Arc::new(files::read::ReadTool::new(deps.file_stamps.clone())),
        Arc::new(files::write::WriteTool::new(deps.file_stamps.clone())),
        Arc::new(files::edit::EditTool::new(deps.file_stamps.clone())),
        Arc::new(files::native::text_editor::TextEditorTool::new(
            deps.file_stamps.clone(),
        )),
        Arc::new(files::native::apply_patch::ApplyPatchTool::new(
            deps.file_stamps.clone(),
        )),
        Arc::new(files::glob::GlobTool::new()),
        Arc::new(files::grep::GrepTool::new()),
        Arc::new(fetch::FetchTool::new()),
        Arc::new(process::ProcessTool::new(deps.processes.clone())),
        Arc::new(skill::SkillTool::new(deps.skills.clone())),
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

/// The tools' whole configuration: the runtime's part and the built-ins'
/// `search`, `code` and `fetch` sections; warnings say what was ignored.
pub fn tools_config(settings: &Settings) -> (ToolsConfig, Vec<String>) {
    let (mut config, mut warnings) = ToolsConfig::from_settings(settings);
    warnings.extend(configure(settings, &mut config));
    (config, warnings)
}

/// Parses the built-ins' sections of `settings` into `config`; returns
/// what was wrong with them.
pub fn configure(settings: &Settings, config: &mut ToolsConfig) -> Vec<String> {
    let (search, mut warnings) = search::SearchConfig::from_settings(settings, &settings.env);
    let (code, code_warnings) = code::CodeConfig::from_settings(settings);
    warnings.extend(code_warnings);
    let (fetch, fetch_warnings) = fetch::FetchConfig::from_settings(settings);
    warnings.extend(fetch_warnings);
    config.sections.insert(search);
    config.sections.insert(code);
    config.sections.insert(fetch);
    warnings
}

/// The `search` section a call runs with (the default when the host set
/// none).
pub fn search_config(config: &ToolsConfig) -> std::borrow::Cow<'_, search::SearchConfig> {
    match config.sections.get::<search::SearchConfig>() {
        Some(section) => std::borrow::Cow::Borrowed(section),
        None => std::borrow::Cow::Owned(search::SearchConfig::default()),
    }
}

/// The `code` section a call runs with (the default when the host set
/// none).
pub fn code_config(config: &ToolsConfig) -> std::borrow::Cow<'_, code::CodeConfig> {
    match config.sections.get::<code::CodeConfig>() {
        Some(section) => std::borrow::Cow::Borrowed(section),
        None => std::borrow::Cow::Owned(code::CodeConfig::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built-in tools' schemas are compiled on first call, not at
    /// registration: each must compile (and pass its meta-schema) as any
    /// other tool's would at registration.
    #[test]
    fn every_builtin_schema_compiles() {
        let tools = builtin_tools(&BuiltinDeps::default());
        assert_eq!(tools.len(), 15);
        let mut registry = Registry::new();
        for tool in tools {
            let name = tool.spec().name.clone();
            registry
                .register_arc(tool)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
