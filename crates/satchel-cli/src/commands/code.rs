//! `satchel code stats|failures`: what the `code` tool's traces say.

use std::io::Write;
use std::process::ExitCode;

use satchel_builtins::code::{FailureSummary, code_stats};
use satchel_store::{Clock, CodeQuery, CodeStore, SystemClock, Timestamp};

use super::db;
use crate::cli::{CodeCommand, CodeFailuresArgs, CodeStatsArgs};
use satchel_host::Host;

pub(crate) async fn run(command: CodeCommand, project: &Host) -> anyhow::Result<ExitCode> {
    match command {
        CodeCommand::Stats(args) => stats(args, project).await,
        CodeCommand::Failures(args) => failures(args, project).await,
    }
}

pub(crate) async fn stats(args: CodeStatsArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let since =
        Timestamp::from_millis(SystemClock.now().as_millis() - i64::from(args.days) * 86_400_000);
    let rows = match db::open_for_reading(project.db.as_deref()).await? {
        Some(store) => {
            store
                .code_executions(CodeQuery {
                    since: Some(since),
                    ..CodeQuery::default()
                })
                .await?
        }
        None => Vec::new(),
    };
    let stats = code_stats(&rows);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    out.write_all(stats.render(args.days).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn failures(args: CodeFailuresArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let rows = match db::open_for_reading(project.db.as_deref()).await? {
        Some(store) => {
            store
                .code_executions(CodeQuery {
                    failed_only: true,
                    limit: Some(args.count),
                    ..CodeQuery::default()
                })
                .await?
        }
        None => Vec::new(),
    };
    let failures: Vec<FailureSummary> = rows.iter().rev().map(FailureSummary::of).collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&failures)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    out.write_all(FailureSummary::render_all(&failures).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
