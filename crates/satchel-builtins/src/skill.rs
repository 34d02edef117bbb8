//! The `skill` tool: loads one of the skills listed in the system prompt
//! (`satchel_tools::skills`): its instructions, and the absolute paths of
//! the files beside them, which `read` and `bash` can then use.

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint};
use satchel_tools::skills::SkillDirs;
use satchel_tools::{Tool, ToolContext, ToolError};

/// Characters of instructions given at most (the rest is in the file).
const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// Loads skills from the host's skill directories.
pub struct SkillTool {
    spec: ToolSpec,
    dirs: SkillDirs,
}

impl SkillTool {
    /// The tool over `dirs`.
    pub fn new(dirs: SkillDirs) -> SkillTool {
        SkillTool { spec: spec(), dirs }
    }
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "skill".into(),
        title: Some("Load a skill".into()),
        description: "Load a skill listed in the system prompt: its instructions, and the paths of its \
            files (scripts, templates), which read and bash can use. Load one when a task matches its description."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": "The skill's name, as listed"}
            },
            "required": ["name"],
            "additionalProperties": false
        }),
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::FILES],
            writes: Vec::new(),
        },
    }
}

fn name_of(input: &Value) -> &str {
    input
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = name_of(&input).to_owned();
        let dirs = self.dirs.clone();
        let lookup = name.clone();
        let loaded = tokio::task::spawn_blocking(move || dirs.load(&lookup))
            .await
            .map_err(|error| ToolError::new(ErrorCode::ToolCrashed, error.to_string()))?
            .map_err(|why| ToolError::new(ErrorCode::InvalidParams, why))?;
        let mut instructions: String = loaded.instructions.chars().take(MAX_INSTRUCTIONS).collect();
        if instructions.len() < loaded.instructions.len() {
            instructions.push_str(&format!(
                "\n[cut to {MAX_INSTRUCTIONS} characters; the whole file is {}]",
                loaded
                    .skill
                    .dir
                    .join(satchel_tools::skills::SKILL_FILE)
                    .display()
            ));
        }
        let mut text = format!(
            "Skill `{}` ({}), in {}:\n\n{instructions}\n",
            loaded.skill.name,
            loaded.skill.description,
            loaded.skill.dir.display()
        );
        if !loaded.files.is_empty() {
            text.push_str("\nIts files (use them with read or bash):\n");
            for file in &loaded.files {
                text.push_str(&format!("- {}\n", file.display()));
            }
        }
        Ok(ToolOutput::success(
            ToolResults::Text(text),
            format!("loaded skill `{name}` ({} files)", loaded.files.len()),
        ))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let name = name_of(input);
        match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "2", "skill"), paint(style, "1", name))
            }
            Style::Markdown => format!("skill `{name}`"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        if output.is_error {
            return satchel_tools::format::generic_result(output, style);
        }
        match style {
            Style::Terminal { .. } => paint(style, "2", &output.user_message),
            Style::Markdown => output.user_message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_skill_loads_with_its_files_and_an_unknown_one_names_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join("skills/greet");
        std::fs::create_dir_all(skills.join("scripts")).unwrap();
        std::fs::write(
            skills.join("SKILL.md"),
            "---\nname: greet\ndescription: Greets people\n---\nRun scripts/hello.sh NAME.\n",
        )
        .unwrap();
        std::fs::write(skills.join("scripts/hello.sh"), "echo hello \"$1\"\n").unwrap();
        let tool = SkillTool::new(SkillDirs {
            project: None,
            user: Some(dir.path().join("skills")),
        });
        let ctx = ToolContext::standalone(
            "c1",
            dir.path().to_path_buf(),
            Arc::new(satchel_tools::ToolsConfig::default()),
        );
        let output = tool.run(json!({"name": "greet"}), &ctx).await.unwrap();
        let text = output.results.to_text();
        assert!(text.contains("Run scripts/hello.sh NAME."), "{text}");
        assert!(
            text.contains(&skills.join("scripts/hello.sh").display().to_string()),
            "{text}"
        );
        assert_eq!(
            tool.format_result(&output, Style::Markdown),
            "loaded skill `greet` (1 files)"
        );
        let error = tool.run(json!({"name": "nope"}), &ctx).await.unwrap_err();
        assert!(error.message.contains("greet"), "{}", error.message);
    }
}
