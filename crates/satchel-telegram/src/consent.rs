//! Consent on Telegram: when policy says "ask", the chat gets the question
//! with three buttons (allow once, allow in this chat, deny). Only the
//! person the statement came from can answer; nobody answering within the
//! configured time is a refusal the model is told about; `/stop` while
//! the question waits cancels the statement.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{EditMessageTextParams, SendMessageParams};
use frankenstein::types::{InlineKeyboardButton, InlineKeyboardMarkup, ReplyMarkup};
use satchel_core::ToolCall;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::api::BotApi;
use crate::html::escape;

/// Questions waiting for a button, by the nonce in their buttons' data.
#[derive(Default, Clone)]
pub(crate) struct PendingQuestions {
    inner: Arc<Mutex<HashMap<String, Pending>>>,
}

struct Pending {
    chat_id: i64,
    /// The only user whose press counts.
    asker: u64,
    answer: oneshot::Sender<ConsentAnswer>,
}

/// What became of a button press.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Press {
    /// The question is answered.
    Answered,
    /// Someone else pressed: the question still waits.
    NotYours,
    /// No such question (answered, expired, or from before a restart).
    Gone,
}

impl PendingQuestions {
    /// Handles a button's `data` pressed by `user` in `chat_id`.
    pub(crate) fn press(&self, data: &str, chat_id: i64, user: u64) -> Press {
        let Some((nonce, choice)) = data
            .strip_prefix("consent:")
            .and_then(|d| d.rsplit_once(':'))
        else {
            return Press::Gone;
        };
        let mut pending = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match pending.get(nonce) {
            None => return Press::Gone,
            Some(question) if question.chat_id != chat_id || question.asker != user => {
                return Press::NotYours;
            }
            Some(_) => {}
        }
        let Some(question) = pending.remove(nonce) else {
            return Press::Gone;
        };
        let answer = match choice {
            "once" => ConsentAnswer::AllowOnce,
            "chat" => ConsentAnswer::AllowForConversation,
            _ => ConsentAnswer::Deny { reason: None },
        };
        let _ = question.answer.send(answer);
        Press::Answered
    }

    fn add(&self, nonce: String, pending: Pending) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(nonce, pending);
    }

    fn remove(&self, nonce: &str) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(nonce);
    }
}

/// Takes a question out of [`PendingQuestions`] however its wait ends,
/// a dropped future included.
struct Asked<'a> {
    questions: &'a PendingQuestions,
    nonce: String,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        self.questions.remove(&self.nonce);
    }
}

/// Characters of a call's input shown with the question.
const INPUT_SHOWN: usize = 3000;

/// The whole input a person is asked about (a command cut short could
/// hide what it does), within Telegram's message size.
fn input_shown(call: &ToolCall) -> String {
    let text = match call
        .input
        .get("command")
        .and_then(serde_json::Value::as_str)
    {
        Some(command) => command.to_owned(),
        None => serde_json::to_string_pretty(&call.input).unwrap_or_default(),
    };
    let (shown, cut) = satchel_core::text::char_prefix(&text, INPUT_SHOWN);
    if cut {
        format!(
            "{shown}\n… ({} characters more)",
            text.chars().count() - INPUT_SHOWN
        )
    } else {
        shown.to_owned()
    }
}

/// The running statement of a chat, as consent needs it: who asked, and
/// the cancellation `/stop` fires.
#[derive(Default)]
pub(crate) struct Running {
    pub(crate) asker: u64,
    pub(crate) cancel: Option<CancellationToken>,
}

/// Asks one chat's user through inline buttons.
pub(crate) struct ButtonConsent {
    pub(crate) api: Arc<BotApi>,
    pub(crate) chat_id: i64,
    pub(crate) questions: PendingQuestions,
    pub(crate) timeout: Duration,
    pub(crate) running: Arc<Mutex<Running>>,
}

fn button(text: &str, nonce: &str, choice: &str) -> InlineKeyboardButton {
    InlineKeyboardButton::builder()
        .text(text)
        .callback_data(format!("consent:{nonce}:{choice}"))
        .build()
}

fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:x}", NEXT.fetch_add(1, Ordering::Relaxed), salt)
}

#[async_trait]
impl Consent for ButtonConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let (asker, cancel) = {
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            (running.asker, running.cancel.clone().unwrap_or_default())
        };
        let nonce = nonce();
        let (tx, rx) = oneshot::channel();
        let _asked = Asked {
            questions: &self.questions,
            nonce: nonce.clone(),
        };
        self.questions.add(
            nonce.clone(),
            Pending {
                chat_id: self.chat_id,
                asker,
                answer: tx,
            },
        );
        let question = format!(
            "🔐 <b>Allow this {}?</b>\n<pre>{}</pre>\n{}\n<i>No answer within {} s counts as no.</i>",
            escape(&call.name),
            escape(&input_shown(call)),
            escape(&decision.explanation()),
            self.timeout.as_secs()
        );
        let keyboard = InlineKeyboardMarkup::builder()
            .inline_keyboard(vec![
                vec![
                    button("Allow once", &nonce, "once"),
                    button("Allow in this chat", &nonce, "chat"),
                ],
                vec![button("Deny", &nonce, "deny")],
            ])
            .build();
        let params = SendMessageParams::builder()
            .chat_id(self.chat_id)
            .text(question)
            .parse_mode(frankenstein::ParseMode::Html)
            .reply_markup(ReplyMarkup::InlineKeyboardMarkup(keyboard))
            .build();
        let sent = match self.api.send_message(&params).await {
            Ok(sent) => sent.result,
            Err(error) => {
                self.questions.remove(&nonce);
                tracing::warn!("cannot ask for consent: {error}");
                return ConsentAnswer::Nobody;
            }
        };
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or(ConsentAnswer::Nobody),
            () = cancel.cancelled() => ConsentAnswer::Cancel,
            () = tokio::time::sleep(self.timeout) => ConsentAnswer::Deny {
                reason: Some(format!(
                    "nobody answered within {} s; ask again only if it is needed",
                    self.timeout.as_secs()
                )),
            },
        };
        self.questions.remove(&nonce);
        let outcome = match &answer {
            ConsentAnswer::AllowOnce => "✅ allowed once",
            ConsentAnswer::AllowForConversation => "✅ allowed in this chat",
            ConsentAnswer::Cancel => "⏹ stopped",
            ConsentAnswer::Deny { reason: Some(_) } => "⌛ no answer: refused",
            _ => "🚫 denied",
        };
        // The question stays, its buttons replaced by what was decided.
        let edit = EditMessageTextParams::builder()
            .chat_id(self.chat_id)
            .message_id(sent.message_id)
            .text(format!(
                "<code>{}</code>\n{outcome}",
                escape(&satchel_tools::format::call_summary(
                    &call.name,
                    &call.input
                ))
            ))
            .parse_mode(frankenstein::ParseMode::Html)
            .build();
        if let Err(error) = self.api.edit_message_text(&edit).await {
            tracing::debug!("cannot update the consent question: {error}");
        }
        tracing::info!(chat = self.chat_id, tool = %call.name, ?answer, "consent");
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_asker_in_its_chat_can_answer() {
        let questions = PendingQuestions::default();
        let (tx, mut rx) = oneshot::channel();
        questions.add(
            "n1".into(),
            Pending {
                chat_id: 5,
                asker: 7,
                answer: tx,
            },
        );
        assert_eq!(questions.press("consent:n1:once", 5, 8), Press::NotYours);
        assert_eq!(questions.press("consent:n1:once", 6, 7), Press::NotYours);
        assert!(rx.try_recv().is_err());
        assert_eq!(questions.press("consent:n1:chat", 5, 7), Press::Answered);
        assert_eq!(
            rx.try_recv().ok(),
            Some(ConsentAnswer::AllowForConversation)
        );
        assert_eq!(questions.press("consent:n1:once", 5, 7), Press::Gone);
        assert_eq!(questions.press("garbage", 5, 7), Press::Gone);
    }
}
