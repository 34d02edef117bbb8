//! `satchel context [CONVERSATION]` and the REPL's `/context`: the token
//! breakdown of a conversation's next request, counted on the exact bytes
//! that would be sent.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use satchel_agent::ContextReport;
use satchel_store::AuditSource;
use satchel_tools::{NonInteractive, Style};
use serde_json::json;

use super::db;
use crate::cli::ContextArgs;
use satchel_host::{ConversationOptions, Host};

pub(crate) async fn run(args: ContextArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let Some(store) = db::open_for_reading(project.db.as_deref()).await? else {
        anyhow::bail!("nothing recorded yet: no database at the configured location");
    };
    let Some(conversation) = db::resolve_conversation(&store, args.conversation.as_deref()).await?
    else {
        anyhow::bail!("no conversation recorded yet; `satchel chat` starts one");
    };
    store.close().await?;
    // The conversation as `satchel chat --resume` would open it, with the
    // MCP servers' tools once they are up: the request counted is the
    // one chat would send.
    let mut agent = project
        .conversation(ConversationOptions {
            source: AuditSource::Cli,
            caller: None,
            memory_namespace: None,
            consent: Arc::new(NonInteractive),
            display: Style::Markdown,
            resume: Some(conversation.id.clone()),
        })
        .await?;
    project.wait_for_mcp_servers().await;
    let report = agent.context_report().await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report_json(&report))?
        )?;
    } else {
        writeln!(out, "Conversation {}", conversation.id)?;
        out.write_all(report.render().as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn report_json(report: &ContextReport) -> serde_json::Value {
    let estimate = &report.estimate;
    json!({
        "model": report.model,
        "total_tokens": estimate.total,
        "context_window": estimate.context_window,
        "window_source": report.window_source,
        "max_output_tokens": report.max_output_tokens,
        "output_source": report.output_source,
        "window_share": estimate.total as f64 / estimate.context_window.max(1) as f64,
        "threshold": report.threshold,
        "sections": estimate.sections,
        "tool_summary_tokens": report.tool_summary_tokens,
        "instruction_tokens": report.instruction_tokens,
        "instruction_files": report.instruction_files,
        "instructions_truncated": report.instructions_truncated,
        "skill_tokens": report.skill_tokens,
        "messages": report.messages,
        "statements": report.statements,
        "summarised_through": report.summarised_through,
        "encoding": estimate.encoding,
        "calibrated_total_tokens": report.calibrated_total(),
        "calibration": report.calibration,
    })
}
