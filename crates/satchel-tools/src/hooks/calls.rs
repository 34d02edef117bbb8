//! What `PreToolUse` and `PostToolUse` hooks do to a call, the same
//! wherever the call comes from: the agent loop, `mcp serve`, `tools call`.
//!
//! - [`before_fields`] / [`decide_before`]: the event's input, and what
//!   the merged answers decide. A block or `deny` refuses the call with the
//!   reason for the model; `updatedInput` replaces its input, which the
//!   policy then judges as any other (a hook cannot allow what a deny rule
//!   refuses); `ask` goes to consent; `allow` skips the policy's question.
//! - [`after_event`] / [`after_notes`]: `PostToolUse` (or
//!   `PostToolUseFailure`) for a call that ran; blocks' reasons and
//!   `additionalContext` reach the model in the result's note.
//!
//! [`CallHooks`] is how a caller outside the loop (the MCP server, the
//! one-shot command) has them fired around a dispatch; the host implements
//! it with the store to record each run.

use async_trait::async_trait;
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use serde_json::{Map, Value, json};

use super::{Fired, HookEvent, Permission, claude_name};
use crate::policy::Policy;
use crate::{Registry, Steer, ToolContext, ToolSource};

/// What `PreToolUse` hooks decided about a call.
#[derive(Debug)]
pub enum Before {
    /// Refused: the output the model gets, and the label for the record.
    Refused(ToolOutput, String),
    /// Go on, steered so, with the label for the record and the context
    /// for the model.
    Go(Steer, Option<String>, Option<String>),
}

impl Default for Before {
    fn default() -> Before {
        Before::Go(Steer::default(), None, None)
    }
}

/// Hooks fired around a call by a caller outside the agent loop.
#[async_trait]
pub trait CallHooks: Send + Sync {
    /// Fires `PreToolUse` for `call` (whose input an `updatedInput`
    /// replaces) and says what it decided; `policy` gives the mode, and
    /// with it the sandbox a project's hook runs in.
    async fn before(&self, at: HookPlace<'_>, call: &mut ToolCall) -> Before;

    /// Fires `PostToolUse` or `PostToolUseFailure` for a call that ran,
    /// adding what the hooks said to `output`'s note.
    async fn after(&self, at: HookPlace<'_>, call: &ToolCall, output: &mut ToolOutput);
}

/// Where a call's hooks fire: its registry, the policy in force and the
/// call's context.
#[derive(Clone, Copy)]
pub struct HookPlace<'a> {
    /// The tools (to tell an MCP server's tool by its source).
    pub registry: &'a Registry,
    /// The policy in force (its mode decides the hooks' sandbox).
    pub policy: &'a Policy,
    /// The call's context (working directory, settings, cancellation).
    pub ctx: &'a ToolContext,
}

/// Claude Code's name for the policy's mode (`permission_mode`).
pub fn permission_mode(mode: crate::policy::Mode) -> &'static str {
    use crate::policy::Mode;
    match mode {
        Mode::ReadOnly => "plan",
        Mode::Workspace => "default",
        Mode::Trust => "bypassPermissions",
    }
}

/// Whether `name` is an MCP server's tool in `registry`.
pub fn from_mcp(registry: &Registry, name: &str) -> bool {
    registry.get(name).is_some_and(
        |tool| matches!(tool.source(), ToolSource::Extra { group, .. } if group == "mcp"),
    )
}

/// The fields `PreToolUse` adds to the common input.
pub fn before_fields(call: &ToolCall, mcp: bool) -> Map<String, Value> {
    tool_fields(call, mcp)
}

fn tool_fields(call: &ToolCall, mcp: bool) -> Map<String, Value> {
    [
        ("tool_name", json!(claude_name(&call.name, mcp))),
        ("tool_input", call.input.clone()),
        ("tool_use_id", json!(call.id)),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// What the `PreToolUse` hooks that `fired` decided; an `updatedInput`
/// replaces `call`'s input.
pub fn decide_before(fired: Fired, call: &mut ToolCall) -> Before {
    let mut merged = fired.merged;
    let mut reasons: Vec<String> = merged.blocks.clone();
    let mut steer = Steer::default();
    match &merged.permission {
        Some((Permission::Deny, why)) => reasons.extend(why.iter().cloned()),
        Some((Permission::Ask, why)) => steer.ask = Some(why.join("; ")),
        Some((Permission::Allow, _)) => steer.allow = true,
        None => {}
    }
    let denied =
        !merged.blocks.is_empty() || matches!(merged.permission, Some((Permission::Deny, _)));
    if denied {
        let reason = if reasons.is_empty() {
            "a PreToolUse hook denied it".to_owned()
        } else {
            reasons.join("; ")
        };
        let mut details = Map::new();
        details.insert("hook_reason".into(), json!(reason));
        let output = ToolOutput::error_with(
            ErrorCode::PermissionDenied,
            format!(
                "A PreToolUse hook blocked this call: {reason}. It did not run. Do not retry it as it is; adapt to the reason."
            ),
            details,
        )
        .with_user_message(format!("hook blocked `{}`: {reason}", call.name));
        return Before::Refused(output, format!("deny by PreToolUse hook: {reason}"));
    }
    let mut label = None;
    if let Some(input) = merged.updated_input.take() {
        call.input = input;
        label = Some("input rewritten by a PreToolUse hook".to_owned());
    }
    if steer.allow {
        label = Some(match label {
            Some(label) => format!("{label}; allowed by a PreToolUse hook"),
            None => "allowed by a PreToolUse hook".to_owned(),
        });
    }
    let context = merged
        .context_text()
        .map(|context| format!("PreToolUse hook context: {context}"));
    Before::Go(steer, label, context)
}

/// The event that follows `call` and its fields: `PostToolUseFailure` for
/// an error, `PostToolUse` otherwise; `None` for a call that never ran
/// (refused, unknown, invalid), which has none, as in Claude Code.
pub fn after_event(
    call: &ToolCall,
    output: &ToolOutput,
    mcp: bool,
) -> Option<(HookEvent, Map<String, Value>)> {
    if matches!(
        output.error_code,
        Some(ErrorCode::PermissionDenied | ErrorCode::ToolNotFound | ErrorCode::InvalidParams)
    ) {
        return None;
    }
    let mut fields = tool_fields(call, mcp);
    let event = if output.is_error {
        fields.insert("error".into(), json!(output.results.to_text()));
        fields.insert(
            "is_interrupt".into(),
            json!(output.error_code == Some(ErrorCode::Cancelled)),
        );
        HookEvent::PostToolUseFailure
    } else {
        let response = output
            .results
            .structured()
            .cloned()
            .unwrap_or_else(|| json!(output.results.to_text()));
        fields.insert("tool_response".into(), response);
        HookEvent::PostToolUse
    };
    Some((event, fields))
}

/// What the model is told of the `event` hooks that `fired` after a call.
pub fn after_notes(event: HookEvent, fired: &Fired) -> Vec<String> {
    let mut notes: Vec<String> = fired
        .merged
        .blocks
        .iter()
        .map(|reason| format!("{event} hook: {reason}"))
        .collect();
    if let Some(context) = fired.merged.context_text() {
        notes.push(format!("{event} hook context: {context}"));
    }
    notes
}

/// Adds `notes` to the output's note for the model.
pub fn add_note(output: &mut ToolOutput, notes: Vec<String>) {
    if notes.is_empty() {
        return;
    }
    let note = notes.join("\n");
    output.response = Some(match output.response.take() {
        Some(existing) => format!("{existing}\n{note}"),
        None => note,
    });
}
