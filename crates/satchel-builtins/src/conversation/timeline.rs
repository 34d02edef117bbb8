//! A conversation's timeline: its log joined with its tool-call rows, the
//! one sequence of events that the `conversation` tool gives the model
//! (as JSON) and `/history` shows the user (through the tools' formatters).
//!
//! An event is a log entry, except that a tool call (its `tool_use` and
//! `tool_result` entries) is one event carrying its stored record.
//! Thinking is left out; other side entries (goal, objective, title,
//! summary...) stay, marked by their side conversation.

use std::collections::{HashMap, VecDeque};

use satchel_store::{LogEntry, LogKind, Statement, THINKING_SIDE, ToolCallRecord};

/// One event of the timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event<'a> {
    /// 1-based position in the whole timeline.
    pub n: usize,
    /// The statement (its `seq`) the event belongs to, when known.
    pub statement: Option<u32>,
    /// What happened.
    pub item: Item<'a>,
}

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item<'a> {
    /// A user, assistant, auxiliary or error entry.
    Entry(&'a LogEntry),
    /// A tool call, with its stored record.
    Call(&'a ToolCallRecord),
    /// A tool entry shown to the user whose call has no record (Satchel
    /// stopped before recording it).
    Unrecorded(&'a LogEntry),
}

impl Event<'_> {
    /// The event's id: the tool call's record id for a call, else the log
    /// entry's id.
    pub fn id(&self) -> &str {
        match self.item {
            Item::Entry(entry) | Item::Unrecorded(entry) => &entry.id,
            Item::Call(record) => &record.id,
        }
    }
}

/// The timeline of one conversation from its rows (log in `seq` order,
/// calls in the order they started).
pub fn timeline<'a>(
    log: &'a [LogEntry],
    calls: &'a [ToolCallRecord],
    statements: &[Statement],
) -> Vec<Event<'a>> {
    let seq_of: HashMap<&str, u32> = statements.iter().map(|s| (s.id.as_str(), s.seq)).collect();
    // A model's call id is unique within a statement (prompted mode reuses
    // ids across statements); a queue covers a repeat anyway.
    let mut records: HashMap<(Option<&str>, &str), VecDeque<&ToolCallRecord>> = HashMap::new();
    for record in calls {
        records
            .entry((record.statement_id.as_deref(), record.call_id.as_str()))
            .or_default()
            .push_back(record);
    }
    // Calls already shown by their `tool_use` entry, awaiting their result entry.
    let mut awaiting: HashMap<(Option<&str>, &str), usize> = HashMap::new();
    let mut events = Vec::with_capacity(log.len());
    for entry in log {
        if entry.side_conversation.as_deref() == Some(THINKING_SIDE) {
            continue;
        }
        let key = entry
            .call_id
            .as_deref()
            .map(|call_id| (entry.statement_id.as_deref(), call_id));
        let item = match (entry.kind, key) {
            (LogKind::ToolUse, Some(key)) => {
                match records.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some(record) => {
                        *awaiting.entry(key).or_default() += 1;
                        Item::Call(record)
                    }
                    None => Item::Unrecorded(entry),
                }
            }
            (LogKind::ToolResult, Some(key)) => match awaiting.get_mut(&key) {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    continue;
                }
                _ => match records.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some(record) => Item::Call(record),
                    None => Item::Unrecorded(entry),
                },
            },
            (LogKind::ToolUse | LogKind::ToolResult, None) => Item::Unrecorded(entry),
            (LogKind::User | LogKind::Assistant | LogKind::Auxiliary | LogKind::Error, _) => {
                Item::Entry(entry)
            }
        };
        events.push(Event {
            n: events.len() + 1,
            statement: entry
                .statement_id
                .as_deref()
                .and_then(|id| seq_of.get(id).copied()),
            item,
        });
    }
    events
}

/// The events of statement `statement` (all when `None`), then the last
/// `limit` of them (all when `None`).
pub fn select<'e, 'a>(
    events: &'e [Event<'a>],
    statement: Option<u32>,
    limit: Option<usize>,
) -> Vec<&'e Event<'a>> {
    let mut chosen: Vec<&Event<'a>> = events
        .iter()
        .filter(|event| statement.is_none() || event.statement == statement)
        .collect();
    if let Some(limit) = limit {
        let skip = chosen.len().saturating_sub(limit);
        chosen.drain(..skip);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::{ToolOutput, ToolResults};
    use satchel_store::Timestamp;
    use serde_json::json;

    use super::*;

    fn entry(seq: u32, kind: LogKind, statement: &str, call_id: Option<&str>) -> LogEntry {
        LogEntry {
            id: format!("e{seq}"),
            conversation_id: "c".into(),
            seq,
            kind,
            text: format!("text {seq}"),
            parent_id: None,
            side_conversation: None,
            statement_id: Some(statement.into()),
            call_id: call_id.map(str::to_owned),
            created_at: Timestamp::from_millis(0),
        }
    }

    fn record(id: &str, statement: &str, call_id: &str) -> ToolCallRecord {
        ToolCallRecord {
            id: id.into(),
            conversation_id: Some("c".into()),
            statement_id: Some(statement.into()),
            turn: Some(1),
            call_id: call_id.into(),
            tool: "bash".into(),
            input: json!({"command": "ls"}),
            output: ToolOutput::success(ToolResults::Text("out".into()), "ran"),
            started_at: Timestamp::from_millis(0),
            finished_at: Timestamp::from_millis(0),
            duration_us: 0,
        }
    }

    fn statement(id: &str, seq: u32) -> Statement {
        Statement {
            id: id.into(),
            conversation_id: "c".into(),
            seq,
            objective: None,
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn calls_are_one_event_thinking_is_left_out_and_reused_ids_stay_apart() {
        let mut thinking = entry(2, LogKind::Auxiliary, "s1", None);
        thinking.side_conversation = Some(THINKING_SIDE.into());
        let mut title = entry(6, LogKind::Auxiliary, "s1", None);
        title.side_conversation = Some("title".into());
        let log = vec![
            entry(1, LogKind::User, "s1", None),
            thinking,
            entry(3, LogKind::Assistant, "s1", None),
            entry(4, LogKind::ToolUse, "s1", Some("p_1_0")),
            entry(5, LogKind::ToolResult, "s1", Some("p_1_0")),
            title,
            entry(7, LogKind::User, "s2", None),
            entry(8, LogKind::ToolUse, "s2", Some("p_1_0")),
            entry(9, LogKind::ToolResult, "s2", Some("p_1_0")),
            entry(10, LogKind::ToolUse, "s2", Some("lost")),
            entry(11, LogKind::Error, "s2", None),
        ];
        let calls = vec![record("t1", "s1", "p_1_0"), record("t2", "s2", "p_1_0")];
        let statements = vec![statement("s1", 1), statement("s2", 2)];
        let events = timeline(&log, &calls, &statements);
        let summary: Vec<(usize, Option<u32>, &str)> =
            events.iter().map(|e| (e.n, e.statement, e.id())).collect();
        assert_eq!(
            summary,
            [
                (1, Some(1), "e1"),
                (2, Some(1), "e3"),
                (3, Some(1), "t1"),
                (4, Some(1), "e6"),
                (5, Some(2), "e7"),
                (6, Some(2), "t2"),
                (7, Some(2), "e10"),
                (8, Some(2), "e11"),
            ]
        );
        assert!(matches!(events[6].item, Item::Unrecorded(_)));

        let ids = |chosen: Vec<&Event<'_>>| -> Vec<String> {
            chosen.iter().map(|e| e.id().to_owned()).collect()
        };
        assert_eq!(
            ids(select(&events, Some(2), None)),
            ["e7", "t2", "e10", "e11"]
        );
        assert_eq!(ids(select(&events, Some(1), Some(2))), ["t1", "e6"]);
        assert_eq!(ids(select(&events, None, Some(1))), ["e11"]);
        assert_eq!(select(&events, Some(9), None).len(), 0);
    }
}
