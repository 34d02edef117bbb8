//! The hooks a project's conversations run: agent.json's (every layer,
//! read again before each turn by the agent), the project's
//! `.claude/settings.json` and `.codex/hooks.json` (trusted projects
//! only), and the user's approvals of project hooks, kept in
//! `data/approved-hooks.json`.

use satchel_agent::HookSetup;
use satchel_tools::hooks::{HookApprovals, HookSet};

use crate::host::{Host, read_settings};
use crate::trust;

impl Host {
    /// Where the user's approvals of project hooks are kept.
    pub fn hook_approvals(&self) -> HookApprovals {
        HookApprovals::at(
            self.paths
                .data
                .as_ref()
                .map(|dir| dir.join("approved-hooks.json")),
        )
    }

    /// The hooks of the project's `.claude/settings.json` and
    /// `.codex/hooks.json`, when the project is trusted, and what was
    /// wrong with them.
    pub fn project_hook_files(&self) -> (HookSet, Vec<String>) {
        if !trust::is_trusted(&self.root) {
            return (HookSet::default(), Vec::new());
        }
        HookSet::from_project_files(&self.root)
    }

    /// What a conversation needs to run hooks besides agent.json's.
    pub fn hook_setup(&self) -> HookSetup {
        let (project_files, warnings) = self.project_hook_files();
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        HookSetup {
            project_files,
            approvals: self.hook_approvals(),
        }
    }

    /// Every hook in force now (agent.json's layers, then the project's
    /// files), and what was wrong with them.
    pub fn hooks(&self) -> anyhow::Result<(HookSet, Vec<String>)> {
        let settings = read_settings(&self.root, &self.paths, &self.env)?;
        let (set, mut warnings) = HookSet::from_settings(&settings);
        let (files, file_warnings) = self.project_hook_files();
        warnings.extend(file_warnings);
        Ok((set.joined(&files), warnings))
    }
}
