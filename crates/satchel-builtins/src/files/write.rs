//! The `write` tool: creates or replaces a whole file, atomically, its
//! parent directories made and an existing file's mode kept. Replacing a
//! file the model has not read (or that changed since) is refused in a
//! conversation (see `super::stamps`).

use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::stamps::{FileStamps, Stamp};
use super::{atomic, io_failure, parse_input, paths};

/// Writes whole files; see the module docs.
pub struct WriteTool {
    spec: ToolSpec,
    stamps: Arc<FileStamps>,
}

impl WriteTool {
    /// The tool, sharing `stamps` with `read` and `edit`.
    pub fn new(stamps: Arc<FileStamps>) -> WriteTool {
        WriteTool {
            spec: spec(),
            stamps,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    file_path: String,
    content: String,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "write".into(),
        title: Some("Write file".into()),
        description: "Create a file, or replace one whole, with `content` exactly as given; parent directories \
            are made, an existing file keeps its mode, and the write is atomic. To replace an existing file, read \
            it first; to change part of a file, prefer `edit`."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1, "description": "The file to write, absolute or relative to the project"},
                "content": {"type": "string", "description": "The whole new content of the file"}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "created": {"type": "boolean"},
                "bytes": {"type": "integer"},
                "lines": {"type": "integer"}
            },
            "required": ["file_path", "created", "bytes", "lines"]
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: Vec::new(),
            writes: vec![Resource::FILES],
        },
    }
}

#[async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: WriteInput = parse_input("write", input)?;
        let path = paths::for_writing(ctx, &input.file_path, "write")?;
        let shown = paths::shown(ctx, &path);
        let conversation = ctx.owner();
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    format!("`{shown}` is a directory; give a file path"),
                ));
            }
            Ok(meta) => {
                if conversation.is_some() {
                    let old = std::fs::read(&path).map_err(|e| io_failure(&shown, "read", &e))?;
                    self.stamps
                        .check(conversation, &path, &shown, &old, &meta, "write")?;
                }
            }
            Err(_) => {}
        }
        let bytes = input.content.as_bytes();
        let created =
            atomic::write_atomic(&path, bytes).map_err(|e| io_failure(&shown, "write", &e))?;
        if let Ok(meta) = std::fs::metadata(&path) {
            self.stamps
                .remember(conversation, &path, Stamp::of(bytes, &meta));
        }
        let lines = input.content.lines().count();
        let verb = if created { "created" } else { "replaced" };
        Ok(ToolOutput::success(
            ToolResults::json(json!({
                "file_path": shown,
                "created": created,
                "bytes": bytes.len(),
                "lines": lines,
            })),
            format!("{verb} {shown} ({lines} lines, {} bytes)", bytes.len()),
        ))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let path = input
            .get("file_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let lines = input
            .get("content")
            .and_then(Value::as_str)
            .map_or(0, |c| c.lines().count());
        match style {
            Style::Terminal { .. } => format!(
                "{} {} {}",
                paint(style, "2", "write"),
                paint(style, "1", path),
                paint(style, "2", &format!("({lines} lines)"))
            ),
            Style::Markdown => format!("write `{path}` ({lines} lines)"),
        }
    }
}
