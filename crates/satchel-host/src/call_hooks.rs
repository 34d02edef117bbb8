//! [`HostCallHooks`]: `PreToolUse` and `PostToolUse` hooks around the
//! calls made outside a conversation (`mcp serve`'s clients, `tools call`),
//! as the agent loop fires them around its own: the same hooks (agent.json's
//! layers, read again when a layer changes, and a trusted project's
//! `.claude/settings.json` and `.codex/hooks.json`), the same approvals
//! (an unapproved project hook never runs; it is named once in the log),
//! the same sandbox, each run an audit row.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use satchel_agent::record_hook_runs;
use satchel_core::{ToolCall, ToolOutput};
use satchel_store::AuditSource;
use satchel_tools::ToolContext;
use satchel_tools::hooks::{
    Before, CallHooks, Fired, HookApprovals, HookEvent, HookPlace, HookSet, RunSetting, add_note,
    after_event, after_notes, before_fields, decide_before, fire, from_mcp, permission_mode,
    tool_names,
};
use serde_json::{Map, Value, json};

use crate::HostPaths;
use crate::host::{config_paths, read_settings};
use crate::{Host, LazyStore, trust};

/// The hook set now in force, read again when a file it comes from changed.
type HookLoader = Arc<dyn Fn() -> Arc<HookSet> + Send + Sync>;

/// Hooks fired around calls outside a conversation, each run recorded.
pub struct HostCallHooks {
    hooks: HookLoader,
    approvals: HookApprovals,
    store: Arc<LazyStore>,
    source: AuditSource,
    /// Unapproved hooks already named in the log.
    told: Mutex<BTreeSet<String>>,
}

impl Host {
    /// The hooks to fire around calls recorded under `source`.
    pub fn call_hooks(&self, source: AuditSource) -> HostCallHooks {
        HostCallHooks {
            hooks: hook_loader(&self.root, &self.paths, &self.env),
            approvals: self.hook_approvals(),
            store: self.store.clone(),
            source,
            told: Mutex::default(),
        }
    }
}

/// Every hook in force for the project at `root`, read again when an
/// agent.json layer or one of the project's hook files changed.
fn hook_loader(root: &Path, paths: &HostPaths, env: &BTreeMap<String, String>) -> HookLoader {
    let mut watched = config_paths(root, paths);
    watched.extend(
        [
            satchel_tools::hooks::CLAUDE_SETTINGS,
            satchel_tools::hooks::CODEX_HOOKS,
        ]
        .iter()
        .map(|file| root.join(file)),
    );
    let (paths, env) = (paths.clone(), env.clone());
    crate::loaders::reloading(
        root,
        watched,
        ("hooks", "no hook runs"),
        move |root: &Path| {
            let settings = read_settings(root, &paths, &env)?;
            let (set, mut warnings) = HookSet::from_settings(&settings);
            let (files, file_warnings) = if trust::is_trusted(root) {
                HookSet::from_project_files(root)
            } else {
                (HookSet::default(), Vec::new())
            };
            warnings.extend(file_warnings);
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            Ok(Arc::new(set.joined(&files)))
        },
        |_: &Path| Arc::new(HookSet::default()),
    )
}

impl HostCallHooks {
    /// Fires `event` for the call at `at`, records every run and names
    /// in the log what the user should know.
    async fn fire(
        &self,
        set: &HookSet,
        at: HookPlace<'_>,
        event: HookEvent,
        subjects: &[String],
        fields: Map<String, Value>,
    ) -> Fired {
        let ctx = at.ctx;
        let mut input = common_fields(ctx, at.policy.mode());
        input.insert("hook_event_name".into(), json!(event.name()));
        input.extend(fields);
        let setting = RunSetting {
            cwd: ctx.working_dir.clone(),
            sandbox: satchel_tools::sandbox::spec_for(&confined(ctx, at)),
            runner: ctx.config.runner.clone(),
        };
        let fired = fire(
            set,
            &self.approvals,
            event,
            subjects,
            &Value::Object(input),
            &setting,
            &ctx.cancel,
        )
        .await;
        match self.store.get().await {
            Ok(store) => {
                record_hook_runs(
                    store,
                    self.source,
                    None,
                    ctx.conversation_id.clone(),
                    event,
                    &fired,
                )
                .await;
            }
            Err(reason) => tracing::warn!("hook runs not recorded: {reason}"),
        }
        self.tell(&fired);
        fired
    }

    /// Names unapproved hooks (once each), failures and hooks' messages.
    fn tell(&self, fired: &Fired) {
        for hook in &fired.skipped {
            let new = self
                .told
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(hook.id());
            if new {
                tracing::warn!(
                    "hook skipped: {} from {} is not approved; review it, then run `satchel hooks trust`",
                    hook.label(),
                    hook.file.display()
                );
            }
        }
        for run in &fired.runs {
            if let Some(why) = &run.reply.failure {
                tracing::warn!("hook {} failed ({why})", run.hook.label());
            }
        }
        for message in &fired.merged.system_messages {
            tracing::warn!("hook: {message}");
        }
    }
}

#[async_trait::async_trait]
impl CallHooks for HostCallHooks {
    async fn before(&self, at: HookPlace<'_>, call: &mut ToolCall) -> Before {
        let set = (self.hooks)();
        if !set.has(HookEvent::PreToolUse) {
            return Before::default();
        }
        let mcp = from_mcp(at.registry, &call.name);
        let fired = self
            .fire(
                &set,
                at,
                HookEvent::PreToolUse,
                &tool_names(&call.name, mcp),
                before_fields(call, mcp),
            )
            .await;
        decide_before(fired, call)
    }

    async fn after(&self, at: HookPlace<'_>, call: &ToolCall, output: &mut ToolOutput) {
        let set = (self.hooks)();
        // Most projects have no such hook: nothing of the call is copied then.
        if !set.has(HookEvent::PostToolUse) && !set.has(HookEvent::PostToolUseFailure) {
            return;
        }
        let mcp = from_mcp(at.registry, &call.name);
        let Some((event, fields)) = after_event(call, output, mcp) else {
            return;
        };
        if !set.has(event) {
            return;
        }
        let fired = self
            .fire(&set, at, event, &tool_names(&call.name, mcp), fields)
            .await;
        add_note(output, after_notes(event, &fired));
    }
}

/// The call's context confined as the policy's mode confines `bash`, for
/// the sandbox a project's hook runs in.
fn confined(ctx: &ToolContext, at: HookPlace<'_>) -> ToolContext {
    let mut ctx = ctx.clone();
    ctx.confinement = at.policy.mode().confinement();
    ctx
}

/// The fields every event's input carries, in Claude Code's names.
fn common_fields(ctx: &ToolContext, mode: satchel_tools::policy::Mode) -> Map<String, Value> {
    let session = ctx
        .conversation_id
        .clone()
        .or_else(|| ctx.session.clone())
        .unwrap_or_default();
    [
        ("session_id", json!(session)),
        ("transcript_path", Value::Null),
        ("cwd", json!(ctx.working_dir.display().to_string())),
        ("permission_mode", json!(permission_mode(mode))),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}
