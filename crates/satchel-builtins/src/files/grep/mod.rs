//! The `grep` tool: ripgrep's engine as crates (`search`), with Claude
//! Code's parameters (`output_mode`, `-i`, `-n`, `-A`/`-B`/`-C`,
//! `multiline`, `head_limit`, `glob`, `type`) and `rg`'s defaults.

pub(crate) mod search;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::{parse_input, paths};
use search::{OutputMode, Query};

/// Entries (files, lines or counts) shown when `head_limit` is not given.
pub const DEFAULT_HEAD_LIMIT: usize = 250;

/// Searches file contents; see the module docs.
pub struct GrepTool {
    spec: ToolSpec,
}

impl Default for GrepTool {
    fn default() -> GrepTool {
        GrepTool::new()
    }
}

impl GrepTool {
    /// The tool with its spec.
    pub fn new() -> GrepTool {
        GrepTool { spec: spec() }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepInput {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(rename = "type")]
    file_type: Option<String>,
    output_mode: Option<String>,
    #[serde(rename = "-i")]
    case_insensitive: Option<bool>,
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    #[serde(rename = "-A")]
    after: Option<usize>,
    #[serde(rename = "-B")]
    before: Option<usize>,
    #[serde(rename = "-C")]
    context: Option<usize>,
    multiline: Option<bool>,
    head_limit: Option<usize>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "grep".into(),
        title: Some("Search file contents".into()),
        description: "Search file contents with a regex (ripgrep's engine and defaults: .gitignored, hidden and \
            binary files skipped). `output_mode`: `files_with_matches` (default: paths), `content` (matching lines, \
            with `-n` line numbers, `-A`/`-B`/`-C` context) or `count`. Filter with `glob` (`*.rs`) or `type` (`rust`, \
            `py`...). `multiline` lets `.` and patterns span lines. At most `head_limit` entries (default 250)."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "The regex to search for (Rust regex syntax, as ripgrep)"},
                "path": {"type": "string", "description": "File or directory to search; default the project"},
                "glob": {"type": "string", "description": "Only files matching this glob, e.g. `*.js` or `*.{ts,tsx}`"},
                "type": {"type": "string", "description": "Only files of this ripgrep type, e.g. `rust`, `py`, `js`"},
                "output_mode": {
                    "type": "string", "enum": ["files_with_matches", "content", "count"], "default": "files_with_matches",
                    "description": "What to show"
                },
                "-i": {"type": "boolean", "description": "Case-insensitive"},
                "-n": {"type": "boolean", "description": "Line numbers in `content` mode (default true)"},
                "-A": {"type": "integer", "minimum": 0, "description": "Lines after each match (`content`)"},
                "-B": {"type": "integer", "minimum": 0, "description": "Lines before each match (`content`)"},
                "-C": {"type": "integer", "minimum": 0, "description": "Lines before and after each match (`content`)"},
                "multiline": {"type": "boolean", "description": "Let matches span lines (`.` matches newlines)"},
                "head_limit": {"type": "integer", "minimum": 1, "description": "Show at most this many entries (default 250)"}
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

#[async_trait]
impl Tool for GrepTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: GrepInput = parse_input("grep", input)?;
        let mode = match input.output_mode.as_deref() {
            None | Some("files_with_matches") => OutputMode::FilesWithMatches,
            Some("content") => OutputMode::Content,
            Some("count") => OutputMode::Count,
            Some(other) => {
                return Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "`output_mode` {other:?} is not one of files_with_matches, content, count"
                    ),
                ));
            }
        };
        let root = paths::absolute(ctx, input.path.as_deref().unwrap_or("."))?;
        if !root.exists() {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("`{}` does not exist", paths::shown(ctx, &root)),
            ));
        }
        let head_limit = input.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT).max(1);
        let query = Query {
            pattern: input.pattern.clone(),
            root,
            glob: input.glob,
            file_type: input.file_type,
            mode,
            case_insensitive: input.case_insensitive.unwrap_or(false),
            line_numbers: input.line_numbers.unwrap_or(true),
            before: input.before.or(input.context).unwrap_or(0),
            after: input.after.or(input.context).unwrap_or(0),
            multiline: input.multiline.unwrap_or(false),
            // A little more than shown, so the count of the rest is exact
            // in the common case; past it, lines are only counted.
            max_lines: head_limit.saturating_mul(4).max(1000),
            relative_to: ctx.working_dir.clone(),
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let token = ctx.cancel.clone();
        let watcher = tokio::spawn(async move {
            token.cancelled().await;
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let found = tokio::task::spawn_blocking(move || search::search(&query, &cancel)).await;
        watcher.abort();
        let found = found
            .map_err(|error| ToolError::new(ErrorCode::ToolCrashed, error.to_string()))?
            .map_err(|error| ToolError::new(ErrorCode::InvalidParams, error.to_string()))?;
        if found.cancelled {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                "the search was cancelled",
            ));
        }
        Ok(render(&input.pattern, mode, &found, head_limit))
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
                paint(style, "2", "grep"),
                paint(style, "1", pattern)
            ),
            Style::Markdown => format!("grep `{pattern}`{path}"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let ToolResults::Text(text) = &output.results else {
            return satchel_tools::format::generic_result(output, style);
        };
        let preview = satchel_tools::format::truncate_chars(text, 4000);
        match style {
            Style::Terminal { .. } => format!(
                "{}\n{}",
                paint(style, "2", &output.user_message),
                preview.trim_end()
            ),
            Style::Markdown => format!(
                "{}\n\n{}",
                output.user_message,
                markdown_fence(&preview, "text")
            ),
        }
    }
}

fn render(pattern: &str, mode: OutputMode, found: &search::Found, head_limit: usize) -> ToolOutput {
    let files = found.files.len();
    let matches: u64 = found.files.iter().map(|f| f.count).sum();
    // The text shown, and how many entries (files or lines) were found.
    let (mut text, entries) = match mode {
        OutputMode::FilesWithMatches | OutputMode::Count => {
            let mut text = String::new();
            for f in found.files.iter().take(head_limit) {
                text.push_str(&shown_path(&f.path));
                if mode == OutputMode::Count {
                    text.push_str(&format!(":{}", f.count));
                }
                text.push('\n');
            }
            (text, files)
        }
        OutputMode::Content => content_lines(found, head_limit),
    };
    let total = entries + found.dropped_lines;
    let user_message = match mode {
        OutputMode::FilesWithMatches => format!("`{pattern}`: {files} files match"),
        OutputMode::Count | OutputMode::Content => {
            format!("`{pattern}`: {matches} matching lines in {files} files")
        }
    };
    if files == 0 {
        text = format!("No matches for `{pattern}`.");
    } else if total > head_limit {
        text.push_str(&format!(
            "… {} more {} not shown (head_limit {head_limit}); narrow the search or raise head_limit.\n",
            total - head_limit,
            if mode == OutputMode::Content { "lines" } else { "files" }
        ));
    }
    ToolOutput::success(ToolResults::Text(text), user_message)
}

/// The first `head_limit` output lines of every file, in one string sized
/// once, and how many lines were collected in all.
fn content_lines(found: &search::Found, head_limit: usize) -> (String, usize) {
    let collected: usize = found.files.iter().map(|f| f.lines).sum();
    let mut left = head_limit;
    let mut shown = Vec::new();
    for f in &found.files {
        if left == 0 {
            break;
        }
        if f.lines <= left {
            shown.push(f.text.as_str());
            left -= f.lines;
        } else {
            let end = f
                .text
                .match_indices('\n')
                .nth(left - 1)
                .map_or(f.text.len(), |(at, _)| at + 1);
            shown.push(&f.text[..end]);
            left = 0;
        }
    }
    (shown.concat(), collected)
}

/// A path as the search found it (already relative to the project when
/// beneath it).
fn shown_path(path: &std::path::Path) -> String {
    path.display().to_string()
}
