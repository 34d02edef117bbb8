//! The `glob` tool: files whose path matches a glob (`globset`, `**`
//! across directories, `*` within one), newest first, walked with
//! ripgrep's `ignore` crate so `.gitignore`d and hidden paths are left out
//! as `rg --files` leaves them out (hidden ones are searched when the
//! pattern names a hidden directory or file); capped, with a count of the
//! rest.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::{parse_input, paths};

/// Files listed at most.
pub const MAX_FILES: usize = 100;

/// Finds files by name; see the module docs.
pub struct GlobTool {
    spec: ToolSpec,
}

impl Default for GlobTool {
    fn default() -> GlobTool {
        GlobTool::new()
    }
}

impl GlobTool {
    /// The tool with its spec.
    pub fn new() -> GlobTool {
        GlobTool { spec: spec() }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobInput {
    pattern: String,
    path: Option<String>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "glob".into(),
        title: Some("Find files".into()),
        description: "Find files by path pattern (`**/*.rs`, `src/**/test_*.py`), newest first; .gitignored and \
            hidden paths are left out as ripgrep leaves them out. At most 100 are listed, with a count of the rest."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "The glob to match paths against, relative to `path`"},
                "path": {"type": "string", "description": "The directory to search; default the project"}
            },
            "required": ["pattern"],
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

/// Splits the leading literal directories off a pattern:
/// `src/**/*.rs` → (`src`, `**/*.rs`).
fn literal_prefix(pattern: &str) -> (PathBuf, String) {
    let parts: Vec<&str> = pattern.split('/').collect();
    let meta = |part: &str| part.contains(['*', '?', '[', '{', '\\']);
    let literal = parts
        .iter()
        .take(parts.len().saturating_sub(1))
        .take_while(|part| !meta(part))
        .count();
    let mut base: PathBuf = parts[..literal].iter().collect();
    if pattern.starts_with('/') && literal > 0 {
        base = Path::new("/").join(base);
    }
    (base, parts[literal..].join("/"))
}

#[async_trait]
impl Tool for GlobTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: GlobInput = parse_input("glob", input)?;
        let root = paths::absolute(ctx, input.path.as_deref().unwrap_or("."))?;
        let (prefix, rest) = literal_prefix(&input.pattern);
        let base = root.join(prefix);
        let matcher = globset::GlobBuilder::new(&rest)
            .literal_separator(true)
            .build()
            .map_err(|error| {
                ToolError::new(
                    ErrorCode::InvalidParams,
                    format!("`{}` is not a glob: {error}", input.pattern),
                )
            })?
            .compile_matcher();
        let hidden = input.pattern.split('/').any(|part| part.starts_with('.'));
        let cancel = ctx.cancel.clone();
        let walk_base = base.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
            let walker = ignore::WalkBuilder::new(&walk_base).hidden(!hidden).build();
            for entry in walker.flatten() {
                if cancel.is_cancelled() {
                    break;
                }
                if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                    continue;
                }
                let Ok(relative) = entry.path().strip_prefix(&walk_base) else {
                    continue;
                };
                if matcher.is_match(relative) {
                    let modified = entry
                        .metadata()
                        .ok()
                        .and_then(|meta| meta.modified().ok())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    found.push((modified, entry.path().to_path_buf()));
                }
            }
            found
        })
        .await
        .map_err(|error| ToolError::new(ErrorCode::ToolCrashed, error.to_string()))?;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                "the search was cancelled",
            ));
        }
        let mut found = found;
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len();
        let mut text = String::new();
        for (_, path) in found.iter().take(MAX_FILES) {
            text.push_str(&paths::shown(ctx, path));
            text.push('\n');
        }
        if total == 0 {
            text = format!(
                "No files match `{}` under {}.",
                input.pattern,
                paths::shown(ctx, &base)
            );
        } else if total > MAX_FILES {
            text.push_str(&format!(
                "… {} more files not shown (newest first); narrow the pattern or the path.\n",
                total - MAX_FILES
            ));
        }
        Ok(ToolOutput::success(
            ToolResults::Text(text),
            format!("found {total} files matching `{}`", input.pattern),
        ))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let pattern = input
            .get("pattern")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .map(|p| format!(" in {p}"))
            .unwrap_or_default();
        match style {
            Style::Terminal { .. } => format!(
                "{} {}{path}",
                paint(style, "2", "glob"),
                paint(style, "1", pattern)
            ),
            Style::Markdown => format!("glob `{pattern}`{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_directories_are_split_off() {
        assert_eq!(
            literal_prefix("src/**/*.rs"),
            (PathBuf::from("src"), "**/*.rs".to_owned())
        );
        assert_eq!(literal_prefix("*.rs"), (PathBuf::new(), "*.rs".to_owned()));
        assert_eq!(
            literal_prefix("/etc/*.conf"),
            (PathBuf::from("/etc"), "*.conf".to_owned())
        );
        assert_eq!(
            literal_prefix("a/b/c.txt"),
            (PathBuf::from("a/b"), "c.txt".to_owned())
        );
    }
}
