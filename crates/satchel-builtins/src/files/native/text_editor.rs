//! Anthropic's text editor (`str_replace_based_edit_tool`), the form
//! Claude models are trained to edit files with, over Satchel's own file
//! tools: `view` is `read`, `create` is `write`, `str_replace` is `edit`
//! (so exactly one match, line endings kept, the stale-file rule), and
//! `insert` puts lines after a line number with the same care. Requests
//! declare it by type, not by schema (see `satchel_llm`'s Anthropic
//! writer); the schema here is what its calls are validated against.

use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::edit_forms::TEXT_EDITOR;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use crate::files::edit::EditTool;
use crate::files::edit::engine::{self, Document};
use crate::files::read::ReadTool;
use crate::files::stamps::{FileStamps, Stamp};
use crate::files::write::WriteTool;
use crate::files::{atomic, io_failure, parse_input, paths};

/// The text editor; see the module docs.
pub struct TextEditorTool {
    spec: ToolSpec,
    stamps: Arc<FileStamps>,
    read: ReadTool,
    write: WriteTool,
    edit: EditTool,
}

impl TextEditorTool {
    /// The tool, sharing `stamps` with `read`, `write` and `edit`.
    pub fn new(stamps: Arc<FileStamps>) -> TextEditorTool {
        TextEditorTool {
            spec: spec(),
            read: ReadTool::new(stamps.clone()),
            write: WriteTool::new(stamps.clone()),
            edit: EditTool::new(stamps.clone()),
            stamps,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditorInput {
    command: String,
    path: String,
    view_range: Option<Vec<i64>>,
    file_text: Option<String>,
    old_str: Option<String>,
    new_str: Option<String>,
    insert_line: Option<u64>,
    insert_text: Option<String>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: TEXT_EDITOR.into(),
        title: Some("Text editor".into()),
        description: "View, create and edit files: `view` (a file's numbered lines, `view_range` [first, last] \
            with -1 for the end; a directory's entries), `create` (`file_text`), `str_replace` (`old_str` must \
            occur exactly once; `new_str` replaces it), `insert` (`insert_text` after line `insert_line`, 0 for \
            the top)."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
                "path": {"type": "string", "minLength": 1, "description": "The file or directory"},
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                "file_text": {"type": "string"},
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
                "insert_line": {"type": "integer", "minimum": 0},
                "insert_text": {"type": "string"}
            },
            "required": ["command", "path"],
            "additionalProperties": false
        }),
        output_schema: None,
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

fn missing(command: &str, field: &str) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidParams,
        format!("`{command}` needs `{field}`"),
    )
}

#[async_trait]
impl Tool for TextEditorTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: EditorInput = parse_input(TEXT_EDITOR, input)?;
        match input.command.as_str() {
            "view" => {
                let mut read = json!({"file_path": input.path});
                if let Some(range) = &input.view_range {
                    let (first, last) = match range.as_slice() {
                        [first, last] => (*first, *last),
                        _ => return Err(missing("view", "view_range: [first, last]")),
                    };
                    if first < 1 || (last != -1 && last < first) {
                        return Err(ToolError::new(
                            ErrorCode::InvalidParams,
                            format!(
                                "`view_range` [{first}, {last}] is not a range of lines: lines count from 1, \
                                 and the last is -1 (the end) or not before the first"
                            ),
                        ));
                    }
                    read["offset"] = json!(first);
                    if last != -1 {
                        read["limit"] = json!(last - first + 1);
                    }
                }
                self.read.run(read, ctx).await
            }
            "create" => {
                let content = input
                    .file_text
                    .ok_or_else(|| missing("create", "file_text"))?;
                self.write
                    .run(json!({"file_path": input.path, "content": content}), ctx)
                    .await
            }
            "str_replace" => {
                let old = input
                    .old_str
                    .ok_or_else(|| missing("str_replace", "old_str"))?;
                let new = input.new_str.unwrap_or_default();
                self.edit
                    .run(
                        json!({"file_path": input.path, "old_string": old, "new_string": new}),
                        ctx,
                    )
                    .await
            }
            "insert" => {
                let line = input
                    .insert_line
                    .ok_or_else(|| missing("insert", "insert_line"))?;
                // Older versions of the tool called the text `new_str`.
                let text = input
                    .insert_text
                    .or(input.new_str)
                    .ok_or_else(|| missing("insert", "insert_text"))?;
                self.insert(&input.path, line, &text, ctx)
            }
            other => Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("unknown command `{other}`: use view, create, str_replace or insert"),
            )),
        }
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        let (command, path) = (text("command"), text("path"));
        match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "2", command), paint(style, "1", path))
            }
            Style::Markdown => format!("{command} `{path}`"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let structured = output.results.structured();
        if structured.is_some_and(|v| v.get("diff").is_some()) {
            self.edit.format_result(output, style)
        } else if structured.is_some_and(|v| v.get("created").is_some()) {
            self.write.format_result(output, style)
        } else {
            self.read.format_result(output, style)
        }
    }
}

impl TextEditorTool {
    /// `text` as new lines after line `after` (0: before the first).
    fn insert(
        &self,
        raw: &str,
        after: u64,
        text: &str,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let path = paths::for_writing(ctx, raw, "insert")?;
        let shown = paths::shown(ctx, &path);
        let bytes = std::fs::read(&path).map_err(|e| io_failure(&shown, "read", &e))?;
        let meta = std::fs::metadata(&path).map_err(|e| io_failure(&shown, "read", &e))?;
        let conversation = ctx.owner();
        self.stamps
            .check(conversation, &path, &shown, &bytes, &meta, "insert")?;
        let Some(doc) = Document::decode(&bytes) else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("`{shown}` is not UTF-8 text; `insert` changes text files only"),
            ));
        };
        let lines = doc.text.lines().count();
        let after = usize::try_from(after).unwrap_or(usize::MAX);
        if after > lines {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("`insert_line` {after} is past the end: `{shown}` has {lines} lines"),
            ));
        }
        let at = if after == 0 {
            0
        } else {
            doc.text
                .match_indices('\n')
                .nth(after - 1)
                .map_or(doc.text.len(), |(i, _)| i + 1)
        };
        let mut inserted = doc.normalise(text);
        if !inserted.ends_with('\n') {
            inserted.push('\n');
        }
        let mut new_text = doc.text.clone();
        if at == new_text.len() && !new_text.is_empty() && !new_text.ends_with('\n') {
            // After a last line without a newline: keep the file's ending.
            new_text.push('\n');
            inserted.pop();
        }
        new_text.insert_str(at, &inserted);
        let new_bytes = doc.encode(&new_text);
        atomic::write_atomic(&path, &new_bytes).map_err(|e| io_failure(&shown, "write", &e))?;
        if let Ok(meta) = std::fs::metadata(&path) {
            self.stamps
                .remember(conversation, &path, Stamp::of(&new_bytes, &meta));
        }
        let diff = engine::unified_diff(&shown, &doc.text, &new_text, 80);
        let count = text.lines().count().max(1);
        Ok(ToolOutput::success(
            ToolResults::json(json!({"file_path": shown, "replacements": 0, "diff": diff})),
            format!("inserted {count} lines into {shown} after line {after}"),
        ))
    }
}
