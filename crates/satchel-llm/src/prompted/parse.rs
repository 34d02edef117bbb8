//! Reading a model's reply in prompted mode: where the call object is, what
//! it asks for, and what is left for the user ([`parse_reply`]).
//!
//! A call object is a JSON object with a `tool_calls` key (or
//! `tool_call`), or a single call
//! `{"tool": NAME, "params": {...}}` written without the wrapper. It may
//! stand alone, sit in a fenced block (```` ```json ````), in inline
//! backticks or in `<tool_call>` tags, and have prose before or after it;
//! several call objects in one reply are merged in order. JSON in the
//! prose that is not a call object (an example, a config file) stays in
//! the message, and text inside `<think>...</think>` is never searched.
//!
//! Inside `tool_calls`, each entry is read forgivingly: `name` is taken for
//! `tool`; `arguments`, `parameters`, `input` or `args` for `params` (one
//! of them, not several); `params` written as a JSON string is read; a
//! call whose parameters sit beside `tool` instead of inside `params` gets
//! them as its parameters; other keys are ignored. Unknown keys beside
//! `tool_calls` are ignored too. Validation against the tool's schema is
//! not done here: the loop's dispatch does it, as for native calls.

use std::ops::Range;

use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use serde_json::{Map, Value};

use super::lenient::{self, Budget};

/// The keys a call's parameters are accepted under, `params` first.
const PARAM_KEYS: [&str; 5] = ["params", "arguments", "parameters", "input", "args"];

/// Keys of a call entry that are never parameters.
const ENTRY_KEYS: [&str; 5] = ["tool", "name", "id", "type", "reasoning"];

/// A model's reply in prompted mode, split into what it says and what it asks.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptedReply {
    /// The prose outside the call object(s), trimmed: the assistant's
    /// message, and the final answer when there are no calls. When the
    /// object holds no calls and there is no prose, its `reasoning`.
    pub message: String,
    /// The `reasoning` field(s) of the call object(s), joined by newlines.
    pub reasoning: Option<String>,
    /// What the reply asks for.
    pub outcome: ReplyOutcome,
}

impl PromptedReply {
    /// True when the reply asks for nothing: it is the final answer.
    pub fn is_final(&self) -> bool {
        matches!(self.outcome, ReplyOutcome::Final)
    }
}

/// What a reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutcome {
    /// No call object (or one with an empty `tool_calls`): the final answer.
    Final,
    /// Calls to make, in order; each either readable or rejected with a reason.
    Calls(Vec<PromptedCall>),
    /// A call object was there but could not be read: nothing runs, and the
    /// reason goes back to the model as a tool error.
    Invalid(ReplyError),
}

/// One entry of `tool_calls`.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptedCall {
    /// A call that can go to dispatch (which validates `params` against the
    /// tool's schema and reports an unknown tool).
    Valid {
        /// The tool's name as the model wrote it.
        tool: String,
        /// The input.
        params: Map<String, Value>,
    },
    /// An entry that is not a call: what the model must change.
    Invalid {
        /// The tool's name, when the entry has a readable one.
        tool: Option<String>,
        /// Why, addressed to the model.
        reason: String,
    },
}

impl PromptedCall {
    /// The tool's name, when there is a readable one.
    pub fn tool(&self) -> Option<&str> {
        match self {
            PromptedCall::Valid { tool, .. } => Some(tool),
            PromptedCall::Invalid { tool, .. } => tool.as_deref(),
        }
    }

    /// The call for dispatch, with the id the loop gives it; or, for an
    /// invalid entry, the `INVALID_PARAMS` output the model gets instead.
    pub fn to_tool_call(&self, id: impl Into<String>) -> Result<ToolCall, ToolOutput> {
        match self {
            PromptedCall::Valid { tool, params } => Ok(ToolCall {
                id: id.into(),
                name: tool.clone(),
                input: Value::Object(params.clone()),
            }),
            PromptedCall::Invalid { reason, .. } => {
                Err(ToolOutput::error(ErrorCode::InvalidParams, reason.clone()))
            }
        }
    }
}

/// Why a reply's call object could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ReplyError {
    /// Why, addressed to the model: what is wrong, where, and the shape to use.
    pub reason: String,
}

impl ReplyError {
    /// The `INVALID_PARAMS` output the model gets on its next turn.
    pub fn to_output(&self) -> ToolOutput {
        ToolOutput::error(ErrorCode::InvalidParams, self.reason.clone())
    }
}

/// Splits `reply` into its message and the calls it asks for.
pub fn parse_reply(reply: &str) -> PromptedReply {
    if let Some(answer) = answer_object(reply) {
        return PromptedReply {
            message: answer,
            reasoning: None,
            outcome: ReplyOutcome::Final,
        };
    }
    let fences = fences(reply);
    let skipped = thinking(reply);
    let mut budget = Budget::for_text(reply);
    let mut found: Vec<(Range<usize>, Map<String, Value>)> = Vec::new();
    let mut pos = 0;
    while let Some(offset) = reply[pos..].find('{') {
        let start = pos + offset;
        if let Some(region) = skipped.iter().find(|region| region.contains(&start)) {
            pos = region.end;
            continue;
        }
        match lenient::object_at(reply, start, &mut budget) {
            Ok((value, end)) => {
                if let Value::Object(map) = value
                    && is_call_object(&map)
                {
                    found.push((start..end, map));
                }
                pos = end;
            }
            Err(error) if error.exhausted => break,
            Err(error) => {
                let seen = &reply[start..boundary_after(reply, error.offset).max(start)];
                if looks_like_a_call(seen) {
                    let before = fences
                        .iter()
                        .find(|fence| fence.content.contains(&start))
                        .map_or(start, |fence| fence.outer.start);
                    return PromptedReply {
                        message: reply[..before].trim().to_owned(),
                        reasoning: None,
                        outcome: ReplyOutcome::Invalid(unreadable(
                            reply,
                            error.offset,
                            &error.message,
                        )),
                    };
                }
                pos = start + 1;
            }
        }
    }
    if found.is_empty() {
        return PromptedReply {
            message: reply.trim().to_owned(),
            reasoning: None,
            outcome: ReplyOutcome::Final,
        };
    }

    let spans: Vec<Range<usize>> = found.iter().map(|(span, _)| span.clone()).collect();
    let message = prose(reply, &cut_spans(reply, &spans, &fences));
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for (_, object) in found {
        if let Err(error) = read_object(object, &mut calls, &mut reasoning) {
            return PromptedReply {
                message,
                reasoning: join(reasoning),
                outcome: ReplyOutcome::Invalid(error),
            };
        }
    }
    let reasoning = join(reasoning);
    if calls.is_empty() {
        let message = match (message.is_empty(), &reasoning) {
            (true, Some(reasoning)) => reasoning.clone(),
            _ => message,
        };
        return PromptedReply {
            message,
            reasoning,
            outcome: ReplyOutcome::Final,
        };
    }
    PromptedReply {
        message,
        reasoning,
        outcome: ReplyOutcome::Calls(calls),
    }
}

/// The text of a reply that is exactly `{"answer": "..."}`: the final
/// answer's shape under a constrained reply schema.
fn answer_object(reply: &str) -> Option<String> {
    let trimmed = reply.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(trimmed) else {
        return None;
    };
    match (map.remove("answer"), map.is_empty()) {
        (Some(Value::String(answer)), true) => Some(answer.trim().to_owned()),
        _ => None,
    }
}

/// The first character boundary of `text` after byte `offset`.
fn boundary_after(text: &str, offset: usize) -> usize {
    (offset + 1..text.len())
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(text.len())
}

fn join(parts: Vec<String>) -> Option<String> {
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// A `tool_calls` wrapper, or one call in our own field names.
fn is_call_object(map: &Map<String, Value>) -> bool {
    map.contains_key("tool_calls")
        || map.contains_key("tool_call")
        || (matches!(map.get("tool"), Some(Value::String(_))) && map.contains_key("params"))
}

/// What the reader got through before failing looks like a call object.
fn looks_like_a_call(seen: &str) -> bool {
    seen.contains("tool_call") || (seen.contains("tool") && seen.contains("params"))
}

/// The reason for an object that is not JSON even leniently.
fn unreadable(reply: &str, offset: usize, message: &str) -> ReplyError {
    let mut end = offset.min(reply.len());
    while !reply.is_char_boundary(end) {
        end -= 1;
    }
    let before = &reply[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or(before).chars().count() + 1;
    ReplyError {
        reason: format!(
            "your tool call could not be read: {message} at line {line}, column {column} of your \
             reply. No tool was run. Send the call again as one JSON object: {{\"reasoning\": \
             \"...\", \"tool_calls\": [{{\"tool\": \"NAME\", \"params\": {{...}}}}]}}, with \
             double quotes and any quote inside a string escaped as \\\"."
        ),
    }
}

/// Adds the calls of one call object to `calls`.
fn read_object(
    mut object: Map<String, Value>,
    calls: &mut Vec<PromptedCall>,
    reasoning: &mut Vec<String>,
) -> Result<(), ReplyError> {
    let entries = object
        .remove("tool_calls")
        .or_else(|| object.remove("tool_call"));
    let Some(entries) = entries else {
        // A single call without the wrapper.
        calls.push(read_call(calls.len() + 1, Value::Object(object)));
        return Ok(());
    };
    match object.remove("reasoning") {
        Some(Value::String(text)) if !text.trim().is_empty() => {
            reasoning.push(text.trim().to_owned());
        }
        Some(Value::Null | Value::String(_)) | None => {}
        Some(other) => reasoning.push(other.to_string()),
    }
    match entries {
        Value::Array(entries) => {
            for entry in entries {
                calls.push(read_call(calls.len() + 1, entry));
            }
        }
        entry @ Value::Object(_) => calls.push(read_call(calls.len() + 1, entry)),
        Value::Null => {}
        other => {
            return Err(ReplyError {
                reason: format!(
                    "`tool_calls` must be a list of calls, found {}. No tool was run. Use \
                     {{\"tool_calls\": [{{\"tool\": \"NAME\", \"params\": {{...}}}}]}}.",
                    kind(&other)
                ),
            });
        }
    }
    Ok(())
}

/// Reads entry number `n` (from 1) of `tool_calls`.
fn read_call(n: usize, entry: Value) -> PromptedCall {
    const SHAPE: &str = "{\"tool\": \"NAME\", \"params\": {...}}";
    let Value::Object(mut entry) = entry else {
        return PromptedCall::Invalid {
            tool: None,
            reason: format!("call {n} is {}, not an object {SHAPE}", kind(&entry)),
        };
    };
    let name = match entry.get("tool").or_else(|| entry.get("name")) {
        Some(Value::String(name)) if !name.trim().is_empty() => name.trim().to_owned(),
        Some(Value::String(_)) | None => {
            return PromptedCall::Invalid {
                tool: None,
                reason: format!("call {n} has no `tool` (the tool's name): use {SHAPE}"),
            };
        }
        Some(other) => {
            return PromptedCall::Invalid {
                tool: None,
                reason: format!(
                    "call {n}: `tool` must be the tool's name as a string, found {}",
                    kind(other)
                ),
            };
        }
    };
    let present: Vec<&str> = PARAM_KEYS
        .into_iter()
        .filter(|key| entry.contains_key(*key))
        .collect();
    let invalid = |reason: String| PromptedCall::Invalid {
        tool: Some(name.clone()),
        reason,
    };
    let params = match present.as_slice() {
        [] => {
            // Parameters written beside `tool`: they are the parameters.
            entry.retain(|key, _| !ENTRY_KEYS.contains(&key.as_str()));
            entry
        }
        [key] => match entry.remove(*key).unwrap_or(Value::Null) {
            Value::Object(params) => params,
            Value::Null => Map::new(),
            Value::String(text) => match lenient::value(&text) {
                Ok(Value::Object(params)) => params,
                _ => {
                    return invalid(format!(
                        "call {n} (`{name}`): `{key}` must be an object of parameters, found a \
                         string that is not one"
                    ));
                }
            },
            other => {
                return invalid(format!(
                    "call {n} (`{name}`): `{key}` must be an object of parameters, found {}",
                    kind(&other)
                ));
            }
        },
        [first, second, ..] => {
            return invalid(format!(
                "call {n} (`{name}`) has both `{first}` and `{second}`: put the parameters in \
                 `params` only"
            ));
        }
    };
    PromptedCall::Valid { tool: name, params }
}

/// `a string`, `a number`... for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A fenced code block: the fence lines and what is between them.
#[derive(Debug, PartialEq)]
struct Fence {
    /// From the opening fence to the end of the closing fence's line.
    outer: Range<usize>,
    /// The lines between the fences.
    content: Range<usize>,
}

/// Every fenced block of `text` (``` or ~~~, three or more, indented at most
/// three spaces); an unclosed fence runs to the end.
fn fences(text: &str) -> Vec<Fence> {
    let mut fences = Vec::new();
    let mut open: Option<(u8, usize, usize, usize)> = None; // marker, length, start, content start
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        let indent = line.len() - line.trim_start_matches(' ').len();
        let body = line.trim_start_matches(' ');
        let marker = body.bytes().next().filter(|b| matches!(b, b'`' | b'~'));
        if let (true, Some(marker)) = (indent <= 3, marker) {
            let run = body.bytes().take_while(|b| *b == marker).count();
            if run >= 3 {
                match open {
                    None => open = Some((marker, run, line_start, line_end)),
                    Some((open_marker, open_run, start, content_start))
                        if open_marker == marker
                            && run >= open_run
                            && body[run..].trim().is_empty() =>
                    {
                        fences.push(Fence {
                            outer: start..line_end,
                            content: content_start..line_start,
                        });
                        open = None;
                    }
                    Some(_) => {}
                }
            }
        }
        line_start = line_end;
    }
    if let Some((_, _, start, content_start)) = open {
        fences.push(Fence {
            outer: start..text.len(),
            content: content_start..text.len(),
        });
    }
    fences
}

/// `<think>...</think>` (and `<thinking>`) regions, never searched for
/// calls; an unclosed one runs to the end.
fn thinking(text: &str) -> Vec<Range<usize>> {
    let mut regions = Vec::new();
    let mut pos = 0;
    while let Some(offset) = text[pos..].find("<think") {
        let start = pos + offset;
        let rest = &text[start..];
        let (open, close) = if rest.starts_with("<thinking>") {
            ("<thinking>", "</thinking>")
        } else if rest.starts_with("<think>") {
            ("<think>", "</think>")
        } else {
            pos = start + 1;
            continue;
        };
        let end = text[start + open.len()..]
            .find(close)
            .map_or(text.len(), |at| start + open.len() + at + close.len());
        regions.push(start..end);
        pos = end;
    }
    regions
}

/// The ranges to remove from the reply: each call object, with the fence,
/// backticks or `<tool_call>` tags around it when they hold nothing else.
fn cut_spans(text: &str, spans: &[Range<usize>], fences: &[Fence]) -> Vec<Range<usize>> {
    let mut cuts: Vec<Range<usize>> = Vec::new();
    for span in spans {
        let fence = fences
            .iter()
            .find(|fence| fence.content.contains(&span.start));
        if let Some(fence) = fence {
            let mut rest = text[fence.content.clone()].to_owned();
            // Blank out every call object in this fence; what remains must be space.
            for other in spans
                .iter()
                .filter(|other| fence.content.contains(&other.start))
            {
                let from = other.start - fence.content.start;
                let to = other.end.min(fence.content.end) - fence.content.start;
                rest.replace_range(from..to, &" ".repeat(to - from));
            }
            if rest.trim().is_empty() {
                cuts.push(fence.outer.clone());
                continue;
            }
        }
        cuts.push(wrapped(text, span.clone()));
    }
    cuts.sort_by_key(|range| range.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for cut in cuts {
        match merged.last_mut() {
            Some(last) if cut.start <= last.end => last.end = last.end.max(cut.end),
            _ => merged.push(cut),
        }
    }
    merged
}

/// `span` widened to single backticks or `<tool_call>` tags right around it.
fn wrapped(text: &str, span: Range<usize>) -> Range<usize> {
    let before = &text[..span.start];
    let after = &text[span.end..];
    if before.ends_with('`') && after.starts_with('`') {
        return span.start - 1..span.end + 1;
    }
    for (open, close) in [
        ("<tool_call>", "</tool_call>"),
        ("<tool_calls>", "</tool_calls>"),
    ] {
        let trimmed_before = before.trim_end();
        let trimmed_after = after.trim_start();
        if trimmed_before.ends_with(open) && trimmed_after.starts_with(close) {
            let start = trimmed_before.len() - open.len();
            let end = text.len() - trimmed_after.len() + close.len();
            return start..end;
        }
    }
    span
}

/// The text outside `cuts`, each piece trimmed, joined by blank lines.
fn prose(text: &str, cuts: &[Range<usize>]) -> String {
    let mut pieces = Vec::new();
    let mut pos = 0;
    for cut in cuts {
        pieces.push(&text[pos..cut.start]);
        pos = cut.end;
    }
    pieces.push(&text[pos..]);
    pieces
        .into_iter()
        .map(str::trim)
        .filter(|piece| !piece.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn valid(tool: &str, input: Value) -> PromptedCall {
        PromptedCall::Valid {
            tool: tool.into(),
            params: params(input),
        }
    }

    fn calls(reply: &PromptedReply) -> &[PromptedCall] {
        match &reply.outcome {
            ReplyOutcome::Calls(calls) => calls,
            other => panic!("expected calls, got {other:?}"),
        }
    }

    fn invalid_reason(reply: &PromptedReply) -> &str {
        match &reply.outcome {
            ReplyOutcome::Invalid(error) => &error.reason,
            other => panic!("expected an invalid reply, got {other:?}"),
        }
    }

    #[test]
    fn an_object_alone() {
        let reply = parse_reply(
            r#"{"reasoning": "list first", "tool_calls": [{"tool": "bash", "params": {"command": "ls"}}]}"#,
        );
        assert_eq!(reply.message, "");
        assert_eq!(reply.reasoning.as_deref(), Some("list first"));
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
        assert!(!reply.is_final());
    }

    #[test]
    fn prose_before_and_after_the_object_is_the_message() {
        let reply = parse_reply(
            "Let me look at the files.\n\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}}]}\n\nThen I will read them.",
        );
        assert_eq!(
            reply.message,
            "Let me look at the files.\n\nThen I will read them."
        );
        assert_eq!(reply.reasoning, None);
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
    }

    #[test]
    fn an_answer_object_is_the_final_answer_and_its_text_the_message() {
        let reply = parse_reply("{\"answer\": \" The files are a and b. \"}\n");
        assert_eq!(reply.message, "The files are a and b.");
        assert!(reply.is_final());
        // Anything more than the answer is read as usual.
        let reply = parse_reply(r#"{"answer": "x", "note": 1}"#);
        assert_eq!(reply.message, r#"{"answer": "x", "note": 1}"#);
    }

    #[test]
    fn a_reply_without_a_call_is_the_final_answer() {
        let reply = parse_reply("  The repository has 3 crates.\n");
        assert_eq!(
            reply,
            PromptedReply {
                message: "The repository has 3 crates.".into(),
                reasoning: None,
                outcome: ReplyOutcome::Final,
            }
        );
        assert!(reply.is_final());
    }

    #[test]
    fn json_in_prose_that_is_not_a_call_stays_in_the_message() {
        let text = "Set it like this: {\"llm\": {\"model\": \"qwen3\"}}, or use `{\"tool\": \"hammer\"}` \
                    (a result looks like {\"tool\": \"bash\", \"result\": {}}). Braces { alone } too.";
        let reply = parse_reply(text);
        assert_eq!(reply.outcome, ReplyOutcome::Final);
        assert_eq!(reply.message, text);
    }

    #[test]
    fn a_fenced_block_is_cut_whole_and_other_blocks_stay() {
        let reply = parse_reply(
            "Here is the script:\n\n```bash\nfor f in *; do echo \"{$f}\"; done\n```\n\nRunning it now.\n\n```json\n{\n  \"reasoning\": \"run it\",\n  \"tool_calls\": [\n    {\"tool\": \"bash\", \"params\": {\"command\": \"sh run.sh\"}}\n  ]\n}\n```\n",
        );
        assert_eq!(
            reply.message,
            "Here is the script:\n\n```bash\nfor f in *; do echo \"{$f}\"; done\n```\n\nRunning it now."
        );
        assert_eq!(
            calls(&reply),
            [valid("bash", json!({"command": "sh run.sh"}))]
        );
    }

    #[test]
    fn several_fenced_call_objects_are_merged_in_order() {
        let reply = parse_reply(
            "```json\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}}]}\n```\nand\n```\n{\"tool\": \"search\", \"params\": {\"query\": \"rust\"}}\n```",
        );
        assert_eq!(reply.message, "and");
        assert_eq!(
            calls(&reply),
            [
                valid("bash", json!({"command": "ls"})),
                valid("search", json!({"query": "rust"})),
            ]
        );
    }

    #[test]
    fn a_fence_with_other_text_keeps_that_text() {
        let reply = parse_reply(
            "```\nNote: calling now\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {}}]}\n```",
        );
        assert_eq!(reply.message, "```\nNote: calling now\n\n```");
        assert_eq!(calls(&reply).len(), 1);
    }

    #[test]
    fn inline_backticks_and_tool_call_tags_go_with_the_object() {
        let reply = parse_reply(
            "Calling `{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}}` now.\n<tool_call>\n{\"tool_calls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"pwd\"}}]}\n</tool_call>\nDone.",
        );
        assert_eq!(reply.message, "Calling\n\nnow.\n\nDone.");
        assert_eq!(
            calls(&reply),
            [
                valid("bash", json!({"command": "ls"})),
                valid("bash", json!({"command": "pwd"})),
            ]
        );
    }

    #[test]
    fn single_quotes_and_trailing_commas() {
        let reply = parse_reply(
            "{'reasoning': 'check the date', 'tool_calls': [{'tool': 'bash', 'params': {'command': \"date '+%Y'\",},},],}",
        );
        assert_eq!(reply.reasoning.as_deref(), Some("check the date"));
        assert_eq!(
            calls(&reply),
            [valid("bash", json!({"command": "date '+%Y'"}))]
        );
    }

    #[test]
    fn braces_and_quotes_inside_strings() {
        let reply = parse_reply(
            r#"{"tool_calls": [{"tool": "code", "params": {"action": "execute", "language": "javascript", "code": "const o = {a: '}'}; console.log(\"{\" + JSON.stringify(o) + \"}\")"}}]} trailing words"#,
        );
        assert_eq!(reply.message, "trailing words");
        assert_eq!(
            calls(&reply),
            [valid(
                "code",
                json!({"action": "execute", "language": "javascript",
                       "code": "const o = {a: '}'}; console.log(\"{\" + JSON.stringify(o) + \"}\")"})
            )]
        );
    }

    #[test]
    fn unknown_fields_are_ignored_and_misplaced_params_are_taken() {
        let reply = parse_reply(
            r#"{"thought": "hm", "confidence": 0.9, "tool_calls": [
                {"tool": "bash", "params": {"command": "ls"}, "id": "c1", "why": "look"},
                {"tool": "bash", "command": "pwd", "id": "c2"},
                {"tool": "search"}
            ]}"#,
        );
        assert_eq!(
            calls(&reply),
            [
                valid("bash", json!({"command": "ls"})),
                valid("bash", json!({"command": "pwd"})),
                valid("search", json!({})),
            ]
        );
    }

    #[test]
    fn params_as_a_json_string_are_read() {
        let reply = parse_reply(
            r#"{"tool_calls": [{"name": "bash", "arguments": "{\"command\": \"ls\"}"}]}"#,
        );
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
    }

    #[test]
    fn malformed_entries_become_per_call_errors() {
        let reply = parse_reply(
            r#"{"tool_calls": [
                "bash ls",
                {"params": {"command": "ls"}},
                {"tool": 42, "params": {}},
                {"tool": "bash", "params": ["ls"]},
                {"tool": "bash", "params": "ls -la"},
                {"tool": "bash", "params": {}, "arguments": {}},
                {"tool": "bash", "params": {"command": "ok"}}
            ]}"#,
        );
        let reasons: Vec<(Option<&str>, &str)> = calls(&reply)
            .iter()
            .map(|call| match call {
                PromptedCall::Invalid { tool, reason } => (tool.as_deref(), reason.as_str()),
                PromptedCall::Valid { tool, .. } => (Some(tool.as_str()), "valid"),
            })
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    None,
                    "call 1 is a string, not an object {\"tool\": \"NAME\", \"params\": {...}}"
                ),
                (
                    None,
                    "call 2 has no `tool` (the tool's name): use {\"tool\": \"NAME\", \"params\": {...}}"
                ),
                (
                    None,
                    "call 3: `tool` must be the tool's name as a string, found a number"
                ),
                (
                    Some("bash"),
                    "call 4 (`bash`): `params` must be an object of parameters, found a list"
                ),
                (
                    Some("bash"),
                    "call 5 (`bash`): `params` must be an object of parameters, found a string that is not one"
                ),
                (
                    Some("bash"),
                    "call 6 (`bash`) has both `params` and `arguments`: put the parameters in `params` only"
                ),
                (Some("bash"), "valid"),
            ]
        );
        let output = calls(&reply)[3].to_tool_call("c4").unwrap_err();
        assert!(output.is_error);
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
        let call = calls(&reply)[6].to_tool_call("c7").unwrap();
        assert_eq!(
            call,
            ToolCall {
                id: "c7".into(),
                name: "bash".into(),
                input: json!({"command": "ok"})
            }
        );
    }

    #[test]
    fn an_unreadable_object_fails_the_whole_reply_with_where_and_why() {
        // A missing closing brace, a missing comma, a truncated reply, an unquoted value.
        let cases = [
            (
                "Listing.\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}]}",
                "Listing.",
                "expected `,` or `}` after a value, found `]` at line 2, column 61",
            ),
            (
                "{\"tool_calls\": [{\"tool\": \"bash\" \"params\": {}}]}",
                "",
                "expected `,` or `}` after a value, found `\"` at line 1, column 33",
            ),
            (
                "```json\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls",
                "",
                "an unclosed string, opened at line 2, column 56",
            ),
            (
                "Before\n\n{\"tool\": \"bash\", \"params\": {\"command\": ls}}",
                "Before",
                "expected a value (strings need quotes), found `l` at line 3, column 40",
            ),
        ];
        for (text, message, expected) in cases {
            let reply = parse_reply(text);
            assert_eq!(reply.message, message, "{text}");
            let reason = invalid_reason(&reply);
            assert!(
                reason.starts_with("your tool call could not be read: "),
                "{reason}"
            );
            assert!(reason.contains(expected), "{text}\n{reason}");
            assert!(reason.contains("No tool was run"), "{reason}");
        }
    }

    #[test]
    fn tool_calls_that_is_not_a_list_fails_the_whole_reply() {
        let reply = parse_reply(r#"{"tool_calls": "bash ls"}"#);
        assert_eq!(
            invalid_reason(&reply),
            "`tool_calls` must be a list of calls, found a string. No tool was run. Use \
             {\"tool_calls\": [{\"tool\": \"NAME\", \"params\": {...}}]}."
        );
        let output = match &reply.outcome {
            ReplyOutcome::Invalid(error) => error.to_output(),
            _ => unreachable!(),
        };
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
    }

    #[test]
    fn empty_tool_calls_is_a_final_answer() {
        let reply = parse_reply(r#"{"reasoning": "The answer is 42.", "tool_calls": []}"#);
        assert_eq!(reply.outcome, ReplyOutcome::Final);
        assert_eq!(reply.message, "The answer is 42.");
        let reply = parse_reply("It is 42.\n{\"reasoning\": \"done\", \"tool_calls\": null}");
        assert_eq!(reply.outcome, ReplyOutcome::Final);
        assert_eq!(reply.message, "It is 42.");
    }

    #[test]
    fn a_single_call_object_is_taken_for_the_list() {
        let reply = parse_reply(r#"{"tool_calls": {"tool": "bash", "params": {"command": "ls"}}}"#);
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
    }

    #[test]
    fn tool_call_singular_is_taken_for_tool_calls() {
        let reply = parse_reply(r#"{"tool_call": {"tool": "bash", "params": {"command": "ls"}}}"#);
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
    }

    #[test]
    fn thinking_is_not_searched() {
        let reply = parse_reply(
            "<think>I could send {\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"rm -rf /\"}}]} but no.</think>\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}}]}",
        );
        assert_eq!(calls(&reply), [valid("bash", json!({"command": "ls"}))]);
        let unclosed = parse_reply("<think>{\"tool_calls\": [{\"tool\": \"bash\"");
        assert_eq!(unclosed.outcome, ReplyOutcome::Final);
    }

    #[test]
    fn a_reply_of_many_unclosed_braces_is_read_in_bounded_time() {
        let text = "{\"a\": ".repeat(20_000);
        let started = std::time::Instant::now();
        let reply = parse_reply(&text);
        assert_eq!(reply.outcome, ReplyOutcome::Final);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn fences_are_found_with_their_content() {
        let text = "a\n```json\n{}\n```\nb\n~~~~\nx\n~~~\n~~~~\n  ```\nopen";
        let found = fences(text);
        assert_eq!(found.len(), 3);
        assert_eq!(&text[found[0].content.clone()], "{}\n");
        assert_eq!(&text[found[1].content.clone()], "x\n~~~\n");
        assert_eq!(&text[found[2].content.clone()], "open");
    }
}
