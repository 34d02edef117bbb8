//! Hooks in the loop: where each event fires and what its decisions do.
//!
//! - `PreToolUse` before a call is dispatched (after its start is on
//!   record): a block or `deny` refuses it with the reason for the model;
//!   `updatedInput` replaces its input, which the policy then judges as
//!   any other (a hook cannot allow what a deny rule refuses); `ask` goes
//!   to the conversation's consent; `allow` skips the policy's question.
//! - `PostToolUse` / `PostToolUseFailure` after it: a block's reason and
//!   `additionalContext` reach the model beside the result.
//! - `UserPromptSubmit` (and `SessionStart` at a conversation's first
//!   statement) before the statement: a block ends it; context joins the
//!   user's message.
//! - `Stop` when the model answers without tools: a block sends it back to
//!   work with the reason, at most [`MAX_STOP_BLOCKS`] times in a row.
//! - `PreCompact` before old statements are summarised, `SessionEnd` when
//!   the front end closes the conversation, `Notification` when the user
//!   is asked for consent.
//!
//! Every run (and every unapproved hook skipped) is an audit row:
//! `hook:<event>`, the hook, exit status, duration and decision.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{ToolCall, ToolOutput};
use satchel_store::{AuditSource, NewAudit, Store, Timestamp};
use satchel_tools::hooks::{
    Before, Fired, HookApprovals, HookEvent, HookSet, RunSetting, add_note, after_event,
    after_notes, before_fields, decide_before, fire, from_mcp, permission_mode, tool_names,
};
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer, Registry, ToolContext};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::{AgentEvent, EventSink, Snapshot};

/// Times in a row a `Stop` hook may send the model back to work.
pub(super) const MAX_STOP_BLOCKS: u32 = 8;

/// Everything one event needs to fire and be recorded, owned, so that a
/// consent wrapper can fire `Notification` from inside a dispatch.
#[derive(Clone)]
pub(super) struct HookContext {
    set: Arc<HookSet>,
    approvals: HookApprovals,
    setting: RunSetting,
    common: Map<String, Value>,
    store: Arc<dyn Store>,
    source: AuditSource,
    caller: Option<String>,
    conversation_id: Option<String>,
}

impl HookContext {
    /// Fires `event` and records every run and every hook skipped.
    pub(super) async fn fire(
        &self,
        event: HookEvent,
        subjects: &[String],
        fields: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Fired {
        if !self.set.has(event) {
            return Fired::default();
        }
        let mut input = self.common.clone();
        input.insert("hook_event_name".into(), json!(event.name()));
        input.extend(fields);
        let fired = fire(
            &self.set,
            &self.approvals,
            event,
            subjects,
            &Value::Object(input),
            &self.setting,
            cancel,
        )
        .await;
        self.record(event, &fired).await;
        fired
    }

    async fn record(&self, event: HookEvent, fired: &Fired) {
        record_hook_runs(
            self.store.as_ref(),
            self.source,
            self.caller.clone(),
            self.conversation_id.clone(),
            event,
            fired,
        )
        .await;
    }
}

/// Puts every run of `fired` (and every unapproved hook it skipped) on
/// record as an audit row: `hook:<event>`, the hook, exit status, duration
/// and decision. A row that cannot be written is a warning: the hook has
/// already run.
pub async fn record_hook_runs(
    store: &dyn Store,
    source: AuditSource,
    caller: Option<String>,
    conversation_id: Option<String>,
    event: HookEvent,
    fired: &Fired,
) {
    let rows = fired
        .runs
        .iter()
        .map(|run| {
            let error_code = if run.timed_out {
                Some("HOOK_TIMEOUT".to_owned())
            } else {
                run.reply.failure.as_ref().map(|_| "HOOK_FAILED".to_owned())
            };
            (
                &run.hook,
                run.sandboxed,
                error_code,
                format!("{}; {}", run.status(), run.reply.summary()),
                run.started_at,
                run.duration,
            )
        })
        .chain(fired.skipped.iter().map(|hook| {
            (
                hook,
                false,
                None,
                "skipped: not approved (satchel hooks trust)".to_owned(),
                std::time::SystemTime::now(),
                Duration::ZERO,
            )
        }));
    for (hook, sandboxed, error_code, decision, started_at, duration) in rows {
        let row = NewAudit {
            source,
            caller: caller.clone(),
            tool: format!("hook:{event}"),
            input: json!({
                "command": hook.command,
                "matcher": hook.matcher,
                "origin": hook.origin.to_string(),
                "file": hook.file.display().to_string(),
                "sandboxed": sandboxed,
            }),
            is_error: error_code.is_some(),
            error_code,
            decision: Some(decision),
            conversation_id: conversation_id.clone(),
            started_at: Timestamp::from_system_time(started_at),
            finished_at: Timestamp::from_system_time(started_at + duration),
            duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
        };
        if let Err(error) = store.record_audit(row).await {
            tracing::warn!(%error, hook = %hook.label(), "a hook's run could not be put on record");
        }
    }
}

fn fields(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

impl Agent {
    /// What hooks need to fire now, as of `snapshot`.
    pub(super) fn hook_context(&self, snapshot: &Snapshot) -> HookContext {
        let set = snapshot.hooks.joined(&self.hooks.project_files);
        let mut ctx =
            ToolContext::standalone("hook", self.working_dir.clone(), snapshot.tools.clone());
        ctx.confinement = snapshot.policy.mode().confinement();
        let conversation_id = self.conversation.as_ref().map(|c| c.id.clone());
        let common = fields([
            (
                "session_id",
                json!(conversation_id.clone().unwrap_or_default()),
            ),
            ("transcript_path", Value::Null),
            ("cwd", json!(self.working_dir.display().to_string())),
            (
                "permission_mode",
                json!(permission_mode(snapshot.policy.mode())),
            ),
        ]);
        HookContext {
            set: Arc::new(set),
            approvals: self.hooks.approvals.clone(),
            setting: RunSetting {
                cwd: self.working_dir.clone(),
                sandbox: satchel_tools::sandbox::spec_for(&ctx),
                runner: snapshot.tools.runner.clone(),
            },
            common,
            store: self.store.clone(),
            source: self.source,
            caller: self.caller.clone(),
            conversation_id,
        }
    }

    /// Fires `event` and tells the user what they should know: hooks
    /// skipped for want of approval (once each), failures, messages.
    pub(super) async fn fire_hooks(
        &self,
        hooks: &HookContext,
        event: HookEvent,
        subjects: &[String],
        fields: Map<String, Value>,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Fired {
        let fired = hooks.fire(event, subjects, fields, cancel).await;
        for hook in &fired.skipped {
            let new = self
                .hooks_told
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(hook.id());
            if new {
                sink.emit(AgentEvent::Notice(format!(
                    "hook skipped: {} from {} is not approved; review it, then run `satchel hooks trust`",
                    hook.label(),
                    hook.file.display()
                )));
            }
        }
        for run in &fired.runs {
            if let Some(why) = &run.reply.failure {
                let then = if run.reply.block.is_some() {
                    "it blocks on failure"
                } else {
                    "the action went on"
                };
                sink.emit(AgentEvent::Notice(format!(
                    "hook {} failed ({why}); {then}",
                    run.hook.label()
                )));
            }
        }
        for message in &fired.merged.system_messages {
            sink.emit(AgentEvent::Notice(format!("hook: {message}")));
        }
        fired
    }

    /// Runs the PreToolUse hooks on `call`, whose input an `updatedInput`
    /// replaces.
    pub(super) async fn pre_tool_hooks(
        &self,
        hooks: &HookContext,
        registry: &Registry,
        call: &mut ToolCall,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Before {
        let mcp = from_mcp(registry, &call.name);
        let fired = self
            .fire_hooks(
                hooks,
                HookEvent::PreToolUse,
                &tool_names(&call.name, mcp),
                before_fields(call, mcp),
                cancel,
                sink,
            )
            .await;
        decide_before(fired, call)
    }

    /// Runs the PostToolUse (or, for a failed call, PostToolUseFailure)
    /// hooks; their blocks' reasons and context reach the model in the
    /// result's note.
    pub(super) async fn post_tool_hooks(
        &self,
        hooks: &HookContext,
        registry: &Registry,
        call: &ToolCall,
        output: &mut ToolOutput,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) {
        let mcp = from_mcp(registry, &call.name);
        let Some((event, fields)) = after_event(call, output, mcp) else {
            return;
        };
        let fired = self
            .fire_hooks(
                hooks,
                event,
                &tool_names(&call.name, mcp),
                fields,
                cancel,
                sink,
            )
            .await;
        add_note(output, after_notes(event, &fired));
    }

    /// A consent that tells `Notification` hooks before the user is asked.
    pub(super) fn notifying_consent(&self, hooks: &HookContext) -> Option<NotifyingConsent> {
        hooks
            .set
            .has(HookEvent::Notification)
            .then(|| NotifyingConsent {
                inner: self.consent.clone(),
                hooks: hooks.clone(),
            })
    }

    /// Fires `SessionEnd` (the front end closes the conversation: `exit`,
    /// `clear`, `other`), if the conversation began.
    pub async fn end_session(&mut self, reason: &str, sink: &dyn EventSink) {
        if self.conversation.is_none() || !self.session_started {
            return;
        }
        let snapshot = self.config.current();
        let hooks = self.hook_context(&snapshot);
        self.fire_hooks(
            &hooks,
            HookEvent::SessionEnd,
            &[reason.to_owned()],
            fields([("reason", json!(reason))]),
            &CancellationToken::new(),
            sink,
        )
        .await;
        self.session_started = false;
    }

    /// Fires `SessionStart` at a conversation's first statement (source
    /// `startup` or `resume`) and `UserPromptSubmit`; returns the reason
    /// when a hook blocks the statement, else the context for the model.
    pub(super) async fn prompt_hooks(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<Vec<String>, String> {
        let snapshot = self.config.current();
        let hooks = self.hook_context(&snapshot);
        let mut context = Vec::new();
        if !self.session_started {
            self.session_started = true;
            let source = if self.resumed { "resume" } else { "startup" };
            let fired = self
                .fire_hooks(
                    &hooks,
                    HookEvent::SessionStart,
                    &[source.to_owned()],
                    fields([("source", json!(source))]),
                    cancel,
                    sink,
                )
                .await;
            context.extend(fired.merged.context);
        }
        let fired = self
            .fire_hooks(
                &hooks,
                HookEvent::UserPromptSubmit,
                &[],
                fields([("prompt", json!(text))]),
                cancel,
                sink,
            )
            .await;
        let mut blocks = fired.merged.blocks;
        blocks.extend(fired.merged.halts);
        if !blocks.is_empty() {
            return Err(blocks.join("; "));
        }
        context.extend(fired.merged.context);
        Ok(context)
    }

    /// Fires `Stop`; the reason to go on when a hook blocks the stop.
    pub(super) async fn stop_hooks(
        &self,
        snapshot: &Snapshot,
        blocked_before: u32,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Option<String> {
        let hooks = self.hook_context(snapshot);
        if !hooks.set.has(HookEvent::Stop) {
            return None;
        }
        let fired = self
            .fire_hooks(
                &hooks,
                HookEvent::Stop,
                &[],
                fields([("stop_hook_active", json!(blocked_before > 0))]),
                cancel,
                sink,
            )
            .await;
        // `continue: false` lets the agent stop whatever else was said.
        if !fired.merged.halts.is_empty() || fired.merged.blocks.is_empty() {
            return None;
        }
        if blocked_before >= MAX_STOP_BLOCKS {
            sink.emit(AgentEvent::Notice(format!(
                "a Stop hook blocked the stop {MAX_STOP_BLOCKS} times in a row; the statement ends here"
            )));
            return None;
        }
        Some(fired.merged.blocks.join("; "))
    }

    /// Fires `PreCompact` (trigger `auto`) before old statements are
    /// summarised; its answers are recorded, not obeyed.
    pub(super) async fn pre_compact_hooks(
        &self,
        snapshot: &Snapshot,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) {
        let hooks = self.hook_context(snapshot);
        self.fire_hooks(
            &hooks,
            HookEvent::PreCompact,
            &["auto".to_owned()],
            fields([
                ("trigger", json!("auto")),
                ("custom_instructions", json!("")),
            ]),
            cancel,
            sink,
        )
        .await;
    }
}

/// The conversation's consent, with `Notification` hooks told first.
pub(super) struct NotifyingConsent {
    inner: Arc<dyn Consent>,
    hooks: HookContext,
}

#[async_trait]
impl Consent for NotifyingConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let kind = "permission_prompt".to_owned();
        self.hooks
            .fire(
                HookEvent::Notification,
                std::slice::from_ref(&kind),
                fields([
                    (
                        "message",
                        json!(format!(
                            "Satchel needs your permission to use {}",
                            call.name
                        )),
                    ),
                    ("notification_type", json!(kind)),
                ]),
                &CancellationToken::new(),
            )
            .await;
        self.inner.ask(call, decision).await
    }
}
