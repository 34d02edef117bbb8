//! Anthropic Messages, as documented: `message_start`, `content_block_start`
//! / `content_block_delta` (`text_delta`, `input_json_delta`,
//! `thinking_delta`, `signature_delta`) / `content_block_stop`,
//! `message_delta` with `stop_reason` and cumulative `usage`,
//! `message_stop`, `ping` and `error` events; `x-api-key` and
//! `anthropic-version` headers.

use std::time::Duration;

use pretty_assertions::assert_eq;
use satchel_core::{AssistantPart, Content, ErrorCode, Message, ToolCall, ToolOutput, ToolResults};
use satchel_llm::{
    ChatRequest, LlmError, Mode, ProviderKind, Section, StopReason, StreamEvent, ToolChoice, Usage,
};
use serde_json::{Value, json};

use crate::server::{End, Reply, Server, event};
use crate::{assert_sent_exactly, bash_spec, call, provider, read_spec};

fn ev(data: Value) -> String {
    let name = data["type"].as_str().unwrap().to_owned();
    event(Some(&name), &data)
}

fn message_start(input_tokens: u64) -> String {
    ev(json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}
    }}))
}

fn text_block(index: usize, pieces: &[&str]) -> Vec<String> {
    let mut events = vec![ev(
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    for piece in pieces {
        events.push(ev(json!({"type": "content_block_delta", "index": index,
                              "delta": {"type": "text_delta", "text": piece}})));
    }
    events.push(ev(json!({"type": "content_block_stop", "index": index})));
    events
}

fn tool_block(index: usize, id: &str, name: &str, input: &str, piece: usize) -> Vec<String> {
    let mut events = vec![ev(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))];
    let chars: Vec<char> = input.chars().collect();
    for fragment in chars.chunks(piece) {
        let fragment: String = fragment.iter().collect();
        events.push(ev(json!({"type": "content_block_delta", "index": index,
                              "delta": {"type": "input_json_delta", "partial_json": fragment}})));
    }
    events.push(ev(json!({"type": "content_block_stop", "index": index})));
    events
}

fn thinking_block(index: usize, pieces: &[&str], signature: &str) -> Vec<String> {
    let mut events = vec![ev(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "thinking", "thinking": ""}}))];
    for piece in pieces {
        events.push(ev(json!({"type": "content_block_delta", "index": index,
                              "delta": {"type": "thinking_delta", "thinking": piece}})));
    }
    events.push(ev(json!({"type": "content_block_delta", "index": index,
                          "delta": {"type": "signature_delta", "signature": signature}})));
    events.push(ev(json!({"type": "content_block_stop", "index": index})));
    events
}

fn end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
    vec![
        ev(json!({"type": "message_delta",
                  "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                  "usage": {"output_tokens": output_tokens}})),
        ev(json!({"type": "message_stop"})),
    ]
}

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("What is in this directory?"),
    ]
}

#[tokio::test]
async fn streams_a_plain_answer_with_usage() {
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
async fn answers_without_streaming() {
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
async fn an_overloaded_error_before_content_is_retried() {
    let overloaded = vec![
        message_start(10),
        ev(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    let mut fine = vec![message_start(10)];
    fine.extend(text_block(0, &["here"]));
    fine.extend(end("end_turn", 1));
    let server = Server::start(vec![Reply::sse(overloaded), Reply::sse(fine)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert_eq!(outcome.response().text(), "here");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_error_event_after_content_keeps_the_partial_answer() {
    let mut events = vec![message_start(10)];
    events.push(ev(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
    events.push(ev(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half an"}})));
    events.push(ev(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let error = outcome.error();
    assert!(matches!(error, LlmError::Interrupted { .. }), "{error}");
    assert_eq!(error.partial_response().unwrap().text(), "Half an");
    assert!(error.to_string().contains("overloaded_error"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn errors_name_the_key_variable_and_overload_is_retried() {
    let body = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let server = Server::start(vec![Reply::json(401, body.to_string())]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert!(
        outcome
            .error()
            .to_string()
            .starts_with("the API key in $ANTHROPIC_API_KEY was rejected by http://127.0.0.1:"),
        "{}",
        outcome.error()
    );

    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = Server::start(vec![Reply::json(529, overloaded.to_string())]).await;
    let provider = crate::provider(ProviderKind::Anthropic, &server, |c| {
        c.max_retries = Some(1)
    });
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Whole,
    )
    .await;
    assert!(matches!(
        outcome.error(),
        LlmError::Server {
            status: 529,
            attempts: 2,
            ..
        }
    ));
    assert_eq!(server.requests().len(), 2);

    let not_found = json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}});
    let server = Server::start(vec![Reply::json(404, not_found.to_string())]).await;
    let provider = crate::provider(ProviderKind::Anthropic, &server, |c| {
        c.model = Some("claude-nope".into())
    });
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let message = outcome.error().to_string();
    assert!(
        message.contains("does not know the model `claude-nope` (404: model: claude-nope)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_keeps_the_partial_answer() {
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

#[tokio::test]
async fn streams_one_tool_call_with_its_input_in_many_deltas() {
    let input = r#"{"command": "cargo test --workspace 2>&1 | tail -n 20", "timeout": 600}"#;
    let mut events = vec![message_start(120)];
    events.extend(tool_block(0, "toolu_single", "bash", input, 1));
    events.extend(end("tool_use", 40));
    let server = Server::start(vec![Reply::Sse {
        events,
        piece: 5,
        delay: Duration::ZERO,
        end: End::Clean,
    }])
    .await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let messages = history();
    let tools = [bash_spec()];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!(call.arguments, input);
    assert_eq!(
        call.input,
        json!({"command": "cargo test --workspace 2>&1 | tail -n 20", "timeout": 600})
    );
    let deltas = outcome
        .events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. }))
        .count();
    assert_eq!(deltas, input.chars().count());
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_sent_exactly(&server, &outcome.prepared);
}

#[tokio::test]
async fn shared_failures_behave_the_same_for_anthropic() {
    let messages = history();
    let request = ChatRequest::new(&messages, &[]);
    let mut fine = vec![message_start(10)];
    fine.extend(text_block(0, &["after the wait"]));
    fine.extend(end("end_turn", 3));

    // 429 with Retry-After, then an answer.
    let limited = Reply::json(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
            .to_string(),
    )
    .with_header("retry-after", "1");
    let server = Server::start(vec![limited, Reply::sse(fine)]).await;
    let provider = provider(ProviderKind::Anthropic, &server, |_| {});
    let outcome = call(provider.as_ref(), &request, Mode::Stream).await;
    assert_eq!(outcome.response().text(), "after the wait");
    let requests = server.requests();
    assert!(requests[1].at - requests[0].at >= Duration::from_millis(950));

    // Silence: a timeout, retried, then reported.
    let server = Server::start(vec![Reply::Hang]).await;
    let provider = crate::provider(ProviderKind::Anthropic, &server, |c| {
        c.request_timeout_secs = Some(1);
        c.max_retries = Some(1);
    });
    let outcome = call(provider.as_ref(), &request, Mode::Whole).await;
    assert!(matches!(outcome.error(), LlmError::Timeout { .. }));
    assert_eq!(server.requests().len(), 2);

    // Cancellation while the server holds the request.
    let server = Server::start(vec![Reply::Hang]).await;
    let provider = crate::provider(ProviderKind::Anthropic, &server, |_| {});
    let cancel = tokio_util::sync::CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let outcome = crate::call_with(provider.as_ref(), &request, Mode::Stream, cancel).await;
    assert!(matches!(outcome.error(), LlmError::Cancelled));
    assert!(started.elapsed() < Duration::from_millis(1_500));

    // Nothing listening at a configured address.
    let port = crate::closed_port().await;
    let provider = crate::provider(ProviderKind::Anthropic, &server, |c| {
        c.base_url = Some(format!("http://127.0.0.1:{port}"));
        c.max_retries = Some(0);
    });
    let outcome = call(provider.as_ref(), &request, Mode::Stream).await;
    let message = outcome.error().to_string();
    assert!(
        message.starts_with(&format!("cannot reach http://127.0.0.1:{port} (")),
        "{message}"
    );
    assert!(message.contains("Connection refused"), "{message}");
}
