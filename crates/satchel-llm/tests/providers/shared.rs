//! Behaviours both wire formats share, each written once and run against
//! both providers (`name::openai`, `name::anthropic`): answers streamed and
//! whole, tool calls, usage, retries and Retry-After, timeouts,
//! cancellation, cut-off streams and the errors the user meets. What only
//! one format has (its request body, headers, thinking, reasoning fields)
//! is in `openai.rs` and `anthropic.rs`.

use std::time::{Duration, Instant};

use expect_test::expect;
use satchel_core::{AssistantPart, ErrorCode, Message};
use satchel_llm::{ChatRequest, LlmError, Mode, ProviderKind, StopReason, StreamEvent};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::server::{End, Reply, Server};
use crate::wire::{self, USAGE};
use crate::{
    assert_sent_exactly, bash_spec, call, call_with, closed_port, provider, read_spec, shown,
};

fn history() -> Vec<Message> {
    vec![
        Message::system("You are a careful assistant."),
        Message::user("What is in this directory?"),
    ]
}

/// `events` sent with `end`, event by event.
fn sse_ending(events: Vec<String>, end: End) -> Reply {
    Reply::Sse {
        events,
        piece: 0,
        delay: Duration::ZERO,
        end,
    }
}

/// How many `Retrying` events came.
fn retries(events: &[StreamEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retrying { .. }))
        .count()
}

/// `events` of which the connection drops after the first `keep`.
fn cut_after(events: Vec<String>, keep: usize) -> Reply {
    sse_ending(events, End::CutAfter(keep))
}

both! {
    async fn streams_a_plain_answer_with_usage(kind) {
        let server = Server::start(vec![Reply::sse(wire::answer(kind, &["Hello", ", ", "world", "."]))]).await;
        let provider = provider(kind, &server, |_| {});
        assert!(
            !format!("{provider:?}").contains("test-key-123"),
            "the key leaks through Debug"
        );
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let response = outcome.response();
        assert_eq!(response.text(), "Hello, world.");
        assert_eq!(outcome.streamed_text(), "Hello, world.");
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        let usage = response.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), USAGE);
        // Estimate and usage side by side.
        assert_eq!(response.estimate, *outcome.prepared.estimate());
        assert_eq!(
            response.input_estimate_error(),
            Some(response.estimate.total as i64 - USAGE.0 as i64)
        );
        assert!(matches!(outcome.events.last(), Some(StreamEvent::Done(_))));
        assert_eq!(server.requests()[0].header("accept"), Some("text/event-stream"));
        assert_sent_exactly(&server, &outcome.prepared);
    }
}

both! {
    async fn answers_without_streaming(kind) {
        let body = wire::whole(kind, "Two files.", &[]);
        let server = Server::start(vec![Reply::json(200, body.clone())]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Whole).await;
        let response = outcome.response();
        assert_eq!(response.text(), "Two files.");
        assert_eq!(outcome.streamed_text(), "Two files.");
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        let usage = response.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), USAGE);
        assert_sent_exactly(&server, &outcome.prepared);
        assert_eq!(server.requests()[0].json().get("stream"), None);
        assert_eq!(server.requests()[0].header("accept"), Some("application/json"));

        // `complete` is the same path.
        let server = Server::start(vec![Reply::json(200, body)]).await;
        let provider = crate::provider(kind, &server, |_| {});
        let response = provider
            .complete(&ChatRequest::new(&messages, &[]), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(response.text(), "Two files.");
    }
}

both! {
    async fn assembles_one_tool_call_split_across_many_chunks(kind) {
        let arguments = r#"{"command": "ls -la \"src dir\"", "timeout": 30}"#;
        // Fragments of 2 characters; the network splits the stream every 7
        // bytes, across events and lines.
        let events = wire::tool_calls(kind, "", &[("call_abc", "bash", arguments)], 2);
        let server = Server::start(vec![Reply::Sse {
            events,
            piece: 7,
            delay: Duration::ZERO,
            end: End::Clean,
        }])
        .await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let tools = [bash_spec()];
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &tools), Mode::Stream).await;
        let response = outcome.response();

        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.tool_calls.len(), 1);
        let call = &response.tool_calls[0];
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call_abc", "bash"));
        assert_eq!(call.arguments, arguments);
        assert_eq!(call.input, json!({"command": "ls -la \"src dir\"", "timeout": 30}));
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
        let completed = outcome
            .events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallCompleted { index: 0, call: c } if c == call))
            .count();
        assert_eq!(completed, 1);
        assert_sent_exactly(&server, &outcome.prepared);
        assert!(outcome.prepared.estimate().section(satchel_llm::Section::Tools) > 30);
    }
}

both! {
    async fn assembles_parallel_tool_calls_streamed_and_whole(kind) {
        let calls = [
            ("call_1", "bash", r#"{"command":"ls"}"#),
            ("call_2", "read_file", r#"{"path":"README.md"}"#),
            ("call_3", "read_file", r#"{"path":"Cargo.toml"}"#),
        ];
        let messages = history();
        let tools = [bash_spec(), read_spec()];
        for (reply, mode) in [
            (Reply::sse(wire::tool_calls(kind, "Looking.", &calls, 3)), Mode::Stream),
            (Reply::json(200, wire::whole(kind, "Looking.", &calls)), Mode::Whole),
        ] {
            let server = Server::start(vec![reply]).await;
            let provider = provider(kind, &server, |_| {});
            let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &tools), mode).await;
            let response = outcome.response();
            assert_eq!(response.text(), "Looking.", "{mode:?}");
            assert_eq!(response.stop_reason, StopReason::ToolUse, "{mode:?}");
            let got: Vec<(String, String, Value)> = response
                .tool_calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone(), c.input.clone()))
                .collect();
            assert_eq!(
                got,
                vec![
                    ("call_1".into(), "bash".into(), json!({"command": "ls"})),
                    ("call_2".into(), "read_file".into(), json!({"path": "README.md"})),
                    ("call_3".into(), "read_file".into(), json!({"path": "Cargo.toml"})),
                ],
                "{mode:?}"
            );
            let completed: Vec<usize> = outcome
                .events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolCallCompleted { index, .. } => Some(*index),
                    _ => None,
                })
                .collect();
            assert_eq!(completed, vec![0, 1, 2], "{mode:?}");
            assert_sent_exactly(&server, &outcome.prepared);
        }
    }
}

both! {
    /// How each format sends the call back is in its own file.
    async fn malformed_arguments_become_an_invalid_params_result_the_model_can_fix(kind) {
        let events = wire::tool_calls(kind, "", &[("call_bad", "bash", r#"{"command": "ls"#)], 4);
        let server = Server::start(vec![Reply::sse(events)]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let tools = [bash_spec()];
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &tools), Mode::Stream).await;
        let call = &outcome.response().tool_calls[0];
        expect![[r#"the arguments are not valid JSON (EOF while parsing a string at line 1 column 15)"#]]
            .assert_eq(call.error.as_deref().unwrap());
        assert!(call.to_tool_call().is_none());
        let output = call.invalid_params_output().unwrap();
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
        assert_eq!(
            output.results.structured().unwrap()["arguments"],
            r#"{"command": "ls"#
        );
    }
}

both! {
    async fn rate_limits_are_retried_after_the_time_the_server_asks(kind) {
        let limited = Reply::json(429, wire::error_body(kind, "rate_limit_error", "slow down"))
            .with_header("Retry-After", "1");
        let server = Server::start(vec![limited, Reply::sse(wire::answer(kind, &["fine"]))]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        assert_eq!(outcome.response().text(), "fine");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let waited = requests[1].at - requests[0].at;
        assert!(waited >= Duration::from_millis(950), "retried after {waited:?}");
        assert_eq!(retries(&outcome.events), 1);
        assert_sent_exactly(&server, &outcome.prepared);
    }
}

both! {
    async fn a_retry_after_beyond_the_limit_fails_at_once(kind) {
        let limited = Reply::json(429, wire::error_body(kind, "rate_limit_error", "quota"))
            .with_header("Retry-After", "3600");
        let server = Server::start(vec![limited]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let started = Instant::now();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(matches!(
            outcome.error(),
            LlmError::RateLimited { attempts: 1, retry_after: Some(wait), .. } if wait.as_secs() == 3600
        ));
        expect![[r#"<url> is rate limiting this key (429 after 1 attempt(s), asks to wait 3600 s): quota"#]]
            .assert_eq(&shown(outcome.error(), &server, kind));
    }
}

both! {
    /// 500, 502, 503 and 529 (Anthropic's overload) are retried with
    /// backoff, then reported with the status and the server's words.
    async fn server_errors_are_retried_with_backoff_then_reported(kind) {
        let failing = |status| Reply::json(status, wire::error_body(kind, "api_error", "upstream down"));
        let server = Server::start(vec![failing(503), Reply::sse(wire::answer(kind, &["recovered"]))]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let request = ChatRequest::new(&messages, &[]);
        let outcome = call(provider.as_ref(), &request, Mode::Stream).await;
        assert_eq!(outcome.response().text(), "recovered");
        assert_eq!(server.requests().len(), 2);

        for status in [500, 502, 503, 529] {
            let server = Server::start(vec![failing(status)]).await;
            let provider = crate::provider(kind, &server, |_| {});
            let outcome = call(provider.as_ref(), &request, Mode::Stream).await;
            let error = outcome.error();
            assert!(error.is_retryable());
            assert!(
                matches!(error, LlmError::Server { status: s, attempts: 3, .. } if *s == status),
                "{error}"
            );
            assert_eq!(
                shown(error, &server, kind),
                format!("<url> failed with {status} after 3 attempt(s): upstream down")
            );
            assert_eq!(server.requests().len(), 3, "maxRetries 2: three attempts");
            assert_eq!(retries(&outcome.events), 2);
        }
    }
}

both! {
    async fn a_rejected_key_names_the_variable_and_the_server(kind) {
        let body = wire::error_body(kind, "authentication_error", "Incorrect API key provided: test-key***");
        let server = Server::start(vec![Reply::json(401, body)]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let error = outcome.error();
        assert!(matches!(error, LlmError::Unauthorized { status: 401, .. }));
        assert!(!error.is_retryable());
        let key_var = match kind {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        };
        assert_eq!(
            shown(error, &server, kind),
            format!(
                "the API key in ${key_var} was rejected by <url> (401: Incorrect API key provided: \
                 test-key***); check it, or name the right variable in `llm.apiKeyEnv`"
            )
        );
        assert_eq!(server.requests().len(), 1, "a 401 is not retried");
    }
}

both! {
    /// The advice after the first sentence differs by provider (Ollama's
    /// `pull`, or the models page); see each provider's file.
    async fn an_unknown_model_says_which(kind) {
        let body = wire::error_body(kind, "not_found_error", "model \"llama9\" not found");
        let server = Server::start(vec![Reply::json(404, body)]).await;
        let provider = provider(kind, &server, |c| c.model = Some("llama9".into()));
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let message = shown(outcome.error(), &server, kind);
        assert!(
            message.starts_with(
                "<url> does not know the model `llama9` (404: model \"llama9\" not found); check `llm.model` or SATCHEL_MODEL"
            ),
            "{message}"
        );
        assert!(!outcome.error().is_retryable());
        assert_eq!(server.requests().len(), 1);
    }
}

both! {
    async fn a_bad_request_is_not_retried_and_shows_the_servers_words(kind) {
        let body = wire::error_body(kind, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum");
        let server = Server::start(vec![Reply::json(400, body)]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Whole).await;
        expect![[r#"<url> rejected the request (400): prompt is too long: 210000 tokens > 200000 maximum"#]]
            .assert_eq(&shown(outcome.error(), &server, kind));
        assert_eq!(server.requests().len(), 1);
    }
}

both! {
    async fn an_error_in_the_stream_is_reported_and_not_retried(kind) {
        let mut events = wire::unfinished(kind, &[]);
        events.truncate(1);
        events.push(wire::stream_error(kind, "invalid_request_error", "context length exceeded"));
        let server = Server::start(vec![Reply::sse(events)]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        expect![[r#"<url> reported an error (invalid_request_error): context length exceeded"#]]
            .assert_eq(&shown(outcome.error(), &server, kind));
        assert_eq!(server.requests().len(), 1);
    }
}

both! {
    async fn an_overload_in_the_stream_before_content_is_retried(kind) {
        let overload = match kind {
            ProviderKind::OpenAi => "server_error",
            ProviderKind::Anthropic => "overloaded_error",
        };
        let mut events = wire::unfinished(kind, &[]);
        events.truncate(1);
        events.push(wire::stream_error(kind, overload, "Overloaded"));
        let server = Server::start(vec![Reply::sse(events), Reply::sse(wire::answer(kind, &["here"]))]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        assert_eq!(outcome.response().text(), "here");
        assert_eq!(server.requests().len(), 2);
        assert_eq!(retries(&outcome.events), 1);
    }
}

both! {
    async fn an_error_in_the_stream_after_content_keeps_the_partial_answer(kind) {
        let mut events = wire::unfinished(kind, &["Half an"]);
        events.push(wire::stream_error(kind, "overloaded_error", "Overloaded"));
        let server = Server::start(vec![Reply::sse(events)]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let error = outcome.error();
        assert!(matches!(error, LlmError::Interrupted { .. }), "{error}");
        assert_eq!(error.partial_response().unwrap().text(), "Half an");
        expect![[r#"the answer from <url> was cut off: <url> reported an error (overloaded_error): Overloaded"#]]
            .assert_eq(&shown(error, &server, kind));
        assert_eq!(server.requests().len(), 1);
    }
}

both! {
    async fn a_silent_server_times_out_and_is_retried(kind) {
        let server = Server::start(vec![Reply::Hang]).await;
        let provider = provider(kind, &server, |c| {
            c.request_timeout_secs = Some(1);
            c.max_retries = Some(1);
        });
        let messages = history();
        let started = Instant::now();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let elapsed = started.elapsed();
        assert!(matches!(outcome.error(), LlmError::Timeout { .. }), "{}", outcome.error());
        assert_eq!(server.requests().len(), 2, "a timeout is retried");
        assert!(
            elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(8),
            "{elapsed:?}"
        );
        expect![[r#"<url> sent nothing for 1 s (waiting for the response); raise `llm.requestTimeoutSecs` for slow local models"#]]
            .assert_eq(&shown(outcome.error(), &server, kind));
    }
}

both! {
    async fn nothing_listening_at_a_configured_address_is_reported(kind) {
        let closed = closed_port().await;
    let port = closed.port;
        let server = Server::start(vec![]).await;
        let provider = provider(kind, &server, |c| {
            c.base_url = Some(format!("http://127.0.0.1:{port}"));
            c.max_retries = Some(0);
        });
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let message = outcome.error().to_string();
        assert!(
            message.starts_with(&format!("cannot reach http://127.0.0.1:{port} (")),
            "{message}"
        );
        assert!(message.contains("Connection refused"), "{message}");
    }
}

both! {
    /// A cut mid-text keeps the text; a cut mid tool-call arguments keeps
    /// the text and drops the call (it never runs). Never retried: the
    /// caller has shown the content.
    async fn a_stream_cut_in_the_middle_keeps_the_partial_answer(kind) {
        let text = wire::answer(kind, &["The answer ", "is ", "forty", "-two"]);
        let text_cut = text.iter().position(|e| e.contains("-two")).unwrap();
        let tool = wire::tool_calls_open(kind, "Running it.", &[("call_x", "bash", r#"{"command":"ls"}"#)], 3);
        let tool_cut = tool.len() - 1;
        for (events, cut, expected_text) in [
            (text, text_cut, "The answer is forty"),
            (tool, tool_cut, "Running it."),
        ] {
            let server = Server::start(vec![cut_after(events, cut)]).await;
            let provider = provider(kind, &server, |_| {});
            let messages = history();
            let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
            let error = outcome.error();
            let partial = error.partial_response().expect("partial answer kept");
            assert_eq!(partial.text(), expected_text);
            assert_eq!(partial.stop_reason, StopReason::Interrupted);
            assert!(partial.tool_calls.is_empty(), "an unfinished tool call is dropped");
            assert!(error.to_string().contains("was cut off"), "{error}");
            assert_eq!(server.requests().len(), 1, "never retried after content");
        }
    }
}

both! {
    async fn a_stream_cut_before_any_content_is_retried(kind) {
        let mut events = vec![": keep-alive\n\n".to_owned()];
        events.extend(wire::unfinished(kind, &["lost"]));
        let keep = events.len() - 1;
        let server = Server::start(vec![cut_after(events, keep), Reply::sse(wire::answer(kind, &["whole"]))]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        assert_eq!(outcome.response().text(), "whole");
        assert_eq!(outcome.streamed_text(), "whole");
        assert_eq!(server.requests().len(), 2);
        assert_eq!(retries(&outcome.events), 1);
    }
}

both! {
    async fn a_stream_that_goes_silent_is_cut_after_the_timeout(kind) {
        let events = wire::answer(kind, &["partial", "never"]);
        let keep = events.iter().position(|e| e.contains("never")).unwrap();
        let server = Server::start(vec![sse_ending(events, End::HangAfter(keep))]).await;
        let provider = provider(kind, &server, |c| c.request_timeout_secs = Some(1));
        let messages = history();
        let outcome = call(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream).await;
        let error = outcome.error();
        assert_eq!(error.partial_response().unwrap().text(), "partial");
        expect![[r#"the answer from <url> was cut off: <url> sent nothing for 1 s (waiting for the next part of the stream); raise `llm.requestTimeoutSecs` for slow local models"#]]
            .assert_eq(&shown(error, &server, kind));
        assert_eq!(server.requests().len(), 1);
    }
}

both! {
    async fn cancellation_aborts_the_request_at_once(kind) {
        let server = Server::start(vec![Reply::Hang]).await;
        let provider = provider(kind, &server, |_| {});
        let messages = history();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let outcome = call_with(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream, cancel).await;
        let cancelled_after = started.elapsed();
        assert!(matches!(outcome.error(), LlmError::Cancelled));
        assert!(cancelled_after < Duration::from_millis(1_500), "{cancelled_after:?}");
        // The server sees the connection close right away.
        for _ in 0..100 {
            if !server.closed().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(server.closed().len(), 1, "the connection was not closed");
    }
}

both! {
    async fn cancellation_interrupts_a_retry_backoff(kind) {
        let limited = Reply::json(429, wire::error_body(kind, "rate_limit_error", "wait"))
            .with_header("Retry-After", "20");
        let server = Server::start(vec![limited]).await;
        let provider = provider(kind, &server, |c| c.retry_max_delay_ms = Some(60_000));
        let messages = history();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let outcome = call_with(provider.as_ref(), &ChatRequest::new(&messages, &[]), Mode::Stream, cancel).await;
        assert!(matches!(outcome.error(), LlmError::Cancelled));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(server.requests().len(), 1);
    }
}

/// The tool list goes before the system prompt and the messages, so the
/// requests of every conversation over the same tools start with the same
/// bytes through the last tool: the token count resumes after them.
#[tokio::test]
async fn requests_over_the_same_tools_share_their_bytes_through_the_tools() {
    let server = Server::start(Vec::new()).await;
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let provider = provider(kind, &server, |_| {});
        let tools = [bash_spec(), read_spec()];
        let body = |conversation: &str| {
            let messages = vec![
                Message::system(format!("You help with {conversation}.")),
                Message::user(format!("A question about {conversation}")),
            ];
            let prepared = provider
                .prepare(&ChatRequest::new(&messages, &tools), Mode::Stream)
                .unwrap();
            prepared.body_text().to_owned()
        };
        let (one, two) = (body("gardens"), body("boats"));
        let shared = one
            .bytes()
            .zip(two.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(
            one[..shared].contains("Read a text file."),
            "{kind:?}: the bodies part before the end of the tools: {}",
            &one[..shared]
        );
    }
}
