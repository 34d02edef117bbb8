//! Consent in the REPL: when policy says "ask", the user answers at a
//! prompt: allow once, allow for this conversation, or deny with an
//! optional reason that the model is told.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use satchel_core::ToolCall;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer, RememberingConsent};

use super::LineEditor;
use super::screen::SharedScreen;

/// Asks at the terminal, through the REPL's own line editor.
struct Prompt {
    editor: LineEditor,
    screen: SharedScreen,
    /// One prompt at a time, even when calls of a turn run concurrently.
    turn: tokio::sync::Mutex<()>,
}

#[async_trait]
impl Consent for Prompt {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let _one_at_a_time = self.turn.lock().await;
        self.screen.lock().pause();
        let question = format!(
            "The model wants to run {}\n{}\nAllow? [y] once  [a] for this conversation  [n] deny (n REASON tells the model why): ",
            satchel_tools::format::call_summary(&call.name, &call.input),
            decision.explanation()
        );
        let editor = self.editor.clone();
        let line = tokio::task::spawn_blocking(move || {
            let mut editor = editor.lock().unwrap_or_else(|p| p.into_inner());
            editor.readline(&question)
        })
        .await;
        self.screen.lock().resume();
        let answer = match line {
            Ok(Ok(line)) => parse_answer(&line),
            // Ctrl-C, Ctrl-D or a broken terminal: refused.
            _ => ConsentAnswer::Deny { reason: None },
        };
        tracing::debug!(tool = %call.name, ?answer, "consent");
        answer
    }
}

/// `y`, `a`, `n [reason]`; anything else is a refusal.
fn parse_answer(line: &str) -> ConsentAnswer {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => ConsentAnswer::AllowOnce,
        "a" | "always" => ConsentAnswer::AllowForConversation,
        _ => ConsentAnswer::Deny {
            reason: (!rest.trim().is_empty()).then(|| rest.trim().to_owned()),
        },
    }
}

/// The REPL's consent: remembers "for this conversation" answers until
/// [`TerminalConsent::forget`] (a new conversation).
pub(crate) struct TerminalConsent {
    editor: LineEditor,
    screen: SharedScreen,
    current: Mutex<Arc<RememberingConsent<Prompt>>>,
}

impl TerminalConsent {
    pub(crate) fn new(editor: LineEditor, screen: SharedScreen) -> TerminalConsent {
        let current = Mutex::new(Arc::new(Self::fresh(&editor, &screen)));
        TerminalConsent {
            editor,
            screen,
            current,
        }
    }

    fn fresh(editor: &LineEditor, screen: &SharedScreen) -> RememberingConsent<Prompt> {
        RememberingConsent::new(Prompt {
            editor: editor.clone(),
            screen: screen.clone(),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// Forgets the answers given for the previous conversation.
    pub(crate) fn forget(&self) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(Self::fresh(&self.editor, &self.screen));
    }
}

#[async_trait]
impl Consent for TerminalConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        current.ask(call, decision).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_with_an_optional_reason() {
        assert_eq!(parse_answer("y"), ConsentAnswer::AllowOnce);
        assert_eq!(parse_answer(" A "), ConsentAnswer::AllowForConversation);
        assert_eq!(
            parse_answer("n not on main"),
            ConsentAnswer::Deny {
                reason: Some("not on main".into())
            }
        );
        assert_eq!(parse_answer(""), ConsentAnswer::Deny { reason: None });
    }
}
