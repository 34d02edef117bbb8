//! What the system prompt carries besides agent.json's `systemPrompt`:
//! project instructions (`AGENTS.md`, or `CLAUDE.md` where a directory has
//! no `AGENTS.md`) from the user's config directory and from the project
//! root down to the working directory, capped at
//! [`MAX_INSTRUCTION_BYTES`]; and one line per skill
//! (`satchel_tools::skills`). Both are read again for every request, so an
//! edit applies on the next turn, as agent.json's do.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use satchel_tools::skills::{SkillDirs, listing};

/// Project instructions given at most (32 KiB); the rest is left out and
/// the prompt says so.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;
/// The instruction file most agents read.
pub const AGENTS_FILE: &str = "AGENTS.md";
/// Claude Code's, read where a directory has no `AGENTS.md`.
pub const CLAUDE_FILE: &str = "CLAUDE.md";

/// Where instructions and skills come from; the host decides (trusted
/// projects only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectContext {
    /// Directories whose `AGENTS.md` (else `CLAUDE.md`) is read, outermost
    /// first: the user's config directory, then the project root down to
    /// the working directory.
    pub instruction_dirs: Vec<PathBuf>,
    /// Where skills are found.
    pub skills: SkillDirs,
}

/// The instructions as read now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The text put in the system prompt (headed by each file's path).
    pub text: String,
    /// The files read, outermost first.
    pub files: Vec<PathBuf>,
    /// Some text was left out at the cap.
    pub truncated: bool,
}

/// What the system prompt adds to `systemPrompt`, as read now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptAdditions {
    /// Project instructions, if any file was found.
    pub instructions: Option<Instructions>,
    /// The skills' listing, if there are skills.
    pub skills: Option<String>,
}

impl ProjectContext {
    /// The directories from `root` down to `working_dir` (just `root` when
    /// the working directory is not inside it), after `user_dir`.
    pub fn instruction_dirs(
        user_dir: Option<&Path>,
        root: &Path,
        working_dir: &Path,
    ) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = user_dir.map(Path::to_path_buf).into_iter().collect();
        match working_dir.strip_prefix(root) {
            Ok(below) => {
                let mut dir = root.to_path_buf();
                dirs.push(dir.clone());
                for part in below.components() {
                    dir.push(part);
                    dirs.push(dir.clone());
                }
            }
            Err(_) => dirs.push(root.to_path_buf()),
        }
        dirs
    }

    /// Reads the instructions and the skills now.
    pub fn read(&self) -> PromptAdditions {
        let (skills, _) = self.skills.discover();
        PromptAdditions {
            instructions: self.instructions(),
            skills: listing(&skills),
        }
    }

    /// The instruction files as they are now, capped.
    pub fn instructions(&self) -> Option<Instructions> {
        let mut instructions = Instructions::default();
        for dir in &self.instruction_dirs {
            let Some((path, text)) = [AGENTS_FILE, CLAUDE_FILE].iter().find_map(|name| {
                let path = dir.join(name);
                read_small(&path).map(|text| (path, text))
            }) else {
                continue;
            };
            if text.trim().is_empty() {
                continue;
            }
            let section = format!("## {}\n\n{}\n\n", path.display(), text.trim());
            let room = MAX_INSTRUCTION_BYTES.saturating_sub(instructions.text.len());
            if section.len() > room {
                let mut cut = room;
                while cut > 0 && !section.is_char_boundary(cut) {
                    cut -= 1;
                }
                instructions.text.push_str(&section[..cut]);
                instructions.truncated = true;
                instructions.files.push(path);
                break;
            }
            instructions.text.push_str(&section);
            instructions.files.push(path);
        }
        if instructions.files.is_empty() {
            return None;
        }
        if instructions.truncated {
            let _ = write!(
                instructions.text,
                "\n[Project instructions cut at {MAX_INSTRUCTION_BYTES} bytes; read the files named above for the rest.]\n"
            );
        }
        Some(instructions)
    }
}

/// A file's text, when it is a regular file the size of instructions (a
/// larger one is read up to a little past the cap).
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_INSTRUCTION_BYTES as u64 + 1024)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

impl PromptAdditions {
    /// `base` with the instructions and the skills after it.
    pub fn system_prompt(&self, base: &str) -> String {
        let mut prompt = base.to_owned();
        if let Some(instructions) = &self.instructions {
            let _ = write!(
                prompt,
                "\n\n# Project instructions\n\nThese files of the user and the project say how to work here:\n\n{}",
                instructions.text.trim_end()
            );
        }
        if let Some(skills) = &self.skills {
            let _ = write!(prompt, "\n\n{}", skills.trim_end());
        }
        prompt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_files_are_read_outermost_first_with_claude_md_where_agents_md_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let sub = root.join("crates/app");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(dir.path().join("user")).unwrap();
        std::fs::write(dir.path().join("user/AGENTS.md"), "user rule").unwrap();
        std::fs::write(root.join("AGENTS.md"), "root rule").unwrap();
        std::fs::write(root.join("CLAUDE.md"), "not read: AGENTS.md is there").unwrap();
        std::fs::write(root.join("crates/CLAUDE.md"), "crates rule").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "app rule").unwrap();
        let context = ProjectContext {
            instruction_dirs: ProjectContext::instruction_dirs(
                Some(&dir.path().join("user")),
                &root,
                &sub,
            ),
            skills: SkillDirs::default(),
        };
        let read = context.instructions().unwrap();
        let order: Vec<_> = ["user rule", "root rule", "crates rule", "app rule"]
            .iter()
            .map(|rule| read.text.find(rule).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{}", read.text);
        assert!(!read.text.contains("not read"));
        assert_eq!(read.files.len(), 4);
        assert!(!read.truncated);
    }

    #[test]
    fn instructions_past_the_cap_are_cut_and_say_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "é".repeat(40_000)).unwrap();
        let context = ProjectContext {
            instruction_dirs: vec![dir.path().to_path_buf()],
            skills: SkillDirs::default(),
        };
        let read = context.instructions().unwrap();
        assert!(read.truncated);
        assert!(
            read.text.len() < MAX_INSTRUCTION_BYTES + 200,
            "{}",
            read.text.len()
        );
        assert!(
            read.text
                .ends_with("read the files named above for the rest.]\n")
        );
    }
}
