//! Consent in the REPL: when policy says "ask", the user answers at a
//! prompt: allow once, for this conversation, or for this project (the
//! narrowest rule that covers the call is written to the project's
//! agent.json and shown), or deny with an optional reason that the model
//! is told. Ctrl-C at the prompt cancels the turn, as everywhere else.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rustyline::error::ReadlineError;
use satchel_core::ToolCall;
use satchel_tools::policy::{Decision, narrowest_rules};
use satchel_tools::{Consent, ConsentAnswer, RememberingConsent};
use tokio_util::sync::CancellationToken;

use super::LineEditor;
use super::screen::SharedScreen;

/// Asks at the terminal, through the REPL's own line editor.
struct Prompt {
    editor: LineEditor,
    screen: SharedScreen,
    /// One prompt at a time, even when calls of a turn run concurrently.
    turn: tokio::sync::Mutex<()>,
    /// The project's agent.json, where "for this project" writes.
    project_config: PathBuf,
    /// The running turn, cancelled by Ctrl-C at the prompt.
    running: Arc<Mutex<Option<CancellationToken>>>,
}

#[async_trait]
impl Consent for Prompt {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let _one_at_a_time = self.turn.lock().await;
        self.screen.lock().pause();
        let question = format!(
            "The model wants to run {}\n{}\nAllow? [y] once  [a] for this conversation  [p] for this project  [n] deny (n REASON tells the model why): ",
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
            Ok(Ok(line)) => match parse_answer(&line) {
                ConsentAnswer::AllowForProject { .. } => self.allow_for_project(decision),
                answer => answer,
            },
            Ok(Err(ReadlineError::Interrupted)) => {
                if let Some(turn) = self
                    .running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    turn.cancel();
                }
                ConsentAnswer::Cancel
            }
            // Ctrl-D or a broken terminal: refused.
            _ => ConsentAnswer::Deny { reason: None },
        };
        tracing::debug!(tool = %call.name, ?answer, "consent");
        answer
    }
}

impl Prompt {
    /// Writes the narrowest rules that cover the call and says which; if
    /// they cannot be written, the call is allowed once and the user told.
    fn allow_for_project(&self, decision: &Decision) -> ConsentAnswer {
        let rules = narrowest_rules(decision);
        let path = &self.project_config;
        let root = path.parent().and_then(std::path::Path::parent);
        // Only a project the user already trusted stays trusted after the
        // edit: trusting now would also trust whatever else is there.
        let was_trusted = root.is_some_and(satchel_host::trust::trusted_by_record);
        match satchel_tools::config::add_allow_rules(path, &rules) {
            Ok(()) => {
                if was_trusted
                    && let Some(root) = root
                    && let Err(error) = satchel_host::trust::trust(root)
                {
                    tracing::warn!(%error, "cannot remember the project as trusted");
                }
                let shown: Vec<String> = rules.iter().map(|r| format!("`{r}`")).collect();
                self.screen.lock().line(&format!(
                    "added to {}: allow {}",
                    path.display(),
                    shown.join(", ")
                ));
                ConsentAnswer::AllowForProject { rules }
            }
            Err(error) => {
                self.screen.lock().line(&format!(
                    "cannot remember it for the project ({error}); allowed once"
                ));
                ConsentAnswer::AllowOnce
            }
        }
    }
}

/// `y`, `a`, `p`, `n [reason]`; anything else is a refusal.
fn parse_answer(line: &str) -> ConsentAnswer {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => ConsentAnswer::AllowOnce,
        "a" | "always" => ConsentAnswer::AllowForConversation,
        "p" | "project" => ConsentAnswer::AllowForProject { rules: Vec::new() },
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
    project_config: PathBuf,
    running: Arc<Mutex<Option<CancellationToken>>>,
    current: Mutex<Arc<RememberingConsent<Prompt>>>,
}

impl TerminalConsent {
    pub(crate) fn new(
        editor: LineEditor,
        screen: SharedScreen,
        project_config: PathBuf,
    ) -> TerminalConsent {
        let running = Arc::new(Mutex::new(None));
        let current = Mutex::new(Arc::new(Self::fresh(
            &editor,
            &screen,
            &project_config,
            &running,
        )));
        TerminalConsent {
            editor,
            screen,
            project_config,
            running,
            current,
        }
    }

    fn fresh(
        editor: &LineEditor,
        screen: &SharedScreen,
        project_config: &std::path::Path,
        running: &Arc<Mutex<Option<CancellationToken>>>,
    ) -> RememberingConsent<Prompt> {
        RememberingConsent::new(Prompt {
            editor: editor.clone(),
            screen: screen.clone(),
            turn: tokio::sync::Mutex::new(()),
            project_config: project_config.to_path_buf(),
            running: running.clone(),
        })
    }

    /// The turn Ctrl-C at a prompt cancels (`None` between turns).
    pub(crate) fn set_running(&self, turn: Option<CancellationToken>) {
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = turn;
    }

    /// Forgets the answers given for the previous conversation.
    pub(crate) fn forget(&self) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(Self::fresh(
            &self.editor,
            &self.screen,
            &self.project_config,
            &self.running,
        ));
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
            parse_answer("p"),
            ConsentAnswer::AllowForProject { rules: Vec::new() }
        );
        assert_eq!(
            parse_answer("n not on main"),
            ConsentAnswer::Deny {
                reason: Some("not on main".into())
            }
        );
        assert_eq!(parse_answer(""), ConsentAnswer::Deny { reason: None });
    }
}
