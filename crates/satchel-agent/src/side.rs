//! Side requests: short calls to the model that write the conversation
//! goal, a statement's objective, a title, or a summary of older turns.
//!
//! They are logged as auxiliary entries and recorded as model requests of
//! their own purpose, never added to the history.

use std::fmt;

use satchel_core::Message;

/// Every side request's system prompt (or, when it continues a main
/// request, its last message) starts with this, so a reader of the log (or
/// a test's fake model) can tell them from main turns.
pub const SIDE_PREFIX: &str =
    "You write short notes about a conversation between a user and an AI assistant.";

/// What a side request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideKind {
    /// The conversation goal, from its first statement.
    Goal,
    /// The objective of one statement.
    Objective,
    /// The conversation title.
    Title,
    /// A summary of older statements, to fit the context window.
    Summary,
}

impl SideKind {
    /// The name used in logs and usage rows, e.g. `objective`.
    pub fn as_str(self) -> &'static str {
        match self {
            SideKind::Goal => "goal",
            SideKind::Objective => "objective",
            SideKind::Title => "title",
            SideKind::Summary => "summary",
        }
    }

    /// Largest answer asked for.
    pub fn max_output_tokens(self) -> u32 {
        match self {
            SideKind::Summary => 1200,
            _ => 120,
        }
    }

    fn task(self) -> &'static str {
        match self {
            SideKind::Goal => {
                "Task: state the overall goal of the user in this conversation, in one sentence, as an instruction to the assistant. Reply with that sentence only."
            }
            SideKind::Objective => {
                "Task: state what the assistant must achieve to answer the user's latest message, in one sentence, as an instruction to the assistant. Reply with that sentence only."
            }
            SideKind::Title => {
                "Task: give the conversation a title of at most six words. Reply with the title only, without quotes."
            }
            SideKind::Summary => {
                "Task: summarise the conversation excerpt for the assistant's own future reference: what the user asked, what was done, decisions, facts learned, files and commands that matter, open questions. Be concise; keep exact names, paths and numbers."
            }
        }
    }
}

impl fmt::Display for SideKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The messages of a side request about `material`.
pub(crate) fn side_messages(kind: SideKind, material: &str) -> Vec<Message> {
    vec![
        Message::system(format!("{SIDE_PREFIX}\n{}", kind.task())),
        Message::user(material),
    ]
}

/// The last message of a side request that continues a main request: the
/// task, marked as Satchel's (the conversation so far is the material).
pub(crate) fn side_note(kind: SideKind) -> Message {
    Message::user(format!(
        "{SIDE_PREFIX}\n(This request is from Satchel, not from the user; do not call tools, \
         and the user will not see your reply.)\n{}",
        kind.task()
    ))
}

/// The answer's text made into one clean line (goal, objective, title) or
/// trimmed text (summary); `None` when nothing usable came back.
pub(crate) fn clean_answer(kind: SideKind, text: &str) -> Option<String> {
    let text = text.trim();
    let cleaned = match kind {
        SideKind::Summary => text.to_owned(),
        _ => text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())?
            .trim_matches(|c| c == '"' || c == '\'' || c == '*' || c == '#')
            .trim()
            .to_owned(),
    };
    (!cleaned.is_empty()).then_some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_one_clean_line() {
        assert_eq!(
            clean_answer(SideKind::Title, "\n\"Fix the build\"\nextra"),
            Some("Fix the build".into())
        );
        assert_eq!(clean_answer(SideKind::Goal, "  \n "), None);
        assert_eq!(
            clean_answer(SideKind::Summary, " a\nb "),
            Some("a\nb".into())
        );
    }
}
