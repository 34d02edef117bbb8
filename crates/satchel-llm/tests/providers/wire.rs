//! What each provider's server sends, as its documentation shows it:
//! `openai` (Chat Completions chunks, `data: [DONE]`) and `anthropic`
//! (Messages events), and the same replies chosen by [`ProviderKind`], so
//! a behaviour test is written once for both.

use satchel_llm::ProviderKind;
use serde_json::{Value, json};

use crate::server::event;

/// Input and output tokens every finished answer here reports.
pub(crate) const USAGE: (u64, u64) = (42, 7);

/// OpenAI Chat Completions.
pub(crate) mod openai {
    use super::*;

    pub(crate) const DONE: &str = "data: [DONE]\n\n";

    pub(crate) fn chunk(delta: Value, finish: Option<&str>) -> String {
        event(
            None,
            &json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            }),
        )
    }

    pub(crate) fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> String {
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

    /// The role chunk, then one chunk per word: no finish yet.
    pub(crate) fn text(words: &[&str]) -> Vec<String> {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        events.extend(words.iter().map(|w| chunk(json!({"content": w}), None)));
        events
    }

    /// Tool-call chunks as OpenAI sends them: the first carries index, id,
    /// type and name with empty arguments; the rest carry argument
    /// fragments of `piece` characters.
    pub(crate) fn tool_call(
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

    /// The finishing chunk, usage, `[DONE]`.
    pub(crate) fn end(finish: &str) -> Vec<String> {
        vec![
            chunk(json!({}), Some(finish)),
            usage_chunk(USAGE.0, USAGE.1, 0),
            DONE.to_owned(),
        ]
    }
}

/// Anthropic Messages.
pub(crate) mod anthropic {
    use super::*;

    /// An event named after its `type`.
    pub(crate) fn ev(data: Value) -> String {
        let name = data["type"].as_str().unwrap().to_owned();
        event(Some(&name), &data)
    }

    pub(crate) fn message_start(input_tokens: u64) -> String {
        ev(json!({"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}
        }}))
    }

    /// A text block's start and deltas, without its stop.
    pub(crate) fn text_open(index: usize, pieces: &[&str]) -> Vec<String> {
        let mut events = vec![ev(
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        )];
        for piece in pieces {
            events.push(ev(json!({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "text_delta", "text": piece}})));
        }
        events
    }

    pub(crate) fn block_stop(index: usize) -> String {
        ev(json!({"type": "content_block_stop", "index": index}))
    }

    pub(crate) fn text_block(index: usize, pieces: &[&str]) -> Vec<String> {
        let mut events = text_open(index, pieces);
        events.push(block_stop(index));
        events
    }

    /// A tool-use block whose input comes in fragments of `piece` characters.
    pub(crate) fn tool_block(
        index: usize,
        id: &str,
        name: &str,
        input: &str,
        piece: usize,
    ) -> Vec<String> {
        let mut events = vec![ev(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))];
        let chars: Vec<char> = input.chars().collect();
        for fragment in chars.chunks(piece) {
            let fragment: String = fragment.iter().collect();
            events.push(ev(json!({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "input_json_delta", "partial_json": fragment}})));
        }
        events.push(block_stop(index));
        events
    }

    pub(crate) fn thinking_block(index: usize, pieces: &[&str], signature: &str) -> Vec<String> {
        let mut events = vec![ev(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": ""}}))];
        for piece in pieces {
            events.push(ev(json!({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "thinking_delta", "thinking": piece}})));
        }
        events.push(ev(json!({"type": "content_block_delta", "index": index,
                              "delta": {"type": "signature_delta", "signature": signature}})));
        events.push(block_stop(index));
        events
    }

    pub(crate) fn message_delta(stop_reason: &str, output_tokens: u64) -> String {
        ev(json!({"type": "message_delta",
                  "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                  "usage": {"output_tokens": output_tokens}}))
    }

    pub(crate) fn message_stop() -> String {
        ev(json!({"type": "message_stop"}))
    }

    pub(crate) fn end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
        vec![message_delta(stop_reason, output_tokens), message_stop()]
    }
}

/// The events of an answer that has begun with `words` and not finished.
pub(crate) fn unfinished(kind: ProviderKind, words: &[&str]) -> Vec<String> {
    match kind {
        ProviderKind::OpenAi => openai::text(words),
        ProviderKind::Anthropic => {
            let mut events = vec![anthropic::message_start(USAGE.0)];
            events.extend(anthropic::text_open(0, words));
            events
        }
    }
}

/// A finished text answer of `words`, with [`USAGE`].
pub(crate) fn answer(kind: ProviderKind, words: &[&str]) -> Vec<String> {
    let mut events = unfinished(kind, words);
    match kind {
        ProviderKind::OpenAi => events.extend(openai::end("stop")),
        ProviderKind::Anthropic => {
            events.push(anthropic::block_stop(0));
            events.extend(anthropic::end("end_turn", USAGE.1));
        }
    }
    events
}

/// `text` (when not empty), then `calls` (id, name, arguments) with their
/// arguments in fragments of `piece` characters, finished for tool use.
pub(crate) fn tool_calls(
    kind: ProviderKind,
    text: &str,
    calls: &[(&str, &str, &str)],
    piece: usize,
) -> Vec<String> {
    let mut events = tool_calls_open(kind, text, calls, piece);
    match kind {
        ProviderKind::OpenAi => events.extend(openai::end("tool_calls")),
        ProviderKind::Anthropic => events.extend(anthropic::end("tool_use", USAGE.1)),
    }
    events
}

/// As [`tool_calls`], without the end.
pub(crate) fn tool_calls_open(
    kind: ProviderKind,
    text: &str,
    calls: &[(&str, &str, &str)],
    piece: usize,
) -> Vec<String> {
    match kind {
        ProviderKind::OpenAi => {
            let mut events = vec![openai::chunk(
                json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }}),
                None,
            )];
            for (i, (id, name, args)) in calls.iter().enumerate() {
                events.extend(openai::tool_call(i, id, name, args, piece));
            }
            events
        }
        ProviderKind::Anthropic => {
            let mut events = vec![anthropic::message_start(USAGE.0)];
            let first = usize::from(!text.is_empty());
            if !text.is_empty() {
                events.extend(anthropic::text_block(0, &[text]));
            }
            for (i, (id, name, args)) in calls.iter().enumerate() {
                events.extend(anthropic::tool_block(first + i, id, name, args, piece));
            }
            events
        }
    }
}

/// A whole (non-streamed) answer: `text`, then `calls`, with [`USAGE`].
pub(crate) fn whole(kind: ProviderKind, text: &str, calls: &[(&str, &str, &str)]) -> String {
    let (input, output) = USAGE;
    match kind {
        ProviderKind::OpenAi => {
            let mut message = json!({"role": "assistant", "content": text, "refusal": null});
            if !calls.is_empty() {
                message["tool_calls"] = calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                    })
                    .collect();
            }
            json!({
                "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "message": message, "logprobs": null,
                             "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
            })
        }
        ProviderKind::Anthropic => {
            let mut content = vec![json!({"type": "text", "text": text})];
            content.extend(calls.iter().map(|(id, name, args)| {
                json!({"type": "tool_use", "id": id, "name": name,
                       "input": serde_json::from_str::<Value>(args).unwrap()})
            }));
            json!({
                "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                "content": content,
                "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }, "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": output},
            })
        }
    }
    .to_string()
}

/// An error body for a non-2xx status, in the provider's shape.
pub(crate) fn error_body(kind: ProviderKind, error_type: &str, message: &str) -> String {
    match kind {
        ProviderKind::OpenAi => json!({"error": {"message": message, "type": error_type}}),
        ProviderKind::Anthropic => {
            json!({"type": "error", "error": {"type": error_type, "message": message}})
        }
    }
    .to_string()
}

/// An error reported inside a stream, as the provider sends it.
pub(crate) fn stream_error(kind: ProviderKind, error_type: &str, message: &str) -> String {
    match kind {
        ProviderKind::OpenAi => event(
            None,
            &json!({"error": {"message": message, "type": error_type}}),
        ),
        ProviderKind::Anthropic => anthropic::ev(
            json!({"type": "error", "error": {"type": error_type, "message": message}}),
        ),
    }
}
