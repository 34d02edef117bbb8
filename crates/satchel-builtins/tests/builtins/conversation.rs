//! The `conversation` tool over a real SQLite store: the timeline cut at
//! the `toolResultMaxLength` of each call's config, a call recovered whole
//! (by record id or the model's id), ids of other conversations refused,
//! stats that match the rows, search hits in tool results, and a call
//! made outside any conversation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use satchel_builtins::conversation::{ConversationTool, OpenRecords};
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolCall, ToolOutput, ToolResults, ToolSpec,
};
use satchel_store::{
    AuditSource, ConversationStore, LlmCallStore, LogKind, LogStore, NewConversation, NewLlmCall,
    NewLogEntry, NewStatement, NewToolCall, SqliteStore, StatementStore, StoreOptions, Timestamp,
    ToolCallStore,
};
use satchel_tools::format::TRUNCATED_MARK;
use satchel_tools::{Registry, Tool, ToolContext, ToolError, ToolsConfig};
use serde_json::{Value, json};

const TEST_BOUND: Duration = Duration::from_secs(60);

/// A tool that edits the file named by `path` (for the resources count).
struct Edit(ToolSpec);

#[async_trait]
impl Tool for Edit {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::success(
            ToolResults::Text("edited".into()),
            "edited",
        ))
    }
}

fn edit_tool() -> Edit {
    Edit(ToolSpec {
        name: "edit".into(),
        title: None,
        description: "Edits a file.".into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
        capabilities: Capabilities {
            reads: vec![Resource::FILES],
            writes: vec![Resource::FILES],
        },
    })
}

struct Harness {
    _dir: tempfile::TempDir,
    registry: Arc<Registry>,
    /// Conversation A and its calls' record ids: cat, edit, failed cat.
    a: String,
    a_calls: Vec<String>,
    /// Conversation B and its one call's record id (same model id as A's first).
    b: String,
    b_call: String,
    /// A's first call's whole stdout.
    long_stdout: String,
}

fn call(
    conversation: &str,
    statement: &str,
    id: &str,
    name: &str,
    input: Value,
    output: ToolOutput,
) -> NewToolCall {
    NewToolCall {
        source: AuditSource::Run,
        caller: None,
        conversation_id: Some(conversation.into()),
        statement_id: Some(statement.into()),
        turn: Some(1),
        call: ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        },
        output,
        decision: None,
        started_at: Timestamp::from_millis(1_000),
        finished_at: Timestamp::from_millis(1_001),
        duration_us: 1_000,
    }
}

fn turn_row(conversation: &str, purpose: &str, estimate: u64) -> NewLlmCall {
    NewLlmCall {
        conversation_id: Some(conversation.into()),
        purpose: purpose.into(),
        provider: "openai".into(),
        model: "gpt-4o".into(),
        estimate_tokens: estimate,
        context_window: 128_000,
        input_tokens: Some(estimate + 7),
        ..NewLlmCall::default()
    }
}

impl Harness {
    async fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("satchel.db"), StoreOptions::default())
            .await
            .unwrap();
        let mut registry = Registry::new();
        registry
            .register(ConversationTool::new(Some(Arc::new(OpenRecords(
                Arc::new(store.clone()),
            )))))
            .unwrap();
        registry.register(edit_tool()).unwrap();

        let a = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap()
            .id;
        let s1 = store
            .add_statement(NewStatement {
                conversation_id: a.clone(),
                objective: None,
            })
            .await
            .unwrap()
            .id;
        let log = |kind, text: &str, statement: &str, call_id: Option<&str>| {
            let mut entry = NewLogEntry::new(&a, kind, text);
            entry.statement_id = Some(statement.to_owned());
            entry.call_id = call_id.map(str::to_owned);
            entry
        };
        store
            .append_log_entry(log(LogKind::User, "look around", &s1, None))
            .await
            .unwrap();
        let mut thinking = log(LogKind::Auxiliary, "secret plan", &s1, None);
        thinking.side_conversation = Some("thinking".into());
        store.append_log_entry(thinking).await.unwrap();
        store
            .append_log_entry(log(LogKind::Assistant, "Looking.", &s1, None))
            .await
            .unwrap();
        store
            .record_llm_call(turn_row(&a, "turn", 1_000))
            .await
            .unwrap();
        store
            .record_llm_call(turn_row(&a, "title", 50))
            .await
            .unwrap();
        let long_stdout = format!("{} TAIL-MARKER\n", "x".repeat(300));
        let a_calls = store
            .record_tool_calls(vec![
                call(
                    &a,
                    &s1,
                    "c1",
                    "bash",
                    json!({"command": "cat notes.txt"}),
                    ToolOutput::success(
                        ToolResults::json(json!({"stdout": long_stdout, "exit_code": 0})),
                        "ran cat",
                    ),
                ),
                call(
                    &a,
                    &s1,
                    "c2",
                    "edit",
                    json!({"file_path": "out.txt", "old_string": "a", "new_string": "b"}),
                    ToolOutput::success(ToolResults::Text("edited".into()), "edited"),
                ),
                call(
                    &a,
                    &s1,
                    "c3",
                    "bash",
                    json!({"command": "cat missing.txt"}),
                    ToolOutput::error(ErrorCode::ToolCrashed, "no such file"),
                ),
            ])
            .await
            .unwrap();
        for id in ["c1", "c2", "c3"] {
            for kind in [LogKind::ToolUse, LogKind::ToolResult] {
                store
                    .append_log_entry(log(kind, "shown", &s1, Some(id)))
                    .await
                    .unwrap();
            }
        }
        let mut title = log(LogKind::Auxiliary, "Title: Looking around", &s1, None);
        title.side_conversation = Some("title".into());
        store.append_log_entry(title).await.unwrap();
        store
            .append_log_entry(log(LogKind::Assistant, "Done.", &s1, None))
            .await
            .unwrap();
        let s2 = store
            .add_statement(NewStatement {
                conversation_id: a.clone(),
                objective: None,
            })
            .await
            .unwrap()
            .id;
        store
            .append_log_entry(log(LogKind::User, "and now?", &s2, None))
            .await
            .unwrap();
        store
            .record_llm_call(turn_row(&a, "turn", 1_500))
            .await
            .unwrap();

        let b = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap()
            .id;
        let sb = store
            .add_statement(NewStatement {
                conversation_id: b.clone(),
                objective: None,
            })
            .await
            .unwrap()
            .id;
        let b_call = store
            .record_tool_call(call(
                &b,
                &sb,
                "c1",
                "bash",
                json!({"command": "echo elsewhere"}),
                ToolOutput::success(ToolResults::Text("TAIL-MARKER elsewhere".into()), "ran"),
            ))
            .await
            .unwrap();
        Harness {
            _dir: dir,
            registry: Arc::new(registry),
            a,
            a_calls,
            b,
            b_call,
            long_stdout,
        }
    }

    fn ctx(&self, conversation: Option<&str>, max_length: usize) -> ToolContext {
        let config = ToolsConfig {
            tool_result_max_length: max_length,
            ..ToolsConfig::default()
        };
        ToolContext {
            conversation_id: conversation.map(str::to_owned),
            registry: Some(self.registry.clone()),
            ..ToolContext::standalone("call-x", PathBuf::from("/"), Arc::new(config))
        }
    }

    async fn call_in(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let call = ToolCall {
            id: "call-x".into(),
            name: "conversation".into(),
            input,
        };
        tokio::time::timeout(TEST_BOUND, self.registry.call(&call, ctx))
            .await
            .expect("conversation call hung")
    }

    /// A call in conversation A with `toolResultMaxLength` = `max_length`.
    async fn call(&self, max_length: usize, input: Value) -> Value {
        let output = self
            .call_in(&self.ctx(Some(&self.a), max_length), input)
            .await;
        assert!(!output.is_error, "{output:?}");
        output.results.structured().unwrap().clone()
    }
}

#[tokio::test]
async fn the_timeline_cuts_results_at_the_length_in_force_for_each_call() {
    let harness = Harness::new().await;
    let timeline = harness.call(40, json!({"action": "timeline"})).await;
    let events = timeline["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "tool_call",
            "tool_call",
            "tool_call",
            "auxiliary",
            "assistant",
            "user"
        ],
        "thinking is left out, each call is one event"
    );
    assert_eq!(timeline["total_events"], 8);
    let cat = &events[2];
    assert_eq!(cat["id"], harness.a_calls[0].as_str());
    assert_eq!(cat["n"], 3);
    assert_eq!(cat["statement"], 1);
    assert_eq!(cat["call"], "bash(command=\"cat notes.txt\")");
    let whole = json!({"stdout": harness.long_stdout, "exit_code": 0}).to_string();
    let cut = |chars: usize| {
        format!(
            "{}{TRUNCATED_MARK}",
            whole.chars().take(chars).collect::<String>()
        )
    };
    assert_eq!(cat["result"], cut(40));
    assert_eq!(events[4]["is_error"], true);
    assert_eq!(events[5]["side"], "title");
    assert_eq!(events[5]["text"], "Title: Looking around");

    // The next call reads the config it is given: a shorter length applies at once.
    let timeline = harness.call(12, json!({"action": "timeline"})).await;
    assert_eq!(timeline["events"][2]["result"], cut(12));

    // A statement, the last N events.
    let second = harness
        .call(40, json!({"action": "timeline", "statement": 2}))
        .await;
    assert_eq!(second["events"].as_array().unwrap().len(), 1);
    assert_eq!(second["events"][0]["text"], "and now?");
    let last = harness
        .call(40, json!({"action": "timeline", "limit": 2}))
        .await;
    let ns: Vec<u64> = last["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, [7, 8]);
}

#[tokio::test]
async fn a_call_is_recovered_whole_by_record_id_or_model_id() {
    let harness = Harness::new().await;
    let by_record = harness
        .call(10, json!({"action": "tool_call", "id": harness.a_calls[0]}))
        .await;
    assert_eq!(by_record["result"]["stdout"], harness.long_stdout.as_str());
    assert_eq!(by_record["input"], json!({"command": "cat notes.txt"}));
    assert_eq!(by_record["tool"], "bash");
    assert_eq!(by_record["statement"], 1);
    // The model's id of the call names this conversation's call, not B's.
    let by_model_id = harness
        .call(10, json!({"action": "tool_call", "id": "c1"}))
        .await;
    assert_eq!(by_model_id, by_record);
    let failed = harness
        .call(10, json!({"action": "tool_call", "id": "c3"}))
        .await;
    assert_eq!(failed["is_error"], true);
    assert_eq!(failed["error_code"], "TOOL_CRASHED");
}

#[tokio::test]
async fn an_id_from_another_conversation_is_refused() {
    let harness = Harness::new().await;
    let ctx = harness.ctx(Some(&harness.a), 100);
    let refused = harness
        .call_in(&ctx, json!({"action": "tool_call", "id": harness.b_call}))
        .await;
    assert!(refused.is_error);
    assert_eq!(refused.error_code, Some(ErrorCode::PermissionDenied));
    assert!(
        !refused.results.to_text().contains("elsewhere"),
        "the other conversation's result leaked"
    );
    // From B, the same id is B's own.
    let own = harness
        .call_in(
            &harness.ctx(Some(&harness.b), 100),
            json!({"action": "tool_call", "id": harness.b_call}),
        )
        .await;
    assert!(!own.is_error, "{own:?}");
    let unknown = harness
        .call_in(&ctx, json!({"action": "tool_call", "id": "nope"}))
        .await;
    assert_eq!(unknown.error_code, Some(ErrorCode::InvalidParams));
}

#[tokio::test]
async fn stats_match_the_rows() {
    let harness = Harness::new().await;
    let stats = harness.call(100, json!({"action": "stats"})).await;
    assert_eq!(
        stats,
        json!({
            "conversation": harness.a,
            "events": 8,
            "statements": 2,
            "turns": 2,
            "tool_calls": 3,
            "tools": [
                {"tool": "bash", "calls": 2, "ok": 1, "failed": 1},
                {"tool": "edit", "calls": 1, "ok": 1, "failed": 0}
            ],
            "resources": {
                "summary": "1 file read, 1 modified",
                "read": ["notes.txt"],
                "modified": ["out.txt"],
                "fetched": []
            },
            "tokens": {"estimate": 1500, "reported_input": 1507, "context_window": 128000}
        })
    );
}

#[tokio::test]
async fn search_finds_tool_results_as_timeline_events() {
    let harness = Harness::new().await;
    let found = harness
        .call(20, json!({"action": "search", "query": "tail-marker"}))
        .await;
    let matches = found["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{found}");
    assert_eq!(matches[0]["id"], harness.a_calls[0].as_str());
    assert_eq!(matches[0]["n"], 3);
    assert!(
        matches[0]["result"]
            .as_str()
            .unwrap()
            .ends_with(TRUNCATED_MARK)
    );
    // Thinking stays out of search as it stays out of the timeline.
    let thinking = harness
        .call(20, json!({"action": "search", "query": "secret plan"}))
        .await;
    assert_eq!(thinking["matches"], json!([]));
}

#[tokio::test]
async fn outside_a_conversation_or_without_a_store_the_tool_says_why() {
    let harness = Harness::new().await;
    let output = harness
        .call_in(&harness.ctx(None, 100), json!({"action": "stats"}))
        .await;
    assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
    assert!(
        output.user_message.contains("not part of a conversation"),
        "{}",
        output.user_message
    );

    let mut bare = Registry::new();
    bare.register(ConversationTool::new(None)).unwrap();
    let call = ToolCall {
        id: "x".into(),
        name: "conversation".into(),
        input: json!({"action": "timeline"}),
    };
    let output = bare.call(&call, &harness.ctx(Some(&harness.a), 100)).await;
    assert_eq!(output.error_code, Some(ErrorCode::ToolCrashed));
    assert!(
        output.user_message.contains("no database"),
        "{}",
        output.user_message
    );
}
