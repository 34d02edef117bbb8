//! One answer as the user sees it on Telegram: tool activity as short
//! lines, then the answer, streamed by editing one message at most once a
//! second; at the end the answer is cut into messages at paragraph
//! boundaries, and an answer too long for a few messages also comes as a
//! file.

use std::sync::Arc;
use std::time::Duration;

use frankenstein::AsyncTelegramApi;
use frankenstein::input_file::InputFile;
use frankenstein::methods::{
    EditMessageTextParams, SendChatActionParams, SendDocumentParams, SendMessageParams,
    SendPhotoParams,
};
use frankenstein::types::{ChatAction, ReplyParameters};
use satchel_agent::{AgentEvent, Outcome};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::BotApi;
use crate::html::{self, Chunk, MESSAGE_LIMIT, escape};

/// The least time between two edits of the live message (Telegram allows
/// about one a second per chat).
pub(crate) const EDIT_INTERVAL: Duration = Duration::from_millis(1100);

/// An answer longer than this many messages is also sent as a file.
const MESSAGES_BEFORE_FILE: usize = 3;

/// Room kept in the live message for the activity lines.
const ACTIVITY_LINES: usize = 8;

/// What the live message holds so far.
#[derive(Default)]
struct Live {
    /// Tool calls and notices, one short line each.
    activity: Vec<(Option<String>, String)>,
    /// The answer's markdown so far.
    answer: String,
    /// The message being edited, once sent.
    message_id: Option<i32>,
    /// The HTML it shows now.
    shown: String,
    /// The whole answer went out when the statement's turns were over,
    /// before its side requests (goal, objective, title) came back.
    delivered: bool,
}

impl Live {
    fn apply(&mut self, event: AgentEvent) -> bool {
        match event {
            AgentEvent::TextDelta(text) => self.answer.push_str(&text),
            AgentEvent::ToolStarted {
                call_id,
                tool,
                display,
            } => self.activity.push((
                Some(call_id),
                format!("⚙️ {tool}: {}", first_line(&display)),
            )),
            AgentEvent::ToolFinished {
                call_id,
                tool,
                is_error,
                duration,
                display,
            } => {
                let mark = if is_error { "❌" } else { "✅" };
                let line = format!(
                    "{mark} {tool} ({:.1} s){}",
                    duration.as_secs_f64(),
                    if is_error {
                        format!(": {}", first_line(&display))
                    } else {
                        String::new()
                    }
                );
                match self
                    .activity
                    .iter_mut()
                    .find(|(id, _)| id.as_deref() == Some(call_id.as_str()))
                {
                    Some(entry) => entry.1 = line,
                    None => self.activity.push((None, line)),
                }
            }
            AgentEvent::Notice(notice) => self.activity.push((None, format!("ℹ️ {notice}"))),
            _ => return false,
        }
        true
    }

    /// The activity lines (the latest few) as HTML.
    fn activity_html(&self) -> String {
        let skip = self.activity.len().saturating_sub(ACTIVITY_LINES);
        let mut lines: Vec<String> = self.activity[skip..]
            .iter()
            .map(|(_, line)| format!("<i>{}</i>", escape(line)))
            .collect();
        if skip > 0 {
            lines.insert(0, format!("<i>… {skip} earlier</i>"));
        }
        lines.join("\n")
    }

    /// The live message: activity, then the start of the answer.
    fn render(&self) -> String {
        let activity = self.activity_html();
        let room = MESSAGE_LIMIT.saturating_sub(activity.chars().count() + 4);
        let answer = html::split(&self.answer, room.max(200))
            .into_iter()
            .next()
            .map(|chunk| chunk.html)
            .unwrap_or_default();
        match (activity.is_empty(), answer.is_empty()) {
            (true, true) => String::new(),
            (false, true) => activity,
            (true, false) => answer,
            (false, false) => format!("{activity}\n\n{answer}"),
        }
    }
}

/// The first line of a tool's display, as short plain text.
fn first_line(display: &str) -> String {
    let line = display
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default();
    let plain = html::to_plain(line);
    let plain = plain.trim();
    if plain.chars().count() > 100 {
        format!("{}…", satchel_core::text::char_prefix(plain, 99).0)
    } else {
        plain.to_owned()
    }
}

/// The answer being written to one chat.
pub(crate) struct LiveReply {
    events: mpsc::UnboundedSender<AgentEvent>,
    /// Ends the live task (sinks handed out may outlive the statement).
    close: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Live>,
    api: Arc<BotApi>,
    chat_id: i64,
    reply_to: Option<i32>,
}

impl LiveReply {
    /// Starts showing an answer to the message `reply_to` in `chat_id`.
    pub(crate) fn start(api: Arc<BotApi>, chat_id: i64, reply_to: Option<i32>) -> LiveReply {
        let (events, mut receiver) = mpsc::unbounded_channel::<AgentEvent>();
        let (close, mut closed) = tokio::sync::oneshot::channel::<()>();
        let task = {
            let api = api.clone();
            tokio::spawn(async move {
                let mut live = Live::default();
                let mut last_edit = Instant::now() - EDIT_INTERVAL;
                let mut dirty = false;
                let mut typing_at = Instant::now() - Duration::from_secs(10);
                loop {
                    // Say "typing…" until something can be shown.
                    if live.message_id.is_none() && typing_at.elapsed() >= Duration::from_secs(4) {
                        typing_at = Instant::now();
                        let action = SendChatActionParams::builder()
                            .chat_id(chat_id)
                            .action(ChatAction::Typing)
                            .build();
                        let _ = api.send_chat_action(&action).await;
                    }
                    let deadline = if dirty {
                        last_edit + EDIT_INTERVAL
                    } else {
                        Instant::now() + Duration::from_secs(4)
                    };
                    tokio::select! {
                        event = receiver.recv() => match event {
                            // The answer is whole: the user gets it now,
                            // not once the side requests are back.
                            Some(AgentEvent::AnswerComplete {
                                outcome: Outcome::Answered | Outcome::TurnLimit,
                            }) => {
                                deliver(&api, chat_id, reply_to, &mut live, None).await;
                                live.delivered = true;
                                break;
                            }
                            Some(event) => dirty |= live.apply(event),
                            None => break,
                        },
                        _ = &mut closed => {
                            while let Ok(event) = receiver.try_recv() {
                                live.apply(event);
                            }
                            break;
                        }
                        () = tokio::time::sleep_until(deadline) => {}
                    }
                    // Progress is left out while sends queue up (many
                    // chats at once): tried again an interval later; the
                    // final answer always goes.
                    if dirty
                        && last_edit.elapsed() >= EDIT_INTERVAL
                        && api.is_congested(EDIT_INTERVAL)
                    {
                        last_edit = Instant::now();
                    }
                    if dirty && last_edit.elapsed() >= EDIT_INTERVAL {
                        dirty = false;
                        last_edit = Instant::now();
                        show(&api, chat_id, reply_to, &mut live).await;
                    }
                }
                live
            })
        };
        LiveReply {
            events,
            close,
            task,
            api,
            chat_id,
            reply_to,
        }
    }

    /// The sink the statement's events go to.
    pub(crate) fn sink(&self) -> impl Fn(AgentEvent) + Send + Sync + use<> {
        let events = self.events.clone();
        move |event| {
            let _ = events.send(event);
        }
    }

    /// Shows the whole answer, with `ending` (a failure, a stop) after it.
    pub(crate) async fn finish(self, ending: Option<String>) {
        let LiveReply {
            events,
            close,
            task,
            api,
            chat_id,
            reply_to,
        } = self;
        drop(events);
        let _ = close.send(());
        let mut live: Live = task.await.unwrap_or_default();
        if !live.delivered {
            deliver(&api, chat_id, reply_to, &mut live, ending).await;
        } else if let Some(ending) = ending {
            // Something failed after the answer went out (recording what
            // the side requests wrote): said in a message of its own.
            send_markdown(&api, chat_id, &ending, "error.md").await;
        }
    }
}

/// Shows the whole answer, with `ending` (a failure, a stop) after it: the
/// live message edited into its first part, the rest sent after it.
async fn deliver(
    api: &BotApi,
    chat_id: i64,
    reply_to: Option<i32>,
    live: &mut Live,
    ending: Option<String>,
) {
    let mut answer = live.answer.trim().to_owned();
    if let Some(ending) = ending {
        if !answer.is_empty() {
            answer.push_str("\n\n");
        }
        answer.push_str(&ending);
    }
    if answer.is_empty() {
        // The user is never shown an empty success.
        answer = "(the model gave no answer)".to_owned();
    }
    let activity = live.activity_html();
    let mut chunks = html::split(&answer, MESSAGE_LIMIT);
    // The activity lines lead the first message when they fit.
    if let Some(first) = chunks.first_mut()
        && !activity.is_empty()
    {
        if activity.chars().count() + first.html.chars().count() + 2 <= MESSAGE_LIMIT {
            first.html = format!("{activity}\n\n{}", first.html);
        } else {
            chunks.insert(
                0,
                Chunk {
                    html: activity.clone(),
                    plain: html::to_plain(&activity),
                },
            );
        }
    }
    let as_file = chunks.len() > MESSAGES_BEFORE_FILE;
    if as_file {
        chunks.truncate(1);
    }
    for (index, chunk) in chunks.into_iter().enumerate() {
        if index == 0 && live.message_id.is_some() {
            // An edit that fails (the message was deleted, the network
            // broke) is sent as a new message: the answer is not lost.
            if chunk.html != live.shown && !edit(api, chat_id, live, &chunk).await {
                send(api, chat_id, reply_to, &chunk).await;
            }
        } else {
            let reply = if index == 0 { reply_to } else { None };
            send(api, chat_id, reply, &chunk).await;
        }
    }
    if as_file {
        send_file(
            api,
            chat_id,
            Upload::Document,
            ("answer.md", answer.as_bytes()),
            "The whole answer",
        )
        .await;
    }
}

/// Puts the live message on screen: sent the first time, edited after.
async fn show(api: &BotApi, chat_id: i64, reply_to: Option<i32>, live: &mut Live) {
    let html = live.render();
    if html.is_empty() || html == live.shown {
        return;
    }
    let chunk = Chunk {
        plain: html.clone(),
        html,
    };
    if live.message_id.is_some() {
        edit(api, chat_id, live, &chunk).await;
    } else {
        live.message_id = send(api, chat_id, reply_to, &chunk).await;
        live.shown = chunk.html;
    }
}

/// Edits the live message to `chunk`; false when it could not be shown.
async fn edit(api: &BotApi, chat_id: i64, live: &mut Live, chunk: &Chunk) -> bool {
    let Some(message_id) = live.message_id else {
        return false;
    };
    let params = EditMessageTextParams::builder()
        .chat_id(chat_id)
        .message_id(message_id)
        .text(chunk.html.clone())
        .parse_mode(frankenstein::ParseMode::Html)
        .build();
    match api.edit_message_text(&params).await {
        Ok(_) => {
            live.shown = chunk.html.clone();
            true
        }
        Err(error) if error.is_not_modified() => {
            live.shown = chunk.html.clone();
            true
        }
        Err(error) if error.is_parse_error() => {
            let params = EditMessageTextParams::builder()
                .chat_id(chat_id)
                .message_id(message_id)
                .text(plain_or_dot(&chunk.plain))
                .build();
            live.shown = chunk.html.clone();
            match api.edit_message_text(&params).await {
                Ok(_) => true,
                Err(error) => {
                    tracing::warn!(chat = chat_id, "cannot edit the answer: {error}");
                    false
                }
            }
        }
        Err(error) => {
            tracing::warn!(chat = chat_id, "cannot edit the answer: {error}");
            false
        }
    }
}

fn plain_or_dot(plain: &str) -> String {
    if plain.trim().is_empty() {
        "…".to_owned()
    } else {
        satchel_core::text::char_prefix(plain, MESSAGE_LIMIT)
            .0
            .to_owned()
    }
}

/// Sends one message as HTML, and as plain text if Telegram cannot parse
/// it; returns its id.
pub(crate) async fn send(
    api: &BotApi,
    chat_id: i64,
    reply_to: Option<i32>,
    chunk: &Chunk,
) -> Option<i32> {
    let reply = reply_to.map(|id| {
        ReplyParameters::builder()
            .message_id(id)
            .allow_sending_without_reply(true)
            .build()
    });
    let params = SendMessageParams::builder()
        .chat_id(chat_id)
        .text(chunk.html.clone())
        .parse_mode(frankenstein::ParseMode::Html)
        .maybe_reply_parameters(reply.clone())
        .build();
    match api.send_message(&params).await {
        Ok(sent) => Some(sent.result.message_id),
        Err(error) if error.is_parse_error() => {
            tracing::debug!("Telegram could not parse the HTML ({error}); sending plain text");
            let params = SendMessageParams::builder()
                .chat_id(chat_id)
                .text(plain_or_dot(&chunk.plain))
                .maybe_reply_parameters(reply)
                .build();
            match api.send_message(&params).await {
                Ok(sent) => Some(sent.result.message_id),
                Err(error) => {
                    tracing::warn!(chat = chat_id, "cannot send a message: {error}");
                    None
                }
            }
        }
        Err(error) => {
            tracing::warn!(chat = chat_id, "cannot send a message: {error}");
            None
        }
    }
}

/// Sends markdown as one or more messages (a text too long for a few
/// also as a file).
pub(crate) async fn send_markdown(api: &BotApi, chat_id: i64, markdown: &str, file_name: &str) {
    let chunks = html::split(markdown, MESSAGE_LIMIT);
    if chunks.len() > MESSAGES_BEFORE_FILE {
        if let Some(first) = chunks.first() {
            send(api, chat_id, None, first).await;
        }
        send_file(
            api,
            chat_id,
            Upload::Document,
            (file_name, markdown.as_bytes()),
            "All of it",
        )
        .await;
        return;
    }
    for chunk in &chunks {
        send(api, chat_id, None, chunk).await;
    }
}

/// How a file goes to the chat.
#[derive(Clone, Copy)]
pub(crate) enum Upload {
    /// A document (any file).
    Document,
    /// A picture, shown inline.
    Photo,
}

/// Sends `bytes` named `name` with `caption`; a failure is logged (the
/// text around it was sent already).
pub(crate) async fn send_file(
    api: &BotApi,
    chat_id: i64,
    upload: Upload,
    (name, bytes): (&str, &[u8]),
    caption: &str,
) {
    let result = async {
        // The client uploads from a path.
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        tokio::fs::write(&path, bytes).await?;
        match upload {
            Upload::Document => {
                let params = SendDocumentParams::builder()
                    .chat_id(chat_id)
                    .document(InputFile { path })
                    .caption(caption)
                    .build();
                api.send_document(&params).await?;
            }
            Upload::Photo => {
                let params = SendPhotoParams::builder()
                    .chat_id(chat_id)
                    .photo(InputFile { path })
                    .caption(caption)
                    .build();
                api.send_photo(&params).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(error) = result {
        tracing::warn!(chat = chat_id, "cannot send {name}: {error:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_call_replaces_its_started_line() {
        let mut live = Live::default();
        live.apply(AgentEvent::ToolStarted {
            call_id: "c1".into(),
            tool: "bash".into(),
            display: "`ls -la`\nmore".into(),
        });
        assert_eq!(live.render(), "<i>⚙️ bash: ls -la</i>");
        live.apply(AgentEvent::ToolFinished {
            call_id: "c1".into(),
            tool: "bash".into(),
            display: "out".into(),
            is_error: false,
            duration: Duration::from_millis(300),
        });
        live.apply(AgentEvent::TextDelta("**done** <ok>".into()));
        assert_eq!(
            live.render(),
            "<i>✅ bash (0.3 s)</i>\n\n<b>done</b> &lt;ok&gt;"
        );
    }
}
