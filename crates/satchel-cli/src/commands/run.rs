//! `satchel run "prompt"`: one statement, non-interactive. The answer
//! streams to stdout and tool activity to stderr; `--json` prints the
//! whole transcript instead. The exit status says how it ended.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use satchel_agent::{AgentEvent, Outcome};
use satchel_store::{AuditSource, ConversationStore, LlmCallStore};
use satchel_tools::{NonInteractive, Style};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cli::RunArgs;
use satchel_host::ConversationOptions;
use satchel_host::Host;

/// Exit status when the turn budget ran out.
const EXIT_TURN_LIMIT: u8 = 3;
/// Exit status when interrupted (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

pub(crate) async fn run(args: RunArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let color = crate::paths::color(&std::io::stderr());
    let mut agent = project
        .conversation(ConversationOptions {
            source: AuditSource::Run,
            caller: None,
            memory_namespace: None,
            consent: Arc::new(NonInteractive),
            display: Style::Terminal { color },
            resume: args.resume.clone(),
        })
        .await?;
    // One statement, no second chance: the MCP servers' tools are there
    // from the first turn (each server has its startup timeout; one that
    // fails is reported and the statement goes on without it).
    project.wait_for_mcp_servers().await;
    let json_output = args.json;
    // The answer's line ends as soon as the answer is whole
    // (`AnswerComplete`): side requests come after it, and a reader of
    // stdout should not wait for them.
    let answer_ended = Arc::new(AtomicBool::new(json_output));
    let sink = {
        let answer_ended = answer_ended.clone();
        move |event: AgentEvent| report(event, json_output, &answer_ended)
    };
    let cancel = CancellationToken::new();
    let interrupt = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            super::signals::wait_for_interrupt().await;
            cancel.cancel();
        })
    };
    let result = agent.statement(&args.prompt, &cancel, &sink).await;
    interrupt.abort();
    agent.end_session("other", &sink).await;
    let report = result?;
    end_answer_line(&answer_ended);
    if let Outcome::Failed(message) = &report.outcome {
        eprintln!("error: {message}");
    }
    if let Some(tape) = project.model_tape.as_ref().filter(|tape| tape.unused() > 0) {
        eprintln!(
            "note: {} recorded model request(s) of {} were not asked for",
            tape.unused(),
            tape.path().display()
        );
    }
    if json_output {
        let store = project
            .store
            .get()
            .await
            .map_err(|reason| anyhow::anyhow!(reason))?;
        let id = agent.conversation_id().unwrap_or_default().to_owned();
        let dump = store.dump_conversation(&id).await?;
        let usage = store.llm_calls(&id).await?;
        let outcome = match &report.outcome {
            Outcome::Answered => json!({"status": "answered"}),
            Outcome::TurnLimit => json!({"status": "turn_limit"}),
            Outcome::Cancelled => json!({"status": "cancelled"}),
            Outcome::Failed(message) => json!({"status": "failed", "error": message}),
        };
        let transcript = json!({
            "conversation_id": id,
            "statement_id": report.statement_id,
            "outcome": outcome,
            "answer": report.answer,
            "turns": report.turns,
            "tool_calls": dump.as_ref().map(|d| &d.tool_calls),
            "log": dump.as_ref().map(|d| &d.log_entries),
            "usage": usage,
            "usage_total": {
                "input_tokens": report.usage.input_tokens,
                "output_tokens": report.usage.output_tokens,
            },
        });
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", serde_json::to_string_pretty(&transcript)?)?;
    }
    project.close().await;
    Ok(match report.outcome {
        Outcome::Answered => ExitCode::SUCCESS,
        Outcome::TurnLimit => ExitCode::from(EXIT_TURN_LIMIT),
        Outcome::Cancelled => ExitCode::from(EXIT_INTERRUPTED),
        Outcome::Failed(_) => ExitCode::FAILURE,
    })
}

/// The answer to stdout as it streams (unless `--json`); tool activity and
/// notices to stderr.
fn report(event: AgentEvent, json_output: bool, answer_ended: &AtomicBool) {
    match event {
        AgentEvent::TextDelta(text) if !json_output => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        AgentEvent::ToolStarted { display, .. } => eprintln!("▸ {display}"),
        AgentEvent::ToolFinished {
            display, duration, ..
        } => eprintln!(
            "  {} ({} ms)",
            display.replace('\n', "\n  "),
            duration.as_millis()
        ),
        AgentEvent::Notice(text) => eprintln!("note: {text}"),
        AgentEvent::AnswerComplete { .. } => end_answer_line(answer_ended),
        _ => {}
    }
}

/// Ends the answer's line on stdout, once.
fn end_answer_line(answer_ended: &AtomicBool) {
    if !answer_ended.swap(true, Ordering::Relaxed) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out);
        let _ = out.flush();
    }
}
