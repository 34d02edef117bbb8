//! OpenAI Chat Completions, as documented: `chat.completion.chunk` events
//! with `choices[].delta` (`content`, `tool_calls[].index/id/function`),
//! a last chunk with empty `choices` and `usage` when
//! `stream_options.include_usage` is set, then `data: [DONE]`.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use satchel_core::{AssistantPart, ErrorCode, Message, ToolCall, ToolOutput, ToolResults};
use satchel_llm::{
    ChatRequest, LlmConfig, LlmError, Mode, ProviderKind, StopReason, StreamEvent, ToolChoice,
    Usage, connect,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::server::{End, Reply, Server, event};
use crate::{
    assert_sent_exactly, bash_spec, call, call_with, closed_port, env, provider, read_spec,
};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    event(
        None,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        }),
    )
}

fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> String {
    event(
        None,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o-2024-08-06", "choices": [],
            "usage": {
                "prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }),
    )
}

const DONE: &str = "data: [DONE]\n\n";

fn text_stream(words: &[&str]) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(words.iter().map(|w| chunk(json!({"content": w}), None)));
    events.push(chunk(json!({}), Some("stop")));
    events.push(usage_chunk(42, 7, 0));
    events.push(DONE.to_owned());
    events
}

/// Tool-call chunks as OpenAI sends them: the first carries index, id,
/// type and name with empty arguments; the rest carry argument fragments.
fn tool_call_chunks(
    index: usize,
    id: &str,
    name: &str,
    arguments: &str,
    piece: usize,
) -> Vec<String> {
    let mut events = vec![chunk(
        json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        None,
    )];
    let chars: Vec<char> = arguments.chars().collect();
    for fragment in chars.chunks(piece) {
        let fragment: String = fragment.iter().collect();
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
            None,
        ));
    }
    events
}

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("What is in this directory?"),
    ]
}

#[tokio::test]
async fn streams_a_plain_answer_with_usage() {
    let server = Server::start(vec![Reply::sse(text_stream(&[
        "Hello", ", ", "world", ".",
    ]))])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.headers.insert("x-team".into(), "infra".into());
    });
    assert!(
        !format!("{provider:?}").contains("test-key-123"),
        "the key leaks through Debug"
    );
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;

    let response = outcome.response();
    assert_eq!(response.text(), "Hello, world.");
    assert_eq!(outcome.streamed_text(), "Hello, world.");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 42,
            output_tokens: 7,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: Some(0),
        })
    );
    // Estimate and usage side by side.
    assert_eq!(response.estimate, *outcome.prepared.estimate());
    assert_eq!(
        response.input_estimate_error(),
        Some(response.estimate.total as i64 - 42)
    );
    assert!(matches!(outcome.events.last(), Some(StreamEvent::Done(_))));

    assert_sent_exactly(&server, &outcome.prepared);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.header("x-team"), Some("infra"));
    assert_eq!(
        request.json(),
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are a careful assistant."},
                {"role": "user", "content": "What is in this directory?"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn answers_without_streaming() {
    let body = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Two files.", "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33,
                  "prompt_tokens_details": {"cached_tokens": 16}},
    });
    let server = Server::start(vec![Reply::json(200, body.to_string())]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.max_output_tokens = Some(100)
    });
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Whole,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.text(), "Two files.");
    assert_eq!(response.id.as_deref(), Some("chatcmpl-2"));
    let usage = response.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (30, 3, 16)
    );
    assert_sent_exactly(&server, &outcome.prepared);
    let sent = server.requests()[0].json();
    assert_eq!(sent.get("stream"), None);
    // Not api.openai.com: the widely supported field.
    assert_eq!(sent["max_tokens"], 100);
    assert_eq!(
        server.requests()[0].header("accept"),
        Some("application/json")
    );

    // `complete` is the same path.
    let server = Server::start(vec![Reply::json(200, body.to_string())]).await;
    let provider = crate::provider(ProviderKind::OpenAi, &server, |_| {});
    let response = provider
        .complete(&ChatRequest::new(&messages, &[]), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text(), "Two files.");
}

#[tokio::test]
async fn assembles_one_tool_call_split_across_many_chunks() {
    let arguments = r#"{"command": "ls -la \"src dir\"", "timeout": 30}"#;
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    events.extend(tool_call_chunks(0, "call_abc", "bash", arguments, 2));
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(usage_chunk(80, 20, 0));
    events.push(DONE.to_owned());
    // The network splits the stream every 7 bytes, across events and lines.
    let server = Server::start(vec![Reply::Sse {
        events,
        piece: 7,
        delay: Duration::ZERO,
        end: End::Clean,
    }])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let tools = [bash_spec()];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();

    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_abc", "bash"));
    assert_eq!(call.arguments, arguments);
    assert_eq!(
        call.input,
        json!({"command": "ls -la \"src dir\"", "timeout": 30})
    );
    assert_eq!(
        response.content,
        vec![AssistantPart::ToolCall(call.to_tool_call().unwrap())]
    );
    // Events: started once, deltas that add up, completed once.
    let started: Vec<_> = outcome
        .events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
        .collect();
    assert_eq!(
        started,
        vec![&StreamEvent::ToolCallStarted {
            index: 0,
            id: "call_abc".into(),
            name: "bash".into()
        }]
    );
    let deltas: String = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, arguments);
    assert!(
        outcome.events.iter().any(
            |e| matches!(e, StreamEvent::ToolCallCompleted { index: 0, call: c } if c == call)
        )
    );

    assert_sent_exactly(&server, &outcome.prepared);
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["tools"],
        json!([{"type": "function", "function": {
            "name": "bash",
            "description": "Run a shell command and return its output.",
            "parameters": bash_spec().input_schema,
        }}])
    );
    assert!(
        outcome
            .prepared
            .estimate()
            .section(satchel_llm::Section::Tools)
            > 30
    );
}

#[tokio::test]
async fn assembles_parallel_tool_calls_streamed_and_whole() {
    let calls = [
        ("call_1", "bash", r#"{"command":"ls"}"#),
        ("call_2", "read_file", r#"{"path":"README.md"}"#),
        ("call_3", "read_file", r#"{"path":"Cargo.toml"}"#),
    ];
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": "Looking."}),
        None,
    )];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        events.extend(tool_call_chunks(i, id, name, args, 3));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(usage_chunk(100, 40, 0));
    events.push(DONE.to_owned());
    let whole = json!({
        "id": "chatcmpl-3", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Looking.",
            "tool_calls": calls.iter().map(|(id, name, args)| json!({
                "id": id, "type": "function", "function": {"name": name, "arguments": args}
            })).collect::<Vec<_>>(),
        }}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
    });
    let messages = history();
    let tools = [bash_spec(), read_spec()];
    for (reply, mode) in [
        (Reply::sse(events), Mode::Stream),
        (Reply::json(200, whole.to_string()), Mode::Whole),
    ] {
        let server = Server::start(vec![reply]).await;
        let provider = provider(ProviderKind::OpenAi, &server, |_| {});
        let outcome = call(
            provider.as_ref(),
            &ChatRequest::new(&messages, &tools),
            mode,
        )
        .await;
        let response = outcome.response();
        assert_eq!(response.text(), "Looking.", "{mode:?}");
        let got: Vec<(String, String, Value)> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), c.input.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("call_1".into(), "bash".into(), json!({"command": "ls"})),
                (
                    "call_2".into(),
                    "read_file".into(),
                    json!({"path": "README.md"})
                ),
                (
                    "call_3".into(),
                    "read_file".into(),
                    json!({"path": "Cargo.toml"})
                ),
            ],
            "{mode:?}"
        );
        let completed = outcome
            .events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallCompleted { .. }))
            .count();
        assert_eq!(completed, 3, "{mode:?}");
        assert_sent_exactly(&server, &outcome.prepared);
    }
}

#[tokio::test]
async fn malformed_arguments_become_an_invalid_params_result_the_model_can_fix() {
    let mut events = tool_call_chunks(0, "call_bad", "bash", r#"{"command": "ls"#, 4);
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(DONE.to_owned());
    let server = Server::start(vec![Reply::sse(events), Reply::sse(text_stream(&["ok"]))]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
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
    assert!(
        call.error
            .as_deref()
            .unwrap()
            .starts_with("the arguments are not valid JSON")
    );
    assert!(call.to_tool_call().is_none());
    let output = call.invalid_params_output().unwrap();
    assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));

    // The agent sends the error back; the raw arguments go back as written.
    messages.push(response.message());
    messages.push(Message::tool_result(&call.id, &output));
    let outcome = crate::call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &tools),
        Mode::Stream,
    )
    .await;
    assert_eq!(outcome.response().text(), "ok");
    let sent = server.requests()[1].json();
    assert_eq!(
        sent["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_bad", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls"}}
        ]})
    );
    let result: Value =
        serde_json::from_str(sent["messages"][3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error_code"], "INVALID_PARAMS");
    assert_eq!(sent["messages"][3]["tool_call_id"], "call_bad");
}

#[tokio::test]
async fn history_tool_choice_and_parallel_flag_follow_the_format() {
    let server = Server::start(vec![Reply::sse(text_stream(&["done"]))]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| c.temperature = Some(0.5));
    let messages = vec![
        Message::system("sys"),
        Message::user("run ls"),
        Message::Assistant {
            content: vec![
                AssistantPart::Thinking {
                    thinking: "private".into(),
                    signature: None,
                },
                AssistantPart::Text {
                    text: "Sure.".into(),
                },
                AssistantPart::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls"}),
                }),
            ],
        },
        Message::tool_result(
            "c1",
            &ToolOutput::success(ToolResults::Text("a\nb".into()), "ran ls")
                .with_response("2 entries"),
        ),
    ];
    let tools = [bash_spec()];
    let choice = ToolChoice::Tool("bash".into());
    let request = ChatRequest {
        tool_choice: &choice,
        parallel_tool_calls: false,
        ..ChatRequest::new(&messages, &tools)
    };
    let outcome = call(provider.as_ref(), &request, Mode::Stream).await;
    outcome.response();
    assert_sent_exactly(&server, &outcome.prepared);
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "run ls"},
            {"role": "assistant", "content": "Sure.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "a\nb\n2 entries"},
        ])
    );
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "bash"}})
    );
    assert_eq!(sent["parallel_tool_calls"], false);
    assert_eq!(sent["temperature"], 0.5);
    let estimate = &outcome.prepared.estimate();
    for section in satchel_llm::Section::ALL {
        assert!(estimate.section(section) > 0, "{section:?} is empty");
    }
}

#[tokio::test]
async fn reasoning_deltas_are_shown_as_thinking() {
    let events = vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": "Let me "}),
            None,
        ),
        chunk(json!({"reasoning_content": "think."}), None),
        chunk(json!({"content": "Answer."}), None),
        chunk(json!({}), Some("stop")),
        DONE.to_owned(),
    ];
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.thinking(), "Let me think.");
    assert_eq!(response.text(), "Answer.");
    assert_eq!(response.usage, None);
    assert!(
        outcome
            .events
            .contains(&StreamEvent::ThinkingDelta("think.".into()))
    );
}

// ---- Errors ----

#[tokio::test]
async fn a_rejected_key_names_the_variable_and_the_server() {
    let body = json!({"error": {"message": "Incorrect API key provided: test-key***", "type": "invalid_request_error", "code": "invalid_api_key"}});
    let server = Server::start(vec![Reply::json(401, body.to_string())]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let error = outcome.error();
    assert!(matches!(error, LlmError::Unauthorized { status: 401, .. }));
    assert!(!error.is_retryable());
    assert_eq!(
        error.to_string(),
        format!(
            "the API key in $OPENAI_API_KEY was rejected by {} (401: Incorrect API key provided: \
             test-key***); check it, or name the right variable in `llm.apiKeyEnv`",
            server.url("/v1")
        )
    );
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn an_unknown_model_says_which_and_how_to_fix_it() {
    let body = json!({"error": {"message": "model \"llama9\" not found, try pulling it first", "type": "api_error"}});
    let server = Server::start(vec![Reply::json(404, body.to_string())]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.model = Some("llama9".into());
        c.base_url = Some(format!("http://127.0.0.1:{}/v1", server.addr.port()));
    });
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let message = outcome.error().to_string();
    assert!(
        message.starts_with(&format!(
            "{} does not know the model `llama9` (404: model \"llama9\" not found, try pulling it first); check `llm.model` or SATCHEL_MODEL",
            server.url("/v1")
        )),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_time_the_server_asks() {
    let limited = Reply::json(
        429,
        json!({"error": {"message": "Rate limit reached", "type": "requests"}}).to_string(),
    )
    .with_header("Retry-After", "1");
    let server = Server::start(vec![limited, Reply::sse(text_stream(&["fine"]))]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert_eq!(outcome.response().text(), "fine");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(
        waited >= Duration::from_millis(950),
        "retried after {waited:?}"
    );
    assert_sent_exactly(&server, &outcome.prepared);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_reported() {
    let failing = Reply::json(
        503,
        json!({"error": {"message": "The engine is currently overloaded", "type": "server_error"}})
            .to_string(),
    );
    let server = Server::start(vec![
        failing.clone(),
        Reply::sse(text_stream(&["recovered"])),
    ])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert_eq!(outcome.response().text(), "recovered");
    assert_eq!(server.requests().len(), 2);

    let server = Server::start(vec![failing]).await;
    let provider = crate::provider(ProviderKind::OpenAi, &server, |c| c.max_retries = Some(3));
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let error = outcome.error();
    assert!(error.is_retryable());
    assert_eq!(
        error.to_string(),
        format!(
            "{} failed with 503 after 4 attempt(s): The engine is currently overloaded",
            server.url("/v1")
        )
    );
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_fails_at_once() {
    let limited = Reply::json(429, json!({"error": {"message": "quota"}}).to_string())
        .with_header("Retry-After", "3600");
    let server = Server::start(vec![limited]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let started = Instant::now();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(
        outcome.error(),
        LlmError::RateLimited { attempts: 1, retry_after: Some(wait), .. } if wait.as_secs() == 3600
    ));
    assert!(outcome.error().to_string().contains("asks to wait 3600 s"));
}

#[tokio::test]
async fn nothing_listening_at_the_default_endpoint_says_how_to_configure_a_model() {
    let port = closed_port().await;
    let mut config = LlmConfig::default().resolve(&env(&[])).unwrap();
    assert!(config.default_endpoint);
    config.base_url = format!("http://127.0.0.1:{port}/v1");
    config.retry.max_retries = 1;
    config.retry.base_delay = Duration::from_millis(5);
    let provider = connect(config).unwrap();
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let message = outcome.error().to_string();
    let expected_start =
        format!("nothing answers at http://127.0.0.1:{port}/v1 (the default, a local Ollama: ");
    assert!(message.starts_with(&expected_start), "{message}");
    assert!(
        message.ends_with(
            "Point Satchel at a model: set `llm` in .agents/agent.json, or SATCHEL_MODEL and \
             OPENAI_BASE_URL/OPENAI_API_KEY, or ANTHROPIC_API_KEY"
        ),
        "{message}"
    );
    assert!(message.contains("Connection refused"), "{message}");

    // A configured endpoint gets the plain advice.
    let server_less = LlmConfig {
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        max_retries: Some(0),
        ..LlmConfig::default()
    };
    let provider = connect(server_less.resolve(&env(&[])).unwrap()).unwrap();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Whole,
    )
    .await;
    let message = outcome.error().to_string();
    assert!(
        message.starts_with(&format!("cannot reach http://127.0.0.1:{port}/v1 (")),
        "{message}"
    );
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let server = Server::start(vec![Reply::Hang]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.request_timeout_secs = Some(1);
        c.max_retries = Some(1);
    });
    let messages = history();
    let started = Instant::now();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let elapsed = started.elapsed();
    assert!(
        matches!(outcome.error(), LlmError::Timeout { .. }),
        "{}",
        outcome.error()
    );
    assert_eq!(server.requests().len(), 2, "a timeout is retried");
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(8),
        "{elapsed:?}"
    );
    assert!(
        outcome
            .error()
            .to_string()
            .contains("raise `llm.requestTimeoutSecs`")
    );
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_keeps_the_partial_answer() {
    let mut events = text_stream(&["The answer ", "is ", "forty"]);
    events.truncate(4); // role, three words; then the connection drops
    events.push(chunk(json!({"content": "-two"}), None));
    let mut with_tool = vec![chunk(json!({"content": "Running it."}), None)];
    with_tool.extend(tool_call_chunks(
        0,
        "call_x",
        "bash",
        r#"{"command":"ls"}"#,
        3,
    ));
    for (events, cut, expected_text) in [
        (events.clone(), End::CutAfter(4), "The answer is forty"),
        (
            with_tool.clone(),
            End::CutAfter(with_tool.len() - 1),
            "Running it.",
        ),
    ] {
        let server = Server::start(vec![Reply::Sse {
            events,
            piece: 0,
            delay: Duration::ZERO,
            end: cut,
        }])
        .await;
        let provider = provider(ProviderKind::OpenAi, &server, |_| {});
        let messages = history();
        let outcome = call(
            provider.as_ref(),
            &ChatRequest::new(&messages, &[]),
            Mode::Stream,
        )
        .await;
        let error = outcome.error();
        let partial = error.partial_response().expect("partial answer kept");
        assert_eq!(partial.text(), expected_text);
        assert_eq!(partial.stop_reason, StopReason::Interrupted);
        assert!(
            partial.tool_calls.is_empty(),
            "an unfinished tool call is dropped"
        );
        assert!(error.to_string().contains("was cut off"), "{error}");
        assert_eq!(server.requests().len(), 1, "never retried after content");
    }
}

#[tokio::test]
async fn a_stream_cut_before_any_content_is_retried() {
    let cut = Reply::Sse {
        events: vec![
            ": keep-alive\n\n".into(),
            chunk(json!({"content": "lost"}), None),
        ],
        piece: 0,
        delay: Duration::ZERO,
        end: End::CutAfter(1),
    };
    let server = Server::start(vec![cut, Reply::sse(text_stream(&["whole"]))]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert_eq!(outcome.response().text(), "whole");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_that_goes_silent_is_cut_after_the_timeout() {
    let server = Server::start(vec![Reply::Sse {
        events: text_stream(&["partial", "never"]),
        piece: 0,
        delay: Duration::ZERO,
        end: End::HangAfter(2),
    }])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.request_timeout_secs = Some(1)
    });
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let error = outcome.error();
    assert_eq!(error.partial_response().unwrap().text(), "partial");
    assert!(
        error.to_string().contains("sent nothing for 1 s"),
        "{error}"
    );
}

#[tokio::test]
async fn cancellation_aborts_the_request_at_once() {
    let server = Server::start(vec![Reply::Hang]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = call_with(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
        cancel,
    )
    .await;
    let cancelled_after = started.elapsed();
    assert!(matches!(outcome.error(), LlmError::Cancelled));
    assert!(
        cancelled_after < Duration::from_millis(1_500),
        "{cancelled_after:?}"
    );
    // The server sees the connection close right away.
    for _ in 0..100 {
        if !server.closed().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.closed().len(), 1, "the connection was not closed");
}

#[tokio::test]
async fn cancellation_interrupts_a_retry_backoff() {
    let limited = Reply::json(429, "{}").with_header("Retry-After", "20");
    let server = Server::start(vec![limited]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.retry_max_delay_ms = Some(60_000)
    });
    let messages = history();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = call_with(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
        cancel,
    )
    .await;
    assert!(matches!(outcome.error(), LlmError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_object_in_the_stream_is_reported() {
    let events = vec![event(
        None,
        &json!({"error": {"message": "context length exceeded", "type": "invalid_request_error"}}),
    )];
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    assert_eq!(
        outcome.error().to_string(),
        format!(
            "{} reported an error (invalid_request_error): context length exceeded",
            server.url("/v1")
        )
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_bad_request_is_not_retried_and_shows_the_servers_words() {
    let body = json!({"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error"}});
    let server = Server::start(vec![Reply::json(400, body.to_string())]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Whole,
    )
    .await;
    assert_eq!(
        outcome.error().to_string(),
        format!(
            "{} rejected the request (400): This model's maximum context length is 128000 tokens.",
            server.url("/v1")
        )
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn openai_itself_gets_max_completion_tokens_and_reasoning_effort() {
    let config = LlmConfig {
        model: Some("o4-mini".into()),
        max_output_tokens: Some(4_000),
        reasoning_effort: Some("low".into()),
        ..LlmConfig::default()
    }
    .resolve(&env(&[("OPENAI_API_KEY", "sk-test")]))
    .unwrap();
    assert_eq!(config.base_url, satchel_llm::OPENAI_URL);
    let provider = connect(config).unwrap();
    let messages = history();
    let prepared = provider
        .prepare(&ChatRequest::new(&messages, &[]), Mode::Whole)
        .unwrap();
    assert_eq!(prepared.url, "https://api.openai.com/v1/chat/completions");
    let body: Value = serde_json::from_slice(&prepared.body).unwrap();
    assert_eq!(body["max_completion_tokens"], 4_000);
    assert_eq!(body.get("max_tokens"), None);
    assert_eq!(body["reasoning_effort"], "low");
    let estimate = prepared.estimate();
    assert_eq!(estimate.encoding, satchel_llm::Encoding::O200k);
    assert_eq!(estimate.context_window, 200_000);
    assert_eq!(estimate.max_output_tokens, Some(4_000));
    assert_eq!(estimate.remaining(), 200_000 - estimate.total);
}
