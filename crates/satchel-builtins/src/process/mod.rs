//! The `process` tool: the background processes `bash` started with
//! `background: true`, read (`output`), written to (`input`), ended
//! (`kill`) and listed (`list`), over `satchel-exec`'s [`ProcessTable`].
//!
//! Processes belong to the conversation (or MCP session) that started them
//! ([`owner_of`]); another conversation's ids are not found. The end of a
//! process is told to the model once, in the next result of any tool in
//! its conversation ([`ended_notice`], added by dispatch through
//! `Tool::take_notice`).

mod start;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use satchel_exec::background::{ProcessInfo, ProcessTable, Reading};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{self, Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

pub use start::start_in_background;

/// Longest `wait` a read may ask for, in seconds.
pub const MAX_WAIT_SECS: f64 = 600.0;
/// `wait` of `output` with `until` when the call gives none, in seconds.
const DEFAULT_UNTIL_WAIT_SECS: f64 = 30.0;
/// `wait` of `input` when the call gives none, in seconds: the answer to
/// what was typed.
const DEFAULT_INPUT_WAIT_SECS: f64 = 1.0;
/// Longest `until` pattern.
const MAX_PATTERN_BYTES: usize = 4096;

/// The owner of a call's background processes: its conversation or MCP
/// session ([`ToolContext::owner`]), or the process itself when the call
/// has neither (`tools call`, a stateless MCP request).
pub fn owner_of(ctx: &ToolContext) -> String {
    ctx.owner().unwrap_or("session").to_owned()
}

/// Manages background processes; see the module docs.
pub struct ProcessTool {
    spec: ToolSpec,
    table: Arc<ProcessTable>,
}

impl ProcessTool {
    /// The tool over `table` (the same one `bash` starts processes in).
    pub fn new(table: Arc<ProcessTable>) -> ProcessTool {
        ProcessTool {
            spec: spec(),
            table,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessInput {
    action: String,
    process_id: Option<String>,
    text: Option<String>,
    wait: Option<f64>,
    until: Option<String>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "process".into(),
        title: Some("Background processes".into()),
        description: "Manage processes started with `bash` and `background: true` (dev servers, long \
            builds, REPLs). `output`: only what was printed since the last read, with the state \
            (running, exited N, killed by S); `wait` seconds for new output, or `until` a regex \
            that returns as soon as a line matches or the process ends. `input`: write `text` to \
            its stdin (`\\u0003` interrupts, `\\u0004` ends input), then return new output. `kill`: \
            end it and everything it started. `list`: the conversation's processes. They end \
            with the conversation."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["output", "input", "kill", "list"]},
                "process_id": {"type": "string", "minLength": 1,
                               "description": "The process (output, input, kill), e.g. p1"},
                "text": {"type": "string", "description": "What to write to its stdin (input)"},
                // No bounds in the schema: constrained decoding expands them
                // into large grammars. Checked in code instead.
                "wait": {"type": "number",
                         "description": "Seconds to wait for new output, 0 to 600 (output, input); with `until`, for a match (default 30)"},
                "until": {"type": "string", "minLength": 1,
                          "description": "A regex: return as soon as a line of output matches it (output, input)"}
            },
            "required": ["action"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "process_id": {"type": "string"},
                "state": {"type": "string", "description": "running, exited N or killed by SIGNAL"},
                "exit_code": {"type": ["integer", "null"]},
                "output": {"type": "string"},
                "matched": {"type": "boolean"},
                "omitted_bytes": {"type": "integer"},
                "processes": {"type": "array"}
            }
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::EXECUTION],
            writes: vec![Resource::EXECUTION],
        },
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidParams, message)
}

/// The field an action needs, or an error naming both.
fn required<'a>(
    value: &'a Option<String>,
    action: &str,
    field: &str,
) -> Result<&'a str, ToolError> {
    value.as_deref().ok_or_else(|| {
        invalid(format!(
            "action `{action}` requires `{field}`{}",
            if field == "process_id" {
                " (see action `list`)"
            } else {
                ""
            }
        ))
    })
}

fn wait_of(input: &ProcessInput, default: f64) -> Result<Duration, ToolError> {
    let wait = input.wait.unwrap_or(default);
    if !(0.0..=MAX_WAIT_SECS).contains(&wait) {
        return Err(invalid(format!(
            "`wait` is {wait}: give seconds from 0 to {MAX_WAIT_SECS}"
        )));
    }
    Ok(Duration::from_secs_f64(wait))
}

fn pattern(until: Option<&str>) -> Result<Option<regex::Regex>, ToolError> {
    if until.is_some_and(|source| source.len() > MAX_PATTERN_BYTES) {
        return Err(invalid(format!(
            "`until` is longer than {MAX_PATTERN_BYTES} bytes; use a shorter pattern"
        )));
    }
    until
        .map(|source| {
            regex::RegexBuilder::new(source)
                .multi_line(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|error| invalid(format!("`until` is not a valid regex: {error}")))
        })
        .transpose()
}

#[async_trait]
impl Tool for ProcessTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A read may wait up to ten minutes.
    fn runs_long(&self, input: &Value) -> bool {
        input
            .get("wait")
            .and_then(Value::as_f64)
            .is_some_and(|wait| wait > 60.0)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ProcessInput = serde_json::from_value(input)
            .map_err(|error| invalid(format!("invalid process input: {error}")))?;
        let owner = owner_of(ctx);
        let action = input.action.as_str();
        if action == "list" {
            return Ok(self.list(&owner));
        }
        if !matches!(action, "output" | "input" | "kill") {
            return Err(invalid(format!(
                "unknown action `{action}`: use output, input, kill or list"
            )));
        }
        let id = required(&input.process_id, action, "process_id")?;
        let Some(process) = self.table.get(&owner, id) else {
            let known: Vec<String> = self.table.list(&owner).into_iter().map(|p| p.id).collect();
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!(
                    "no background process `{id}` in this conversation; {}",
                    if known.is_empty() {
                        "there are none (start one with `bash` and `background: true`)".to_owned()
                    } else {
                        format!("its processes are {}", known.join(", "))
                    }
                ),
            ));
        };
        let output = match action {
            "kill" => {
                let state = process.kill().await;
                let reading = process.read(Duration::ZERO, None).await;
                let mut output = reading_output(id, &reading, None);
                output.user_message = format!(
                    "killed background process {id} (`{}`): {}",
                    preview(process.command()),
                    state.describe()
                );
                output
            }
            "input" => {
                let text = required(&input.text, action, "text")?;
                let until = pattern(input.until.as_deref())?;
                if let Err(message) = process.write(text).await {
                    return Err(ToolError::new(ErrorCode::InvalidParams, message));
                }
                let default = if until.is_some() {
                    DEFAULT_UNTIL_WAIT_SECS
                } else {
                    DEFAULT_INPUT_WAIT_SECS
                };
                let reading = process.read(wait_of(&input, default)?, until).await;
                let mut output = reading_output(id, &reading, None);
                output.user_message = format!(
                    "wrote {} bytes to background process {id}; {} new bytes, {}",
                    text.len(),
                    reading.output.bytes,
                    reading.state.describe()
                );
                output
            }
            _ => {
                let until = pattern(input.until.as_deref())?;
                let default = if until.is_some() {
                    DEFAULT_UNTIL_WAIT_SECS
                } else {
                    0.0
                };
                let reading = process.read(wait_of(&input, default)?, until).await;
                let mut output = reading_output(id, &reading, None);
                output.user_message = format!(
                    "read {} new bytes of background process {id}: {}",
                    reading.output.bytes,
                    reading.state.describe()
                );
                output
            }
        };
        Ok(output)
    }

    fn take_notice(&self, ctx: &ToolContext) -> Option<String> {
        ended_notice(&self.table, &owner_of(ctx))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        let line = format!("process {} {}", field("action"), field("process_id"));
        match style {
            Style::Terminal { .. } => paint(style, "2", line.trim_end()),
            Style::Markdown => format!("`{}`", line.trim_end()),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let Some(fields) = output.results.structured() else {
            return format::generic_result(output, style);
        };
        let text = fields
            .get("output")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let state = fields
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match style {
            Style::Terminal { .. } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(text.trim_end_matches('\n').to_owned());
                }
                parts.push(paint(style, "2", &output.user_message));
                parts.join("\n")
            }
            Style::Markdown => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(markdown_fence(text, "text"));
                }
                parts.push(format!("*{state}* · {}", output.user_message));
                parts.join("\n\n")
            }
        }
    }
}

impl ProcessTool {
    fn list(&self, owner: &str) -> ToolOutput {
        let processes = self.table.list(owner);
        let rows: Vec<Value> = processes.iter().map(info_json).collect();
        let live = processes.iter().filter(|p| p.state.is_running()).count();
        // Listing tells of every end.
        let _ = self.table.take_ended(owner);
        ToolOutput {
            results: ToolResults::json(json!({"processes": rows})),
            response: None,
            user_message: format!("{} background processes, {live} running", processes.len()),
            is_error: false,
            error_code: None,
        }
    }
}

/// A process as listed to the model.
pub fn info_json(info: &ProcessInfo) -> Value {
    json!({
        "process_id": info.id,
        "command": info.command,
        "pid": info.pid,
        "state": info.state.describe(),
        "age_secs": info.age.as_secs(),
        "unread_bytes": info.unread_bytes,
        "tty": info.tty,
    })
}

/// The first line of a command, shortened, for user messages.
pub(crate) fn preview(command: &str) -> String {
    let first = format::truncate_chars(command.lines().next().unwrap_or_default(), 60);
    if command.lines().nth(1).is_some() && !first.ends_with('…') {
        format!("{first}…")
    } else {
        first
    }
}

/// The model's view of one read.
pub(crate) fn reading_output(id: &str, reading: &Reading, pid: Option<i32>) -> ToolOutput {
    let mut fields = json!({
        "process_id": id,
        "state": reading.state.describe(),
        "exit_code": reading.state.exit_code(),
        "output": reading.output.text,
        "omitted_bytes": reading.output.omitted,
    });
    if let Value::Object(map) = &mut fields {
        if let Some(pid) = pid {
            map.insert("pid".into(), json!(pid));
        }
        if let Some(matched) = reading.matched {
            map.insert("matched".into(), json!(matched));
        }
    }
    let mut notes = Vec::new();
    if reading.output.omitted > 0 {
        notes.push(format!(
            "{} new bytes; {} from the middle are left out here.",
            reading.output.bytes, reading.output.omitted
        ));
    }
    if let Some(path) = &reading.spill.path
        && (reading.output.omitted > 0 || reading.spill.dropped > 0)
    {
        let mut note = format!(
            "The whole output ({} bytes) is kept in {}",
            reading.total_bytes,
            path.display()
        );
        if reading.spill.dropped > 0 {
            note.push_str(&format!(
                ", except {} bytes from its middle (the file's size is capped)",
                reading.spill.dropped
            ));
        }
        note.push('.');
        notes.push(note);
    }
    if reading.matched == Some(false) && reading.state.is_running() {
        notes.push(
            "`until` did not match before `wait` ran out; read again to keep waiting.".into(),
        );
    }
    ToolOutput {
        results: ToolResults::json(fields),
        response: (!notes.is_empty()).then(|| notes.join(" ")),
        user_message: String::new(),
        is_error: false,
        error_code: None,
    }
}

/// The processes of `owner` that ended since the model was last told, as
/// one sentence; `None` when none did.
pub fn ended_notice(table: &ProcessTable, owner: &str) -> Option<String> {
    let ended = table.take_ended(owner);
    if ended.is_empty() {
        return None;
    }
    let each: Vec<String> = ended
        .iter()
        .map(|p| {
            format!(
                "{} (`{}`) {}{}",
                p.id,
                preview(&p.command),
                p.state.describe(),
                if p.unread_bytes > 0 {
                    format!(", {} bytes unread", p.unread_bytes)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    Some(format!("Background process ended: {}.", each.join("; ")))
}
