//! `satchel log`: a conversation's log as the user saw it, re-rendered with
//! each tool's own formatter (terminal or markdown), or as JSON. Also the
//! rendering of a conversation's timeline for the REPL's `/history`.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use satchel_builtins::conversation::{Event, Item};
use satchel_store::{
    Conversation, ConversationDump, ConversationStore, LogEntry, LogKind, ToolCallRecord,
};
use satchel_tools::format::{generic_result, generic_use, paint};
use satchel_tools::{Registry, Style};
use serde::Serialize;

use crate::cli::{LogArgs, LogFormat};
use crate::commands::db;
use satchel_host::Host;

pub(crate) async fn run(args: LogArgs, env: &Host) -> anyhow::Result<ExitCode> {
    let Some(store) = db::open_for_reading(env.db.as_deref()).await? else {
        return nothing_recorded(&args, env);
    };
    let Some(conversation) = db::resolve_conversation(&store, args.conversation.as_deref()).await?
    else {
        return nothing_recorded(&args, env);
    };
    let Some(dump) = store.dump_conversation(&conversation.id).await? else {
        bail!(
            "conversation `{}` was deleted while reading it",
            conversation.id
        );
    };
    let registry = env.tools(false).await?.current();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let json = LogJson {
            conversation: &dump.conversation,
            entries: &dump.log_entries,
            tool_calls: &dump.tool_calls,
        };
        writeln!(stdout, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        let style = match args.format {
            LogFormat::Terminal => Style::Terminal {
                color: crate::paths::color(&std::io::stdout()),
            },
            LogFormat::Md => Style::Markdown,
        };
        writeln!(stdout, "{}", render(&dump, &registry, style))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn nothing_recorded(args: &LogArgs, env: &Host) -> anyhow::Result<ExitCode> {
    let db = env
        .db
        .as_deref()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    if let Some(wanted) = &args.conversation {
        bail!("no conversation matches `{wanted}`: nothing is recorded in {db} yet");
    }
    tracing::warn!("no conversations recorded yet in {db}");
    Ok(ExitCode::SUCCESS)
}

/// `satchel log --json`.
#[derive(Serialize)]
struct LogJson<'a> {
    conversation: &'a Conversation,
    entries: &'a [LogEntry],
    tool_calls: &'a [ToolCallRecord],
}

/// The whole log: a header, then every entry, tool entries through their
/// tool's formatter.
pub(crate) fn render(dump: &ConversationDump, registry: &Registry, style: Style) -> String {
    let calls: HashMap<&str, &ToolCallRecord> = dump
        .tool_calls
        .iter()
        .map(|record| (record.call_id.as_str(), record))
        .rev() // The first record wins for a reused call id.
        .collect();
    let mut blocks = vec![header(&dump.conversation, style)];
    let mut side: Option<&str> = None;
    for entry in &dump.log_entries {
        let body = render_entry(entry, &calls, registry, style);
        let entry_side = entry.side_conversation.as_deref();
        if entry_side != side
            && let Some(label) = entry_side
        {
            blocks.push(match style {
                Style::Terminal { .. } => {
                    paint(style, "2", &format!("┌ side conversation: {label}"))
                }
                Style::Markdown => format!("> **Side conversation: {label}**"),
            });
        }
        side = entry_side;
        blocks.push(match (entry_side, style) {
            (None, _) => body,
            (Some(_), Style::Terminal { .. }) => prefix_lines(&body, &paint(style, "2", "│ ")),
            (Some(_), Style::Markdown) => prefix_lines(&body, "> "),
        });
    }
    blocks.join("\n\n")
}

/// Timeline events (what the `conversation` tool gives the model) for a
/// person: each under its position `#n` (and its side conversation, if
/// any), tool calls through their tool's formatters.
pub(crate) fn render_timeline(events: &[&Event<'_>], registry: &Registry, style: Style) -> String {
    let no_calls = HashMap::new();
    events
        .iter()
        .map(|event| {
            let body = match event.item {
                Item::Entry(entry) => render_entry(entry, &no_calls, registry, style),
                Item::Call(record) => {
                    let (use_text, result_text) = match registry.get(&record.tool) {
                        Some(tool) => (
                            tool.format_use(&record.input, style),
                            tool.format_result(&record.output, style),
                        ),
                        None => (
                            generic_use(&record.tool, &record.input, style),
                            generic_result(&record.output, style),
                        ),
                    };
                    format!("{use_text}\n{result_text}")
                }
                Item::Unrecorded(entry) => entry.text.clone(),
            };
            let mut label = format!("#{}", event.n);
            if let Item::Entry(LogEntry {
                side_conversation: Some(side),
                ..
            }) = event.item
            {
                label.push_str(&format!(" · {side}"));
            }
            let label = match style {
                Style::Terminal { .. } => paint(style, "2", &label),
                Style::Markdown => format!("*{label}*"),
            };
            format!("{label}\n{body}")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn header(conversation: &Conversation, style: Style) -> String {
    let title = conversation
        .title
        .as_deref()
        .unwrap_or("Untitled conversation");
    let started = db::table_time(conversation.created_at);
    let updated = db::table_time(conversation.updated_at);
    match style {
        Style::Terminal { .. } => {
            let mut lines = vec![
                paint(style, "1", title),
                paint(
                    style,
                    "2",
                    &format!(
                        "{} · started {started} UTC · updated {updated} UTC",
                        conversation.id
                    ),
                ),
            ];
            if let Some(goal) = &conversation.goal {
                lines.push(format!("{} {goal}", paint(style, "1", "goal:")));
            }
            lines.join("\n")
        }
        Style::Markdown => {
            let mut lines = vec![
                format!("# {title}"),
                String::new(),
                format!("- id: `{}`", conversation.id),
                format!("- started: {started} UTC"),
                format!("- updated: {updated} UTC"),
            ];
            if let Some(goal) = &conversation.goal {
                lines.push(format!("- goal: {goal}"));
            }
            lines.join("\n")
        }
    }
}

fn render_entry(
    entry: &LogEntry,
    calls: &HashMap<&str, &ToolCallRecord>,
    registry: &Registry,
    style: Style,
) -> String {
    let record = entry
        .call_id
        .as_deref()
        .and_then(|call_id| calls.get(call_id));
    match (entry.kind, style) {
        (LogKind::ToolUse, _) => match record {
            Some(record) => match registry.get(&record.tool) {
                Some(tool) => tool.format_use(&record.input, style),
                None => generic_use(&record.tool, &record.input, style),
            },
            // The call never finished (or was not recorded): what was shown.
            None => entry.text.clone(),
        },
        (LogKind::ToolResult, _) => match record {
            Some(record) => match registry.get(&record.tool) {
                Some(tool) => tool.format_result(&record.output, style),
                None => generic_result(&record.output, style),
            },
            None => entry.text.clone(),
        },
        (LogKind::User, Style::Terminal { .. }) => {
            format!("{} {}", paint(style, "1;36", "you›"), entry.text)
        }
        (LogKind::User, Style::Markdown) => format!("**You:** {}", entry.text),
        (LogKind::Assistant, _) => entry.text.clone(),
        (LogKind::Auxiliary, Style::Terminal { .. }) => paint(style, "2", &entry.text),
        (LogKind::Auxiliary, Style::Markdown) => prefix_lines(&entry.text, "> "),
        (LogKind::Error, Style::Terminal { .. }) => {
            format!("{} {}", paint(style, "1;31", "error:"), entry.text)
        }
        (LogKind::Error, Style::Markdown) => format!("**Error:** {}", entry.text),
    }
}

fn prefix_lines(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|line| format!("{prefix}{line}").trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::{ErrorCode, ToolOutput, ToolResults};
    use satchel_store::Timestamp;
    use serde_json::json;

    use super::*;

    fn entry(seq: u32, kind: LogKind, text: &str) -> LogEntry {
        LogEntry {
            id: format!("e{seq}"),
            conversation_id: "c".into(),
            seq,
            kind,
            text: text.into(),
            parent_id: None,
            side_conversation: None,
            statement_id: None,
            call_id: None,
            created_at: Timestamp::from_millis(0),
        }
    }

    fn dump() -> ConversationDump {
        let record = |call_id: &str, tool: &str, output: ToolOutput| ToolCallRecord {
            id: format!("t-{call_id}"),
            conversation_id: Some("c".into()),
            statement_id: None,
            turn: Some(1),
            call_id: call_id.into(),
            tool: tool.into(),
            input: json!({"command": "ls"}),
            output,
            started_at: Timestamp::from_millis(0),
            finished_at: Timestamp::from_millis(4),
            duration_us: 4000,
        };
        let linked = |mut e: LogEntry, call_id: &str| {
            e.call_id = Some(call_id.into());
            e
        };
        let mut side = entry(7, LogKind::Auxiliary, "Title: listing");
        side.side_conversation = Some("title".into());
        ConversationDump {
            conversation: Conversation {
                id: "c".into(),
                title: Some("Listing".into()),
                goal: Some("see the files".into()),
                created_at: Timestamp::from_millis(1_735_787_045_678),
                updated_at: Timestamp::from_millis(1_735_787_105_678),
            },
            statements: Vec::new(),
            log_entries: vec![
                entry(1, LogKind::User, "what is here?"),
                linked(entry(2, LogKind::ToolUse, "shown use"), "call_1"),
                linked(entry(3, LogKind::ToolResult, "shown result"), "call_1"),
                linked(entry(4, LogKind::ToolUse, "$ never finished"), "call_9"),
                linked(entry(5, LogKind::ToolUse, "shown"), "call_2"),
                linked(entry(6, LogKind::ToolResult, "shown"), "call_2"),
                side,
                entry(8, LogKind::Assistant, "Two files."),
                entry(9, LogKind::Error, "rate limited"),
            ],
            messages: Vec::new(),
            tool_calls: vec![
                record(
                    "call_1",
                    "bash",
                    ToolOutput::success(
                        ToolResults::json(json!({
                            "stdout": "a\nb\n", "stderr": "", "exit_code": 0,
                            "truncated": false, "timed_out": false, "duration_ms": 4
                        })),
                        "ran `ls` in 4 ms, exit 0",
                    ),
                ),
                record(
                    "call_2",
                    "gone_tool",
                    ToolOutput::error(ErrorCode::ToolTimeout, "took too long"),
                ),
            ],
        }
    }

    #[test]
    fn terminal_log_uses_each_tools_formatter() {
        let registry = satchel_builtins::builtin_registry().unwrap();
        let text = render(&dump(), &registry, Style::Terminal { color: false });
        let expected = "\
Listing
c · started 2025-01-02 03:04:05 UTC · updated 2025-01-02 03:05:05 UTC
goal: see the files

you› what is here?

$ ls

a
b
exit 0 · 4 ms

$ never finished

gone_tool(command=\"ls\")

✗ took too long

┌ side conversation: title

│ Title: listing

Two files.

error: rate limited";
        assert_eq!(text, expected);
    }

    #[test]
    fn history_shows_timeline_events_through_the_formatters() {
        let registry = satchel_builtins::builtin_registry().unwrap();
        let dump = dump();
        let events =
            satchel_builtins::conversation::timeline(&dump.log_entries, &dump.tool_calls, &[]);
        let chosen = satchel_builtins::conversation::select(&events, None, Some(4));
        let text = render_timeline(&chosen, &registry, Style::Terminal { color: false });
        let expected = "\
#4
gone_tool(command=\"ls\")
✗ took too long

#5 · title
Title: listing

#6
Two files.

#7
error: rate limited";
        assert_eq!(text, expected);
        let all = satchel_builtins::conversation::select(&events, None, None);
        let text = render_timeline(&all, &registry, Style::Terminal { color: false });
        assert!(
            text.starts_with("#1\nyou› what is here?\n\n#2\n$ ls\na\nb\n"),
            "{text}"
        );
        assert!(text.contains("#3\n$ never finished"), "{text}");
    }

    #[test]
    fn markdown_log_fences_commands_and_quotes_side_conversations() {
        let registry = satchel_builtins::builtin_registry().unwrap();
        let text = render(&dump(), &registry, Style::Markdown);
        let expected = "\
# Listing

- id: `c`
- started: 2025-01-02 03:04:05 UTC
- updated: 2025-01-02 03:05:05 UTC
- goal: see the files

**You:** what is here?

```bash
ls
```

```text
a
b
```

*exit 0 · 4 ms*

$ never finished

`gone_tool(command=\"ls\")`

✗ took too long

> **Side conversation: title**

> > Title: listing

Two files.

**Error:** rate limited";
        assert_eq!(text, expected);
    }
}
