//! The LLM history, built for its reader: [`Transcript`] holds what
//! happened, [`Transcript::history`] turns it into the messages sent.
//!
//! Past statements are compact: the user's message, then one assistant
//! message with each turn's text followed by a `[Tool: ...] → result` line
//! per call, the result cut to `toolResultMaxLength`; thinking is dropped.
//! The statement in progress goes native: assistant messages with their
//! tool calls (thinking included, as Anthropic requires within a tool
//! loop) and tool-result messages as they were sent, except that the
//! results of its older turns are cut to `toolResultMaxLength` like a past
//! statement's ([`Shape::recent_turns`]: the latest turns stay whole, and
//! the cut moves in steps of that many turns, so the prefix a provider
//! caches changes once per step, not every turn). Statements already
//! summarised are replaced by their summary.
//!
//! The names the stored history rows use ([`SUMMARY_ROLE`],
//! [`PROMPTED_REPLY_KEY`]) live here too: the loop writes them and
//! `resume.rs` reads them back, and neither should own the other's format.

use std::collections::HashMap;

use satchel_core::{
    AssistantPart, Content, Message, ToolCall, ToolOutput, ToolResult, ToolResults,
};
use satchel_tools::format::{cut_chars, past_result};

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

/// How much of each result the history keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Characters of a result kept in past statements and in the older
    /// turns of the current one (`toolResultMaxLength`).
    pub result_chars: usize,
    /// The current statement's latest turns whose results go whole
    /// (`recentToolTurns`; 0: every turn whole). Between this many and
    /// twice as many less one stay whole: older turns are cut a step of
    /// this many turns at a time.
    pub recent_turns: usize,
}

impl Shape {
    /// How many of a statement's first `turns` turns have their results cut.
    pub fn cut_turns(&self, turns: usize) -> usize {
        if self.recent_turns == 0 || turns < 2 * self.recent_turns {
            return 0;
        }
        (turns - self.recent_turns) / self.recent_turns * self.recent_turns
    }
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
            let cut = shape.cut_turns(statement.turns.len());
            for (index, turn) in statement.turns.iter().enumerate() {
                messages.push(match &turn.raw_reply {
                    Some(raw) => Message::assistant(raw.clone()),
                    None => Message::Assistant {
                        content: turn.assistant.clone(),
                    },
                });
                if index < cut {
                    messages.extend(cut_results(turn, max_result_chars));
                } else {
                    messages.extend(turn.sent_results.iter().cloned());
                }
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

/// An older turn's results as they are sent once cut: each call's result
/// cut to `max_chars` as in a past statement (the feedback block left out:
/// the latest results carry a newer one); a prompted-mode message of
/// results, which is text, cut the same way.
fn cut_results(turn: &TurnRecord, max_chars: usize) -> Vec<Message> {
    turn.sent_results
        .iter()
        .map(|message| match message {
            Message::Tool(result) => {
                let text = turn
                    .calls
                    .iter()
                    .find(|record| record.call.id == result.call_id)
                    .map_or_else(
                        || cut_chars(&result.content.to_text(), max_chars),
                        |record| past_result(&record.output, max_chars),
                    );
                Message::Tool(ToolResult {
                    call_id: result.call_id.clone(),
                    content: ToolResults::Text(text),
                    is_error: result.is_error,
                })
            }
            Message::User { content } => Message::user(cut_chars(&user_text(content), max_chars)),
            other => other.clone(),
        })
        .collect()
}

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

    #[test]
    fn older_turns_of_the_current_statement_have_their_results_cut_a_step_at_a_time() {
        let long = "y".repeat(100);
        let turn = |n: usize| {
            let call = ToolCall {
                id: format!("t{n}"),
                name: "bash".into(),
                input: json!({"command": "ls"}),
            };
            let output = ToolOutput::success(ToolResults::Text(format!("{n}{long}")), "ran");
            TurnRecord {
                assistant: vec![AssistantPart::ToolCall(call.clone())],
                sent_results: vec![Message::tool_result(&call.id, &output)],
                calls: vec![CallRecord { call, output }],
                raw_reply: None,
            }
        };
        let shape = Shape {
            result_chars: 10,
            recent_turns: 2,
        };
        assert_eq!(
            (0..9).map(|n| shape.cut_turns(n)).collect::<Vec<_>>(),
            [0, 0, 0, 0, 2, 2, 4, 4, 6]
        );
        let results = |turns: usize| {
            let mut transcript = Transcript::from_statements(vec![StatementRecord {
                seq: 1,
                user: vec![Content::Text { text: "go".into() }],
                turns: (0..turns).map(turn).collect(),
            }]);
            transcript
                .history("sys", shape, Phase::InStatement)
                .into_iter()
                .filter_map(|m| match m {
                    Message::Tool(result) => Some(result.content.to_text()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        // Three turns: all whole.
        assert!(results(3).iter().all(|r| r.len() > 100));
        // Five: the first two cut as a past statement's, the rest whole.
        let five = results(5);
        assert_eq!(five[0], format!("0{}... [truncated]", "y".repeat(9)));
        assert_eq!(five[1], format!("1{}... [truncated]", "y".repeat(9)));
        assert!(five[2..].iter().all(|r| r.len() > 100), "{five:?}");
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
