//! Reading a turn's answer into what the loop acts on: the parts to keep
//! in the history and the calls to run ([`Planned`]), natively or parsed
//! from a prompted-mode reply (a malformed call becomes a preset error the
//! model reads, never a guess). Calls asked for in the last turn, when
//! tools were off, are dropped here so that no call goes without a result.

use satchel_core::{AssistantPart, ErrorCode, ToolCall, ToolOutput};
use satchel_llm::prompted::{ReplyOutcome, parse_reply};
use satchel_llm::{AssembledToolCall, Response, StopReason};

use crate::history::text_of;
use crate::{AgentEvent, EventSink};

/// The name a prompted reply that could not be read is recorded under.
pub(super) const UNREADABLE_REPLY: &str = "(unreadable reply)";

/// A call to run, or the output it gets without running (malformed).
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) call: ToolCall,
    pub(super) preset: Option<ToolOutput>,
}

impl Planned {
    fn native(assembled: &AssembledToolCall) -> Planned {
        Planned {
            call: ToolCall {
                id: assembled.id.clone(),
                name: assembled.name.clone(),
                input: assembled.input.clone(),
            },
            preset: assembled.invalid_params_output(),
        }
    }
}

/// A turn's answer as the loop acts on it.
pub(super) struct Answer {
    /// What goes into the history: text, thinking, the calls.
    pub(super) parts: Vec<AssistantPart>,
    /// The calls to run, in the order asked.
    pub(super) calls: Vec<Planned>,
    /// Prompted mode: the reply as the model wrote it.
    pub(super) raw_reply: Option<String>,
    /// The model asked for tools in a turn without them; they were dropped.
    pub(super) tools_refused: bool,
    /// Prompted mode: why the reply could not be read, when it could not.
    pub(super) unreadable: Option<String>,
}

/// Reads `response`, turn `turn` of a statement; in prompted mode its
/// prose is told to `sink` (it was not streamed, being inside JSON), and
/// the calls of a turn with `tools_off` are dropped with a notice.
pub(super) fn read_answer(
    response: &Response,
    prompted: bool,
    tools_off: bool,
    turn: u32,
    sink: &dyn EventSink,
) -> Answer {
    let mut unreadable = None;
    let (mut parts, mut calls, raw_reply) = if prompted {
        let raw = response.text();
        let cut_at_limit = response.stop_reason == StopReason::MaxTokens;
        let (parts, calls, reason) = prompted_turn(&raw, turn, cut_at_limit);
        unreadable = reason;
        let prose = text_of(&parts);
        if !prose.is_empty() {
            sink.emit(AgentEvent::TextDelta(prose));
        }
        (parts, calls, Some(raw))
    } else {
        let calls = response.tool_calls.iter().map(Planned::native).collect();
        (response.content.clone(), calls, None)
    };
    let tools_refused = tools_off && !calls.is_empty();
    if tools_refused {
        // Tools were disabled: calls asked anyway are not run, and
        // are left out so no call goes without a result.
        parts.retain(|p| !matches!(p, AssistantPart::ToolCall(_)));
        calls.clear();
        sink.emit(AgentEvent::Notice(
            "the model asked for tools in its last turn; they were not run".into(),
        ));
    }
    Answer {
        parts,
        calls,
        raw_reply,
        tools_refused,
        unreadable,
    }
}

/// The call a prompted reply that could not be read stands for, in turn
/// `turn`: it never runs; its preset result tells the model why.
fn unreadable_call(turn: u32) -> ToolCall {
    ToolCall {
        id: format!("prompted_{turn}_0"),
        name: UNREADABLE_REPLY.into(),
        input: serde_json::Value::Null,
    }
}

/// A prompted reply cut off at the output limit before its JSON closed,
/// as a call that never runs and tells the model to send less.
pub(super) fn cut_off_reply(turn: u32) -> Planned {
    Planned {
        call: unreadable_call(turn),
        preset: Some(ToolOutput::error(
            ErrorCode::InvalidParams,
            "your reply was cut off at the answer's token limit before its JSON object \
             closed, so no tool was run. Send a shorter reply: fewer calls, shorter \
             strings.",
        )),
    }
}

/// Reads a prompted-mode reply into what it says (the prose as the
/// assistant's text) and the calls it asks for (or the reason each cannot
/// run); `cut_at_limit` when the server stopped it at the answer limit,
/// which is then why an unreadable call object is unreadable. The third
/// value is the reason a reply could not be read.
fn prompted_turn(
    raw: &str,
    turn: u32,
    cut_at_limit: bool,
) -> (Vec<AssistantPart>, Vec<Planned>, Option<String>) {
    let reply = parse_reply(raw);
    let mut parts = Vec::new();
    if !reply.message.trim().is_empty() {
        parts.push(AssistantPart::Text {
            text: reply.message.clone(),
        });
    }
    let id = |index: usize| format!("prompted_{turn}_{index}");
    let planned: Vec<Planned> = match &reply.outcome {
        ReplyOutcome::Final => Vec::new(),
        ReplyOutcome::Calls(calls) => calls
            .iter()
            .enumerate()
            .map(|(index, call)| match call.to_tool_call(id(index)) {
                Ok(call) => Planned { call, preset: None },
                Err(output) => Planned {
                    call: ToolCall {
                        id: id(index),
                        name: call.tool().unwrap_or("(invalid call)").to_owned(),
                        input: serde_json::Value::Null,
                    },
                    preset: Some(output),
                },
            })
            .collect(),
        ReplyOutcome::Invalid(_) if cut_at_limit => vec![cut_off_reply(turn)],
        ReplyOutcome::Invalid(error) => vec![Planned {
            call: unreadable_call(turn),
            preset: Some(error.to_output()),
        }],
    };
    parts.extend(
        planned
            .iter()
            .map(|p| AssistantPart::ToolCall(p.call.clone())),
    );
    let unreadable = match reply.outcome {
        ReplyOutcome::Invalid(error) => Some(error.reason),
        _ => None,
    };
    (parts, planned, unreadable)
}
