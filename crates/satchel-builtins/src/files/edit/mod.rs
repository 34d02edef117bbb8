//! The `edit` tool: exact replacements in one file, one
//! (`old_string`/`new_string`/`replace_all`) or many at once (`edits`),
//! applied all or none by `engine`, the file written back atomically
//! with its line endings, BOM, final newline and mode; the result is a
//! short unified diff.

pub(crate) mod engine;

use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::stamps::{FileStamps, Stamp};
use super::{atomic, io_failure, parse_input, paths};
use engine::{Document, Replacement};

/// Diff lines shown in a result at most.
const DIFF_LINES: usize = 80;

/// Edits a file by exact replacement; see the module docs.
pub struct EditTool {
    spec: ToolSpec,
    stamps: Arc<FileStamps>,
}

impl EditTool {
    /// The tool, sharing `stamps` with `read` and `write`.
    pub fn new(stamps: Arc<FileStamps>) -> EditTool {
        EditTool {
            spec: spec(),
            stamps,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditInput {
    file_path: String,
    old_string: Option<String>,
    new_string: Option<String>,
    replace_all: Option<bool>,
    edits: Option<Vec<OneEdit>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OneEdit {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

fn spec() -> ToolSpec {
    let edit_fields = json!({
        "old_string": {"type": "string", "description": "The exact text to replace (it must occur once unless replace_all)"},
        "new_string": {"type": "string", "description": "The text to put in its place"},
        "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence"}
    });
    ToolSpec {
        name: "edit".into(),
        title: Some("Edit file".into()),
        description: "Replace exact text in a file. `old_string` must occur exactly once (include surrounding \
            lines to make it unique) unless `replace_all`; give either `old_string`/`new_string` or `edits`, a \
            list applied in order, all or none. Line endings, BOM, final newline and mode are kept; write `\\n` \
            for line breaks whatever the file uses. Returns a unified diff. Read the file first: an edit of a file \
            changed since you read it is refused."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1, "description": "The file to change, absolute or relative to the project"},
                "old_string": edit_fields["old_string"],
                "new_string": edit_fields["new_string"],
                "replace_all": edit_fields["replace_all"],
                "edits": {
                    "type": "array", "minItems": 1,
                    "description": "Several replacements, applied in order to the result of the ones before; if one fails, none is made",
                    "items": {
                        "type": "object",
                        "properties": edit_fields,
                        "required": ["old_string", "new_string"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["file_path"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "replacements": {"type": "integer", "description": "Occurrences replaced, all edits together"},
                "diff": {"type": "string", "description": "Unified diff of the change"}
            },
            "required": ["file_path", "replacements", "diff"]
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::FILES],
            writes: vec![Resource::FILES],
        },
    }
}

/// Replacements as asked: `(old_string, new_string, replace_all)`.
type Asked = Vec<(String, String, bool)>;

impl EditInput {
    /// The file and the replacements asked for, checked: one form or the
    /// other.
    fn replacements(self) -> Result<(String, Asked), ToolError> {
        let single = self.old_string.is_some() || self.new_string.is_some();
        match (single, self.edits) {
            (true, Some(_)) => Err(ToolError::new(
                ErrorCode::InvalidParams,
                "`edit` takes either `old_string`/`new_string` or `edits`, not both",
            )),
            (false, None) => Err(ToolError::new(
                ErrorCode::InvalidParams,
                "`edit` needs `old_string` and `new_string` (or `edits`, a list of them)",
            )),
            (false, Some(edits)) => Ok((
                self.file_path,
                edits
                    .into_iter()
                    .map(|e| (e.old_string, e.new_string, e.replace_all))
                    .collect(),
            )),
            (true, None) => match (self.old_string, self.new_string) {
                (Some(old), Some(new)) => Ok((
                    self.file_path,
                    vec![(old, new, self.replace_all.unwrap_or(false))],
                )),
                (None, _) => Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    "`edit` got `new_string` without `old_string`; give both",
                )),
                (_, None) => Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    "`edit` got `old_string` without `new_string`; give both (an empty `new_string` deletes)",
                )),
            },
        }
    }
}

#[async_trait]
impl Tool for EditTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: EditInput = parse_input("edit", input)?;
        let (raw, asked) = input.replacements()?;
        let path = paths::for_writing(ctx, &raw, "edit")?;
        let shown = paths::shown(ctx, &path);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    format!("`{shown}` does not exist; create it with `write`"),
                ));
            }
            Err(error) => return Err(io_failure(&shown, "read", &error)),
        };
        let meta = std::fs::metadata(&path).map_err(|e| io_failure(&shown, "read", &e))?;
        let conversation = ctx.owner();
        self.stamps
            .check(conversation, &path, &shown, &bytes, &meta, "edit")?;
        let Some(doc) = Document::decode(&bytes) else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("`{shown}` is not UTF-8 text; `edit` changes text files only"),
            ));
        };
        let replacements: Vec<Replacement> = asked
            .iter()
            .map(|(old, new, all)| Replacement {
                old: doc.normalise(old),
                new: doc.normalise(new),
                all: *all,
            })
            .collect();
        let (text, counts) =
            engine::apply(&doc.text, &replacements).map_err(|(index, error)| {
                let which = if replacements.len() > 1 {
                    format!("edit {} of {}: ", index + 1, replacements.len())
                } else {
                    String::new()
                };
                let mut details = serde_json::Map::new();
                if let engine::EditError::Ambiguous { lines } = &error {
                    details.insert("lines".into(), json!(lines));
                }
                if let engine::EditError::NotFound { closest, .. } = &error {
                    details.insert(
                        "closest".into(),
                        json!(
                            closest
                                .iter()
                                .map(|(line, text)| json!({"line": line, "text": text}))
                                .collect::<Vec<_>>()
                        ),
                    );
                }
                if replacements.len() > 1 {
                    details.insert("failed_edit".into(), json!(index + 1));
                }
                ToolError {
                    code: ErrorCode::InvalidParams,
                    message: format!("{which}{}", error.message()),
                    details,
                }
            })?;
        let new_bytes = doc.encode(&text);
        atomic::write_atomic(&path, &new_bytes).map_err(|e| io_failure(&shown, "write", &e))?;
        if let Ok(meta) = std::fs::metadata(&path) {
            self.stamps
                .remember(conversation, &path, Stamp::of(&new_bytes, &meta));
        }
        let diff = engine::unified_diff(&shown, &doc.text, &text, DIFF_LINES);
        let replaced: usize = counts.iter().sum();
        let (added, removed) = diff_counts(&diff);
        let user_message = format!(
            "edited {shown}: {replaced} {} (+{added} −{removed} lines)",
            if replaced == 1 {
                "replacement"
            } else {
                "replacements"
            }
        );
        Ok(ToolOutput::success(
            ToolResults::json(json!({
                "file_path": shown,
                "replacements": replaced,
                "diff": diff,
            })),
            user_message,
        ))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let path = input
            .get("file_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let count = input
            .get("edits")
            .and_then(Value::as_array)
            .map_or(1, Vec::len);
        let what = if count == 1 {
            String::new()
        } else {
            format!(" ({count} edits)")
        };
        match style {
            Style::Terminal { .. } => {
                format!(
                    "{} {}{what}",
                    paint(style, "2", "edit"),
                    paint(style, "1", path)
                )
            }
            Style::Markdown => format!("edit `{path}`{what}"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        diff_result(output, style)
    }
}

/// A result whose structured part carries a unified `diff` (`edit`, the
/// native edit forms): the user message, then the diff, coloured on a
/// terminal and fenced in markdown; any other result as usual.
pub(crate) fn diff_result(output: &ToolOutput, style: Style) -> String {
    let diff = output
        .results
        .structured()
        .and_then(|v| v.get("diff"))
        .and_then(Value::as_str);
    let Some(diff) = diff.filter(|_| !output.is_error) else {
        return satchel_tools::format::generic_result(output, style);
    };
    match style {
        Style::Terminal { .. } => {
            let body: Vec<String> = diff
                .lines()
                .map(|line| match line.as_bytes().first() {
                    Some(b'+') if !line.starts_with("+++") => paint(style, "32", line),
                    Some(b'-') if !line.starts_with("---") => paint(style, "31", line),
                    Some(b'@') => paint(style, "36", line),
                    _ => paint(style, "2", line),
                })
                .collect();
            format!("{}\n{}", output.user_message, body.join("\n"))
        }
        Style::Markdown => format!(
            "{}\n\n{}",
            output.user_message,
            markdown_fence(diff, "diff")
        ),
    }
}

/// Lines added and removed in a unified diff.
fn diff_counts(diff: &str) -> (usize, usize) {
    diff.lines().fold((0, 0), |(added, removed), line| {
        if line.starts_with('+') && !line.starts_with("+++") {
            (added + 1, removed)
        } else if line.starts_with('-') && !line.starts_with("---") {
            (added, removed + 1)
        } else {
            (added, removed)
        }
    })
}
