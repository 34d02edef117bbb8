//! `satchel conversations`, `satchel audit` and `satchel export`: listing
//! and exporting what the store holds.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;

use anyhow::{Context, bail};
use satchel_store::{
    AuditQuery, AuditRecord, AuditSource, AuditStore, Clock, ConversationStore, SystemClock,
};
use satchel_tools::Style;
use satchel_tools::format::{call_summary, paint, truncate_chars};

use crate::cli::{AuditArgs, ConversationsArgs, ExportArgs, Since, SourceArg};
use crate::commands::db;
use satchel_host::Host;

/// Characters of a title shown by `satchel conversations`.
const TITLE_CHARS: usize = 60;
/// Characters of a call summary shown by `satchel audit`.
const INPUT_CHARS: usize = 80;

fn style() -> Style {
    Style::Terminal {
        color: crate::paths::color(&std::io::stdout()),
    }
}

pub(crate) async fn conversations(args: ConversationsArgs, env: &Host) -> anyhow::Result<ExitCode> {
    let listed = match db::open_for_reading(env.db.as_deref()).await? {
        Some(store) => {
            let listed = store.list_conversations(args.limit).await?;
            store.close().await?;
            listed
        }
        None => Vec::new(),
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&listed)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if listed.is_empty() {
        tracing::warn!("no conversations recorded yet");
        return Ok(ExitCode::SUCCESS);
    }
    let style = style();
    writeln!(
        stdout,
        "{:36}  {:19}  {:>7}  {:>5}  TITLE",
        "ID", "UPDATED (UTC)", "ENTRIES", "CALLS"
    )?;
    for summary in &listed {
        let conversation = &summary.conversation;
        let title = match &conversation.title {
            Some(title) => truncate_chars(title, TITLE_CHARS),
            None => paint(style, "2", "(untitled)"),
        };
        writeln!(
            stdout,
            "{:36}  {:19}  {:>7}  {:>5}  {title}",
            conversation.id,
            db::table_time(conversation.updated_at),
            summary.log_entries,
            summary.tool_calls,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn audit(args: AuditArgs, env: &Host) -> anyhow::Result<ExitCode> {
    let query = AuditQuery {
        tool: args.tool,
        source: args.source.map(|source| match source {
            SourceArg::Cli => AuditSource::Cli,
            SourceArg::Repl => AuditSource::Repl,
            SourceArg::Run => AuditSource::Run,
            SourceArg::Mcp => AuditSource::Mcp,
            SourceArg::Telegram => AuditSource::Telegram,
            SourceArg::Web => AuditSource::Web,
        }),
        since: args.since.map(|since| match since {
            Since::Ago(age) => SystemClock.now().saturating_sub(age),
            Since::At(time) => time,
        }),
        failed_only: args.failed,
        limit: Some(args.limit),
    };
    let (rows, unfinished) = match db::open_for_reading(env.db.as_deref()).await? {
        Some(store) => {
            let rows = store.audit(query).await?;
            let unfinished = store.unfinished_calls().await?;
            store.close().await?;
            (rows, unfinished)
        }
        None => (Vec::new(), Vec::new()),
    };
    let mut stdout = std::io::stdout().lock();
    if args.unfinished && args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&unfinished)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !unfinished.is_empty() {
        // Calls put on record before they ran whose end never was: their
        // process stopped, or the end could not be written.
        writeln!(stdout, "Began and never ended (outcome unknown):")?;
        for start in &unfinished {
            writeln!(
                stdout,
                "{:19}  {:6}  {}  {}",
                db::table_time(start.started_at),
                who(start.source, start.caller.as_deref()),
                start.tool,
                truncate_chars(&call_summary(&start.tool, &start.input), INPUT_CHARS),
            )?;
        }
        writeln!(stdout)?;
    }
    if args.unfinished {
        if unfinished.is_empty() {
            tracing::warn!("no call began without ending");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        tracing::warn!("no recorded tool calls match");
        return Ok(ExitCode::SUCCESS);
    }
    let style = style();
    let tool_width = rows.iter().map(|r| r.tool.len()).max().unwrap_or(4).max(4);
    let result_width = rows.iter().map(|r| result(r).len()).max().unwrap_or(6);
    let source_width = rows
        .iter()
        .map(|r| who(r.source, r.caller.as_deref()).len())
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        stdout,
        "{:19}  {:source_width$}  {:tool_width$}  {:result_width$}  {:>8}  INPUT",
        "STARTED (UTC)", "SOURCE", "TOOL", "RESULT", "DURATION"
    )?;
    for row in &rows {
        let outcome = format!("{:result_width$}", result(row));
        let outcome = if row.is_error {
            paint(style, "31", &outcome)
        } else {
            outcome
        };
        writeln!(
            stdout,
            "{:19}  {:source_width$}  {:tool_width$}  {outcome}  {:>8}  {}",
            db::table_time(row.started_at),
            who(row.source, row.caller.as_deref()),
            row.tool,
            duration(row.duration_us),
            truncate_chars(&call_summary(&row.tool, &row.input), INPUT_CHARS),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The source, and who within it when it serves many people
/// (`telegram:42`).
fn who(source: AuditSource, caller: Option<&str>) -> String {
    match caller {
        Some(caller) if caller.starts_with(source.as_str()) => caller.to_owned(),
        Some(caller) => format!("{} {caller}", source.as_str()),
        None => source.as_str().to_owned(),
    }
}

/// `ok`, or `✗` and the error code.
fn result(row: &AuditRecord) -> String {
    match (row.is_error, &row.error_code) {
        (false, _) => "ok".to_owned(),
        (true, Some(code)) => format!("✗ {code}"),
        (true, None) => "✗ failed".to_owned(),
    }
}

/// `850 µs`, `42 ms`, `3.2 s`, `4 min`.
fn duration(micros: u64) -> String {
    match micros {
        0..1_000 => format!("{micros} µs"),
        1_000..1_000_000 => format!("{} ms", micros / 1_000),
        1_000_000..60_000_000 => format!("{:.1} s", micros as f64 / 1e6),
        _ => format!("{} min", micros / 60_000_000),
    }
}

pub(crate) async fn export(args: ExportArgs, env: &Host) -> anyhow::Result<ExitCode> {
    let Some(store) = db::open_for_reading(env.db.as_deref()).await? else {
        bail!(
            "no conversation matches `{}`: nothing is recorded yet",
            args.conversation
        );
    };
    let Some(conversation) = db::resolve_conversation(&store, Some(&args.conversation)).await?
    else {
        bail!("no conversation matches `{}`", args.conversation);
    };
    let Some(dump) = store.dump_conversation(&conversation.id).await? else {
        bail!(
            "conversation `{}` was deleted while reading it",
            conversation.id
        );
    };
    store.close().await?;
    let records = dump.into_records();
    let count = records.len();
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) if path.as_os_str() != "-" => Box::new(BufWriter::new(
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot write `{}`", path.display()))?,
        )),
        _ => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    for record in &records {
        serde_json::to_writer(&mut out, record)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if let Some(path) = args.output.filter(|path| path.as_os_str() != "-") {
        tracing::info!("wrote {count} records to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850 µs");
        assert_eq!(duration(42_300), "42 ms");
        assert_eq!(duration(3_240_000), "3.2 s");
        assert_eq!(duration(240_000_000), "4 min");
    }
}
