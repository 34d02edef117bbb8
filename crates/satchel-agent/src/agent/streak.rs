//! No loops: the same failure twice in a row changes what the next turn
//! asks for, and a third time ends the statement with an error that says
//! what happened and what to change, instead of spending the turn budget.
//!
//! The failures counted ([`Failure`]): a reply cut off at the output limit
//! before it was complete, a reply that cannot be read, the same invalid
//! tool input, and the same calls failing the same way. What the second one changes ([`Adjust`]): a larger
//! output allowance within the window (when the limit was not configured;
//! a configured one is kept and the next reply is asked to be the answer
//! alone), the answer-only reply, or, for the same invalid input, a tool
//! list of only the tool that was called wrongly. A reply cut off while
//! it repeated itself (a small model that writes the same call again and
//! again) changes the next turn at once: more room would only be filled
//! the same way, so the next reply is asked for the answer alone.

use satchel_core::ErrorCode;
use satchel_llm::{LimitSource, ModelConfig, Response, StopReason};

use super::answer::{Answer, UNREADABLE_REPLY};
use super::repetition::repeats_itself;
use crate::history::CallRecord;

/// The same failure this many times in a row ends the statement (the
/// same failing calls: one more, see [`Failure::give_up_at`]).
pub(super) const GIVE_UP_AFTER: u32 = 3;

/// The same calls with the same results this many times in a row change
/// the next turn: one retry is ordinary work, a third is a loop.
const REPEATED_ADJUST_AT: u32 = 3;

/// A turn that produced nothing usable, in a way that may repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The reply stopped at the output limit before it was complete;
    /// `looping` when it was repeating itself
    /// ([`repeats_itself`]).
    CutOff { looping: bool },
    /// The reply could not be read (the reason).
    Unreadable(String),
    /// Every call of the turn was refused as invalid input; the calls as
    /// `tool(input)`, and the first error.
    InvalidInput {
        tools: Vec<String>,
        calls: String,
        error: String,
    },
    /// The turn's calls ran (not refused as invalid); the calls as
    /// `tool(input)`, what they gave back, and the first error when every
    /// one failed. Only the same calls giving the same results again count
    /// up: a model that does not read its results (a fetch that cannot
    /// resolve, a `process list` asked again and again).
    Repeated {
        calls: String,
        outcome: String,
        error: Option<String>,
    },
}

impl Failure {
    /// How many times in a row this failure changes the next turn.
    pub(super) fn adjust_at(&self) -> u32 {
        match self {
            Failure::Repeated { .. } => REPEATED_ADJUST_AT,
            Failure::CutOff { looping: true } => 1,
            _ => 2,
        }
    }

    /// How many times in a row this failure ends the statement.
    pub(super) fn give_up_at(&self) -> u32 {
        match self {
            Failure::Repeated { .. } => REPEATED_ADJUST_AT + 1,
            _ => GIVE_UP_AFTER,
        }
    }

    /// Whether `other` is the same failure again.
    fn same_as(&self, other: &Failure) -> bool {
        match (self, other) {
            (Failure::CutOff { .. }, Failure::CutOff { .. }) => true,
            (Failure::Unreadable(_), Failure::Unreadable(_)) => true,
            (Failure::InvalidInput { calls: a, .. }, Failure::InvalidInput { calls: b, .. }) => {
                a == b
            }
            (
                Failure::Repeated {
                    calls: a,
                    outcome: x,
                    ..
                },
                Failure::Repeated {
                    calls: b,
                    outcome: y,
                    ..
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}

/// What the next turn does differently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Adjust {
    /// Nothing.
    #[default]
    None,
    /// Asks for a larger answer (tokens).
    MoreOutput(u32),
    /// Tools off: the reply must be the answer (answer-only schema when
    /// replies are constrained).
    AnswerOnly,
    /// Offers only these tools.
    OnlyTools(Vec<String>),
}

/// The failures of a statement so far: the last one and how many times in
/// a row it came.
#[derive(Debug, Default)]
pub(super) struct Streak {
    last: Option<Failure>,
    count: u32,
}

impl Streak {
    /// Notes a turn's failure (or its success: `None`); how many times in a
    /// row this failure has now come.
    pub(super) fn note(&mut self, failure: Option<Failure>) -> u32 {
        match failure {
            None => {
                self.last = None;
                self.count = 0;
            }
            Some(failure) => {
                let again = self
                    .last
                    .as_ref()
                    .is_some_and(|last| last.same_as(&failure));
                self.count = if again { self.count + 1 } else { 1 };
                self.last = Some(failure);
            }
        }
        self.count
    }

    /// The failure last noted.
    pub(super) fn last(&self) -> Option<&Failure> {
        self.last.as_ref()
    }

    /// How many times in a row it came.
    pub(super) fn count(&self) -> u32 {
        self.count
    }
}

/// The failure a turn's answer shows, read before its calls run: cut off
/// at the output limit (a prompted reply that did not close, or a native
/// call whose input was cut), or unreadable.
pub(super) fn reply_failure(
    response: &Response,
    answer: &Answer,
    prompted: bool,
    constrained: bool,
) -> Option<Failure> {
    let cut = response.stop_reason == StopReason::MaxTokens;
    if prompted {
        let unreadable = answer
            .unreadable
            .as_ref()
            .map(|reason| Failure::Unreadable(reason.clone()));
        let raw = answer.raw_reply.as_deref().unwrap_or_default().trim();
        // A constrained reply is one JSON object: one that does not parse
        // whole was cut, whatever the lenient reader made of it.
        let incomplete = constrained && serde_json::from_str::<serde_json::Value>(raw).is_err();
        let cut_off = || Failure::CutOff {
            looping: repeats_itself(raw),
        };
        return match (cut, unreadable) {
            (true, Some(_)) => Some(cut_off()),
            (true, None) if incomplete => Some(cut_off()),
            (_, unreadable) => unreadable,
        };
    }
    let broken_call = response
        .tool_calls
        .iter()
        .any(|call| call.invalid_params_output().is_some());
    (cut && broken_call).then(|| Failure::CutOff {
        looping: repeats_itself(&response.text()),
    })
}

/// What a turn's calls may be the same of as the turn before: every call
/// refused as invalid input, or the calls and what they gave back
/// ([`Failure::Repeated`], a failure only once it repeats).
pub(super) fn input_failure(records: &[CallRecord]) -> Option<Failure> {
    let invalid =
        |r: &CallRecord| r.output.is_error && r.output.error_code == Some(ErrorCode::InvalidParams);
    if records.is_empty() || records.iter().any(|r| r.call.name == UNREADABLE_REPLY) {
        return None;
    }
    let calls = records
        .iter()
        .map(|r| format!("{}({})", r.call.name, r.call.input))
        .collect::<Vec<_>>()
        .join(", ");
    let error = records
        .first()
        .map(|r| satchel_core::text::cut_with(&error_text(r), 300, "..."))
        .unwrap_or_default();
    if !records.iter().all(invalid) {
        let outcome = records
            .iter()
            .map(|r| {
                let note = r.output.response.as_deref().unwrap_or_default();
                format!("{}\n{note}", r.output.results.to_text())
            })
            .collect::<Vec<_>>()
            .join("\n");
        let failed = records.iter().all(|r| r.output.is_error);
        return Some(Failure::Repeated {
            calls,
            outcome,
            error: failed.then_some(error),
        });
    }
    let mut tools: Vec<String> = records.iter().map(|r| r.call.name.clone()).collect();
    tools.dedup();
    Some(Failure::InvalidInput {
        tools,
        calls,
        error,
    })
}

/// A refused call's error message.
fn error_text(record: &CallRecord) -> String {
    record
        .output
        .results
        .structured()
        .and_then(|v| v.get("error"))
        .and_then(|v| v.as_str())
        .map_or_else(|| record.output.user_message.clone(), str::to_owned)
}

/// What the turn after the second failure in a row does differently.
/// `room` is what the window has left past the request just sent.
pub(super) fn adjustment(failure: &Failure, config: &ModelConfig, room: u64) -> Adjust {
    match failure {
        Failure::CutOff { looping: true } => Adjust::AnswerOnly,
        Failure::CutOff { looping: false } => {
            let current = config.max_output_tokens.unwrap_or(1024);
            let larger = u64::from(current).saturating_mul(4).min(room);
            if config.output_source != LimitSource::Configured && larger > u64::from(current) {
                Adjust::MoreOutput(u32::try_from(larger).unwrap_or(u32::MAX))
            } else {
                Adjust::AnswerOnly
            }
        }
        Failure::Unreadable(_) | Failure::Repeated { .. } => Adjust::AnswerOnly,
        Failure::InvalidInput { tools, .. } => Adjust::OnlyTools(tools.clone()),
    }
}

/// The error a statement ends with after `failure` came
/// [`GIVE_UP_AFTER`] times in a row: what happened, what was tried and
/// what to change.
pub(super) fn give_up_message(failure: &Failure, config: &ModelConfig) -> String {
    let limit = config
        .max_output_tokens
        .map_or_else(|| "none".to_owned(), |max| max.to_string());
    match failure {
        Failure::CutOff { .. } => format!(
            "the model's reply was cut off at the output limit {GIVE_UP_AFTER} times in a row, \
             each time before it was complete (the third time with a larger allowance or asked \
             for the answer alone), so nothing more was run. Raise `llm.maxOutputTokens` (now \
             {limit}, {}), or use a model that answers more briefly.",
            config.output_source
        ),
        Failure::Unreadable(reason) => format!(
            "the model's reply could not be read {GIVE_UP_AFTER} times in a row (the last: \
             {reason}), the third time asked for the answer alone. Set `llm.constrainedReplies` \
             to `on` (the server must accept a JSON schema), or use a model that follows the \
             tool-call format (`llm.toolCalling`)."
        ),
        Failure::Repeated { calls, error, .. } => format!(
            "the model made the same tool call with the same result {} times in a row ({}{}), \
             then was asked for the answer alone and did not give it. Use a model that reads its \
             tool results, or give it what the call needs.",
            REPEATED_ADJUST_AT + 1,
            satchel_core::text::cut_with(calls, 300, "..."),
            error
                .as_ref()
                .map(|error| format!("; the error: {error}"))
                .unwrap_or_default()
        ),
        Failure::InvalidInput { calls, error, .. } => format!(
            "the model made the same invalid tool call {GIVE_UP_AFTER} times in a row ({}; the \
             error: {error}), the third time offered only that tool. Use a model that can use \
             this tool, or leave the tool out (`tools` in agent.json).",
            satchel_core::text::cut_with(calls, 300, "...")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_failure_again_counts_up() {
        let mut streak = Streak::default();
        let cut = |looping| Some(Failure::CutOff { looping });
        assert_eq!(streak.note(cut(false)), 1);
        assert_eq!(streak.note(cut(true)), 2);
        assert_eq!(streak.note(Some(Failure::Unreadable("x".into()))), 1);
        assert_eq!(streak.note(Some(Failure::Unreadable("y".into()))), 2);
        assert_eq!(streak.note(None), 0);
        let invalid = |calls: &str| Failure::InvalidInput {
            tools: vec!["bash".into()],
            calls: calls.into(),
            error: "e".into(),
        };
        assert_eq!(streak.note(Some(invalid("bash({})"))), 1);
        assert_eq!(streak.note(Some(invalid("bash({\"a\":1})"))), 1);
        assert_eq!(streak.note(Some(invalid("bash({\"a\":1})"))), 2);
        let repeated = |calls: &str, outcome: &str| Failure::Repeated {
            calls: calls.into(),
            outcome: outcome.into(),
            error: None,
        };
        assert_eq!(streak.note(Some(repeated("fetch({})", "dns"))), 1);
        assert_eq!(streak.note(Some(repeated("fetch({})", "dns"))), 2);
        // The same call with a new result is progress (a poll that moved).
        assert_eq!(streak.note(Some(repeated("fetch({})", "200"))), 1);
        assert_eq!(streak.note(Some(repeated("fetch({\"a\":1})", "200"))), 1);
    }
}
