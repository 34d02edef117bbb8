//! [`HookApprovals`]: which project hooks the user approved, one by one,
//! remembered by [`Hook::id`] (a hash of event, matcher and command) in a
//! file of the user's data directory, so a changed hook asks again. The
//! user's own hooks need no approval.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Hook, HookOrigin};

/// What is remembered of an approved hook, besides its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Approved {
    event: String,
    matcher: String,
    command: String,
    file: String,
}

/// The approvals file (`$XDG_DATA_HOME/satchel/approved-hooks.json`); read
/// at each question, so an approval given by another process
/// (`satchel hooks trust`) applies at once. Without a file nothing is
/// approved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookApprovals {
    path: Option<PathBuf>,
}

impl HookApprovals {
    /// Approvals kept at `path`.
    pub fn at(path: Option<PathBuf>) -> HookApprovals {
        HookApprovals { path }
    }

    /// Where they are kept.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn read(&self) -> BTreeMap<String, Approved> {
        self.path
            .as_ref()
            .and_then(|path| crate::config::read_config_file(path).ok().flatten())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Whether `hook` may run: the user's own, or approved as it is now.
    pub fn is_approved(&self, hook: &Hook) -> bool {
        hook.origin == HookOrigin::User || self.read().contains_key(&hook.id())
    }

    /// Remembers `hooks` as approved.
    ///
    /// # Errors
    /// There is no approvals file (no data directory), or it cannot be
    /// written.
    pub fn approve<'h>(&self, hooks: impl IntoIterator<Item = &'h Hook>) -> Result<(), String> {
        let path = self
            .path
            .as_ref()
            .ok_or_else(|| "no data directory to remember approvals in (set HOME)".to_owned())?;
        let mut approved = self.read();
        for hook in hooks {
            approved.insert(
                hook.id(),
                Approved {
                    event: hook.event.name().to_owned(),
                    matcher: hook.matcher.clone(),
                    command: hook.command.clone(),
                    file: hook.file.display().to_string(),
                },
            );
        }
        let text = serde_json::to_string_pretty(&approved).map_err(|e| e.to_string())?;
        crate::config::write_atomically(path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hooks::HookEvent;

    #[test]
    fn a_project_hook_runs_once_approved_and_asks_again_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = HookApprovals::at(Some(dir.path().join("approved-hooks.json")));
        let mut hook = Hook {
            event: HookEvent::PreToolUse,
            matcher: "Bash".into(),
            command: "guard.sh".into(),
            timeout: Duration::from_secs(1),
            block_on_failure: false,
            origin: HookOrigin::Project,
            file: dir.path().join(".claude/settings.json"),
        };
        assert!(!approvals.is_approved(&hook));
        approvals.approve([&hook]).unwrap();
        assert!(approvals.is_approved(&hook));
        hook.command.push_str(" --quiet");
        assert!(!approvals.is_approved(&hook));
        hook.origin = HookOrigin::User;
        assert!(approvals.is_approved(&hook));
        assert!(HookApprovals::default().approve([&hook]).is_err());
    }
}
