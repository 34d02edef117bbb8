//! The plain record types every store backend reads and writes.
//!
//! `New*` types are what a caller hands in; the store assigns ids, sequence
//! numbers and creation times and hands back the full record. Ids are
//! UUIDv7 text (time-sortable; a native `uuid` in PostgreSQL). Records
//! serialise with snake_case field names and RFC 3339 times, which is the
//! format of `satchel export`.

use satchel_core::{ToolCall, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Timestamp;

/// The side conversation under which the agent logs the model's thinking
/// (the `conversation` tool leaves it out of timelines).
pub const THINKING_SIDE: &str = "thinking";

/// One conversation: the container of a log, a history and tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Store-assigned id.
    pub id: String,
    /// A short title, once one is known.
    pub title: Option<String>,
    /// The conversation goal, set once.
    pub goal: Option<String>,
    /// When the conversation was created.
    pub created_at: Timestamp,
    /// When anything was last added to it.
    pub updated_at: Timestamp,
}

/// What a caller gives to create a conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewConversation {
    /// A title, if known already.
    pub title: Option<String>,
    /// A goal, if known already.
    pub goal: Option<String>,
}

/// A conversation with counts, for listings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// The conversation.
    #[serde(flatten)]
    pub conversation: Conversation,
    /// Number of log entries.
    pub log_entries: u64,
    /// Number of tool calls.
    pub tool_calls: u64,
}

/// One user message and the work done to answer it, with its objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// Store-assigned id.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// 1-based position in the conversation.
    pub seq: u32,
    /// What the agent is trying to achieve for this statement.
    pub objective: Option<String>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// What a caller gives to record a statement.
#[derive(Debug, Clone, PartialEq)]
pub struct NewStatement {
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// Its objective, if known.
    pub objective: Option<String>,
}

/// The kind of a conversation-log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// What the user typed.
    User,
    /// What the assistant answered.
    Assistant,
    /// A tool call, as shown to the user.
    ToolUse,
    /// A tool call's outcome, as shown to the user.
    ToolResult,
    /// Side information: a title, a goal, a summary, a notice.
    Auxiliary,
    /// An error the user was shown.
    Error,
}

impl LogKind {
    /// Every kind, in declaration order.
    pub const ALL: [LogKind; 6] = [
        LogKind::User,
        LogKind::Assistant,
        LogKind::ToolUse,
        LogKind::ToolResult,
        LogKind::Auxiliary,
        LogKind::Error,
    ];

    /// The stored name, e.g. `"tool_use"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::User => "user",
            LogKind::Assistant => "assistant",
            LogKind::ToolUse => "tool_use",
            LogKind::ToolResult => "tool_result",
            LogKind::Auxiliary => "auxiliary",
            LogKind::Error => "error",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<LogKind> {
        LogKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

/// One entry of the conversation log: what the user saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Store-assigned id.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// 1-based position in the conversation's log.
    pub seq: u32,
    /// What kind of entry it is.
    pub kind: LogKind,
    /// The formatted text the user saw.
    pub text: String,
    /// The entry this one answers or belongs under, if any.
    pub parent_id: Option<String>,
    /// The side conversation this entry is part of; `None` for the main thread.
    pub side_conversation: Option<String>,
    /// The statement it was produced for, if any.
    pub statement_id: Option<String>,
    /// For `tool_use`/`tool_result`: the model's id of the call, which links
    /// to the tool-call record.
    pub call_id: Option<String>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// What a caller gives to append a log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLogEntry {
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// What kind of entry it is.
    pub kind: LogKind,
    /// The formatted text the user saw.
    pub text: String,
    /// The entry this one belongs under, if any.
    pub parent_id: Option<String>,
    /// The side conversation this entry is part of, if any.
    pub side_conversation: Option<String>,
    /// The statement it was produced for, if any.
    pub statement_id: Option<String>,
    /// The model's id of the tool call, for tool entries.
    pub call_id: Option<String>,
}

impl NewLogEntry {
    /// An entry on the main thread with no links.
    pub fn new(conversation_id: impl Into<String>, kind: LogKind, text: impl Into<String>) -> Self {
        NewLogEntry {
            conversation_id: conversation_id.into(),
            kind,
            text: text.into(),
            parent_id: None,
            side_conversation: None,
            statement_id: None,
            call_id: None,
        }
    }
}

/// One message of the LLM history: exactly what was sent, with its turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmMessage {
    /// Store-assigned id.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The statement whose turn sent it, if any.
    pub statement_id: Option<String>,
    /// The turn (1-based within the statement) that first sent it.
    pub turn: u32,
    /// 1-based position in the conversation's history.
    pub seq: u32,
    /// `system`, `user`, `assistant`, `tool`...
    pub role: String,
    /// The message body exactly as sent to the provider.
    pub content: Value,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// What a caller gives to append a message to the history.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLlmMessage {
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The statement whose turn sent it, if any.
    pub statement_id: Option<String>,
    /// The turn that sent it.
    pub turn: u32,
    /// The message's role.
    pub role: String,
    /// The message body exactly as sent.
    pub content: Value,
}

/// Rows of one step of a statement, written in one transaction: all of
/// them are kept or none. A statement's start (the statement, the user's
/// log entry and message) or its answer (the model call, the answer's log
/// entries and message) goes to the store as one write instead of three,
/// so nothing waits on the store three times and no step is half on record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewRecords {
    /// A statement to add first; every row below then belongs to it (its
    /// `statement_id` is set to the new statement's id).
    pub statement: Option<NewStatement>,
    /// Requests to a model, in the order they were made.
    pub llm_calls: Vec<crate::NewLlmCall>,
    /// Log entries, in order.
    pub log_entries: Vec<NewLogEntry>,
    /// History messages, in order.
    pub messages: Vec<NewLlmMessage>,
}

impl NewRecords {
    /// Ties every row to `statement_id`: the statement this step added.
    pub(crate) fn belong_to(&mut self, statement_id: &str) {
        let id = Some(statement_id.to_owned());
        self.llm_calls
            .iter_mut()
            .for_each(|c| c.statement_id.clone_from(&id));
        self.log_entries
            .iter_mut()
            .for_each(|e| e.statement_id.clone_from(&id));
        self.messages
            .iter_mut()
            .for_each(|m| m.statement_id.clone_from(&id));
    }
}

/// What [`NewRecords`] became.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The statement added, when one was given.
    pub statement: Option<Statement>,
    /// The ids of the model calls, in order.
    pub llm_call_ids: Vec<String>,
    /// The log entries, in order.
    pub log_entries: Vec<LogEntry>,
    /// The messages, in order.
    pub messages: Vec<LlmMessage>,
}

/// Where a tool call came from, for the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditSource {
    /// `satchel tools call`.
    Cli,
    /// The interactive REPL.
    Repl,
    /// A one-shot `satchel run`.
    Run,
    /// An MCP client.
    Mcp,
    /// `satchel telegram`: a person talking to the bot.
    Telegram,
    /// `satchel web`: a person in the browser.
    Web,
}

impl AuditSource {
    /// Every source, in declaration order.
    pub const ALL: [AuditSource; 6] = [
        AuditSource::Cli,
        AuditSource::Repl,
        AuditSource::Run,
        AuditSource::Mcp,
        AuditSource::Telegram,
        AuditSource::Web,
    ];

    /// The stored name, e.g. `"cli"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditSource::Cli => "cli",
            AuditSource::Repl => "repl",
            AuditSource::Run => "run",
            AuditSource::Mcp => "mcp",
            AuditSource::Telegram => "telegram",
            AuditSource::Web => "web",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<AuditSource> {
        AuditSource::ALL
            .into_iter()
            .find(|source| source.as_str() == name)
    }
}

/// A finished tool call as stored: the call, its three-part output, timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Store-assigned id.
    pub id: String,
    /// The conversation, when the call was made in one.
    pub conversation_id: Option<String>,
    /// The statement, when the call was made for one.
    pub statement_id: Option<String>,
    /// The turn (1-based within the statement), when known.
    pub turn: Option<u32>,
    /// The model's (or Satchel's) id of the call.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The input as given.
    pub input: Value,
    /// Results, response, user message, error flag and code, exactly as the
    /// tool returned them.
    #[serde(flatten)]
    pub output: ToolOutput,
    /// When the call started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Timestamp,
    /// How long it ran, in microseconds (monotonic clock).
    pub duration_us: u64,
}

impl ToolCallRecord {
    /// The call as the model made it.
    pub fn call(&self) -> ToolCall {
        ToolCall {
            id: self.call_id.clone(),
            name: self.tool.clone(),
            input: self.input.clone(),
        }
    }
}

/// What a caller gives to record a finished tool call. Recording one also
/// writes its audit row, in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct NewToolCall {
    /// Where the call came from.
    pub source: AuditSource,
    /// Who made the call within its source, when the source serves many
    /// people (`telegram:<user id>`).
    pub caller: Option<String>,
    /// The conversation, when there is one (one-off CLI calls have none).
    pub conversation_id: Option<String>,
    /// The statement, when there is one.
    pub statement_id: Option<String>,
    /// The turn, when there is one.
    pub turn: Option<u32>,
    /// The call: id, tool name, input.
    pub call: ToolCall,
    /// What the call returned.
    pub output: ToolOutput,
    /// How policy decided on the call (the rule, or the user's answer),
    /// recorded on its audit row.
    pub decision: Option<String>,
    /// When it started (wall clock).
    pub started_at: Timestamp,
    /// When it finished (wall clock).
    pub finished_at: Timestamp,
    /// How long it ran, in microseconds (monotonic clock).
    pub duration_us: u64,
}

/// One row of the audit trail: a tool call made from anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Store-assigned id.
    pub id: String,
    /// Where the call came from.
    pub source: AuditSource,
    /// Who made the call within its source, when the source serves many
    /// people (`telegram:<user id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The input (redacted like everything stored).
    pub input: Value,
    /// True when the call failed.
    pub is_error: bool,
    /// The failure's code, as its wire name (`TOOL_TIMEOUT`...).
    pub error_code: Option<String>,
    /// A policy decision about the call, once policies exist.
    pub decision: Option<String>,
    /// The conversation, when there was one.
    pub conversation_id: Option<String>,
    /// The tool-call record, when there is one.
    pub tool_call_id: Option<String>,
    /// When the call started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Timestamp,
    /// How long it ran, in microseconds.
    pub duration_us: u64,
}

/// What a caller gives to add an audit row on its own (a call refused
/// before it ran, a call whose full record lives elsewhere).
#[derive(Debug, Clone, PartialEq)]
pub struct NewAudit {
    /// Where the call came from.
    pub source: AuditSource,
    /// Who made the call within its source, when the source serves many
    /// people (`telegram:<user id>`).
    pub caller: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The input.
    pub input: Value,
    /// True when the call failed.
    pub is_error: bool,
    /// The failure's code wire name.
    pub error_code: Option<String>,
    /// A policy decision, if any.
    pub decision: Option<String>,
    /// The conversation, if any.
    pub conversation_id: Option<String>,
    /// When the call started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Timestamp,
    /// How long it ran, in microseconds.
    pub duration_us: u64,
}

/// A tool call about to run, put on record before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCallStart {
    /// Where the call came from.
    pub source: AuditSource,
    /// Who made the call within its source, when the source serves many
    /// people (`telegram:<user id>`).
    pub caller: Option<String>,
    /// The call: id, tool name, input.
    pub call: ToolCall,
    /// The conversation, if any.
    pub conversation_id: Option<String>,
    /// When it starts.
    pub started_at: Timestamp,
}

/// A call that began and whose end was never recorded: it ran (or was
/// about to), and its outcome is unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallStartRecord {
    /// Store-assigned id (what [`AuditStore::end_calls`](crate::AuditStore::end_calls) takes).
    pub id: String,
    /// Where the call came from.
    pub source: AuditSource,
    /// Who made the call within its source, when the source serves many
    /// people (`telegram:<user id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The model's (or client's) id of the call.
    pub call_id: String,
    /// The input (redacted like everything stored).
    pub input: Value,
    /// The conversation, if any.
    pub conversation_id: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
}

/// Which audit rows to list. The default lists everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls from this source.
    pub source: Option<AuditSource>,
    /// Only calls started at or after this time.
    pub since: Option<Timestamp>,
    /// Only failed calls.
    pub failed_only: bool,
    /// At most this many rows: the most recent ones.
    pub limit: Option<usize>,
}

/// What to look for in one conversation's record; see
/// [`ConversationStore::search_conversation`](crate::ConversationStore::search_conversation).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSearch {
    /// The conversation searched; no other is ever looked at.
    pub conversation_id: String,
    /// Words that must all appear, in any order; a word ending in `*`
    /// matches as a prefix. Case and diacritics do not matter, nor does
    /// punctuation (it separates words).
    pub text: String,
    /// At most this many hits.
    pub limit: usize,
    /// Log entries of these side conversations are left out (e.g.
    /// `thinking`).
    pub skip_side_conversations: Vec<String>,
}

/// A record that matched a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "id", rename_all = "snake_case")]
pub enum SearchHit {
    /// A log entry (by its id): its text matched. Tool entries are found
    /// through their tool call instead.
    LogEntry(String),
    /// A tool call (by its record id): its tool name, input, results or
    /// note matched.
    ToolCall(String),
}

/// Everything recorded about one conversation, read in one consistent
/// snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationDump {
    /// The conversation.
    pub conversation: Conversation,
    /// Its statements and objectives, in order.
    pub statements: Vec<Statement>,
    /// Its log, in order.
    pub log_entries: Vec<LogEntry>,
    /// Its LLM history, in order.
    pub messages: Vec<LlmMessage>,
    /// Its tool calls, in the order they started.
    pub tool_calls: Vec<ToolCallRecord>,
}

impl ConversationDump {
    /// The dump as export lines: the conversation first, then statements,
    /// log entries, messages and tool calls.
    pub fn into_records(self) -> Vec<ExportRecord> {
        let mut records = vec![ExportRecord::Conversation(self.conversation)];
        records.extend(self.statements.into_iter().map(ExportRecord::Statement));
        records.extend(self.log_entries.into_iter().map(ExportRecord::LogEntry));
        records.extend(self.messages.into_iter().map(ExportRecord::Message));
        records.extend(self.tool_calls.into_iter().map(ExportRecord::ToolCall));
        records
    }
}

/// One line of a JSONL export: a record tagged with its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExportRecord {
    /// The conversation.
    Conversation(Conversation),
    /// A statement and its objective.
    Statement(Statement),
    /// A log entry.
    LogEntry(LogEntry),
    /// An LLM message.
    Message(LlmMessage),
    /// A tool call.
    ToolCall(ToolCallRecord),
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::ErrorCode;
    use serde_json::json;

    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in LogKind::ALL {
            assert_eq!(LogKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        }
        for source in AuditSource::ALL {
            assert_eq!(AuditSource::parse(source.as_str()), Some(source));
            assert_eq!(
                serde_json::to_value(source).unwrap(),
                json!(source.as_str())
            );
        }
        assert_eq!(LogKind::parse("tool-use"), None);
        assert_eq!(AuditSource::parse("CLI"), None);
    }

    #[test]
    fn tool_call_export_line_is_flat_and_round_trips() {
        let record = ToolCallRecord {
            id: "t1".into(),
            conversation_id: Some("c1".into()),
            statement_id: None,
            turn: Some(2),
            call_id: "call_1".into(),
            tool: "bash".into(),
            input: json!({"command": "ls"}),
            output: ToolOutput::error(ErrorCode::ToolTimeout, "too slow"),
            started_at: Timestamp::from_millis(1000),
            finished_at: Timestamp::from_millis(2500),
            duration_us: 1_500_000,
        };
        let line = serde_json::to_value(ExportRecord::ToolCall(record.clone())).unwrap();
        assert_eq!(
            line,
            json!({
                "type": "tool_call",
                "id": "t1",
                "conversation_id": "c1",
                "statement_id": null,
                "turn": 2,
                "call_id": "call_1",
                "tool": "bash",
                "input": {"command": "ls"},
                "results": [{"type": "json", "json": {"error": "too slow", "error_code": "TOOL_TIMEOUT"}}],
                "user_message": "too slow",
                "is_error": true,
                "error_code": "TOOL_TIMEOUT",
                "started_at": "1970-01-01T00:00:01.000Z",
                "finished_at": "1970-01-01T00:00:02.500Z",
                "duration_us": 1_500_000,
            })
        );
        let back: ExportRecord = serde_json::from_value(line).unwrap();
        assert_eq!(back, ExportRecord::ToolCall(record));
    }
}

// ---------------------------------------------------------------- memory

/// The four memory layers, from permanent facts to the current session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryLayer {
    /// Permanent facts, preferences, relationships.
    Long,
    /// Goals, plans, projects: one to three months.
    Mid,
    /// Recent context and conversation summaries: days to weeks.
    Short,
    /// The current session only.
    Session,
}

impl MemoryLayer {
    /// Every layer, longest-lived first.
    pub const ALL: [MemoryLayer; 4] = [
        MemoryLayer::Long,
        MemoryLayer::Mid,
        MemoryLayer::Short,
        MemoryLayer::Session,
    ];

    /// The stored name, e.g. `"long"`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryLayer::Long => "long",
            MemoryLayer::Mid => "mid",
            MemoryLayer::Short => "short",
            MemoryLayer::Session => "session",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<MemoryLayer> {
        MemoryLayer::ALL
            .into_iter()
            .find(|layer| layer.as_str() == name)
    }
}

impl std::fmt::Display for MemoryLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored memory (without its embedding, which only indexes read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Store-assigned id.
    pub id: String,
    /// Store-assigned integer key, for indexes kept outside the store.
    #[serde(skip)]
    pub seq: i64,
    /// Whose memory it is: memories of different namespaces never mix.
    pub namespace: String,
    /// Its layer.
    pub layer: MemoryLayer,
    /// What is remembered.
    pub content: String,
    /// `fact`, `goal`, `system`... or free text.
    pub category: Option<String>,
    /// How sure the one who stored it was, 0 to 1.
    pub certainty: f32,
    /// The session it belongs to (session-layer memories and summaries).
    pub session_id: Option<String>,
    /// The conversation it was stored from, if any.
    pub conversation_id: Option<String>,
    /// When it was stored (or the time it is dated by).
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// When it stops being recalled and may be purged; `None`: never.
    pub expires_at: Option<Timestamp>,
    /// When its session ended and it was archived; archived memories are
    /// not recalled.
    pub archived_at: Option<Timestamp>,
}

/// What a caller gives to store a memory.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Whose memory it is.
    pub namespace: String,
    /// Its layer.
    pub layer: MemoryLayer,
    /// What is remembered.
    pub content: String,
    /// Its category, if any.
    pub category: Option<String>,
    /// 0 to 1.
    pub certainty: f32,
    /// The session it belongs to, if any.
    pub session_id: Option<String>,
    /// The conversation it comes from, if any.
    pub conversation_id: Option<String>,
    /// The time it is dated by; `None`: the store's now.
    pub created_at: Option<Timestamp>,
    /// When it expires; `None`: never.
    pub expires_at: Option<Timestamp>,
    /// Its sentence embedding, when a model is available.
    pub embedding: Option<Vec<f32>>,
}

/// What a caller gives to change a stored memory (a near-duplicate stored
/// again): the fields that are replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryUpdate {
    /// The memory's id.
    pub id: String,
    /// The new text.
    pub content: String,
    /// The new category, if any.
    pub category: Option<String>,
    /// The new certainty.
    pub certainty: f32,
    /// The new expiry.
    pub expires_at: Option<Timestamp>,
    /// The new embedding, when a model is available.
    pub embedding: Option<Vec<f32>>,
}

/// Which memories a listing or a recall considers (the store and the
/// recall index apply the same conditions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilter {
    /// Only this namespace.
    pub namespace: String,
    /// Only these layers; empty means all.
    pub layers: Vec<MemoryLayer>,
    /// Only this category (exact, case-insensitive).
    pub category: Option<String>,
    /// Only memories dated at or after this time.
    pub since: Option<Timestamp>,
    /// Only memories dated before this time.
    pub until: Option<Timestamp>,
    /// Leave out memories expired at this time.
    pub live_at: Option<Timestamp>,
    /// Include memories archived when their session ended.
    pub include_archived: bool,
    /// Session-layer memories only from this session.
    pub session_id: Option<String>,
}

/// What a recall index keeps of one memory: its key, its text and
/// embedding, and what filters look at.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryIndexRow {
    /// The memory's `seq`.
    pub seq: i64,
    /// Its text (what keyword ranking indexes).
    pub content: String,
    /// Its namespace.
    pub namespace: String,
    /// Its layer.
    pub layer: MemoryLayer,
    /// Its category.
    pub category: Option<String>,
    /// Its certainty.
    pub certainty: f32,
    /// Its session.
    pub session_id: Option<String>,
    /// Its date.
    pub created_at: Timestamp,
    /// Its expiry.
    pub expires_at: Option<Timestamp>,
    /// Whether it is archived.
    pub archived: bool,
    /// Its embedding, if it has one.
    pub embedding: Option<Vec<f32>>,
}

/// Memory rows changed since a revision: what an index must apply to
/// catch up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryChanges {
    /// The revision the changes bring the index to.
    pub rev: i64,
    /// Rows inserted or updated since (their latest state).
    pub upserts: Vec<MemoryIndexRow>,
    /// Keys of rows deleted since.
    pub deleted: Vec<i64>,
}

/// Counts for `satchel memory stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// The namespace counted.
    pub namespace: String,
    /// Memories stored, archived and expired ones included.
    pub total: u64,
    /// Memories per layer (live and archived).
    pub by_layer: std::collections::BTreeMap<String, u64>,
    /// Memories past their expiry, waiting to be purged.
    pub expired: u64,
    /// Memories archived when their session ended.
    pub archived: u64,
    /// Memories stored without an embedding (keyword recall only).
    pub without_embedding: u64,
    /// Sessions still open.
    pub open_sessions: u64,
    /// Sessions ever started.
    pub sessions: u64,
    /// The oldest and newest memory dates.
    pub oldest: Option<Timestamp>,
    /// See `oldest`.
    pub newest: Option<Timestamp>,
}

/// A span of a conversation's time that session-layer memories belong to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySession {
    /// Store-assigned id.
    pub id: String,
    /// Whose session it is.
    pub namespace: String,
    /// The conversation it belongs to, if any.
    pub conversation_id: Option<String>,
    /// A name given by the user, if any.
    pub name: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it ended; `None` while open.
    pub ended_at: Option<Timestamp>,
    /// Why it ended: `daily`, `weekly`, `user`, `model`...
    pub end_reason: Option<String>,
    /// The short-layer memory that summarises it, once written.
    pub summary_memory_id: Option<String>,
}

/// What a caller gives to start a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMemorySession {
    /// Whose session it is.
    pub namespace: String,
    /// The conversation it belongs to, if any.
    pub conversation_id: Option<String>,
    /// A name, if any.
    pub name: Option<String>,
    /// When it starts; `None`: the store's now.
    pub started_at: Option<Timestamp>,
}
