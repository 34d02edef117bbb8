//! `satchel context [CONVERSATION]` and the REPL's `/context`: the token
//! breakdown of a conversation's next request, counted on the exact bytes
//! that would be sent.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use satchel_agent::ContextReport;
use satchel_llm::{Section, model_info};
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
        out.write_all(render(&report).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The breakdown as a small table.
pub(crate) fn render(report: &ContextReport) -> String {
    let estimate = &report.estimate;
    let window = estimate.context_window.max(1);
    let mut text = format!(
        "Next request to {}: {} tokens of a {}-token window ({:.1}%); old turns are summarised past {:.0}%.\n",
        report.model,
        estimate.total,
        estimate.context_window,
        estimate.total as f64 * 100.0 / window as f64,
        report.threshold * 100.0
    );
    match report.calibration {
        Some(calibration) => {
            let _ = writeln!(
                text,
                "  Counted with {} (this model's own tokenizer is not embedded); calibrated to the \
                 server's counts: {} tokens (×{:.2}, from the last {} call(s) that reported usage). \
                 The threshold uses the calibrated figure.",
                estimate.encoding,
                report.calibrated_total(),
                calibration.ratio,
                calibration.samples
            );
        }
        None if !model_info(&report.model).exact_tokenizer => {
            let _ = writeln!(
                text,
                "  Counted with {} (this model's own tokenizer is not embedded); not calibrated \
                 yet: no call to it has reported usage.",
                estimate.encoding
            );
        }
        None => {}
    }
    for section in Section::ALL {
        let tokens = estimate.section(section);
        let _ = writeln!(
            text,
            "  {:18} {:>8}  {:>5.1}%",
            section.label(),
            tokens,
            tokens as f64 * 100.0 / window as f64
        );
        if section == Section::Messages && report.tool_summary_tokens > 0 {
            let _ = writeln!(
                text,
                "    {:16} {:>8}  {:>5.1}%",
                "of which tool summaries",
                report.tool_summary_tokens,
                report.tool_summary_tokens as f64 * 100.0 / window as f64
            );
        }
    }
    let _ = writeln!(
        text,
        "  {} messages from {} statements{}",
        report.messages,
        report.statements,
        match report.summarised_through {
            Some(through) => format!("; statements 1-{through} are summarised"),
            None => String::new(),
        }
    );
    text
}

fn report_json(report: &ContextReport) -> serde_json::Value {
    let estimate = &report.estimate;
    json!({
        "model": report.model,
        "total_tokens": estimate.total,
        "context_window": estimate.context_window,
        "window_share": estimate.total as f64 / estimate.context_window.max(1) as f64,
        "threshold": report.threshold,
        "sections": estimate.sections,
        "tool_summary_tokens": report.tool_summary_tokens,
        "messages": report.messages,
        "statements": report.statements,
        "summarised_through": report.summarised_through,
        "encoding": estimate.encoding,
        "calibrated_total_tokens": report.calibrated_total(),
        "calibration": report.calibration,
    })
}
