//! Satchel's own time per turn, model and tools excluded, in a
//! conversation of 500 statements: building the history, counting its
//! tokens on the exact request bytes, and recording the turn in SQLite.
//! Target: under 5 ms p50 in total.
//!
//! The baseline, measured in the same run, is serialising the same
//! history with serde_json alone: the least any client must do.
//!
//! Run with `cargo bench -p satchel-agent --bench turn`; prints a table.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
#![allow(missing_docs)]

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use satchel_agent::history::{CallRecord, StatementRecord, TurnRecord};
use satchel_agent::{AgentConfig, Phase, Transcript};
use satchel_core::{AssistantPart, Content, Message, ToolCall, ToolOutput, ToolResults, ToolSpec};
use satchel_llm::{ChatRequest, LlmConfig, Mode, connect};
use satchel_store::{
    AuditSource, ConversationStore, LlmCallStore, LogKind, LogStore, MessageStore, NewConversation,
    NewLlmCall, NewLlmMessage, NewLogEntry, NewStatement, NewToolCall, SqliteStore, StatementStore,
    StoreOptions, Timestamp, ToolCallStore,
};
use serde_json::json;

const STATEMENTS: u32 = 500;
const ROUNDS: usize = 60;

fn statement(seq: u32) -> StatementRecord {
    let call = ToolCall {
        id: format!("call_{seq}"),
        name: "bash".into(),
        input: json!({"command": format!("grep -rn 'fn handler_{seq}' src/ | head -20")}),
    };
    let stdout: String = (0..20)
        .map(|line| format!("src/module_{seq}/file_{line}.rs:{}: pub fn handler_{seq}(ctx: &Context) -> Result<()> {{\n", line * 7))
        .collect();
    let output = ToolOutput::success(
        ToolResults::json(json!({"stdout": stdout, "stderr": "", "exit_code": 0})),
        "ran grep",
    );
    StatementRecord {
        seq,
        user: vec![Content::Text {
            text: format!(
                "Statement {seq}: where is handler_{seq} defined, and what calls it? Please check the module and summarise."
            ),
        }],
        turns: vec![
            TurnRecord {
                assistant: vec![
                    AssistantPart::Text {
                        text: "Let me look for it.".into(),
                    },
                    AssistantPart::ToolCall(call.clone()),
                ],
                sent_results: vec![Message::tool_result(&call.id, &output)],
                calls: vec![CallRecord { call, output }],
                raw_reply: None,
            },
            TurnRecord {
                assistant: vec![AssistantPart::Text {
                    text: format!(
                        "handler_{seq} is defined in src/module_{seq}/file_0.rs and called from the router; it validates the context and returns early on errors. Nothing else references it."
                    ),
                }],
                ..TurnRecord::default()
            },
        ],
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut transcript = Transcript::from_statements((1..=STATEMENTS).map(statement).collect());
    let specs: Vec<ToolSpec> = satchel_builtins::builtin_registry()
        .unwrap()
        .specs()
        .cloned()
        .collect();
    let config = LlmConfig {
        provider: Some(satchel_llm::ProviderKind::OpenAi),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        model: Some("gpt-4o".into()),
        context_window: Some(400_000),
        ..LlmConfig::default()
    };
    let provider = connect(config.resolve(&HashMap::new()).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = runtime
        .block_on(SqliteStore::open(
            &dir.path().join("bench.db"),
            StoreOptions::default(),
        ))
        .unwrap();
    let (conversation, statement_id) = runtime.block_on(async {
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let statement = store
            .add_statement(NewStatement {
                conversation_id: conversation.id.clone(),
                objective: None,
            })
            .await
            .unwrap();
        (conversation.id, statement.id)
    });

    let system = satchel_agent::DEFAULT_SYSTEM_PROMPT;
    let (mut baseline, mut build, mut estimate, mut record, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut body_bytes = 0;
    let mut tokens = 0;
    for round in 0..ROUNDS + 5 {
        // As in real use, every request differs from the last at its end:
        // the statement in progress gains a turn (a tool loop), and every
        // fifth round a new statement starts (the last one becomes past).
        let seq = STATEMENTS + 1 + round as u32;
        if round % 5 == 0 {
            transcript.statements.push(statement(seq));
        } else {
            let next = statement(seq).turns[0].clone();
            transcript.statements.last_mut().unwrap().turns.push(next);
        }
        let history = transcript.history(
            system,
            AgentConfig::default().history_shape(),
            Phase::InStatement,
        );
        let started = Instant::now();
        black_box(serde_json::to_vec(&(&history, &specs)).unwrap());
        let baseline_time = started.elapsed();

        let started = Instant::now();
        let history = transcript.history(
            system,
            AgentConfig::default().history_shape(),
            Phase::InStatement,
        );
        let built = started.elapsed();
        let request = ChatRequest::new(&history, &specs);
        let prepared = provider.prepare(&request, Mode::Stream).unwrap();
        let counted = black_box(prepared.estimate().clone());
        let estimated = started.elapsed() - built;

        let record_started = Instant::now();
        runtime.block_on(async {
            let last = transcript.statements.last().unwrap();
            let turn = last
                .turns
                .iter()
                .rev()
                .find(|t| !t.calls.is_empty())
                .unwrap();
            let mut messages = vec![NewLlmMessage {
                conversation_id: conversation.clone(),
                statement_id: Some(statement_id.clone()),
                turn: 1,
                role: "assistant".into(),
                content: serde_json::to_value(Message::Assistant {
                    content: turn.assistant.clone(),
                })
                .unwrap(),
            }];
            messages.push(NewLlmMessage {
                content: serde_json::to_value(&turn.sent_results[0]).unwrap(),
                role: "tool".into(),
                ..messages[0].clone()
            });
            store.append_messages(messages).await.unwrap();
            store
                .record_llm_call(NewLlmCall {
                    conversation_id: Some(conversation.clone()),
                    purpose: "turn".into(),
                    provider: "OpenAI".into(),
                    model: "gpt-4o".into(),
                    estimate_tokens: counted.total,
                    estimate_sections: serde_json::to_value(counted.sections).unwrap(),
                    ..NewLlmCall::default()
                })
                .await
                .unwrap();
            let record = &turn.calls[0];
            store
                .record_tool_calls(vec![NewToolCall {
                    source: AuditSource::Repl,
                    caller: None,
                    conversation_id: Some(conversation.clone()),
                    statement_id: Some(statement_id.clone()),
                    turn: Some(1),
                    call: record.call.clone(),
                    output: record.output.clone(),
                    decision: Some("allow by rule bash".into()),
                    started_at: Timestamp::from_millis(0),
                    finished_at: Timestamp::from_millis(1),
                    duration_us: 1000,
                }])
                .await
                .unwrap();
            for kind in [LogKind::Assistant, LogKind::ToolUse, LogKind::ToolResult] {
                store
                    .append_log_entry(NewLogEntry::new(&conversation, kind, "text as shown"))
                    .await
                    .unwrap();
            }
        });
        let recorded = record_started.elapsed();
        if round >= 5 {
            baseline.push(baseline_time);
            build.push(built);
            estimate.push(estimated);
            record.push(recorded);
            total.push(built + estimated + recorded);
        }
        body_bytes = prepared.body.len();
        tokens = counted.total;
    }
    runtime.block_on(store.close()).unwrap();

    let base = percentile(&mut baseline, 0.5);
    println!(
        "Per turn, {STATEMENTS}+ statements of history ({} KB request body, {tokens} tokens), {ROUNDS} rounds:",
        body_bytes / 1024
    );
    println!(
        "{:36} {:>9} {:>9} {:>12}",
        "phase", "p50 ms", "p95 ms", "p50 / base"
    );
    for (name, samples) in [
        ("baseline: serde_json of the history", &mut baseline),
        ("build the history", &mut build),
        ("serialise + count tokens", &mut estimate),
        ("record (messages, usage, calls, log)", &mut record),
        ("total (target p50 < 5 ms)", &mut total),
    ] {
        let p50 = percentile(samples, 0.5);
        let p95 = percentile(samples, 0.95);
        println!(
            "{name:36} {:>9.3} {:>9.3} {:>12.2}",
            p50.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3,
            p50.as_secs_f64() / base.as_secs_f64()
        );
    }
}
