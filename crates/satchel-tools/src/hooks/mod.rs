//! Hooks in Claude Code's schema: commands that run before and after tool
//! calls, when a prompt is submitted, when the agent would stop, when a
//! session starts or ends, before compaction and on notifications.
//!
//! `config` reads the definitions (agent.json's `hooks` in every layer,
//! `.claude/settings.json` and `.codex/hooks.json` as they are), `matcher`
//! says which apply to a tool (Satchel's names and Claude Code's),
//! `reply` reads what one hook answered (exit code 2, or the JSON
//! `decision`, `hookSpecificOutput.permissionDecision`, `updatedInput`,
//! `additionalContext`) and merges the answers of several, `run` runs one
//! hook in its process group with a deadline (sandboxed unless it is the
//! user's own), and `approvals` remembers which project hooks the user
//! approved, one by one, by a hash of their definition. [`fire`] puts
//! these together for one event, and `calls` says what `PreToolUse` and
//! `PostToolUse` do to a call, wherever it comes from.
//!
//! What does not live here: when events fire and what their decisions do
//! to a statement (the agent loop), recording the runs (the caller has
//! the store), asking the user to approve a hook (the front ends).

mod approvals;
mod calls;
mod config;
mod matcher;
mod reply;
mod run;

use std::collections::BTreeSet;

use futures_util::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use approvals::HookApprovals;
pub use calls::{
    Before, CallHooks, HookPlace, add_note, after_event, after_notes, before_fields, decide_before,
    from_mcp, permission_mode,
};
pub use config::{
    CLAUDE_SETTINGS, CODEX_HOOKS, DEFAULT_TIMEOUT, Hook, HookEvent, HookOrigin, HookSet,
};
pub use matcher::{claude_name, matches, tool_names};
pub use reply::{HookReply, Merged, Permission, merge, read_reply};
pub use run::{HookRun, RunSetting, run_hook};

/// What one event did: the hooks that ran, those skipped because the user
/// has not approved them, and their answers merged.
#[derive(Debug, Clone, Default)]
pub struct Fired {
    /// Every hook that ran, in definition order.
    pub runs: Vec<HookRun>,
    /// Project hooks that matched but are not approved: not run.
    pub skipped: Vec<Hook>,
    /// The answers merged (deny > ask > allow; the last `updatedInput`
    /// given; every context).
    pub merged: Merged,
}

/// Runs every approved hook of `set` for `event` whose matcher takes one
/// of `subjects` (tool names, a session source...), at once, with `input`
/// on stdin; identical commands run once. Never fails: a hook that cannot
/// run is a failed run in [`Fired::runs`].
pub async fn fire(
    set: &HookSet,
    approvals: &HookApprovals,
    event: HookEvent,
    subjects: &[String],
    input: &Value,
    setting: &RunSetting,
    cancel: &CancellationToken,
) -> Fired {
    let mut seen = BTreeSet::new();
    let mut approved = Vec::new();
    let mut skipped = Vec::new();
    for hook in set.matching(event, subjects) {
        if !seen.insert(hook.command.clone()) {
            continue;
        }
        if approvals.is_approved(hook) {
            approved.push(hook);
        } else {
            skipped.push(hook.clone());
        }
    }
    if approved.is_empty() {
        return Fired {
            skipped,
            ..Fired::default()
        };
    }
    let runs = join_all(
        approved
            .iter()
            .map(|hook| run_hook(hook, input, setting, cancel)),
    )
    .await;
    let merged = merge(runs.iter().map(|run| &run.reply));
    Fired {
        runs,
        skipped,
        merged,
    }
}
