//! What only Anthropic Messages has, as documented: the `x-api-key` and
//! `anthropic-version` headers, the top-level `system`, thinking blocks
//! (streamed with their signature, sent back only within the current tool
//! loop), `tool_use` input sent back as an object, cache token counts and
//! the usage `message_start` reports. Behaviours both formats share are in
//! `shared.rs`.

use std::time::Duration;

use pretty_assertions::assert_eq;
use satchel_core::{AssistantPart, Content, ErrorCode, Message, ToolCall, ToolOutput, ToolResults};
use satchel_llm::{
    ChatRequest, Mode, ProviderKind, Section, StopReason, StreamEvent, ToolChoice, Usage,
};
use serde_json::{Value, json};

use crate::server::{End, Reply, Server};
use crate::wire::anthropic::{end, ev, message_start, text_block, thinking_block, tool_block};
use crate::{assert_sent_exactly, bash_spec, call, provider, read_spec};

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("What is in this directory?"),
    ]
}

#[tokio::test]
async fn a_streamed_request_is_the_documented_body_and_headers() {
    let mut events = vec![message_start(25)];
    events.push(ev(json!({"type": "ping"})));
    events.extend(text_block(0, &["Hello", "! How can", " I help?"]));
    events.extend(end("end_turn", 12));
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.text(), "Hello! How can I help?");
    assert_eq!(outcome.streamed_text(), "Hello! How can I help?");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.id.as_deref(), Some("msg_01"));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 25,
            output_tokens: 12,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: None,
        })
    );

    assert_sent_exactly(&server, &outcome.prepared);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("test-key-123"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 16384,
            "system": "You are a careful assistant.",
            "messages": [{"role": "user", "content": "What is in this directory?"}],
            "stream": true,
        })
    );
    assert!(outcome.prepared.estimate().section(Section::System) > 0);
    assert_eq!(outcome.prepared.estimate().context_window, 200_000);
}

#[tokio::test]
async fn streams_thinking_and_parallel_tool_calls_split_across_chunks() {
    let mut events = vec![message_start(400)];
    events.extend(thinking_block(
        0,
        &["The user wants ", "a listing."],
        "EqQBCgIYAhIM",
    ));
    events.extend(text_block(1, &["I'll look."]));
    events.extend(tool_block(
        2,
        "toolu_01",
        "bash",
        r#"{"command": "ls -la"}"#,
        3,
    ));
    events.extend(tool_block(
        3,
        "toolu_02",
        "read_file",
        r#"{"path": "README.md"}"#,
        2,
    ));
    events.extend(end("tool_use", 90));
    let server = Server::start(vec![Reply::Sse {
        events,
        piece: 11,
        delay: Duration::ZERO,
        end: End::Clean,
    }])
    .await;
    let provider = provider(ProviderKind::Anthropic, &server, |c| {
        c.thinking_budget_tokens = Some(2048)
    });
    let messages = history();
    let tools = [bash_spec(), read_spec()];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.content,
        vec![
            AssistantPart::Thinking {
                thinking: "The user wants a listing.".into(),
                signature: Some("EqQBCgIYAhIM".into()),
            },
            AssistantPart::Text {
                text: "I'll look.".into()
            },
            AssistantPart::ToolCall(ToolCall {
                id: "toolu_01".into(),
                name: "bash".into(),
                input: json!({"command": "ls -la"}),
            }),
            AssistantPart::ToolCall(ToolCall {
                id: "toolu_02".into(),
                name: "read_file".into(),
                input: json!({"path": "README.md"}),
            }),
        ]
    );
    let thinking: String = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "The user wants a listing.");
    let completed: Vec<usize> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallCompleted { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(completed, vec![0, 1]);
    assert_eq!(response.usage.unwrap().output_tokens, 90);

    assert_sent_exactly(&server, &outcome.prepared);
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        sent["tools"][0],
        json!({"name": "bash", "description": "Run a shell command and return its output.",
               "input_schema": bash_spec().input_schema})
    );
    assert_eq!(sent.get("tool_choice"), None);
}

#[tokio::test]
async fn a_whole_answer_reads_thinking_and_cache_usage() {
    let body = json!({
        "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "thinking", "thinking": "Need ls.", "signature": "sig=="},
            {"type": "text", "text": "Listing now."},
            {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"command": "ls"}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 50, "cache_creation_input_tokens": 100,
                  "cache_read_input_tokens": 1000, "output_tokens": 30},
    });
    let server = Server::start(vec![Reply::json(200, body.to_string())]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let tools = [bash_spec()];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Whole,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.thinking(), "Need ls.");
    assert_eq!(response.text(), "Listing now.");
    assert_eq!(response.tool_calls[0].input, json!({"command": "ls"}));
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 1150,
            output_tokens: 30,
            cache_read_tokens: 1000,
            cache_write_tokens: 100,
            reasoning_tokens: None,
        })
    );
    assert_sent_exactly(&server, &outcome.prepared);
    assert_eq!(server.requests()[0].json().get("stream"), None);
}

#[tokio::test]
async fn thinking_is_sent_back_only_within_the_current_tool_loop() {
    let thinking = |text: &str| AssistantPart::Thinking {
        thinking: text.into(),
        signature: Some(format!("sig-{text}")),
    };
    let call = |id: &str| {
        AssistantPart::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            input: json!({"command": "ls"}),
        })
    };
    let ok = ToolOutput::success(ToolResults::Text("file.txt".into()), "ran ls");
    let failed = ToolOutput::error(ErrorCode::ToolTimeout, "stopped after 30 s");
    let messages = vec![
        Message::system("Rule one."),
        Message::user("first question"),
        Message::Assistant {
            content: vec![thinking("old"), call("t1")],
        },
        Message::tool_result("t1", &ok),
        Message::Assistant {
            content: vec![
                thinking("old-2"),
                AssistantPart::Text {
                    text: "Done.".into(),
                },
            ],
        },
        Message::system("Rule two."),
        Message::User {
            content: vec![
                Content::Text {
                    text: "now this".into(),
                },
                Content::Image {
                    mime_type: "image/png".into(),
                    data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk".into(),
                },
            ],
        },
        Message::Assistant {
            content: vec![thinking("new"), call("t2"), call("t3")],
        },
        Message::tool_result("t2", &ok),
        Message::tool_result("t3", &failed),
    ];
    let mut events = vec![message_start(10)];
    events.extend(text_block(0, &["ok"]));
    events.extend(end("end_turn", 1));
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let tools = [bash_spec()];
    let choice = ToolChoice::Required;
    let request = ChatRequest {
        tool_choice: &choice,
        parallel_tool_calls: false,
        ..ChatRequest::new(&messages, &tools)
    };
    let outcome = crate::call(provider.as_ref(), &request, Mode::Stream).await;
    outcome.response();
    assert_sent_exactly(&server, &outcome.prepared);
    let sent = server.requests()[0].json();
    assert_eq!(sent["system"], "Rule one.\n\nRule two.");
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "file.txt"}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "now this"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                 "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "new", "signature": "sig-new"},
                {"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t3", "name": "bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "file.txt"},
                {"type": "tool_result", "tool_use_id": "t3", "content": [
                    {"type": "text", "text": "{\"error\":\"stopped after 30 s\",\"error_code\":\"TOOL_TIMEOUT\"}"}
                ], "is_error": true}
            ]},
        ])
    );
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let estimate = &outcome.prepared.estimate();
    assert_eq!(estimate.images, 1);
    // The image counts as IMAGE_TOKENS, not as its base64 text.
    let without_image = std::str::from_utf8(&server.requests()[0].body)
        .unwrap()
        .replace(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
            "",
        );
    let text_tokens = satchel_llm::count_tokens(estimate.encoding, &without_image);
    assert!(
        estimate
            .total
            .abs_diff(text_tokens + satchel_llm::IMAGE_TOKENS)
            <= 2,
        "{} vs {text_tokens} + image",
        estimate.total
    );
    assert!(estimate.section(Section::ToolResults) > 20);
    assert!(estimate.section(Section::Messages) >= satchel_llm::IMAGE_TOKENS);
}

#[tokio::test]
async fn malformed_tool_input_is_kept_raw_and_sent_back_as_an_empty_object() {
    let mut events = vec![message_start(10)];
    events.extend(tool_block(
        0,
        "toolu_x",
        "bash",
        r#"{"command": "ls", }"#,
        4,
    ));
    events.extend(end("tool_use", 5));
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let mut messages = history();
    let tools = [bash_spec()];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    let call = &response.tool_calls[0];
    let output = call
        .invalid_params_output()
        .expect("arguments were malformed");
    assert_eq!(
        output.results.structured().unwrap()["arguments"],
        r#"{"command": "ls", }"#
    );

    messages.push(response.message());
    messages.push(Message::tool_result(&call.id, &output));
    let prepared = provider
        .prepare(&ChatRequest::new(&messages, &tools), Mode::Stream)
        .unwrap();
    let body: Value = serde_json::from_slice(&prepared.body).unwrap();
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_x", "name": "bash", "input": {}})
    );
    assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
}

#[tokio::test]
async fn a_cut_answer_keeps_the_usage_message_start_reported() {
    let mut events = vec![message_start(10)];
    events.extend(text_block(0, &["Partial ", "answer", " lost"]));
    events.extend(end("end_turn", 3));
    let server = Server::start(vec![Reply::Sse {
        events,
        piece: 0,
        delay: Duration::ZERO,
        end: End::CutAfter(4),
    }])
    .await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let partial = outcome.error().partial_response().expect("partial kept");
    assert_eq!(partial.text(), "Partial answer");
    assert_eq!(partial.stop_reason, StopReason::Interrupted);
    assert_eq!(partial.usage.unwrap().input_tokens, 10);
}
