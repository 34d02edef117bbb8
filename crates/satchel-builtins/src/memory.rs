//! The `memory` tool: store, recall, list and forget memories in four
//! layers, through the [`Memory`] its host hands it as a [`MemoryHandle`]
//! (in [`BuiltinDeps::memory`](crate::BuiltinDeps::memory)), opened on first use.
//!
//! Without a handle, or when the handle cannot open the memory (no
//! database), the tool is still listed and answers every call with an error
//! that says why, so the model learns that memory is unavailable rather
//! than that the tool does not exist.

use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use satchel_memory::{
    ListQuery, Memory, MemoryError, MemoryLayer, MemoryRecord, RecallQuery, StoreRequest, Stored,
};
use satchel_store::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, paint, truncate_chars};
use satchel_tools::{Tool, ToolContext, ToolError};

/// Results when the input gives no limit.
pub const DEFAULT_LIMIT: usize = 10;
/// Characters of a memory shown in one line for a person.
const PREVIEW_CHARS: usize = 100;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    Store,
    Recall,
    List,
    Forget,
}

#[derive(Debug, Deserialize)]
struct MemoryInput {
    action: Action,
    layer: Option<MemoryLayer>,
    content: Option<String>,
    category: Option<String>,
    certainty: Option<f32>,
    query: Option<String>,
    limit: Option<usize>,
    memory_id: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// Where the tool finds its memory, opened on first use (so a command
/// that never touches memory never creates a database or loads the model).
#[async_trait]
pub trait MemoryHandle: Send + Sync {
    /// The memory, or why there is none.
    async fn memory(&self) -> Result<Arc<Memory>, String>;

    /// The memories of `namespace` (a conversation's own), or of the
    /// configured namespace for `None`.
    async fn memory_in(&self, namespace: Option<&str>) -> Result<Arc<Memory>, String> {
        let memory = self.memory().await?;
        Ok(match namespace {
            Some(namespace) if namespace != memory.config().namespace => {
                Arc::new(memory.in_namespace(namespace))
            }
            _ => memory,
        })
    }
}

/// A memory that is already open.
pub struct OpenMemory(pub Arc<Memory>);

#[async_trait]
impl MemoryHandle for OpenMemory {
    async fn memory(&self) -> Result<Arc<Memory>, String> {
        Ok(self.0.clone())
    }
}

/// The memory tool; see the module docs.
pub struct MemoryTool {
    spec: ToolSpec,
    memory: Option<Arc<dyn MemoryHandle>>,
}

impl MemoryTool {
    /// The tool, working on `memory` (every call is an error without one).
    pub fn new(memory: Option<Arc<dyn MemoryHandle>>) -> MemoryTool {
        MemoryTool {
            spec: spec(),
            memory,
        }
    }

    async fn memory(&self, namespace: Option<&str>) -> Result<Arc<Memory>, ToolError> {
        let opened = match &self.memory {
            Some(handle) => handle.memory_in(namespace).await,
            None => Err("no database is configured".into()),
        };
        opened.map_err(|reason| {
            ToolError::new(
                ErrorCode::ToolUnavailable,
                format!(
                    "memory is unavailable in this session ({reason}); \
                     carry on without storing or recalling memories"
                ),
            )
        })
    }
}

fn spec() -> ToolSpec {
    let layer = json!({
        "type": "string",
        "enum": ["long", "mid", "short", "session"]
    });
    ToolSpec {
        name: "memory".into(),
        title: Some("Memory".into()),
        description: "Remember across conversations. Layers: long (facts, preferences, relationships; \
            kept), mid (goals, plans, projects; 90 days), short (recent context; 14 days), session. \
            `store` a near-duplicate and it is updated. `recall` ranks by meaning and keywords. \
            Store `__NEW_SESSION__` (category `system`) to start a session."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["store", "recall", "list", "forget"]},
                "layer": layer,
                "content": {"type": "string", "minLength": 1, "description": "What to remember (store)"},
                "category": {"type": "string", "minLength": 1, "maxLength": 40,
                             "description": "e.g. fact, preference, goal, plan; or free text"},
                "certainty": {"type": "number", "minimum": 0, "maximum": 1, "default": 1,
                              "description": "0 to 1"},
                "query": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": satchel_memory::MAX_LIMIT, "default": DEFAULT_LIMIT},
                "memory_id": {"type": "string", "minLength": 1},
                "since": {"type": "string", "description": "From: RFC 3339, YYYY-MM-DD or an age like 7d"},
                "until": {"type": "string", "description": "Before: same forms"}
            },
            "required": ["action"],
            "additionalProperties": false,
            // Per action, as an if/else chain: no combinator at the root,
            // which the Anthropic API and Claude Code refuse.
            "if": {"properties": {"action": {"const": "store"}}},
            "then": {"required": ["layer", "content"]},
            "else": {
                "if": {"properties": {"action": {"const": "recall"}}},
                "then": {"required": ["query"]},
                "else": {
                    "if": {"properties": {"action": {"const": "forget"}}},
                    "then": {"required": ["memory_id"]}
                }
            }
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "success": {"type": "boolean"},
                "action": {"type": "string", "description": "created, updated, new_session, recalled, listed, forgotten"},
                "message": {"type": "string"},
                "notice": {"type": "string"},
                "memories": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "layer": {"type": "string"},
                        "content": {"type": "string"},
                        "category": {"type": ["string", "null"]},
                        "certainty": {"type": "number"},
                        "created_at": {"type": "string"},
                        "relevance": {"type": ["number", "null"]}
                    },
                    "required": ["id", "layer", "content", "category", "certainty", "created_at", "relevance"]
                }}
            },
            "required": ["success", "memories"]
        })),
        annotations: ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::MEMORY],
            writes: vec![Resource::MEMORY],
        },
    }
}

/// A memory as the model gets it.
pub fn memory_json(memory: &MemoryRecord, relevance: Option<f32>) -> Value {
    json!({
        "id": memory.id,
        "layer": memory.layer,
        "content": memory.content,
        "category": memory.category,
        "certainty": (f64::from(memory.certainty) * 1000.0).round() / 1000.0,
        "created_at": memory.created_at,
        "relevance": relevance.map(|r| (f64::from(r) * 1000.0).round() / 1000.0),
    })
}

/// Parses a time bound: RFC 3339, `YYYY-MM-DD` (UTC midnight), or an age
/// back from `now` (`30m`, `12h`, `7d`, `2w`; see `parse_age`).
pub fn parse_time_bound(text: &str, now: Timestamp) -> Option<Timestamp> {
    let text = text.trim();
    if let Some(time) = Timestamp::parse_rfc3339(text) {
        return Some(time);
    }
    if let Some(time) = Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z")) {
        return Some(time);
    }
    let age = i64::try_from(satchel_store::parse_age(text)?.as_millis()).ok()?;
    Some(Timestamp::from_millis(now.as_millis().checked_sub(age)?))
}

fn tool_error(error: MemoryError) -> ToolError {
    match error {
        MemoryError::Invalid(message) => ToolError::new(ErrorCode::InvalidParams, message),
        MemoryError::NotFound(id) => ToolError::new(
            ErrorCode::InvalidParams,
            format!("no memory with id `{id}`; use recall or list to find memory ids"),
        ),
        other => ToolError::new(ErrorCode::ToolCrashed, format!("memory failed: {other}")),
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidParams, message)
}

fn bound(text: Option<&str>, name: &str) -> Result<Option<Timestamp>, ToolError> {
    text.map(|text| {
        parse_time_bound(text, satchel_store::Clock::now(&satchel_store::SystemClock))
            .ok_or_else(|| {
                invalid(format!(
                    "{name} `{text}` is not a time: use RFC 3339 (2025-01-02T03:04:05Z), YYYY-MM-DD or an age like 7d"
                ))
            })
    })
    .transpose()
}

#[async_trait]
impl Tool for MemoryTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: MemoryInput = serde_json::from_value(input)
            .map_err(|error| invalid(format!("invalid memory input: {error}")))?;
        let memory = self.memory(ctx.memory_namespace.as_deref()).await?;
        let conversation = ctx.conversation_id.clone();
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
        match input.action {
            Action::Store => {
                let (Some(layer), Some(content)) = (input.layer, input.content) else {
                    return Err(invalid("store needs `layer` and `content`"));
                };
                let stored = memory
                    .store(StoreRequest {
                        layer,
                        content,
                        category: input.category,
                        certainty: input.certainty,
                        conversation_id: conversation,
                        created_at: None,
                    })
                    .await
                    .map_err(tool_error)?;
                Ok(store_output(stored))
            }
            Action::Recall => {
                let Some(query) = input.query else {
                    return Err(invalid("recall needs `query`"));
                };
                let recall = memory
                    .recall(RecallQuery {
                        text: query.clone(),
                        layers: input.layer.into_iter().collect(),
                        category: input.category,
                        since: bound(input.since.as_deref(), "since")?,
                        until: bound(input.until.as_deref(), "until")?,
                        limit,
                        conversation_id: conversation,
                        as_of: None,
                    })
                    .await
                    .map_err(tool_error)?;
                let memories: Vec<Value> = recall
                    .memories
                    .iter()
                    .map(|r| memory_json(&r.memory, Some(r.relevance)))
                    .collect();
                let mut results =
                    json!({"success": true, "action": "recalled", "memories": memories});
                if let Some(notice) = &recall.notice {
                    results["notice"] = json!(notice);
                }
                let how = if recall.semantic {
                    "by meaning and keywords"
                } else {
                    "by keywords only"
                };
                let user_message = format!(
                    "recalled {} for \"{}\" ({how})",
                    satchel_tools::format::plural(recall.memories.len(), "memory", "memories"),
                    truncate_chars(&query, 60)
                );
                Ok(ToolOutput::success(
                    ToolResults::json(results),
                    user_message,
                ))
            }
            Action::List => {
                let listed = memory
                    .list(
                        ListQuery {
                            layers: input.layer.into_iter().collect(),
                            category: input.category,
                            since: bound(input.since.as_deref(), "since")?,
                            until: bound(input.until.as_deref(), "until")?,
                            limit,
                            include_inactive: false,
                        },
                        conversation.as_deref(),
                    )
                    .await
                    .map_err(tool_error)?;
                let memories: Vec<Value> = listed.iter().map(|m| memory_json(m, None)).collect();
                let user_message = format!(
                    "listed {}",
                    satchel_tools::format::plural(memories.len(), "memory", "memories")
                );
                Ok(ToolOutput::success(
                    ToolResults::json(
                        json!({"success": true, "action": "listed", "memories": memories}),
                    ),
                    user_message,
                ))
            }
            Action::Forget => {
                let Some(id) = input.memory_id else {
                    return Err(invalid("forget needs `memory_id`"));
                };
                memory.forget(&id).await.map_err(tool_error)?;
                Ok(ToolOutput::success(
                    ToolResults::json(json!({
                        "success": true, "action": "forgotten", "memories": [],
                        "message": format!("memory {id} was deleted for good")
                    })),
                    format!("forgot memory {id}"),
                ))
            }
        }
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
        let action = field("action");
        let detail = match action {
            "store" => format!(
                "{} {}",
                field("layer"),
                truncate_chars(field("content"), PREVIEW_CHARS)
            ),
            "recall" => format!("\"{}\"", truncate_chars(field("query"), PREVIEW_CHARS)),
            "forget" => field("memory_id").to_owned(),
            _ => field("layer").to_owned(),
        };
        match style {
            Style::Terminal { .. } => format!(
                "{} {}",
                paint(style, "2", &format!("memory {action}")),
                paint(style, "1", &detail)
            ),
            Style::Markdown => format!("memory {action}: **{detail}**"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let Some(memories) = output
            .results
            .structured()
            .and_then(|v| v.get("memories"))
            .and_then(Value::as_array)
        else {
            return satchel_tools::format::generic_result(output, style);
        };
        let mut lines = Vec::new();
        for memory in memories {
            let field = |key: &str| memory.get(key).and_then(Value::as_str).unwrap_or_default();
            let relevance = memory
                .get("relevance")
                .and_then(Value::as_f64)
                .map(|r| format!(" {r:.2}"))
                .unwrap_or_default();
            let label = format!("[{}{relevance}]", field("layer"));
            let text = truncate_chars(field("content"), PREVIEW_CHARS);
            lines.push(match style {
                Style::Terminal { .. } => format!("{} {text}", paint(style, "2", &label)),
                Style::Markdown => format!("- {label} {text}"),
            });
        }
        lines.push(paint(style, "2", &output.user_message));
        lines.join("\n")
    }
}

fn store_output(stored: Stored) -> ToolOutput {
    match stored {
        Stored::Created(memory) => {
            let user_message = format!(
                "stored a {} memory: {}",
                memory.layer,
                truncate_chars(&memory.content, 60)
            );
            ToolOutput::success(
                ToolResults::json(json!({
                    "success": true, "action": "created",
                    "memories": [memory_json(&memory, None)]
                })),
                user_message,
            )
        }
        Stored::Updated {
            memory,
            previous_content,
            similarity,
        } => {
            let message = format!(
                "a memory of the same layer already said nearly this (similarity {similarity:.2}); it was updated instead of adding a copy. It said: {previous_content}"
            );
            ToolOutput::success(
                ToolResults::json(json!({
                    "success": true, "action": "updated", "message": message,
                    "memories": [memory_json(&memory, None)]
                })),
                format!("updated memory {} (near-duplicate)", memory.id),
            )
        }
        Stored::NewSession(change) => {
            let mut parts = Vec::new();
            if let Some(ended) = &change.ended {
                parts.push(format!(
                    "ended session {} ({} memories archived)",
                    ended.id, change.archived
                ));
            }
            if let Some(summary) = &change.summary {
                parts.push(format!("summary stored as {}", summary.id));
            } else if let Some(reason) = &change.summary_skipped {
                parts.push(format!("no summary: {reason}"));
            }
            if let Some(started) = &change.started {
                parts.push(format!("started session {}", started.id));
            }
            let message = parts.join("; ");
            let memories: Vec<Value> = change
                .summary
                .iter()
                .map(|m| memory_json(m, None))
                .collect();
            ToolOutput::success(
                ToolResults::json(json!({
                    "success": true, "action": "new_session", "message": message,
                    "memories": memories
                })),
                format!("new memory session: {message}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn time_bounds_take_dates_times_and_ages() {
        let now = Timestamp::parse_rfc3339("2025-01-10T00:00:00Z").unwrap();
        assert_eq!(
            parse_time_bound("2025-01-02", now),
            Timestamp::parse_rfc3339("2025-01-02T00:00:00Z")
        );
        assert_eq!(
            parse_time_bound("2025-01-02T03:04:05Z", now),
            Timestamp::parse_rfc3339("2025-01-02T03:04:05Z")
        );
        assert_eq!(
            parse_time_bound("7d", now),
            Timestamp::parse_rfc3339("2025-01-03T00:00:00Z")
        );
        assert_eq!(parse_time_bound("soon", now), None);
        assert_eq!(parse_time_bound("7y", now), None);
    }

    #[test]
    fn the_schema_requires_what_each_action_needs() {
        let validator = jsonschema::validator_for(&spec().input_schema).unwrap();
        assert!(validator.is_valid(&json!({"action": "store", "layer": "long", "content": "x"})));
        assert!(!validator.is_valid(&json!({"action": "store", "content": "x"})));
        assert!(
            !validator.is_valid(&json!({"action": "store", "layer": "forever", "content": "x"}))
        );
        assert!(!validator.is_valid(&json!({"action": "recall"})));
        assert!(!validator.is_valid(&json!({"action": "forget"})));
        assert!(!validator.is_valid(
            &json!({"action": "store", "layer": "long", "content": "x", "certainty": 1.5})
        ));
        assert!(validator.is_valid(&json!({"action": "list"})));
    }
}
