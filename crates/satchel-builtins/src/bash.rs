//! The `bash` tool: one command, run non-interactively through the process
//! runner, with its output kept within limits.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use satchel_exec::background::ProcessTable;
use satchel_exec::{ExecError, ExecOutcome, ExecRequest, Exit};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{self, Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

/// Timeout when the input gives none, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Largest timeout a call may ask for, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 600;

/// A timeout longer than this marks a call as long-running (see
/// [`Tool::runs_long`]): an MCP client with tasks gets it as a task.
const LONG_RUNNING_SECS: u64 = 60;
/// Characters of the command shown in the user message.
const COMMAND_PREVIEW_CHARS: usize = 80;

/// Runs bash commands; see the module docs.
pub struct BashTool {
    spec: ToolSpec,
    processes: Arc<ProcessTable>,
}

impl Default for BashTool {
    fn default() -> BashTool {
        BashTool::new()
    }
}

impl BashTool {
    /// The tool with its spec and a process table of its own.
    pub fn new() -> BashTool {
        BashTool::with_processes(Arc::default())
    }

    /// The tool starting background processes in `processes` (the table
    /// the `process` tool reads).
    pub fn with_processes(processes: Arc<ProcessTable>) -> BashTool {
        BashTool {
            spec: spec(),
            processes,
        }
    }
}

#[derive(Deserialize)]
struct BashInput {
    command: String,
    timeout: Option<u64>,
    working_dir: Option<String>,
    #[serde(default)]
    background: bool,
    #[serde(default)]
    tty: bool,
    wait: Option<f64>,
}

/// Words of stderr that mean a connection failed, which the sandbox
/// causes when it has no network.
const NETWORK_SIGNS: [&str; 6] = [
    "Couldn't connect",
    "Could not resolve",
    "Connection refused",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Name or service not known",
];

/// Longest command: the kernel refuses a longer single argument
/// (`MAX_ARG_STRLEN`, 128 KiB with its NUL).
const MAX_COMMAND_BYTES: usize = 128 * 1024 - 1;

/// Words of stderr that mean the sandbox may have stopped a command.
const SANDBOX_SIGNS: [&str; 5] = [
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
    "Cannot assign requested address",
    // Landlock refuses links and renames across its edge with EXDEV.
    "Invalid cross-device link",
];

fn spec() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        title: Some("Bash".into()),
        description: "Run a bash command non-interactively: no stdin, no terminal, so prompts fail \
            at once (pass `-y` and the like). Long output keeps its head and tail; the full text is \
            saved to a file named in the response. Every process the command starts ends with it. \
            Commands run in a sandbox: they read anywhere but write only in the project and /tmp, \
            with no network unless configured. If a command needs more, call again with \
            `sandbox: \"none\"` and a `justification`; the user decides. For a dev server, a long \
            build or a REPL, pass `background: true` (and `tty: true` for a program that needs a \
            terminal): it returns a `process_id` at once (or after `wait` seconds) and the `process` \
            tool reads, writes and kills it."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The bash command to execute"},
                "timeout": {
                    "type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "default": DEFAULT_TIMEOUT_SECS,
                    "description": "Command timeout in seconds"
                },
                "working_dir": {
                    "type": "string", "default": ".",
                    "description": "Where to run, relative to the project"
                },
                "sandbox": {
                    "type": "string", "enum": ["none"],
                    "description": "Ask to run outside the sandbox (needs the user's consent)"
                },
                "justification": {
                    "type": "string",
                    "description": "Why the command needs to leave the sandbox, shown to the user"
                },
                "background": {
                    "type": "boolean", "default": false,
                    "description": "Keep it running after this call (no timeout); manage it with the `process` tool"
                },
                "tty": {
                    "type": "boolean", "default": false,
                    "description": "With `background`: give it a pseudo-terminal (REPLs, programs that need one)"
                },
                "wait": {
                    "type": "number", "default": 1,
                    "description": "With `background`: seconds (0 to 600) to wait before returning with what it printed"
                }
            },
            "required": ["command"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "exit_code": {"type": ["integer", "null"], "description": "128 + N when signal N ended it"},
                "signal": {"type": "string", "description": "The signal that ended the command, if any"},
                "truncated": {"type": "boolean"},
                "timed_out": {"type": "boolean"},
                "duration_ms": {"type": "integer"},
                "sandbox": {"type": "string", "description": "readonly, workspace or none"},
                "process_id": {"type": "string", "description": "With `background`: its id for the `process` tool"},
                "pid": {"type": "integer"},
                "state": {"type": "string", "description": "With `background`: running, exited N or killed by SIGNAL"},
                "output": {"type": "string", "description": "With `background`: what it printed so far (stdout and stderr)"}
            }
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::FILES, Resource::INTERNET, Resource::EXECUTION],
            writes: vec![Resource::FILES, Resource::INTERNET, Resource::EXECUTION],
        },
    }
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A command given more than a minute is expected to take it.
    fn runs_long(&self, input: &Value) -> bool {
        input
            .get("timeout")
            .and_then(Value::as_u64)
            .is_some_and(|timeout| timeout > LONG_RUNNING_SECS)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: BashInput = serde_json::from_value(input).map_err(|error| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("invalid bash input: {error}"),
            )
        })?;
        if input.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!(
                    "the command is {} bytes, too long for one command line (at most {MAX_COMMAND_BYTES}); \
                     write the script to a file and run the file",
                    input.command.len()
                ),
            ));
        }
        let requested_dir = input.working_dir.as_deref().unwrap_or(".");
        let working_dir = ctx.working_dir.join(requested_dir);
        let timeout_secs = input
            .timeout
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(MAX_TIMEOUT_SECS);
        let mut sandbox = satchel_tools::sandbox::spec_for(ctx);
        if let Some(spec) = sandbox.as_mut().filter(|spec| !spec.network) {
            // The conversation's own loopback: a server one command starts
            // is reachable by the next, and nothing outside is.
            spec.loopback = self
                .processes
                .loopback_for(&crate::process::owner_of(ctx), input.background);
        }
        let request = ExecRequest {
            program: "bash".into(),
            args: vec!["-c".into(), input.command.clone().into()],
            stdin: None,
            working_dir,
            env: Vec::new(),
            timeout: Duration::from_secs(timeout_secs),
            clear_env: false,
            sandbox,
        };
        if input
            .wait
            .is_some_and(|wait| !(0.0..=crate::process::MAX_WAIT_SECS).contains(&wait))
        {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!(
                    "`wait` must be seconds from 0 to {}",
                    crate::process::MAX_WAIT_SECS
                ),
            ));
        }
        if input.background {
            return crate::process::start_in_background(
                &self.processes,
                &input.command,
                &request,
                input.tty,
                input.wait,
                ctx,
            )
            .await;
        }
        if input.tty {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                "`tty` needs `background: true` (a terminal is for a process driven with the `process` tool)",
            ));
        }
        // A caller that can show progress hears how long the command has
        // run and how much it printed so far, every second.
        let meter = satchel_exec::OutputMeter::default();
        let ticker = satchel_tools::progress::ProgressTicker::start(
            ctx.progress.clone(),
            &meter,
            request.timeout,
        );
        let outcome =
            satchel_exec::run_metered(&request, &ctx.config.runner, &ctx.cancel, &meter).await;
        drop(ticker);
        let outcome = outcome.map_err(|error| exec_error(error, requested_dir))?;
        let mut output = output_of(
            &input.command,
            timeout_secs,
            &outcome,
            ctx.confinement.as_str(),
        );
        if ctx.confinement.is_sandboxed() && outcome.exit != Exit::Code(0) {
            let stderr = &outcome.stderr.text;
            let offline = ctx.confinement == satchel_tools::sandbox::Confinement::ReadOnly
                || !ctx.config.sandbox.network;
            if SANDBOX_SIGNS.iter().any(|sign| stderr.contains(sign))
                || (offline && NETWORK_SIGNS.iter().any(|sign| stderr.contains(sign)))
            {
                output = output.with_response(format!(
                    "This may be the `{}` sandbox: it allows writes only in the project and /tmp, and no network{}. \
                     If the task needs more, call again with `sandbox: \"none\"` and a `justification`; the user will be asked.",
                    ctx.confinement.as_str(),
                    if ctx.config.sandbox.network { " unless configured (it is)" } else { "" }
                ));
            }
        }
        Ok(output)
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let command = input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "2", "$"), paint(style, "1", command))
            }
            Style::Markdown => markdown_fence(command, "bash"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let Some(fields) = output
            .results
            .structured()
            .filter(|v| v.get("stdout").is_some())
        else {
            return format::generic_result(output, style);
        };
        let text = |key: &str| {
            fields
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (stdout, stderr) = (text("stdout"), text("stderr"));
        let status = status_line(fields);
        match style {
            Style::Terminal { .. } => {
                let mut parts = Vec::new();
                if !stdout.is_empty() {
                    parts.push(stdout.trim_end_matches('\n').to_owned());
                }
                if !stderr.is_empty() {
                    parts.push(paint(style, "31", stderr.trim_end_matches('\n')));
                }
                let colour = if output.is_error || fields.get("exit_code") != Some(&json!(0)) {
                    "33"
                } else {
                    "2"
                };
                parts.push(paint(style, colour, &status));
                parts.join("\n")
            }
            Style::Markdown => {
                let mut parts = Vec::new();
                if !stdout.is_empty() {
                    parts.push(markdown_fence(&stdout, "text"));
                }
                if !stderr.is_empty() {
                    parts.push(format!("stderr:\n{}", markdown_fence(&stderr, "text")));
                }
                parts.push(format!("*{status}*"));
                parts.join("\n\n")
            }
        }
    }
}

/// `exit 0 · 4 ms`, plus `timed out` / `truncated` when they apply.
fn status_line(fields: &Value) -> String {
    let mut status = match (
        fields.get("signal").and_then(Value::as_str),
        fields.get("exit_code"),
    ) {
        (Some(signal), _) => format!("killed by {signal}"),
        (None, Some(Value::Number(code))) => format!("exit {code}"),
        (None, _) => "exit unknown".to_owned(),
    };
    if let Some(ms) = fields.get("duration_ms").and_then(Value::as_u64) {
        status.push_str(&format!(" · {}", human_duration(ms)));
    }
    if fields.get("timed_out") == Some(&Value::Bool(true)) {
        status.push_str(" · timed out");
    }
    if fields.get("truncated") == Some(&Value::Bool(true)) {
        status.push_str(" · output truncated");
    }
    status
}

fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The runner's refusal as the model reads it.
pub(crate) fn exec_error(error: ExecError, requested_dir: &str) -> ToolError {
    match error {
        ExecError::MissingWorkingDir { path } => ToolError::new(
            ErrorCode::InvalidParams,
            format!(
                "working_dir `{requested_dir}` does not exist (resolved to `{}`); use an existing directory",
                path.display()
            ),
        ),
        ExecError::SandboxUnavailable { reason } => ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "{reason}. Call again with `sandbox: \"none\"` and a `justification` to ask the user to run it unsandboxed."
            ),
        ),
        other => ToolError::new(ErrorCode::ToolCrashed, other.to_string()),
    }
}

/// Builds the model- and user-facing output of a finished run.
fn output_of(command: &str, timeout_secs: u64, outcome: &ExecOutcome, sandbox: &str) -> ToolOutput {
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    let mut fields = json!({
        "stdout": outcome.stdout.text,
        "stderr": outcome.stderr.text,
        "exit_code": outcome.exit.shell_code(),
        "truncated": outcome.stdout.truncated() || outcome.stderr.truncated(),
        "timed_out": outcome.timed_out,
        "duration_ms": duration_ms,
        "sandbox": sandbox,
    });
    if let (Some(signal), Value::Object(map)) = (outcome.exit.signal_name(), &mut fields) {
        map.insert("signal".into(), json!(signal));
    }
    let failure = if outcome.timed_out {
        Some((
            ErrorCode::ToolTimeout,
            format!(
                "the command did not finish within {timeout_secs} s and was stopped; raise `timeout` (up to \
                 {MAX_TIMEOUT_SECS}) or split the work into shorter commands"
            ),
        ))
    } else if outcome.cancelled {
        Some((
            ErrorCode::Cancelled,
            "the command was cancelled before it finished".to_owned(),
        ))
    } else {
        None
    };

    let preview = format::truncate_chars(
        command.lines().next().unwrap_or_default(),
        COMMAND_PREVIEW_CHARS,
    );
    let preview = if command.lines().nth(1).is_some() && !preview.ends_with('…') {
        format!("{preview}…")
    } else {
        preview
    };
    let ended = match (outcome.exit.signal_name(), outcome.exit.shell_code()) {
        (Some(signal), _) => format!("killed by {signal}"),
        (None, Some(code)) => format!("exit {code}"),
        (None, None) => "exit unknown".to_owned(),
    };
    let mut user_message = format!(
        "ran `{preview}` in {}, {ended}",
        human_duration(duration_ms)
    );
    if outcome.timed_out {
        user_message.push_str(&format!(" (timed out after {timeout_secs} s)"));
    }

    let mut notes: Vec<String> = [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)]
        .into_iter()
        .filter_map(|(name, captured)| captured.cut_note(name, "`sed -n` or `grep`"))
        .collect();
    let (results, is_error, error_code) = match failure {
        Some((code, message)) => {
            if let Value::Object(map) = &mut fields {
                map.insert("error".into(), json!(message));
                map.insert("error_code".into(), json!(code));
            }
            notes.insert(0, message);
            (ToolResults::json(fields), true, Some(code))
        }
        None => (ToolResults::json(fields), false, None),
    };
    ToolOutput {
        results,
        response: (!notes.is_empty()).then(|| notes.join(" ")),
        user_message,
        is_error,
        error_code,
    }
}
