//! Skills as Claude Code, Codex and opencode keep them: folders with a
//! `SKILL.md` whose YAML front matter has a `name` and a `description`,
//! with instructions below it and scripts beside it. Found under a
//! trusted project's `.agents/skills/` and `.claude/skills/` and the
//! user's `$XDG_CONFIG_HOME/satchel/skills/`; a project skill beats a
//! user skill of the same name.
//!
//! The model sees one line per skill ([`listing`]) and loads one with
//! the `skill` tool (`satchel-builtins`), which reads it here
//! ([`SkillDirs::load`]).

use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::ToolLevel;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// A project's skill folders, relative to the project.
pub const PROJECT_SKILL_DIRS: [&str; 2] = [".agents/skills", ".claude/skills"];
/// The largest `SKILL.md` read (256 KiB).
const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Characters of a description shown in the listing; the rest is in the
/// skill, for the model that loads it.
pub const LISTED_DESCRIPTION: usize = 100;
/// Files listed when a skill is loaded.
const MAX_FILES: usize = 200;
/// Skills read from one directory at most.
const MAX_SKILLS: usize = 500;

/// Where skills are looked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillDirs {
    /// The project, when it is trusted (its `.agents/skills/` and
    /// `.claude/skills/`).
    pub project: Option<PathBuf>,
    /// The user's skills directory (`$XDG_CONFIG_HOME/satchel/skills`).
    pub user: Option<PathBuf>,
}

/// One skill, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (front matter `name`, else the folder's).
    pub name: String,
    /// What it is for and when to use it.
    pub description: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Whose it is.
    pub level: ToolLevel,
}

/// A skill loaded for the model: its instructions and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSkill {
    /// The skill.
    pub skill: Skill,
    /// `SKILL.md` below its front matter.
    pub instructions: String,
    /// The other files of its folder (absolute), at most 200.
    pub files: Vec<PathBuf>,
}

impl SkillDirs {
    /// The directories searched, highest precedence first.
    pub fn roots(&self) -> Vec<(PathBuf, ToolLevel)> {
        let mut roots: Vec<(PathBuf, ToolLevel)> = self
            .project
            .iter()
            .flat_map(|root| {
                PROJECT_SKILL_DIRS
                    .iter()
                    .map(move |dir| (root.join(dir), ToolLevel::Project))
            })
            .collect();
        roots.extend(self.user.iter().map(|dir| (dir.clone(), ToolLevel::User)));
        roots
    }

    /// Every skill, sorted by name, and what could not be read (each
    /// naming its file).
    pub fn discover(&self) -> (Vec<Skill>, Vec<String>) {
        let mut skills: Vec<Skill> = Vec::new();
        let mut warnings = Vec::new();
        for (root, level) in self.roots() {
            let Ok(entries) = std::fs::read_dir(&root) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.join(SKILL_FILE).is_file())
                .collect();
            dirs.sort();
            for dir in dirs.into_iter().take(MAX_SKILLS) {
                match read_skill(&dir, level) {
                    Ok((skill, _)) => {
                        if !skills.iter().any(|known| known.name == skill.name) {
                            skills.push(skill);
                        }
                    }
                    Err(why) => warnings.push(format!(
                        "{}: {why}; the skill is left out",
                        dir.join(SKILL_FILE).display()
                    )),
                }
            }
        }
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        (skills, warnings)
    }

    /// The skill called `name`, read whole, or why it cannot be.
    pub fn load(&self, name: &str) -> Result<LoadedSkill, String> {
        let (skills, _) = self.discover();
        let Some(skill) = skills.iter().find(|skill| skill.name == name) else {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            return Err(if names.is_empty() {
                format!("there is no skill `{name}`: no skills are installed")
            } else {
                format!(
                    "there is no skill `{name}`; the skills are: {}",
                    names.join(", ")
                )
            });
        };
        let (skill, instructions) = read_skill(&skill.dir, skill.level)?;
        let mut files = Vec::new();
        collect_files(&skill.dir, 0, &mut files);
        files.retain(|path| path != &skill.dir.join(SKILL_FILE));
        files.sort();
        Ok(LoadedSkill {
            skill,
            instructions,
            files,
        })
    }
}

fn collect_files(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    const MAX_DEPTH: usize = 4;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if files.len() >= MAX_FILES {
            return;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                collect_files(&path, depth + 1, files);
            }
        } else {
            files.push(path);
        }
    }
}

/// Reads `dir/SKILL.md`: the skill and its instructions.
fn read_skill(dir: &Path, level: ToolLevel) -> Result<(Skill, String), String> {
    let path = dir.join(SKILL_FILE);
    let meta = std::fs::metadata(&path).map_err(|e| format!("cannot read it: {e}"))?;
    if meta.len() > MAX_SKILL_BYTES {
        return Err(format!(
            "it is {} bytes, over the {MAX_SKILL_BYTES}-byte limit",
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read it: {e}"))?;
    let (front, body) = front_matter(&text)?;
    let field = |key: &str| -> Option<String> {
        match &front[key] {
            Yaml::String(text) => Some(text.trim().to_owned()),
            Yaml::Integer(number) => Some(number.to_string()),
            _ => None,
        }
        .filter(|text| !text.is_empty())
    };
    let name = field("name")
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .ok_or("it has no `name`")?;
    let description = field("description")
        .ok_or("its front matter has no `description` (the model chooses skills by it)")?;
    Ok((
        Skill {
            name,
            description,
            dir: dir.to_path_buf(),
            level,
        },
        body.trim().to_owned(),
    ))
}

/// Splits `---\nYAML\n---\nbody`; the YAML must be a mapping.
fn front_matter(text: &str) -> Result<(Yaml, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err("it does not start with YAML front matter (`---`)".into());
    };
    let (yaml, body) = match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            let body = after.find('\n').map_or("", |newline| &after[newline + 1..]);
            (&rest[..end], body)
        }
        None => return Err("its front matter has no closing `---`".into()),
    };
    let docs = YamlLoader::load_from_str(yaml)
        .map_err(|e| format!("its front matter is not YAML: {e}"))?;
    match docs.into_iter().next() {
        Some(front @ Yaml::Hash(_)) => Ok((front, body)),
        _ => Err("its front matter is not a YAML mapping".into()),
    }
}

/// The skills as the model sees them in the system prompt: one line each.
pub fn listing(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Skills (load one with the `skill` tool when a task matches its description):\n",
    );
    for skill in skills {
        let description: String = skill
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let shown: String = description.chars().take(LISTED_DESCRIPTION).collect();
        let cut = if shown.len() < description.len() {
            "…"
        } else {
            ""
        };
        text.push_str(&format!("- {}: {shown}{cut}\n", skill.name));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join(SKILL_FILE), text).unwrap();
    }

    #[test]
    fn skills_are_found_listed_and_loaded_and_the_project_wins() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("p");
        let user = root.path().join("u");
        write(
            &project.join(".claude/skills"),
            "pdf",
            "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  with pdftk.\n---\n# PDF\nRun scripts/fill.sh.\n",
        );
        std::fs::create_dir_all(project.join(".claude/skills/pdf/scripts")).unwrap();
        std::fs::write(project.join(".claude/skills/pdf/scripts/fill.sh"), "echo").unwrap();
        write(
            &user,
            "pdf",
            "---\nname: pdf\ndescription: the user's\n---\nx\n",
        );
        write(
            &user,
            "notes",
            "---\ndescription: Take notes\n---\nWrite them down.\n",
        );
        write(&user, "broken", "no front matter\n");
        let dirs = SkillDirs {
            project: Some(project.clone()),
            user: Some(user),
        };
        let (skills, warnings) = dirs.discover();
        let names: Vec<_> = skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.level))
            .collect();
        assert_eq!(
            names,
            [
                ("notes", "Take notes", ToolLevel::User),
                ("pdf", "Fill PDF forms with pdftk.", ToolLevel::Project)
            ]
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(
            listing(&skills).unwrap(),
            "Skills (load one with the `skill` tool when a task matches its description):\n\
             - notes: Take notes\n- pdf: Fill PDF forms with pdftk.\n"
        );
        let loaded = dirs.load("pdf").unwrap();
        assert_eq!(loaded.instructions, "# PDF\nRun scripts/fill.sh.");
        assert_eq!(
            loaded.files,
            [project.join(".claude/skills/pdf/scripts/fill.sh")]
        );
        assert!(dirs.load("nope").unwrap_err().contains("notes, pdf"));
    }
}
