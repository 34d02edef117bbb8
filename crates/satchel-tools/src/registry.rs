//! The [`Registry`]: tools by name, each input schema compiled once, every
//! call validated before it runs.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use satchel_core::edit_forms::EditForm;
use satchel_core::{ErrorCode, ToolCall, ToolOutput, ToolSpec, is_valid_tool_name};
use serde_json::{Map, Value, json};

use crate::validation::{MAX_VIOLATIONS, SchemaViolation};
use crate::{Tool, ToolContext};

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name breaks the provider-wide naming rule.
    #[error("`{0}` is not a valid tool name (1-64 characters of A-Z, a-z, 0-9, `_`, `-`)")]
    InvalidName(String),
    /// Another tool already has the name.
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    /// The input schema is not a valid JSON Schema, or refers to something
    /// that cannot be resolved offline (remote `$ref`s are never fetched).
    #[error("tool `{name}` has an invalid input schema: {reason}")]
    InvalidSchema {
        /// The tool's name.
        name: String,
        /// What the schema compiler said.
        reason: String,
    },
}

struct Entry {
    tool: Arc<dyn Tool>,
    /// Compiled at registration (an invalid schema is refused there),
    /// except for Satchel's built-in tools ([`Registry::register_builtin`]):
    /// on their first call.
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
}

impl Entry {
    /// The compiled input schema, compiled now if it was not yet.
    fn validator(&self) -> &Result<jsonschema::Validator, String> {
        self.validator
            .get_or_init(|| compile_schema(&self.tool.spec().input_schema))
    }
}

/// Tools by name, ready to be called from any thread.
///
/// Input schemas are compiled at registration (built-in tools' on first
/// call); `jsonschema` is built without its network features, so a schema
/// cannot make Satchel fetch anything.
#[derive(Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
    /// Tools that exist but cannot be called (a broken spec), by name,
    /// with why: a call answers `TOOL_UNAVAILABLE`, not `TOOL_NOT_FOUND`.
    unavailable: BTreeMap<String, String>,
    /// [`Registry::offered_specs`] per edit form, built on first use: every
    /// turn of every conversation over this registry offers them, and a
    /// spec's schema is deep JSON, costly to copy each time.
    offered: std::sync::Mutex<Vec<(EditForm, Arc<[ToolSpec]>)>>,
}

/// The tools' names (a schema validator has nothing to show).
impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.entries.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a tool after checking its name and compiling its input schema.
    pub fn register(&mut self, tool: impl Tool) -> Result<(), RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool; see [`Registry::register`].
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.insert(tool, true)
    }

    /// Adds a tool compiled into the binary (Satchel's built-ins), whose
    /// schema is compiled on its first call: their schemas are ours,
    /// checked by a test (`satchel-builtins`), so a one-shot command does
    /// not compile the ones it never uses. Anything else goes through
    /// [`Registry::register`].
    pub fn register_builtin(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.insert(tool, false)
    }

    fn insert(&mut self, tool: Arc<dyn Tool>, compile_now: bool) -> Result<(), RegistryError> {
        let spec = tool.spec();
        let name = spec.name.clone();
        if !is_valid_tool_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.entries.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let validator = std::sync::OnceLock::new();
        if compile_now {
            let compiled = compile_schema(&spec.input_schema).map_err(|reason| {
                RegistryError::InvalidSchema {
                    name: name.clone(),
                    reason,
                }
            })?;
            let _ = validator.set(Ok(compiled));
        }
        self.entries.insert(name, Entry { tool, validator });
        self.offered
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        Ok(())
    }

    /// Records that a tool of this name exists but cannot be called, and
    /// why (an external tool whose `--schema` failed); ignored when a
    /// working tool has the name.
    pub fn mark_unavailable(&mut self, name: String, reason: String) {
        if !self.entries.contains_key(&name) {
            self.unavailable.insert(name, reason);
        }
    }

    /// Tools that exist but cannot be called, with why, sorted by name.
    pub fn unavailable(&self) -> impl Iterator<Item = (&str, &str)> {
        self.unavailable
            .iter()
            .map(|(name, reason)| (name.as_str(), reason.as_str()))
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entries.get(name).map(|entry| &entry.tool)
    }

    /// `output` with every tool's news for this caller added to what the
    /// model reads ([`Tool::take_notice`]).
    pub fn with_notices(&self, mut output: ToolOutput, ctx: &ToolContext) -> ToolOutput {
        for entry in self.entries.values() {
            if let Some(notice) = entry.tool.take_notice(ctx) {
                output.response = Some(match output.response.take() {
                    Some(response) => format!("{response} {notice}"),
                    None => notice,
                });
            }
        }
        output
    }

    /// Every tool's spec, sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.values().map(|entry| entry.tool.spec())
    }

    /// The specs a request offers under `form` (every tool's but the other
    /// edit forms' tools), sorted by name and shared: made once per form
    /// for this registry, then handed out without a copy.
    pub fn offered_specs(&self, form: EditForm) -> Arc<[ToolSpec]> {
        let mut offered = self
            .offered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, specs)) = offered.iter().find(|(made_for, _)| *made_for == form) {
            return specs.clone();
        }
        let specs: Arc<[ToolSpec]> = self
            .specs()
            .filter(|spec| form.offers(&spec.name))
            .cloned()
            .collect();
        offered.push((form, specs.clone()));
        specs
    }

    /// Names of all tools, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Compiles the input schema of the tool `name` now, if it is
    /// registered and not compiled yet, so that its first [`check`](Self::check)
    /// does not wait for it (a one-shot command compiles it while the
    /// database opens).
    pub fn prepare(&self, name: &str) {
        if let Some(entry) = self.entries.get(name) {
            // A panic leaves it uncompiled: `check` tries again inside the
            // dispatcher, which turns a panic into the call's error.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| entry.validator()));
        }
    }

    /// Looks the tool up and validates `input` against its schema; the
    /// error output is what the model should get instead of a run.
    pub fn check(&self, name: &str, input: &Value) -> Result<&Arc<dyn Tool>, Box<ToolOutput>> {
        let Some(entry) = self.entries.get(name) else {
            return Err(Box::new(self.not_found(name)));
        };
        let validator = match entry.validator() {
            Ok(validator) => validator,
            Err(reason) => {
                return Err(Box::new(ToolOutput::error(
                    ErrorCode::ToolCrashed,
                    format!(
                        "the built-in tool `{name}` has an input schema that does not compile ({reason}); this is a bug in Satchel"
                    ),
                )));
            }
        };
        let mut errors = validator.iter_errors(input).peekable();
        if errors.peek().is_none() {
            return Ok(&entry.tool);
        }
        let mut violations: Vec<SchemaViolation> = errors
            .take(MAX_VIOLATIONS)
            .map(|error| SchemaViolation::from_error(&error, &entry.tool.spec().input_schema))
            .collect();
        // Sorted by path so the same mistake always reads the same way.
        violations.sort_by(|a, b| a.path.cmp(&b.path));
        let listed = violations
            .iter()
            .map(SchemaViolation::describe)
            .collect::<Vec<_>>()
            .join("; ");
        let message = format!(
            "invalid input for tool `{name}`: {listed}. Fix the input to match the tool's inputSchema and call it again."
        );
        let mut details = Map::new();
        details.insert("violations".into(), json!(violations));
        Err(Box::new(ToolOutput::error_with(
            ErrorCode::InvalidParams,
            message,
            details,
        )))
    }

    /// Runs one call: lookup, validation, run. Never panics and never fails:
    /// every problem is an `is_error` output.
    pub async fn call(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutput {
        match self.check(&call.name, &call.input) {
            Ok(tool) => Registry::run_checked(tool, call, ctx).await,
            Err(output) => *output,
        }
    }

    /// Runs a tool that [`Registry::check`] already accepted for this call's
    /// input: the tool's errors and panics become error outputs.
    pub(crate) async fn run_checked(
        tool: &Arc<dyn Tool>,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> ToolOutput {
        if ctx.cancel.is_cancelled() {
            return ToolOutput::error(
                ErrorCode::Cancelled,
                format!("call to `{}` was cancelled before it ran", call.name),
            );
        }
        let run = AssertUnwindSafe(tool.run(call.input.clone(), ctx)).catch_unwind();
        match run.await {
            Ok(Ok(output)) => output,
            Ok(Err(error)) => error.into_output(),
            Err(panic) => {
                let reason = panic_message(panic.as_ref());
                tracing::error!(tool = %call.name, call_id = %call.id, %reason, "tool panicked");
                ToolOutput::error(
                    ErrorCode::ToolCrashed,
                    format!(
                        "tool `{}` crashed: {reason}. This is a bug in the tool, not in your input; try another approach.",
                        call.name
                    ),
                )
            }
        }
    }

    fn not_found(&self, name: &str) -> ToolOutput {
        if let Some(reason) = self.unavailable.get(name) {
            let message = format!(
                "tool `{name}` is installed but cannot be used: {reason}. It will not work until that is fixed; use another tool."
            );
            let mut details = Map::new();
            details.insert("reason".into(), json!(reason));
            return ToolOutput::error_with(ErrorCode::ToolUnavailable, message, details);
        }
        let names: Vec<&str> = self.names().collect();
        let message = format!(
            "no tool named `{name}`; available tools: {}",
            names.join(", ")
        );
        let mut details = Map::new();
        details.insert("available_tools".into(), json!(names));
        ToolOutput::error_with(ErrorCode::ToolNotFound, message, details)
    }
}

/// Compiles an input schema, which must be a JSON object describing an
/// object (tool inputs are always objects).
pub(crate) fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    let Some(object) = schema.as_object() else {
        return Err("the schema must be a JSON object".into());
    };
    if let Some(kind) = object.get("type")
        && kind != "object"
    {
        return Err(format!("the schema's type must be \"object\", not {kind}"));
    }
    // `validator_for` checks the schema against its draft's meta-schema.
    jsonschema::validator_for(schema).map_err(|error| error.to_string())
}

/// The text a panic carried, for a message.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}
