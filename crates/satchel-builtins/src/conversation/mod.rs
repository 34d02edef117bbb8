//! The `conversation` tool: the model reads its own conversation's record
//! from the store, including what the history no longer holds (summarised
//! statements, results cut to `toolResultMaxLength`).
//!
//! Actions: `timeline` (events, tool results cut exactly as the history
//! cuts them, with the length in force at call time), `tool_call` (one
//! call's whole stored output), `stats` (counts, per-tool use, resources,
//! tokens of the last turn's request) and `search` (the store's full-text
//! index). Answers are compact JSON. Only the conversation the call is
//! made in (`ToolContext::conversation_id`) is ever read.
//!
//! `timeline` (the events and how a selection is made) is shared with the
//! REPL's `/history`.

pub mod timeline;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use satchel_store::{
    ConversationSearch, LlmCallRecord, LogEntry, SearchHit, Statement, Store, StoreError,
    ToolCallRecord,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub use self::timeline::{Event, Item, select, timeline};
pub use satchel_store::THINKING_SIDE;
use satchel_tools::format::{Style, call_summary, cut_chars, paint, past_result};
use satchel_tools::usage::{Resources, ToolTally};
use satchel_tools::{Tool, ToolContext, ToolError};

/// Largest timeline answer, in characters: past it the oldest events of
/// the selection are left out (and the answer says how many).
pub const MAX_TIMELINE_CHARS: usize = 40_000;
/// Matches a search returns when the call gives no `limit`.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Items listed per kind of resource in `stats`.
const MAX_LISTED_RESOURCES: usize = 100;
/// The resource the tool reads, for scheduling.
const RECORD: &str = "conversation";

/// Where the tool reads the record, opened on first use (so a command that
/// never reads it never creates a database).
#[async_trait]
pub trait RecordsHandle: Send + Sync {
    /// The store, or why there is none.
    async fn records(&self) -> Result<Arc<dyn Store>, String>;
}

/// A store that is already open.
pub struct OpenRecords(pub Arc<dyn Store>);

#[async_trait]
impl RecordsHandle for OpenRecords {
    async fn records(&self) -> Result<Arc<dyn Store>, String> {
        Ok(self.0.clone())
    }
}

/// The tool; see the module docs.
pub struct ConversationTool {
    spec: ToolSpec,
    records: Option<Arc<dyn RecordsHandle>>,
}

impl ConversationTool {
    /// The tool, reading from `records` (every call fails without one).
    pub fn new(records: Option<Arc<dyn RecordsHandle>>) -> ConversationTool {
        ConversationTool {
            spec: spec(),
            records,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    action: Action,
    statement: Option<u32>,
    limit: Option<usize>,
    id: Option<String>,
    query: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    Timeline,
    ToolCall,
    Stats,
    Search,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "conversation".into(),
        title: Some("Conversation record".into()),
        description: "Read this conversation's own record, summarised turns included: \"timeline\" \
                      (events; results cut as in your history), \"tool_call\" (one call's whole \
                      result, by id), \"stats\" (counts, tool use, resources, tokens) or \"search\"."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["timeline", "tool_call", "stats", "search"]},
                "statement": {"type": "integer", "minimum": 1, "description": "Only this statement (timeline)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Last N events, or N matches"},
                "id": {"type": "string", "minLength": 1, "description": "Call id (tool_call)"},
                "query": {"type": "string", "minLength": 1, "description": "Words, all required; word* for a prefix"}
            },
            "required": ["action"],
            "additionalProperties": false,
            // Per action, as an if/else chain: no combinator at the root,
            // which the Anthropic API and Claude Code refuse.
            "if": {"properties": {"action": {"const": "tool_call"}}},
            "then": {"required": ["id"]},
            "else": {
                "if": {"properties": {"action": {"const": "search"}}},
                "then": {"required": ["query"]}
            }
        }),
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::named(RECORD)],
            writes: vec![],
        },
    }
}

/// What the actions read of one conversation.
struct Record {
    id: String,
    statements: Vec<Statement>,
    log: Vec<LogEntry>,
    calls: Vec<ToolCallRecord>,
}

impl Record {
    async fn read(store: &dyn Store, id: &str) -> Result<Record, StoreError> {
        let (statements, log, calls) = tokio::try_join!(
            store.statements(id),
            store.log_entries(id),
            store.tool_calls(id)
        )?;
        Ok(Record {
            id: id.to_owned(),
            statements,
            log,
            calls,
        })
    }
}

fn store_error(error: StoreError) -> ToolError {
    ToolError::new(
        ErrorCode::ToolCrashed,
        format!("reading the conversation's record failed: {error}"),
    )
}

#[async_trait]
impl Tool for ConversationTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: Input = serde_json::from_value(input).map_err(|error| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("invalid conversation input: {error}"),
            )
        })?;
        let Some(conversation_id) = ctx.conversation_id.as_deref() else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                "this call is not part of a conversation (a one-off `satchel tools call` or an \
                 MCP client), so there is no record to read",
            ));
        };
        let store = match &self.records {
            Some(handle) => handle.records().await,
            None => Err("no database is configured".to_owned()),
        }
        .map_err(|reason| {
            ToolError::new(
                ErrorCode::ToolCrashed,
                format!("the conversation's record cannot be read: {reason}"),
            )
        })?;
        let record = Record::read(store.as_ref(), conversation_id)
            .await
            .map_err(store_error)?;
        let max_chars = ctx.config.tool_result_max_length;
        let (answer, response, user_message) = match input.action {
            Action::Timeline => {
                let events = timeline(&record.log, &record.calls, &record.statements);
                let chosen = select(&events, input.statement, input.limit);
                let (answer, omitted) = timeline_answer(&record, &events, &chosen, max_chars);
                let shown = chosen.len() - omitted;
                let response = (omitted > 0).then(|| {
                    format!(
                        "The {omitted} oldest events of this selection were left out to keep the \
                         answer short; ask for a `statement` or a smaller `limit`."
                    )
                });
                let message = format!(
                    "read {shown} of {} events of this conversation",
                    events.len()
                );
                (answer, response, message)
            }
            Action::ToolCall => {
                let wanted = input.id.unwrap_or_default();
                let call = find_call(store.as_ref(), &record, &wanted).await?;
                let message = format!(
                    "recovered the whole result of {} call {}",
                    call.tool, call.id
                );
                (tool_call_answer(&record, call), None, message)
            }
            Action::Stats => {
                let usage = store
                    .llm_calls(conversation_id)
                    .await
                    .map_err(store_error)?;
                let answer = stats_answer(&record, &usage, ctx);
                (
                    answer,
                    None,
                    "counted this conversation's record".to_owned(),
                )
            }
            Action::Search => {
                let query = input.query.unwrap_or_default();
                let limit = input.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
                let hits = store
                    .search_conversation(ConversationSearch {
                        conversation_id: conversation_id.to_owned(),
                        text: query.clone(),
                        limit,
                        skip_side_conversations: vec![THINKING_SIDE.to_owned()],
                    })
                    .await
                    .map_err(store_error)?;
                let events = timeline(&record.log, &record.calls, &record.statements);
                let found: Vec<Value> = hits
                    .iter()
                    .filter_map(|hit| hit_json(&record, &events, hit, max_chars))
                    .collect();
                let message = format!(
                    "searched this conversation for \"{query}\": {} {}",
                    found.len(),
                    if found.len() == 1 { "match" } else { "matches" }
                );
                (json!({"query": query, "matches": found}), None, message)
            }
        };
        let mut output = ToolOutput::success(ToolResults::json(answer), user_message);
        output.response = response;
        Ok(output)
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        let number = |key: &str| input.get(key).and_then(Value::as_u64);
        let detail = match field("action") {
            "timeline" => match (number("statement"), number("limit")) {
                (Some(s), Some(n)) => format!("timeline of statement {s}, last {n} events"),
                (Some(s), None) => format!("timeline of statement {s}"),
                (None, Some(n)) => format!("timeline, last {n} events"),
                (None, None) => "timeline".to_owned(),
            },
            "tool_call" => format!("tool call {}", field("id")),
            "search" => format!("search \"{}\"", field("query")),
            other => other.to_owned(),
        };
        let text = format!("conversation: {detail}");
        match style {
            Style::Terminal { .. } => paint(style, "1", &text),
            Style::Markdown => format!("`{text}`"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let (mark, colour) = if output.is_error {
            ("✗", "31")
        } else {
            ("✓", "32")
        };
        format!("{} {}", paint(style, colour, mark), output.user_message)
    }
}

/// The selected events as JSON, oldest dropped past [`MAX_TIMELINE_CHARS`];
/// returns how many were dropped.
fn timeline_answer(
    record: &Record,
    events: &[Event<'_>],
    chosen: &[&Event<'_>],
    max_chars: usize,
) -> (Value, usize) {
    let rendered: Vec<Value> = chosen.iter().map(|e| event_json(e, max_chars)).collect();
    let sizes: Vec<usize> = rendered.iter().map(|v| v.to_string().len() + 1).collect();
    let mut total: usize = sizes.iter().sum();
    let mut omitted = 0;
    while total > MAX_TIMELINE_CHARS && omitted + 1 < rendered.len() {
        total -= sizes[omitted];
        omitted += 1;
    }
    let mut answer = json!({
        "conversation": record.id,
        "total_events": events.len(),
        "events": rendered[omitted..],
    });
    if omitted > 0 {
        answer["omitted"] = json!(omitted);
    }
    (answer, omitted)
}

/// One event as the model reads it.
fn event_json(event: &Event<'_>, max_chars: usize) -> Value {
    let mut object = Map::new();
    object.insert("n".into(), json!(event.n));
    object.insert("id".into(), json!(event.id()));
    if let Some(statement) = event.statement {
        object.insert("statement".into(), json!(statement));
    }
    match event.item {
        Item::Entry(entry) => {
            object.insert("type".into(), json!(entry.kind.as_str()));
            if let Some(side) = &entry.side_conversation {
                object.insert("side".into(), json!(side));
            }
            object.insert("text".into(), json!(entry.text));
        }
        Item::Call(record) => call_fields(&mut object, record, max_chars),
        Item::Unrecorded(entry) => {
            object.insert("type".into(), json!("tool_call"));
            object.insert("shown".into(), json!(cut_chars(&entry.text, max_chars)));
            object.insert("unrecorded".into(), json!(true));
        }
    }
    Value::Object(object)
}

/// A call as the history shows it: `name(args)` and the result cut to
/// `max_chars` (see [`past_result`]).
fn call_fields(object: &mut Map<String, Value>, record: &ToolCallRecord, max_chars: usize) {
    object.insert("type".into(), json!("tool_call"));
    if let Some(turn) = record.turn {
        object.insert("turn".into(), json!(turn));
    }
    object.insert(
        "call".into(),
        json!(call_summary(&record.tool, &record.input)),
    );
    object.insert(
        "result".into(),
        json!(past_result(&record.output, max_chars)),
    );
    if record.output.is_error {
        object.insert("is_error".into(), json!(true));
    }
}

/// A search hit as its event, or as a bare call when its call has no log
/// entry; `None` for a hit the timeline leaves out.
fn hit_json(
    record: &Record,
    events: &[Event<'_>],
    hit: &SearchHit,
    max_chars: usize,
) -> Option<Value> {
    let id = match hit {
        SearchHit::LogEntry(id) | SearchHit::ToolCall(id) => id,
    };
    if let Some(event) = events.iter().find(|event| event.id() == id) {
        return Some(event_json(event, max_chars));
    }
    let SearchHit::ToolCall(id) = hit else {
        return None;
    };
    let call = record.calls.iter().find(|call| &call.id == id)?;
    let mut object = Map::new();
    object.insert("id".into(), json!(call.id));
    call_fields(&mut object, call, max_chars);
    Some(Value::Object(object))
}

/// The call `wanted` names: a record id (refused when it belongs to
/// another conversation) or, failing that, the model's id of a call in
/// this conversation (the latest, should prompted mode have reused it).
async fn find_call<'r>(
    store: &dyn Store,
    record: &'r Record,
    wanted: &str,
) -> Result<&'r ToolCallRecord, ToolError> {
    if let Some(call) = record.calls.iter().find(|call| call.id == wanted) {
        return Ok(call);
    }
    if let Some(call) = record
        .calls
        .iter()
        .rev()
        .find(|call| call.call_id == wanted)
    {
        return Ok(call);
    }
    if store
        .tool_call(wanted)
        .await
        .map_err(store_error)?
        .is_some()
    {
        return Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "call {wanted} belongs to another conversation (or to none); this tool reads only \
                 the conversation it is called in"
            ),
        ));
    }
    Err(ToolError::new(
        ErrorCode::InvalidParams,
        format!(
            "this conversation has no call with id {wanted}; the timeline gives each call's id"
        ),
    ))
}

/// One call whole: input as given, results as stored (the JSON value for
/// structured results, else their text) and the tool's note.
fn tool_call_answer(record: &Record, call: &ToolCallRecord) -> Value {
    let statement = call
        .statement_id
        .as_deref()
        .and_then(|id| record.statements.iter().find(|s| s.id == id).map(|s| s.seq));
    let result = match call.output.results.structured() {
        Some(value) => value.clone(),
        None => json!(call.output.results.to_text()),
    };
    let mut answer = json!({
        "id": call.id,
        "call_id": call.call_id,
        "tool": call.tool,
        "statement": statement,
        "turn": call.turn,
        "input": call.input,
        "result": result,
        "is_error": call.output.is_error,
    });
    if let Some(note) = &call.output.response {
        answer["note"] = json!(note);
    }
    if let Some(code) = call.output.error_code {
        answer["error_code"] = json!(code);
    }
    answer
}

/// Counts from the rows: events, statements, turns (`turn` requests),
/// calls; per-tool successes and failures; resources read, modified and
/// fetched by successful calls (as the feedback block counts them); the
/// last turn request's token figures.
fn stats_answer(record: &Record, usage: &[LlmCallRecord], ctx: &ToolContext) -> Value {
    let events = timeline(&record.log, &record.calls, &record.statements);
    let mut tally = ToolTally::default();
    let mut resources = Resources::for_project(&ctx.working_dir);
    for call in &record.calls {
        tally.add(&call.tool, call.output.is_error);
        if !call.output.is_error {
            let spec = ctx
                .registry
                .as_ref()
                .and_then(|registry| registry.get(&call.tool))
                .map(|tool| tool.spec());
            resources.add_call(spec, &call.call());
        }
    }
    let tools: Vec<Value> = tally
        .entries()
        .map(|(tool, ok, failed)| json!({"tool": tool, "calls": ok + failed, "ok": ok, "failed": failed}))
        .collect();
    let turns: Vec<&LlmCallRecord> = usage.iter().filter(|u| u.call.purpose == "turn").collect();
    let tokens = turns.last().map(|last| {
        json!({
            "estimate": last.call.estimate_tokens,
            "reported_input": last.call.input_tokens,
            "context_window": last.call.context_window,
        })
    });
    json!({
        "conversation": record.id,
        "events": events.len(),
        "statements": record.statements.len(),
        "turns": turns.len(),
        "tool_calls": record.calls.len(),
        "tools": tools,
        "resources": {
            "summary": resources.describe(),
            "read": listed(&resources.read),
            "modified": listed(&resources.modified),
            "fetched": listed(&resources.fetched),
        },
        "tokens": tokens,
    })
}

/// At most [`MAX_LISTED_RESOURCES`] names, then how many more.
fn listed(names: &BTreeSet<String>) -> Vec<String> {
    let mut list: Vec<String> = names.iter().take(MAX_LISTED_RESOURCES).cloned().collect();
    if names.len() > MAX_LISTED_RESOURCES {
        list.push(format!("... {} more", names.len() - MAX_LISTED_RESOURCES));
    }
    list
}
