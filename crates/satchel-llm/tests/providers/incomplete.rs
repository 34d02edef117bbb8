//! Answers that end without the provider saying they are finished, in both
//! wire formats: an OpenAI-compatible answer is finished only by a choice
//! with a `finish_reason`, an Anthropic one only by `message_stop` after a
//! `message_delta` with a `stop_reason`. Anything else is incomplete:
//! retried when nothing of it was delivered, else an error that keeps the
//! partial answer and says what happened; never a finished answer.
//!
//! Reproduces a report against llama.cpp's server (llama-cpp-python), which
//! closes an interrupted stream with `data: [DONE]` and no `finish_reason`.

use pretty_assertions::assert_eq;
use satchel_core::Message;
use satchel_llm::{ChatRequest, LlmError, Mode, ProviderKind, StopReason, StreamEvent};
use serde_json::json;

use crate::server::{End, Reply, Server};
use crate::wire::anthropic::{block_stop, message_delta, message_stop};
use crate::wire::openai::DONE;
use crate::wire::{self};
use crate::{call, provider};

fn openai_text(words: &[&str]) -> Vec<String> {
    wire::unfinished(ProviderKind::OpenAi, words)
}

fn openai_finished(words: &[&str]) -> Vec<String> {
    wire::answer(ProviderKind::OpenAi, words)
}

fn anthropic_text(words: &[&str]) -> Vec<String> {
    let mut events = wire::unfinished(ProviderKind::Anthropic, words);
    events.push(block_stop(0));
    events
}

fn anthropic_delta() -> String {
    message_delta("end_turn", 3)
}

fn anthropic_finished(words: &[&str]) -> Vec<String> {
    wire::answer(ProviderKind::Anthropic, words)
}

async fn stream_once(kind: ProviderKind, replies: Vec<Reply>) -> (crate::Outcome, Server) {
    let server = Server::start(replies).await;
    let provider = provider(kind, &server, |_| {});
    let messages = vec![Message::user("hi")];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Stream,
    )
    .await;
    (outcome, server)
}

fn retries(outcome: &crate::Outcome) -> Vec<String> {
    outcome
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// An answer that has been shown in part and then ends without its
/// finishing word is an error with the partial answer, never retried.
#[tokio::test]
async fn a_partial_answer_without_its_finishing_word_is_an_error_not_an_answer() {
    let mut done_without_finish = openai_text(&["The ", "answer ", "is"]);
    done_without_finish.push(DONE.into());
    let cut_before_finish = openai_text(&["The ", "answer ", "is"]);
    let mut anthropic_no_stop = anthropic_text(&["The ", "answer ", "is"]);
    anthropic_no_stop.push(anthropic_delta());
    let mut anthropic_stop_without_reason = anthropic_text(&["The ", "answer ", "is"]);
    anthropic_stop_without_reason.push(message_stop());
    let cases = [
        (
            ProviderKind::OpenAi,
            Reply::sse(done_without_finish),
            "the server ended the stream after 3 streamed part(s)",
            "no choice carried a `finish_reason`",
        ),
        (
            ProviderKind::OpenAi,
            Reply::sse(cut_before_finish.clone()),
            "the connection closed after 3 streamed part(s)",
            "no choice carried a `finish_reason`",
        ),
        (
            ProviderKind::OpenAi,
            Reply::Sse {
                end: End::CutAfter(cut_before_finish.len()),
                events: cut_before_finish,
                piece: 0,
                delay: std::time::Duration::ZERO,
            },
            "the connection failed after 3 streamed part(s)",
            "",
        ),
        (
            ProviderKind::Anthropic,
            Reply::sse(anthropic_no_stop),
            "the connection closed after 3 streamed part(s)",
            "no `message_stop` event came",
        ),
        (
            ProviderKind::Anthropic,
            Reply::sse(anthropic_stop_without_reason),
            "the server ended the stream after 3 streamed part(s)",
            "no `message_delta` carried a `stop_reason`",
        ),
    ];
    for (kind, reply, how, missing) in cases {
        let (outcome, server) = stream_once(kind, vec![reply]).await;
        let error = outcome.error();
        let message = error.to_string();
        assert!(
            matches!(error, LlmError::Interrupted { .. }),
            "{kind:?}: {message}"
        );
        assert!(message.contains(how), "{kind:?}: {message}");
        assert!(message.contains(missing), "{kind:?}: {message}");
        let partial = error.partial_response().unwrap();
        assert_eq!(partial.text(), "The answer is");
        assert_eq!(partial.stop_reason, StopReason::Interrupted);
        assert_eq!(outcome.streamed_text(), "The answer is");
        assert_eq!(server.requests().len(), 1, "never retried after content");
    }
}

/// Nothing was delivered: the same request goes again, the caller is
/// told why, and the second attempt's finished answer is the answer.
#[tokio::test]
async fn an_unfinished_answer_before_any_content_is_retried_and_the_retry_is_reported() {
    let mut openai_empty_done = openai_text(&[]);
    openai_empty_done.push(DONE.into());
    let mut anthropic_empty = anthropic_text(&[]);
    anthropic_empty.push(message_stop());
    let cases = [
        (
            ProviderKind::OpenAi,
            Reply::sse(openai_empty_done),
            Reply::sse(openai_finished(&["whole"])),
        ),
        (
            ProviderKind::Anthropic,
            Reply::sse(anthropic_empty),
            Reply::sse(anthropic_finished(&["whole"])),
        ),
    ];
    for (kind, first, second) in cases {
        let (outcome, server) = stream_once(kind, vec![first, second]).await;
        assert_eq!(outcome.response().text(), "whole", "{kind:?}");
        assert_eq!(server.requests().len(), 2, "{kind:?}");
        let retries = retries(&outcome);
        assert_eq!(retries.len(), 1, "{kind:?}: {retries:?}");
        assert!(
            retries[0].contains("the server ended the stream before any answer"),
            "{kind:?}: {retries:?}"
        );
        assert_eq!(
            server.requests()[0].body,
            server.requests()[1].body,
            "a retry re-sends the same request"
        );
    }
}

/// Retries spent: the error says the answer was incomplete; no answer.
#[tokio::test]
async fn an_answer_that_never_finishes_is_reported_once_retries_are_spent() {
    let mut empty = openai_text(&[]);
    empty.push(DONE.into());
    let (outcome, server) = stream_once(ProviderKind::OpenAi, vec![Reply::sse(empty)]).await;
    let error = outcome.error();
    assert!(matches!(error, LlmError::Incomplete { .. }), "{error}");
    assert!(error.to_string().contains("was incomplete"), "{error}");
    assert_eq!(server.requests().len(), 3, "maxRetries 2: three attempts");
    assert_eq!(retries(&outcome).len(), 2);
}

/// A whole (non-streamed) answer needs its finishing word too.
#[tokio::test]
async fn a_whole_answer_without_a_finish_reason_is_retried() {
    let unfinished = json!({"id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "half"}}]});
    let finished = json!({"id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"},
                     "finish_reason": "stop"}]});
    let server = Server::start(vec![
        Reply::json(200, unfinished.to_string()),
        Reply::json(200, finished.to_string()),
    ])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |_| {});
    let messages = vec![Message::user("hi")];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&messages, &[]),
        Mode::Whole,
    )
    .await;
    assert_eq!(outcome.response().text(), "whole");
    assert!(
        outcome.streamed_text() == "whole",
        "the unfinished attempt's text never reached the caller"
    );
    assert_eq!(server.requests().len(), 2);
}

/// Pages and bodies that are not the wire format: a clear error, not an
/// empty answer.
#[tokio::test]
async fn an_html_page_or_a_body_that_is_not_json_is_a_clear_error() {
    let html = Reply::json(200, "<html><body>502 Bad Gateway</body></html>")
        .with_header("Content-Type", "text/html");
    let not_json = Reply::json(200, "this is not json");
    let malformed_sse = Reply::sse(vec!["data: {\"choices\": [\n\n".into()]);
    for (kind, reply) in [
        (ProviderKind::OpenAi, html.clone()),
        (ProviderKind::Anthropic, html),
        (ProviderKind::OpenAi, not_json.clone()),
        (ProviderKind::Anthropic, not_json),
        (ProviderKind::OpenAi, malformed_sse.clone()),
        (ProviderKind::Anthropic, malformed_sse),
    ] {
        let (outcome, _server) = stream_once(kind, vec![reply]).await;
        let error = outcome.error();
        assert!(
            matches!(error, LlmError::InvalidResponse { .. }),
            "{kind:?}: {error}"
        );
        assert!(
            error
                .to_string()
                .contains("format Satchel does not understand"),
            "{error}"
        );
    }
}
