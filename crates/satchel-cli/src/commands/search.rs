//! `satchel search`: the search tool from a shell.

use std::io::Write;
use std::process::ExitCode;

use satchel_core::ToolCall;
use satchel_store::AuditSource;
use satchel_tools::{Style, ToolContext, UserInitiated};
use serde_json::json;

use crate::cli::SearchArgs;
use satchel_host::Host;

pub(crate) async fn run(args: SearchArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let registry = project.tools(false).await?.current();
    let input = json!({
        "query": args.query,
        "type": if args.news { "news" } else { "web" },
        "max_results": args.max_results,
    });
    let ctx = ToolContext::standalone(
        "cli-search",
        project.root.clone(),
        project.tools_config.clone(),
    );
    let call = ToolCall {
        id: ctx.call_id.clone(),
        name: "search".into(),
        input,
    };
    let output = project
        .recorded_call(&registry, &UserInitiated, &call, &ctx, AuditSource::Cli)
        .await;
    let mut stdout = std::io::stdout().lock();
    if output.is_error && !args.json {
        let reason = output
            .results
            .structured()
            .and_then(|v| v.get("error"))
            .and_then(|e| e.as_str());
        anyhow::bail!("{}", reason.unwrap_or(&output.user_message).to_owned());
    }
    if args.json {
        let value = output
            .results
            .structured()
            .cloned()
            .unwrap_or_else(|| json!(output.results.to_text()));
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
    } else if let Some(tool) = registry.get("search") {
        let color = crate::paths::color(&std::io::stdout());
        writeln!(
            stdout,
            "{}",
            tool.format_result(&output, Style::Terminal { color })
        )?;
    }
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
