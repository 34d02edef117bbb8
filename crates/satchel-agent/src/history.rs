//! The LLM history, built for its reader: [`Transcript`] holds what
//! happened, [`Transcript::history`] turns it into the messages sent.
//!
//! Past statements are compact: the user's message, then one assistant
//! message with each turn's text followed by a `[Tool: ...] → result` line
//! per call, the result cut to `toolResultMaxLength`; thinking is dropped.
//! The statement in progress goes native: assistant messages with their
//! tool calls and tool-result messages as they were sent, except for its
//! older turns ([`Shape`], measured by `satchel bench history` on a real
//! 97-turn session, bench/history-results.md):
//! - a result older than the latest `recentToolTurns` turns is replaced by
//!   a one-line placeholder (observation masking);
//! - the text and thinking of a turn older than the latest
//!   `recentReasoningTurns` turns are left out; its calls stay, so what was
//!   done is still there, not why;
//! - a result whose call (same tool, same input) ran again in a later turn
//!   points to the newer one (unless `recentToolTurns` is 0: all whole).
//!
//! Both windows move in steps of their size, so the prefix a provider
//! caches changes once per step, not every turn. Statements already
//! summarised are replaced by their summary.
//!
//! The names the stored history rows use ([`SUMMARY_ROLE`],
//! [`PROMPTED_REPLY_KEY`]) live here too: the loop writes them and
//! `resume.rs` reads them back, and neither should own the other's format.

use std::collections::HashMap;

use satchel_core::{
    AssistantPart, Content, Message, ToolCall, ToolOutput, ToolResult, ToolResults,
};
use satchel_tools::format::cut_chars;

use crate::summary::tool_call_line;

/// Role under which a summary of older statements is stored in the history.
pub const SUMMARY_ROLE: &str = "summary";

/// Key of a stored assistant message that holds a prompted-mode reply as
/// the model wrote it (the message's parts are its reading).
pub const PROMPTED_REPLY_KEY: &str = "prompted_reply";

/// One tool call of a turn and what it returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call as the model made it.
    pub call: ToolCall,
    /// The tool's output, whole (within the tool's own limits).
    pub output: ToolOutput,
}

/// One LLM call of a statement and the tool calls it asked for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnRecord {
    /// The assistant's answer: text, thinking, tool calls.
    pub assistant: Vec<AssistantPart>,
    /// The calls that ran, in the order the model asked.
    pub calls: Vec<CallRecord>,
    /// The tool-result messages exactly as sent (feedback block included).
    pub sent_results: Vec<Message>,
    /// In prompted mode, the reply as the model wrote it (`assistant` is
    /// its reading: prose and calls); sent back as written.
    pub raw_reply: Option<String>,
}

/// One user message and the turns that answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementRecord {
    /// 1-based position in the conversation.
    pub seq: u32,
    /// What the user said.
    pub user: Vec<Content>,
    /// The turns, in order.
    pub turns: Vec<TurnRecord>,
}

/// Older statements folded into one summary by a side request.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// The summary text.
    pub text: String,
    /// The last statement (by `seq`) the summary covers.
    pub through: u32,
}

/// What happened in a conversation, as the history needs it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transcript {
    /// The latest summary of older statements, if any.
    pub compaction: Option<Compaction>,
    /// Every statement, oldest first (summarised ones included; the
    /// history skips them).
    pub statements: Vec<StatementRecord>,
    /// Past answers already rendered: by statement `seq`, with the result
    /// length and turn count they were rendered for. A past statement does
    /// not change, so each is rendered once, not once per request.
    rendered: HashMap<u32, (usize, usize, String)>,
}

/// How much of each older turn the history keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Characters of a result kept in past statements
    /// (`toolResultMaxLength`).
    pub result_chars: usize,
    /// The current statement's latest turns whose results go whole
    /// (`recentToolTurns`; 0: every turn whole). Between this many and
    /// twice as many less one stay whole: older turns are masked a step of
    /// this many turns at a time.
    pub recent_turns: usize,
    /// The current statement's latest turns whose text and thinking go
    /// (`recentReasoningTurns`; 0: every turn's), in steps like
    /// `recent_turns`.
    pub reasoning_turns: usize,
}

impl Shape {
    /// How many of a statement's first `turns` turns have their results
    /// masked.
    pub fn cut_turns(&self, turns: usize) -> usize {
        stepped(self.recent_turns, turns)
    }

    /// How many of a statement's first `turns` turns have their reasoning
    /// left out.
    pub fn quiet_turns(&self, turns: usize) -> usize {
        stepped(self.reasoning_turns, turns)
    }
}

/// The turns before a window of `window` to `2 × window - 1` latest ones.
fn stepped(window: usize, turns: usize) -> usize {
    if window == 0 || turns < 2 * window {
        return 0;
    }
    (turns - window) / window * window
}

/// Whether the last statement is still being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Between statements: every statement is past.
    Idle,
    /// The last statement is in progress and goes native.
    InStatement,
}

impl Transcript {
    /// A transcript of `statements`, with no summary.
    pub fn from_statements(statements: Vec<StatementRecord>) -> Transcript {
        Transcript {
            statements,
            ..Transcript::default()
        }
    }

    /// The messages to send: `system` first, then the summary, past
    /// statements compact, and the statement in progress native.
    pub fn history(&mut self, system: &str, shape: Shape, phase: Phase) -> Vec<Message> {
        let max_result_chars = shape.result_chars;
        let mut messages = Vec::with_capacity(2 + self.statements.len() * 2);
        messages.push(Message::system(system));
        if let Some(compaction) = &self.compaction {
            messages.push(Message::system(summary_message(&compaction.text)));
        }
        let through = self.compaction.as_ref().map_or(0, |c| c.through);
        let (past, current) = match (phase, self.statements.split_last()) {
            (Phase::InStatement, Some((current, past))) => (past, Some(current)),
            _ => (self.statements.as_slice(), None),
        };
        for statement in past.iter().filter(|s| s.seq > through) {
            messages.push(Message::User {
                content: statement.user.clone(),
            });
            let answer = match self.rendered.get(&statement.seq) {
                Some((chars, turns, text))
                    if *chars == max_result_chars && *turns == statement.turns.len() =>
                {
                    text.clone()
                }
                _ => {
                    let text = past_answer(statement, max_result_chars);
                    self.rendered.insert(
                        statement.seq,
                        (max_result_chars, statement.turns.len(), text.clone()),
                    );
                    text
                }
            };
            messages.push(Message::assistant(answer));
        }
        if let Some(statement) = current {
            messages.push(Message::User {
                content: statement.user.clone(),
            });
            let turns = statement.turns.len();
            let (cut, quiet) = (shape.cut_turns(turns), shape.quiet_turns(turns));
            let newer = if shape.recent_turns == 0 {
                HashMap::new()
            } else {
                newer_runs(&statement.turns)
            };
            for (index, turn) in statement.turns.iter().enumerate() {
                messages.push(match &turn.raw_reply {
                    Some(raw) => Message::assistant(raw.clone()),
                    None if index < quiet => Message::Assistant {
                        content: without_reasoning(&turn.assistant),
                    },
                    None => Message::Assistant {
                        content: turn.assistant.clone(),
                    },
                });
                messages.extend(turn.sent_results.iter().map(|message| {
                    older_result(message, newer.get(&(index, call_id(message))), index < cut)
                }));
            }
        }
        messages
    }

    /// Past statements not yet summarised, oldest first.
    pub fn unsummarised(&self) -> impl Iterator<Item = &StatementRecord> {
        let through = self.compaction.as_ref().map_or(0, |c| c.through);
        self.statements.iter().filter(move |s| s.seq > through)
    }
}

/// A turn's calls without its text and thinking; a turn with no call (a
/// reply the loop answered) keeps its text.
fn without_reasoning(parts: &[AssistantPart]) -> Vec<AssistantPart> {
    let calls: Vec<AssistantPart> = parts
        .iter()
        .filter(|part| matches!(part, AssistantPart::ToolCall(_)))
        .cloned()
        .collect();
    if calls.is_empty() {
        parts.to_vec()
    } else {
        calls
    }
}

/// The id a tool-result message answers (empty for any other message).
fn call_id(message: &Message) -> &str {
    match message {
        Message::Tool(result) => &result.call_id,
        _ => "",
    }
}

/// For each (turn, call id) whose call (same tool, same input) ran again
/// later: the last turn it ran in.
fn newer_runs(turns: &[TurnRecord]) -> HashMap<(usize, &str), usize> {
    let mut last: HashMap<(&str, String), usize> = HashMap::new();
    for (index, turn) in turns.iter().enumerate() {
        for record in &turn.calls {
            last.insert((&record.call.name, record.call.input.to_string()), index);
        }
    }
    let mut newer = HashMap::new();
    for (index, turn) in turns.iter().enumerate() {
        for record in &turn.calls {
            let key = (record.call.name.as_str(), record.call.input.to_string());
            if let Some(&later) = last.get(&key).filter(|&&later| later > index) {
                newer.insert((index, record.call.id.as_str()), later);
            }
        }
    }
    newer
}

/// One result message of the statement in progress as it is sent: whole,
/// pointing to the newer run of the same call, or masked when its turn is
/// older than the window (the feedback block left out with it: the latest
/// results carry a newer one).
fn older_result(message: &Message, newer: Option<&usize>, masked: bool) -> Message {
    let placeholder = match (message, newer) {
        (Message::Tool(_), Some(later)) => format!(
            "[The same call ran again in turn {}: its newer output is there.]",
            later + 1
        ),
        (Message::Tool(result), None) if masked => {
            let lines = result.content.to_text().lines().count();
            format!(
                "[Output of an older turn left out ({lines} lines); run the call again to see it.]"
            )
        }
        (Message::User { content }, _) if masked => {
            return Message::user(cut_chars(&user_text(content), OLDER_TEXT_CHARS));
        }
        _ => return message.clone(),
    };
    let Message::Tool(result) = message else {
        return message.clone();
    };
    Message::Tool(ToolResult {
        call_id: result.call_id.clone(),
        content: ToolResults::Text(placeholder),
        is_error: result.is_error,
    })
}

/// Characters kept of a prompted-mode message of results (text, not
/// result messages) in an older turn.
const OLDER_TEXT_CHARS: usize = 200;

/// The system message that carries a summary of older statements.
pub fn summary_message(text: &str) -> String {
    format!(
        "Summary of the earlier part of this conversation (older turns were summarised to fit the context window):\n{text}"
    )
}

/// A past statement's answer in one message: each turn's text, then one
/// line per tool call.
pub fn past_answer(statement: &StatementRecord, max_result_chars: usize) -> String {
    let mut answer = String::new();
    for turn in &statement.turns {
        let text = text_of(&turn.assistant);
        let text = text.trim();
        if !text.is_empty() {
            if !answer.is_empty() {
                answer.push('\n');
            }
            answer.push_str(text);
        }
        for record in &turn.calls {
            if !answer.is_empty() {
                answer.push('\n');
            }
            answer.push_str(&tool_call_line(
                &record.call,
                &record.output,
                max_result_chars,
            ));
        }
    }
    if answer.is_empty() {
        answer.push_str("(no answer)");
    }
    answer
}

/// The text parts of an assistant answer, joined (thinking and calls left out).
pub fn text_of(parts: &[AssistantPart]) -> String {
    parts
        .iter()
        .filter_map(|part| match part {
            AssistantPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The text of a user message's parts.
pub fn user_text(content: &[Content]) -> String {
    content
        .iter()
        .map(Content::to_text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use satchel_core::ToolResults;
    use serde_json::json;

    use super::*;

    fn shape(result_chars: usize) -> Shape {
        Shape {
            result_chars,
            recent_turns: 0,
            reasoning_turns: 0,
        }
    }

    fn statement(seq: u32, text: &str) -> StatementRecord {
        let call = ToolCall {
            id: format!("c{seq}"),
            name: "bash".into(),
            input: json!({"command": "ls"}),
        };
        let output = ToolOutput::success(ToolResults::Text("x".repeat(30)), "ran");
        StatementRecord {
            seq,
            user: vec![Content::Text { text: text.into() }],
            turns: vec![
                TurnRecord {
                    assistant: vec![
                        AssistantPart::Thinking {
                            thinking: "secret plan".into(),
                            signature: None,
                        },
                        AssistantPart::Text {
                            text: "Looking.".into(),
                        },
                        AssistantPart::ToolCall(call.clone()),
                    ],
                    sent_results: vec![Message::tool_result(&call.id, &output)],
                    calls: vec![CallRecord { call, output }],
                    raw_reply: None,
                },
                TurnRecord {
                    assistant: vec![AssistantPart::Text {
                        text: "Done.".into(),
                    }],
                    ..TurnRecord::default()
                },
            ],
        }
    }

    #[test]
    fn past_statements_are_summaries_and_the_current_one_is_native() {
        let mut transcript =
            Transcript::from_statements(vec![statement(1, "first"), statement(2, "second")]);
        let history = transcript.history("sys", shape(10), Phase::InStatement);
        assert_eq!(history.len(), 1 + 2 + 4);
        assert_eq!(
            history[2],
            Message::assistant(
                "Looking.\n[Tool: bash(command=\"ls\")] → xxxxxxxxxx... [truncated]\nDone."
            )
        );
        let past = serde_json::to_string(&history[..3]).unwrap();
        assert!(
            !past.contains("secret plan"),
            "thinking left in a past turn"
        );
        let Message::Assistant { content } = &history[4] else {
            panic!("not native")
        };
        assert!(matches!(content[0], AssistantPart::Thinking { .. }));
        assert!(matches!(history[5], Message::Tool(_)));

        let idle = transcript.history("sys", shape(10), Phase::Idle);
        assert_eq!(idle.len(), 1 + 4);
    }

    /// A turn that thinks `n`, runs `command` and reads a long result.
    fn turn(n: usize, command: &str) -> TurnRecord {
        let call = ToolCall {
            id: format!("t{n}"),
            name: "bash".into(),
            input: json!({ "command": command }),
        };
        let output =
            ToolOutput::success(ToolResults::Text(format!("{n}{}", "y".repeat(100))), "ran");
        TurnRecord {
            assistant: vec![
                AssistantPart::Text {
                    text: format!("thought {n}"),
                },
                AssistantPart::ToolCall(call.clone()),
            ],
            sent_results: vec![Message::tool_result(&call.id, &output)],
            calls: vec![CallRecord { call, output }],
            raw_reply: None,
        }
    }

    /// The results and the assistants' texts sent for `turns` under `shape`.
    fn sent(turns: Vec<TurnRecord>, shape: Shape) -> (Vec<String>, Vec<String>) {
        let mut transcript = Transcript::from_statements(vec![StatementRecord {
            seq: 1,
            user: vec![Content::Text { text: "go".into() }],
            turns,
        }]);
        let mut results = Vec::new();
        let mut texts = Vec::new();
        for message in transcript.history("sys", shape, Phase::InStatement) {
            match message {
                Message::Tool(result) => results.push(result.content.to_text()),
                Message::Assistant { content } => texts.push(text_of(&content)),
                _ => {}
            }
        }
        (results, texts)
    }

    #[test]
    fn older_turns_lose_their_results_and_reasoning_a_step_at_a_time() {
        let shape = Shape {
            result_chars: 10,
            recent_turns: 2,
            reasoning_turns: 1,
        };
        assert_eq!(
            (0..9).map(|n| shape.cut_turns(n)).collect::<Vec<_>>(),
            [0, 0, 0, 0, 2, 2, 4, 4, 6]
        );
        assert_eq!(
            (0..5).map(|n| shape.quiet_turns(n)).collect::<Vec<_>>(),
            [0, 0, 1, 2, 3]
        );
        let turns = |count: usize| (0..count).map(|n| turn(n, &format!("ls {n}"))).collect();
        // Three turns: all results whole; the latest turn's reasoning kept.
        let (results, texts) = sent(turns(3), shape);
        assert!(results.iter().all(|r| r.len() > 100));
        assert_eq!(texts, ["", "", "thought 2"]);
        // Five: the first two results masked, the rest whole.
        let (results, _) = sent(turns(5), shape);
        let masked = "[Output of an older turn left out (1 lines); run the call again to see it.]";
        assert_eq!(results[..2], [masked, masked]);
        assert!(results[2..].iter().all(|r| r.len() > 100), "{results:?}");
    }

    #[test]
    fn a_call_run_again_points_to_its_newer_output_unless_all_is_whole() {
        let turns = || {
            vec![
                turn(0, "pytest"),
                turn(1, "edit"),
                turn(2, "pytest"),
                turn(3, "ls"),
            ]
        };
        let shape = Shape {
            result_chars: 10,
            recent_turns: 10,
            reasoning_turns: 0,
        };
        let (results, texts) = sent(turns(), shape);
        assert_eq!(
            results[0],
            "[The same call ran again in turn 3: its newer output is there.]"
        );
        assert!(results[1..].iter().all(|r| r.len() > 100), "{results:?}");
        assert_eq!(texts[0], "thought 0");
        let whole = Shape {
            recent_turns: 0,
            ..shape
        };
        let (results, _) = sent(turns(), whole);
        assert!(results.iter().all(|r| r.len() > 100), "{results:?}");
    }

    #[test]
    fn summarised_statements_give_way_to_the_summary() {
        let mut transcript =
            Transcript::from_statements(vec![statement(1, "first"), statement(2, "second")]);
        transcript.compaction = Some(Compaction {
            text: "they said first".into(),
            through: 1,
        });
        let history = transcript.history("sys", shape(10), Phase::Idle);
        assert_eq!(history.len(), 4);
        assert_eq!(
            history[1],
            Message::system(summary_message("they said first"))
        );
        assert_eq!(history[2], Message::user("second"));
    }
}
