//! One external tool: its spec, its executable, and a call through the
//! process runner.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use satchel_core::{ErrorCode, ToolOutput, ToolResults, ToolSpec};
use satchel_exec::{ExecOutcome, ExecRequest, OutputConfig, RunnerConfig};
use serde_json::{Map, Value, json};

use crate::format::truncate_chars;
use crate::registry::compile_schema;
use crate::validation::{MAX_VIOLATIONS, SchemaViolation};
use crate::{Tool, ToolContext, ToolError, ToolLevel, ToolSource};

/// Characters of stderr quoted in an error message.
const STDERR_HEAD_CHARS: usize = 1000;
/// Characters of non-JSON stdout quoted in an error message.
const STDOUT_HEAD_CHARS: usize = 200;

/// An executable that speaks the external-tool protocol.
pub struct ExternalTool {
    spec: ToolSpec,
    path: PathBuf,
    level: ToolLevel,
    default_timeout: Option<Duration>,
    output_validator: Option<jsonschema::Validator>,
}

impl ExternalTool {
    /// A tool for `path` described by `spec`; fails when the output schema
    /// does not compile.
    pub fn new(
        spec: ToolSpec,
        path: PathBuf,
        level: ToolLevel,
        default_timeout: Option<Duration>,
    ) -> Result<ExternalTool, String> {
        let output_validator = spec
            .output_schema
            .as_ref()
            .map(compile_schema)
            .transpose()?;
        Ok(ExternalTool {
            spec,
            path,
            level,
            default_timeout,
            output_validator,
        })
    }

    /// The executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory level it was found at.
    pub fn level(&self) -> ToolLevel {
        self.level
    }

    /// The runner configuration for a call: stdout is a protocol channel
    /// (JSON, never cut, never cleaned), stderr is text for people.
    fn runner_config(&self, ctx: &ToolContext) -> RunnerConfig {
        RunnerConfig {
            stdout: OutputConfig {
                limit_bytes: ctx.config.external.max_output_bytes,
            },
            strip_ansi: false,
            collapse_carriage_returns: false,
            ..ctx.config.runner.clone()
        }
    }

    fn timeout(&self, ctx: &ToolContext) -> Duration {
        self.default_timeout
            .unwrap_or(ctx.config.external.timeout)
            .min(ctx.config.external.max_timeout)
    }

    /// Turns what the tool did into the model's output.
    fn output_of(&self, outcome: &ExecOutcome, timeout: Duration) -> Result<ToolOutput, ToolError> {
        let name = &self.spec.name;
        let stderr = stderr_head(&outcome.stderr.text);
        if outcome.timed_out {
            return Err(ToolError::new(
                ErrorCode::ToolTimeout,
                format!(
                    "tool `{name}` did not finish within {} s and was stopped{stderr}",
                    timeout.as_secs_f64()
                ),
            ));
        }
        if outcome.cancelled {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                format!("call to `{name}` was cancelled"),
            ));
        }
        if outcome.stdout.truncated() {
            let kept = outcome
                .stdout
                .spill
                .as_ref()
                .map_or_else(String::new, |spill| {
                    format!("; what it printed is in {}", spill.path.display())
                });
            return Err(ToolError::new(
                ErrorCode::InvalidOutput,
                format!(
                    "tool `{name}` printed {} bytes, more than the {}-byte limit for results{kept}",
                    outcome.stdout.total_bytes,
                    outcome.stdout.total_bytes - outcome.stdout.omitted_bytes
                ),
            ));
        }
        let parsed: Option<Value> = serde_json::from_str(&outcome.stdout.text).ok();
        // A tool-level error object wins over the exit status: it says more.
        if let Some(Value::Object(object)) = &parsed
            && let Some(message) = object.get("error").and_then(Value::as_str)
        {
            let code = object
                .get("error_code")
                .and_then(Value::as_str)
                .and_then(ErrorCode::parse);
            let output = ToolOutput {
                results: ToolResults::json(Value::Object(object.clone())),
                response: None,
                user_message: format!("tool `{name}` failed: {message}"),
                is_error: true,
                error_code: code,
            };
            return Ok(output);
        }
        match outcome.exit.shell_code() {
            Some(0) => {}
            code => {
                let code = code.map_or_else(|| "unknown".into(), |c| c.to_string());
                return Err(ToolError::new(
                    ErrorCode::ToolCrashed,
                    format!("tool `{name}` exited with status {code}{stderr}"),
                ));
            }
        }
        let Some(results) = parsed else {
            let printed = outcome.stdout.text.trim();
            let what = if printed.is_empty() {
                "nothing on stdout".to_owned()
            } else {
                format!(
                    "output that is not JSON: {:?}",
                    truncate_chars(printed, STDOUT_HEAD_CHARS)
                )
            };
            return Err(ToolError::new(
                ErrorCode::InvalidOutput,
                format!("tool `{name}` printed {what}{stderr}"),
            ));
        };
        if let (Some(validator), Some(schema)) = (&self.output_validator, &self.spec.output_schema)
        {
            let mut violations: Vec<SchemaViolation> = validator
                .iter_errors(&results)
                .take(MAX_VIOLATIONS)
                .map(|e| SchemaViolation::from_error(&e, schema))
                .collect();
            if !violations.is_empty() {
                violations.sort_by(|a, b| a.path.cmp(&b.path));
                let listed = violations
                    .iter()
                    .map(SchemaViolation::describe)
                    .collect::<Vec<_>>()
                    .join("; ");
                let mut details = Map::new();
                details.insert("violations".into(), json!(violations));
                return Err(ToolError {
                    code: ErrorCode::InvalidOutput,
                    message: format!(
                        "tool `{name}` returned results that break its outputSchema: {listed}"
                    ),
                    details,
                });
            }
        }
        let duration_ms = outcome.duration.as_millis();
        let mut output = ToolOutput::success(
            ToolResults::json(results),
            format!("ran `{name}` in {duration_ms} ms"),
        );
        if !outcome.stderr.text.trim().is_empty() {
            output.response = Some(format!(
                "The tool also wrote to stderr:{}",
                stderr_head(&outcome.stderr.text)
            ));
        }
        Ok(output)
    }
}

/// `": <first part of stderr>"`, cleaned of terminal codes, or nothing.
pub(crate) fn stderr_head(stderr: &str) -> String {
    let cleaned = satchel_exec::clean_terminal_text(stderr, true, true);
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", truncate_chars(trimmed, STDERR_HEAD_CHARS))
    }
}

#[async_trait]
impl Tool for ExternalTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::External {
            level: self.level,
            path: self.path.clone(),
        }
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let timeout = self.timeout(ctx);
        let mut env = vec![("SATCHEL_TOOL_CALL_ID".into(), ctx.call_id.clone().into())];
        if let Some(conversation) = &ctx.conversation_id {
            env.push((
                "SATCHEL_CONVERSATION_ID".into(),
                conversation.clone().into(),
            ));
        }
        let request = ExecRequest {
            program: self.path.as_os_str().to_owned(),
            args: Vec::new(),
            stdin: Some(input.to_string().into_bytes()),
            working_dir: ctx.working_dir.clone(),
            env,
            timeout,
            clear_env: false,
            sandbox: crate::sandbox::spec_for(ctx),
        };
        let meter = satchel_exec::OutputMeter::default();
        let ticker = crate::progress::ProgressTicker::start(ctx.progress.clone(), &meter, timeout);
        let outcome =
            satchel_exec::run_metered(&request, &self.runner_config(ctx), &ctx.cancel, &meter)
                .await;
        drop(ticker);
        let outcome = outcome.map_err(|error| {
            ToolError::new(
                ErrorCode::ToolCrashed,
                format!("tool `{}` could not run: {error}", self.spec.name),
            )
        })?;
        self.output_of(&outcome, timeout)
    }
}
