//! What a conversation's system prompt carries from the project and the
//! user besides agent.json: instruction files (`AGENTS.md`, `CLAUDE.md`)
//! and skills. A project's own come only from a trusted project; the
//! user's (`$XDG_CONFIG_HOME/satchel/AGENTS.md`, `.../skills/`) always.

use std::path::{Path, PathBuf};

use satchel_agent::ProjectContext;
use satchel_tools::skills::SkillDirs;

use crate::host::Host;
use crate::trust;

impl Host {
    /// Where skills are found: the user's directory, and the project's
    /// `.agents/skills/` and `.claude/skills/` when it is trusted.
    pub fn skill_dirs(&self) -> SkillDirs {
        SkillDirs {
            project: trust::is_trusted(&self.root).then(|| self.root.clone()),
            user: self.paths.config.as_ref().map(|dir| dir.join("skills")),
        }
    }

    /// Instructions and skills for this host's conversations: the user's
    /// `AGENTS.md`, then, in a trusted project, those from the project's
    /// root (its nearest ancestor with `.git`, else the project
    /// directory) down to the project directory.
    pub fn project_context(&self) -> ProjectContext {
        let user = self.paths.config.as_deref();
        let instruction_dirs = if trust::is_trusted(&self.root) {
            ProjectContext::instruction_dirs(user, &repository_root(&self.root), &self.root)
        } else {
            user.map(Path::to_path_buf)
                .into_iter()
                .collect::<Vec<PathBuf>>()
        };
        ProjectContext {
            instruction_dirs,
            skills: self.skill_dirs(),
        }
    }
}

/// The nearest ancestor of `dir` (itself included) holding `.git`; `dir`
/// when there is none.
fn repository_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|ancestor| ancestor.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}
