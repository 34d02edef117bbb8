//! The JSON endpoints every page reads (scripts can read them too).
//! Everything a model, a tool or a user wrote arrives either as plain
//! JSON strings (the page sets them as text) or as `*_html` fields made by
//! [`crate::render::markdown_html`], which are inert.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use satchel_builtins::code::{FailureSummary, code_stats};
use satchel_builtins::conversation::{Item, timeline};
use satchel_core::ToolCall;
use satchel_memory::{ListQuery, RecallQuery};
use satchel_store::{
    AuditQuery, AuditSource, AuditStore as _, CodeQuery, CodeStore as _, ConversationSearch,
    ConversationStore as _, LlmCallStore as _, LogKind, THINKING_SIDE, Timestamp,
};
use satchel_tools::Style;
use satchel_tools::usage::Resources;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::render::markdown_html;
use crate::state::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

fn not_found(what: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("no such {what}"))
}

type Answer = Result<Json<Value>, ApiError>;

async fn store(state: &AppState) -> Result<satchel_store::OpenedStore, ApiError> {
    Ok(state
        .host
        .store
        .get()
        .await
        .map_err(|reason| ApiError(StatusCode::SERVICE_UNAVAILABLE, reason))?
        .clone())
}

async fn memory_of(state: &AppState) -> Result<Arc<satchel_memory::Memory>, ApiError> {
    state
        .host
        .memory
        .get()
        .await
        .map_err(|reason| ApiError(StatusCode::SERVICE_UNAVAILABLE, reason))
}

fn millis(time: Timestamp) -> i64 {
    time.as_millis()
}

/// `?q=&limit=`
#[derive(Deserialize)]
pub(crate) struct ListParams {
    q: Option<String>,
    limit: Option<usize>,
}

/// Conversations, newest first; `q` matches titles, goals and text.
pub(crate) async fn conversations(
    State(state): Shared,
    Query(params): Query<ListParams>,
) -> Answer {
    let store = store(&state).await?;
    let limit = params.limit.unwrap_or(200).clamp(1, 1000);
    let all = store.list_conversations(limit).await?;
    let query = params.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let mut rows = Vec::new();
    for summary in all {
        let conversation = &summary.conversation;
        let mut matched = None;
        if let Some(query) = query {
            let lower = query.to_lowercase();
            let in_title = [&conversation.title, &conversation.goal]
                .iter()
                .any(|field| {
                    field
                        .as_deref()
                        .is_some_and(|text| text.to_lowercase().contains(&lower))
                });
            if !in_title {
                let hits = store
                    .search_conversation(ConversationSearch {
                        conversation_id: conversation.id.clone(),
                        text: query.to_owned(),
                        limit: 1,
                        skip_side_conversations: vec![THINKING_SIDE.to_owned()],
                    })
                    .await?;
                match hits.first() {
                    Some(satchel_store::SearchHit::ToolCall(_)) => matched = Some("a tool call"),
                    Some(satchel_store::SearchHit::LogEntry(_)) => matched = Some("the text"),
                    None => continue,
                }
            }
        }
        rows.push(json!({
            "id": conversation.id,
            "title": conversation.title,
            "goal": conversation.goal,
            "created_at": millis(conversation.created_at),
            "updated_at": millis(conversation.updated_at),
            "log_entries": summary.log_entries,
            "tool_calls": summary.tool_calls,
            "matched": matched,
        }));
    }
    Ok(Json(json!({"conversations": rows})))
}

/// One conversation: the log as the user saw it (tool calls through each
/// tool's own markdown formatter), side conversations apart, thinking,
/// and per model call the estimate beside the reported usage.
pub(crate) async fn conversation(State(state): Shared, Path(id): Path<String>) -> Answer {
    let store = store(&state).await?;
    let Some(dump) = store.dump_conversation(&id).await? else {
        return Err(not_found("conversation"));
    };
    let calls = store.llm_calls(&id).await?;
    let registry = state.host.shared_tools().await?.current();
    let seq_of: HashMap<&str, u32> = dump
        .statements
        .iter()
        .map(|s| (s.id.as_str(), s.seq))
        .collect();
    let events: Vec<Value> = timeline(&dump.log_entries, &dump.tool_calls, &dump.statements)
        .iter()
        .map(|event| match event.item {
            Item::Call(record) => {
                let (used, result) = match registry.get(&record.tool) {
                    Some(tool) => (
                        tool.format_use(&record.input, Style::Markdown),
                        tool.format_result(&record.output, Style::Markdown),
                    ),
                    None => (
                        satchel_tools::format::generic_use(
                            &record.tool,
                            &record.input,
                            Style::Markdown,
                        ),
                        satchel_tools::format::generic_result(&record.output, Style::Markdown),
                    ),
                };
                json!({
                    "n": event.n, "statement": event.statement, "kind": "tool_call",
                    "tool": record.tool, "is_error": record.output.is_error,
                    "error_code": record.output.error_code.map(|c| c.as_str()),
                    "duration_ms": record.duration_us / 1000,
                    "at": millis(record.started_at),
                    "use_html": markdown_html(&used), "result_html": markdown_html(&result),
                })
            }
            Item::Entry(entry) | Item::Unrecorded(entry) => json!({
                "n": event.n, "statement": event.statement, "kind": entry.kind.as_str(),
                "side": entry.side_conversation, "at": millis(entry.created_at),
                "html": markdown_html(&entry.text),
            }),
        })
        .collect();
    let thinking: Vec<Value> = dump
        .log_entries
        .iter()
        .filter(|entry| entry.side_conversation.as_deref() == Some(THINKING_SIDE))
        .map(|entry| {
            json!({
                "statement": entry.statement_id.as_deref().and_then(|id| seq_of.get(id)),
                "text": entry.text,
            })
        })
        .collect();
    let usage: Vec<Value> = calls
        .iter()
        .map(|record| {
            let call = &record.call;
            json!({
                "statement": call.statement_id.as_deref().and_then(|id| seq_of.get(id)),
                "turn": call.turn, "purpose": call.purpose, "model": call.model,
                "estimate_tokens": call.estimate_tokens, "context_window": call.context_window,
                "input_tokens": call.input_tokens, "output_tokens": call.output_tokens,
                "duration_ms": call.duration_ms, "error": call.error,
            })
        })
        .collect();
    // The files and URLs the conversation's calls touched: exact for the
    // file tools and `fetch`, estimated from commands for `bash`.
    let mut resources = Resources::for_project(&state.host.root);
    for record in dump.tool_calls.iter().filter(|r| !r.output.is_error) {
        let call = ToolCall {
            id: record.call_id.clone(),
            name: record.tool.clone(),
            input: record.input.clone(),
        };
        resources.add_call(registry.get(&record.tool).map(|t| t.spec()), &call);
    }
    let conversation = &dump.conversation;
    let errors = dump
        .log_entries
        .iter()
        .filter(|e| e.kind == LogKind::Error)
        .count();
    Ok(Json(json!({
        "conversation": {
            "id": conversation.id, "title": conversation.title, "goal": conversation.goal,
            "created_at": millis(conversation.created_at), "updated_at": millis(conversation.updated_at),
        },
        "statements": dump.statements.iter().map(|s| json!({"seq": s.seq, "objective": s.objective})).collect::<Vec<_>>(),
        "events": events,
        "thinking": thinking,
        "usage": usage,
        "resources": {
            "read": resources.read, "modified": resources.modified, "fetched": resources.fetched,
        },
        "errors": errors,
    })))
}

/// When a conversation last changed: what an open page polls to follow
/// statements made elsewhere (another tab, the REPL, Telegram).
pub(crate) async fn conversation_updated(State(state): Shared, Path(id): Path<String>) -> Answer {
    let store = store(&state).await?;
    let Some(conversation) = store.conversation(&id).await? else {
        return Err(not_found("conversation"));
    };
    Ok(Json(json!({"updated_at": millis(conversation.updated_at)})))
}

/// `?days=`
#[derive(Deserialize)]
pub(crate) struct DaysParams {
    days: Option<u32>,
}

/// The `code` tool's figures over the last days (as `/codestats`).
pub(crate) async fn code_stats_json(
    State(state): Shared,
    Query(params): Query<DaysParams>,
) -> Answer {
    let store = store(&state).await?;
    let days = params.days.unwrap_or(7).clamp(1, 365);
    let now = satchel_store::Clock::now(&satchel_store::SystemClock).as_millis();
    let executions = store
        .code_executions(CodeQuery {
            since: Some(Timestamp::from_millis(now - i64::from(days) * 86_400_000)),
            ..CodeQuery::default()
        })
        .await?;
    Ok(Json(
        json!({"days": days, "stats": code_stats(&executions)}),
    ))
}

/// `?n=`
#[derive(Deserialize)]
pub(crate) struct CountParams {
    n: Option<usize>,
}

/// The latest failed code runs, with their code and stderr.
pub(crate) async fn code_failures(
    State(state): Shared,
    Query(params): Query<CountParams>,
) -> Answer {
    let store = store(&state).await?;
    let rows = store
        .code_executions(CodeQuery {
            failed_only: true,
            limit: Some(params.n.unwrap_or(20).clamp(1, 200)),
            ..CodeQuery::default()
        })
        .await?;
    let failures: Vec<Value> = rows
        .iter()
        .rev()
        .map(|row| {
            json!({
                "summary": FailureSummary::of(row),
                "code": row.code, "stderr": row.stderr, "exit_code": row.exit_code,
                "duration_ms": row.duration_ms,
            })
        })
        .collect();
    Ok(Json(json!({"failures": failures})))
}

/// `?q=&layer=`
#[derive(Deserialize)]
pub(crate) struct MemoryParams {
    q: Option<String>,
    layer: Option<String>,
}

/// Memory: counts by layer, the embedding backlog, and the memories of a
/// layer or those a query recalls (with relevance).
pub(crate) async fn memory(State(state): Shared, Query(params): Query<MemoryParams>) -> Answer {
    let memory = memory_of(&state).await?;
    let stats = memory.stats().await?;
    let layers = match params.layer.as_deref().filter(|l| !l.is_empty()) {
        Some(layer) => vec![
            satchel_store::MemoryLayer::parse(layer)
                .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, format!("no layer `{layer}`")))?,
        ],
        None => Vec::new(),
    };
    let (memories, semantic) = match params.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(query) => {
            let recall = memory
                .recall(RecallQuery {
                    layers,
                    limit: 50,
                    ..RecallQuery::new(query)
                })
                .await?;
            let rows = recall
                .memories
                .iter()
                .map(|r| json!({"memory": r.memory, "relevance": r.relevance}))
                .collect::<Vec<_>>();
            (rows, Some(recall.semantic))
        }
        None => {
            let list = memory
                .list(
                    ListQuery {
                        layers,
                        limit: 200,
                        ..ListQuery::default()
                    },
                    None,
                )
                .await?;
            (
                list.into_iter().map(|m| json!({"memory": m})).collect(),
                None,
            )
        }
    };
    Ok(Json(
        json!({"stats": stats, "memories": memories, "semantic": semantic}),
    ))
}

/// Forgets one memory (the page asks for confirmation first).
pub(crate) async fn forget(State(state): Shared, Path(id): Path<String>) -> Answer {
    let memory = memory_of(&state).await?;
    memory
        .forget(&id)
        .await
        .map_err(|error| ApiError(StatusCode::NOT_FOUND, error.to_string()))?;
    Ok(Json(json!({"forgotten": id})))
}

/// The background processes of every conversation (`bash` with
/// `background: true`), oldest first.
pub(crate) async fn processes(State(state): Shared) -> Answer {
    let rows: Vec<Value> = state
        .host
        .processes
        .list_all()
        .iter()
        .map(|(owner, info)| {
            let mut row = satchel_builtins::process::info_json(info);
            if let Value::Object(map) = &mut row {
                map.insert("conversation".into(), json!(owner));
            }
            row
        })
        .collect();
    Ok(Json(json!({"processes": rows})))
}

/// Ends a background process and everything it started.
pub(crate) async fn kill_process(State(state): Shared, Path(id): Path<String>) -> Answer {
    let process = state.host.processes.find(&id).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            format!("no background process `{id}`"),
        )
    })?;
    let ended = process.kill().await;
    Ok(Json(json!({"process_id": id, "state": ended.describe()})))
}

/// `?tool=&source=&failed=&since=&limit=`
#[derive(Deserialize)]
pub(crate) struct AuditParams {
    tool: Option<String>,
    source: Option<String>,
    failed: Option<bool>,
    /// An age like `1d`, `2h`.
    since: Option<String>,
    limit: Option<usize>,
}

/// The audit trail, filtered.
pub(crate) async fn audit(State(state): Shared, Query(params): Query<AuditParams>) -> Answer {
    let store = store(&state).await?;
    let source = match params.source.as_deref().filter(|s| !s.is_empty()) {
        Some(name) => Some(
            AuditSource::parse(name)
                .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, format!("no source `{name}`")))?,
        ),
        None => None,
    };
    let since = match params.since.as_deref().filter(|s| !s.is_empty()) {
        Some(age) => {
            let age = satchel_store::parse_age(age).ok_or_else(|| {
                ApiError(
                    StatusCode::BAD_REQUEST,
                    format!("`{age}` is not an age like 2h or 7d"),
                )
            })?;
            Some(satchel_store::Clock::now(&satchel_store::SystemClock).saturating_sub(age))
        }
        None => None,
    };
    let rows = store
        .audit(AuditQuery {
            tool: params.tool.filter(|t| !t.is_empty()),
            source,
            since,
            failed_only: params.failed.unwrap_or(false),
            limit: Some(params.limit.unwrap_or(500).clamp(1, 5000)),
        })
        .await?;
    Ok(Json(json!({"rows": rows})))
}
