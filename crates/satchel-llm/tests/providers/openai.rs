//! What only OpenAI Chat Completions has, as documented: the request body
//! and headers (`stream_options.include_usage`, `max_tokens` or
//! `max_completion_tokens`, `tool_choice`, `parallel_tool_calls`), tools
//! as functions, arguments sent back as the model wrote them,
//! `reasoning_content` deltas, cached and reasoning token counts, and the
//! default endpoint (a local Ollama). Behaviours both formats share are
//! in `shared.rs`.

use std::time::Duration;

use expect_test::expect;
use pretty_assertions::assert_eq;
use satchel_core::{AssistantPart, Message, ToolCall, ToolOutput, ToolResults};
use satchel_llm::{
    ChatRequest, LlmConfig, Mode, ProviderKind, StreamEvent, ToolChoice, Usage, connect,
};
use serde_json::{Value, json};

use crate::server::{Reply, Server};
use crate::wire::openai::{DONE, chunk, text, tool_call, usage_chunk};
use crate::wire::{self};
use crate::{assert_sent_exactly, bash_spec, call, closed_port, env, provider, shown};

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("What is in this directory?"),
    ]
}

fn text_stream(words: &[&str]) -> Vec<String> {
    wire::answer(ProviderKind::OpenAi, words)
}

#[tokio::test]
async fn a_streamed_request_is_the_documented_body_and_headers() {
    let mut events = text(&["Hello."]);
    events.push(chunk(json!({}), Some("stop")));
    events.push(usage_chunk(42, 7, 16));
    events.push(DONE.to_owned());
    let server = Server::start(vec![Reply::sse(events)]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.headers.insert("x-team".into(), "infra".into());
    });
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    let response = outcome.response();
    assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 42,
            output_tokens: 7,
            cache_read_tokens: 16,
            cache_write_tokens: 0,
            reasoning_tokens: Some(0),
        })
    );
    assert_sent_exactly(&server, &outcome.prepared);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer test-key-123"));
    assert_eq!(request.header("x-team"), Some("infra"));
    assert_eq!(
        request.json(),
        json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are a careful assistant."},
                {"role": "user", "content": "What is in this directory?"},
            ],
            // No limit configured: an eighth of gpt-4o's window, within its own.
            "max_tokens": 16000,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn a_whole_request_sends_max_tokens_and_reads_cached_tokens() {
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
    let sent = server.requests()[0].json();
    // Not api.openai.com: the widely supported field.
    assert_eq!(sent["max_tokens"], 100);
}

#[tokio::test]
async fn tools_are_functions_and_malformed_arguments_go_back_as_written() {
    let mut events = tool_call(0, "call_bad", "bash", r#"{"command": "ls"#, 4);
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
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["tools"],
        json!([{"type": "function", "function": {
            "name": "bash",
            "description": "Run a shell command and return its output.",
            "parameters": bash_spec().input_schema,
        }}])
    );
    let response = outcome.response();
    let call = &response.tool_calls[0];
    let output = call.invalid_params_output().unwrap();

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
async fn an_unknown_model_says_how_to_fix_it() {
    let body = wire::error_body(
        ProviderKind::OpenAi,
        "api_error",
        "model \"llama9\" not found, try pulling it first",
    );
    let server = Server::start(vec![Reply::json(404, body)]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |c| {
        c.model = Some("llama9".into())
    });
    let messages = history();
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    expect![[r#"<url> does not know the model `llama9` (404: model "llama9" not found, try pulling it first); check `llm.model` or SATCHEL_MODEL; or `llm.baseUrl` is not the API root (requests go to <url>/chat/completions)"#]].assert_eq(&shown(outcome.error(), &server, ProviderKind::OpenAi));
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

#[tokio::test]
async fn nothing_listening_at_the_default_endpoint_says_how_to_configure_a_model() {
    let closed = closed_port().await;
    let port = closed.port;
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
