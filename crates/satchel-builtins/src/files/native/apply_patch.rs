//! `apply_patch`, the form OpenAI's coding models are trained to edit
//! files with (Codex's patch grammar, `super::patch`), as a function
//! tool taking the patch as `input`. Every file of the patch is resolved
//! against the writable paths, checked against the stale-file rule and
//! changed in memory first; only when all of it applies is anything
//! written, each file atomically with its line endings, BOM and mode.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::edit_forms::APPLY_PATCH;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::patch::{self, FileOp};
use crate::files::edit::engine::{self, Document};
use crate::files::stamps::{FileStamps, Stamp};
use crate::files::{atomic, io_failure, parse_input, paths};

/// Diff lines shown per file at most.
const DIFF_LINES: usize = 60;

/// Applies patches in Codex's grammar; see the module docs.
pub struct ApplyPatchTool {
    spec: ToolSpec,
    stamps: Arc<FileStamps>,
}

impl ApplyPatchTool {
    /// The tool, sharing `stamps` with the other file tools.
    pub fn new(stamps: Arc<FileStamps>) -> ApplyPatchTool {
        ApplyPatchTool {
            spec: spec(),
            stamps,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchInput {
    input: String,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: APPLY_PATCH.into(),
        title: Some("Apply patch".into()),
        description: "Add, change, move and delete files with one patch:\n\
            *** Begin Patch\n\
            *** Add File: path   (then each line of the new file, prefixed with +)\n\
            *** Delete File: path\n\
            *** Update File: path\n\
            *** Move to: new_path   (optional)\n\
            @@ a line near the change, to find it (optional)\n\
            \x20context line (a space first)\n\
            -removed line\n\
            +added line\n\
            *** End Patch\n\
            Give three lines of context around each change; paths are relative to the project. \
            All of the patch applies or none of it."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "The whole patch, from `*** Begin Patch` to `*** End Patch`"}
            },
            "required": ["input"],
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

/// One file's outcome, worked out before anything is written.
struct Planned {
    /// `A`, `M` or `D`, as Codex reports them.
    mark: char,
    shown: String,
    /// Where the new bytes go; `None` for a deletion.
    target: Option<(PathBuf, Vec<u8>)>,
    /// A file to remove afterwards: a deletion, or a move's old name.
    remove: Option<PathBuf>,
    diff: String,
}

fn refused(message: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidParams, message)
}

impl ApplyPatchTool {
    fn plan(&self, op: &FileOp, ctx: &ToolContext) -> Result<Planned, ToolError> {
        let conversation = ctx.owner();
        let path = paths::for_writing(ctx, op.path(), APPLY_PATCH)?;
        let shown = paths::shown(ctx, &path);
        match op {
            FileOp::Add { contents, .. } => {
                if path.exists() {
                    return Err(refused(format!(
                        "`{shown}` already exists; change it with `*** Update File: {shown}`"
                    )));
                }
                let diff = engine::unified_diff(&shown, "", contents, DIFF_LINES);
                Ok(Planned {
                    mark: 'A',
                    shown,
                    target: Some((path, contents.clone().into_bytes())),
                    remove: None,
                    diff,
                })
            }
            FileOp::Delete { .. } => {
                let (bytes, _) = self.current(&path, &shown, conversation)?;
                let old = String::from_utf8_lossy(&bytes);
                let diff = engine::unified_diff(&shown, &old, "", DIFF_LINES);
                Ok(Planned {
                    mark: 'D',
                    shown,
                    target: None,
                    remove: Some(path),
                    diff,
                })
            }
            FileOp::Update { move_to, hunks, .. } => {
                let (bytes, doc) = self.current(&path, &shown, conversation)?;
                let Some(doc) = doc else {
                    return Err(refused(format!(
                        "`{shown}` is not UTF-8 text; a patch changes text files only"
                    )));
                };
                drop(bytes);
                let hunks: Vec<patch::Hunk> = hunks
                    .iter()
                    .map(|h| patch::Hunk {
                        anchor: h.anchor.as_deref().map(|a| doc.normalise(a)),
                        old: h.old.iter().map(|l| doc.normalise(l)).collect(),
                        new: h.new.iter().map(|l| doc.normalise(l)).collect(),
                        end_of_file: h.end_of_file,
                    })
                    .collect();
                let new_text = patch::apply(&doc.text, &hunks)
                    .map_err(|e| refused(format!("`{shown}`: {}", e.0)))?;
                let (target, remove, shown) = match move_to {
                    Some(to) => {
                        let to = paths::for_writing(ctx, to, APPLY_PATCH)?;
                        let to_shown = paths::shown(ctx, &to);
                        if to.exists() && to != path {
                            return Err(refused(format!(
                                "cannot move `{shown}` to `{to_shown}`: it already exists"
                            )));
                        }
                        (to, (to_shown != shown).then_some(path), to_shown)
                    }
                    None => (path, None, shown),
                };
                let diff = engine::unified_diff(&shown, &doc.text, &new_text, DIFF_LINES);
                Ok(Planned {
                    mark: 'M',
                    shown,
                    target: Some((target, doc.encode(&new_text))),
                    remove,
                    diff,
                })
            }
        }
    }

    /// The file's bytes and text, after the stale-file rule.
    fn current(
        &self,
        path: &std::path::Path,
        shown: &str,
        conversation: Option<&str>,
    ) -> Result<(Vec<u8>, Option<Document>), ToolError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(refused(format!(
                    "`{shown}` does not exist; create it with `*** Add File: {shown}`"
                )));
            }
            Err(error) => return Err(io_failure(shown, "read", &error)),
        };
        let meta = std::fs::metadata(path).map_err(|e| io_failure(shown, "read", &e))?;
        self.stamps
            .check(conversation, path, shown, &bytes, &meta, APPLY_PATCH)?;
        let doc = Document::decode(&bytes);
        Ok((bytes, doc))
    }
}

#[async_trait]
impl Tool for ApplyPatchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: PatchInput = parse_input(APPLY_PATCH, input)?;
        let ops = patch::parse(&input.input).map_err(|e| {
            refused(format!(
                "the patch cannot be read: {}. Nothing was changed.",
                e.0
            ))
        })?;
        let mut planned = Vec::with_capacity(ops.len());
        for op in &ops {
            planned.push(self.plan(op, ctx).map_err(|mut error| {
                error.message = format!("{} Nothing was changed.", error.message);
                error
            })?);
        }
        let conversation = ctx.owner();
        let mut done: Vec<String> = Vec::new();
        for step in &planned {
            let result = (|| {
                if let Some((path, bytes)) = &step.target {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    atomic::write_atomic(path, bytes)?;
                    if let Ok(meta) = std::fs::metadata(path) {
                        self.stamps
                            .remember(conversation, path, Stamp::of(bytes, &meta));
                    }
                }
                if let Some(old) = &step.remove {
                    std::fs::remove_file(old)?;
                }
                Ok::<(), std::io::Error>(())
            })();
            if let Err(error) = result {
                let mut failure = io_failure(&step.shown, "write", &error);
                failure.message = if done.is_empty() {
                    format!("{}. Nothing was changed.", failure.message)
                } else {
                    format!(
                        "{}. Already changed before it: {}.",
                        failure.message,
                        done.join(", ")
                    )
                };
                return Err(failure);
            }
            done.push(format!("{} {}", step.mark, step.shown));
        }
        let summary = format!("Success. Updated the following files:\n{}", done.join("\n"));
        let diff: String = planned
            .iter()
            .map(|step| step.diff.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let files: Vec<Value> = planned
            .iter()
            .map(|step| json!({"path": step.shown, "change": step.mark.to_string()}))
            .collect();
        let count = planned.len();
        Ok(ToolOutput::success(
            ToolResults::json(json!({"summary": summary, "files": files, "diff": diff})),
            format!(
                "patched {count} {}: {}",
                if count == 1 { "file" } else { "files" },
                done.join(", ")
            ),
        ))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let patch = input
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let files: Vec<String> = satchel_core::edit_forms::patch_paths(patch)
            .into_iter()
            .map(|(_, path)| path)
            .collect();
        let files = files.join(", ");
        match style {
            Style::Terminal { .. } => {
                format!(
                    "{} {}",
                    paint(style, "2", "apply_patch"),
                    paint(style, "1", &files)
                )
            }
            Style::Markdown => format!("apply_patch `{files}`"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        crate::files::edit::diff_result(output, style)
    }
}
