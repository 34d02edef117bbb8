//! `bash` with `background: true`: the command started in the process
//! table, answered at once or after `wait` seconds with what it printed.

use std::time::Duration;

use satchel_core::{ErrorCode, ToolOutput};
use satchel_exec::ExecRequest;
use satchel_exec::background::{ProcessTable, StartError};
use satchel_tools::{ToolContext, ToolError};

use super::{MAX_WAIT_SECS, info_json, owner_of, preview, reading_output};

/// `wait` of a background start when the call gives none, in seconds.
const DEFAULT_START_WAIT_SECS: f64 = 1.0;

/// Starts `request` for the call's conversation and reads what it printed
/// within `wait` seconds (less if it ends first).
pub async fn start_in_background(
    table: &ProcessTable,
    command: &str,
    request: &ExecRequest,
    tty: bool,
    wait: Option<f64>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let owner = owner_of(ctx);
    let process = table
        .start(&owner, command, request, tty, &ctx.config.runner)
        .map_err(|error| match error {
            StartError::TooMany { limit, live } => {
                let listed: Vec<String> = live
                    .iter()
                    .map(|p| info_json(p).to_string())
                    .collect();
                ToolError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "{limit} background processes are already running in this conversation \
                         (exec.maxBackground); end one with `process` action `kill` first. Running: {}",
                        listed.join(", ")
                    ),
                )
            }
            StartError::Exec(error) => {
                crate::bash::exec_error(error, &request.working_dir.display().to_string())
            }
        })?;
    let wait = Duration::from_secs_f64(
        wait.unwrap_or(DEFAULT_START_WAIT_SECS)
            .clamp(0.0, MAX_WAIT_SECS),
    );
    // The whole `wait`, unless it ends sooner: a server's first lines.
    process.wait_end(wait).await;
    let reading = process.read(Duration::ZERO, None).await;
    let mut output = reading_output(process.id(), &reading, Some(process.pid()));
    let hint = format!(
        "Running in the background as {id}. Read new output with `process` {{\"action\": \"output\", \
         \"process_id\": \"{id}\"}} (add `until` to wait for a line), end it with action `kill`. \
         It ends with this conversation.",
        id = process.id()
    );
    output.response = Some(match output.response.take() {
        Some(note) if reading.state.is_running() => format!("{hint} {note}"),
        Some(note) => note,
        None if reading.state.is_running() => hint,
        None => String::new(),
    })
    .filter(|text| !text.is_empty());
    // The ports the user opened to this machine, told once each.
    let forwarded = table.forward(&owner, &ctx.config.runner.forward_ports);
    if !forwarded.is_empty() {
        let told: Vec<String> = forwarded.iter().map(|f| f.describe()).collect();
        let told = told.join(" ");
        output.response = Some(match output.response.take() {
            Some(note) => format!("{note} {told}"),
            None => told,
        });
    }
    output.user_message = format!(
        "started `{}` in the background as {} (pid {}): {}",
        preview(command),
        process.id(),
        process.pid(),
        reading.state.describe()
    );
    Ok(output)
}
