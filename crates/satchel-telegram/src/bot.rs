//! The bot: who may talk to it, one worker per chat, and its start and
//! stop (the run between them is `serve`'s).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{AnswerCallbackQueryParams, SetMyCommandsParams};
use frankenstein::response::MethodResponse;
use frankenstein::types::{BotCommand, ChatType, MaybeInaccessibleMessage, Message};
use frankenstein::updates::{Update, UpdateContent};
use satchel_agent::{Agent, Outcome};
use satchel_host::{ConversationOptions, Host};
use satchel_store::{AuditSource, FrontEndStore};
use satchel_tools::{RememberingConsent, Style};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::BotOptions;
use crate::api::BotApi;
use crate::command_line::{self, COMMANDS};
use crate::consent::{ButtonConsent, PendingQuestions, Press, Running};
use crate::html::Chunk;
use crate::reply::{self, LiveReply};

/// Where an update came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Delivered by Telegram in this run.
    Received,
    /// Kept in the inbox by a previous run, which did not finish it.
    Replayed,
}

/// A message for a chat's worker, in arrival order.
pub(crate) struct Input {
    /// The inbox item it came from, marked handled once it is.
    pub(crate) update_id: i64,
    /// The message, to reply to.
    pub(crate) message_id: i32,
    /// Who sent it.
    pub(crate) user: u64,
    /// Its text.
    pub(crate) text: String,
}

/// A chat's worker as the dispatcher sees it.
struct ChatHandle {
    inputs: mpsc::UnboundedSender<Input>,
    running: Arc<Mutex<Running>>,
    waiting: Arc<AtomicUsize>,
}

/// The bot's own account: all it needs of `getMe` (read leniently: some
/// Bot API servers leave out fields Telegram always sends).
pub(crate) struct Me {
    pub(crate) id: u64,
    pub(crate) username: Option<String>,
}

impl Me {
    fn from_get_me(user: Value) -> anyhow::Result<Me> {
        let id = user["id"]
            .as_u64()
            .ok_or_else(|| anyhow::anyhow!("getMe answered without the bot's id: {user}"))?;
        Ok(Me {
            id,
            username: user["username"].as_str().map(str::to_owned),
        })
    }
}

/// The bot while it runs.
pub(crate) struct Bot {
    pub(crate) api: Arc<BotApi>,
    pub(crate) host: Arc<Host>,
    pub(crate) options: BotOptions,
    /// The bot's own account.
    pub(crate) me: Me,
    /// `telegram:<bot id>`: the inbox channel and state keys' prefix.
    pub(crate) channel: String,
    pub(crate) front: Arc<dyn FrontEndStore>,
    chats: Mutex<HashMap<i64, ChatHandle>>,
    questions: PendingQuestions,
    /// Users refused once already (one refusal per process).
    strangers: Mutex<HashSet<u64>>,
    /// Chats told once that only private chats are served.
    public_chats: Mutex<HashSet<i64>>,
    /// Each user's recent messages (Telegram's dates, in seconds), for
    /// the rate limit.
    recent: Mutex<HashMap<u64, VecDeque<u64>>>,
    /// Inbox items handed out in this process and not handled yet.
    dispatched: Mutex<HashSet<i64>>,
    tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
}

impl Bot {
    /// Starts the bot: checks the token (`getMe`), registers its commands
    /// and hands out what a previous run received and did not handle. Then
    /// `intake` feeds it until [`Bot::shut_down`].
    pub(crate) async fn start(
        host: Arc<Host>,
        options: BotOptions,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Arc<Bot>> {
        anyhow::ensure!(
            !options.allowed_users.is_empty(),
            "nobody may talk to the bot: list Telegram user ids in agent.json's telegram.allowedUsers \
             or with --allow-user ID (a user's id is in the refusal the bot logs when they write)"
        );
        let api = Arc::new(BotApi::new(
            &options.api_url,
            &options.token,
            options.sends_per_second,
        )?);
        let me = Me::from_get_me(
            api.request::<(), MethodResponse<Value>>("getMe", None)
                .await
                .context("the Bot API did not accept the token (getMe)")?
                .result,
        )?;
        let front = host
            .store
            .get()
            .await
            .map_err(anyhow::Error::msg)?
            .front_end_store();
        let bot = Arc::new(Bot {
            channel: format!("telegram:{}", me.id),
            me,
            api,
            host,
            options,
            front,
            chats: Mutex::default(),
            questions: PendingQuestions::default(),
            strangers: Mutex::default(),
            public_chats: Mutex::default(),
            recent: Mutex::default(),
            dispatched: Mutex::default(),
            tasks: TaskTracker::new(),
            shutdown,
        });
        bot.register_commands().await;
        tracing::info!(
            bot = bot.me.username.as_deref().unwrap_or("?"),
            allowed = ?bot.options.allowed_users,
            "telegram bot started"
        );
        // What a previous run received and did not handle, first.
        for (id, update) in bot.front.inbox_pending(&bot.channel).await? {
            bot.dispatch(id, update, Origin::Replayed);
        }
        Ok(bot)
    }

    /// Stops: running statements are cancelled (their messages stay in
    /// the inbox and run again after a restart); workers end, given 10 s.
    pub(crate) async fn shut_down(&self) {
        self.shutdown.cancel();
        self.chats.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.tasks.close();
        if tokio::time::timeout(Duration::from_secs(10), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some chats did not stop within 10 s");
        }
    }

    /// Tells Telegram the commands (its menu); a refusal is only a warning.
    async fn register_commands(&self) {
        let commands = COMMANDS
            .iter()
            .map(|(command, description)| {
                BotCommand::builder()
                    .command(*command)
                    .description(*description)
                    .build()
            })
            .collect::<Vec<_>>();
        let params = SetMyCommandsParams::builder().commands(commands).build();
        if let Err(error) = self.api.set_my_commands(&params).await {
            tracing::warn!("cannot register the bot's commands: {error}");
        }
    }

    /// Keeps `items` in the inbox (those not seen before) and hands each
    /// kept one to its chat; `Err` means nothing was kept and Telegram
    /// must deliver them again.
    pub(crate) async fn accept(self: &Arc<Self>, items: Vec<(i64, Value)>) -> anyhow::Result<()> {
        let payloads: HashMap<i64, Value> = items.iter().cloned().collect();
        let to_handle = self.front.inbox_accept(&self.channel, items).await?;
        for id in to_handle {
            if let Some(update) = payloads.get(&id) {
                self.dispatch(id, update.clone(), Origin::Received);
            }
        }
        Ok(())
    }

    /// Marks an inbox item handled.
    pub(crate) async fn done(&self, id: i64) {
        if let Err(error) = self.front.inbox_done(&self.channel, id).await {
            tracing::warn!("cannot mark update {id} handled: {error}");
        }
        self.dispatched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    fn done_later(self: &Arc<Self>, id: i64) {
        let bot = self.clone();
        self.tasks.spawn(async move { bot.done(id).await });
    }

    /// Routes one update: a message to its chat's worker (or a refusal),
    /// a button press to its question; anything else is dropped.
    fn dispatch(self: &Arc<Self>, id: i64, raw: Value, origin: Origin) {
        // Each item once per process: one delivered again while it is
        // still being handled is not handed out twice.
        if !self
            .dispatched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id)
        {
            return;
        }
        let update = match serde_json::from_value::<Update>(raw.clone()) {
            Ok(update) => update,
            Err(error) => {
                tracing::warn!("ignoring update {id}, which cannot be read: {error}");
                // Its sender, if allowed, is told rather than left waiting.
                let message = &raw["message"];
                let from = message["from"]["id"].as_u64();
                match message["chat"]["id"].as_i64() {
                    Some(chat_id)
                        if from.is_some_and(|u| self.options.allowed_users.contains(&u)) =>
                    {
                        self.say_then_done(
                            id,
                            chat_id,
                            "I could not read that message; please send it as plain text.",
                        );
                    }
                    _ => self.done_later(id),
                }
                return;
            }
        };
        match update.content {
            UpdateContent::Message(message) => self.on_message(id, *message, origin),
            UpdateContent::CallbackQuery(query) => {
                let bot = self.clone();
                self.tasks.spawn(async move {
                    let chat_id = match &query.message {
                        Some(MaybeInaccessibleMessage::Message(message)) => message.chat.id,
                        Some(MaybeInaccessibleMessage::InaccessibleMessage(message)) => {
                            message.chat.id
                        }
                        None => 0,
                    };
                    let press = query.data.as_deref().map_or(Press::Gone, |data| {
                        bot.questions.press(data, chat_id, query.from.id)
                    });
                    let (text, alert) = match press {
                        Press::Answered => (None, false),
                        Press::NotYours => (
                            Some("Only the person this question is for can answer it."),
                            true,
                        ),
                        Press::Gone => (
                            Some("This question was already answered or has expired."),
                            false,
                        ),
                    };
                    if press == Press::NotYours {
                        tracing::warn!(
                            user = query.from.id,
                            chat = chat_id,
                            "a consent button pressed by someone else"
                        );
                    }
                    let params = AnswerCallbackQueryParams::builder()
                        .callback_query_id(query.id)
                        .maybe_text(text.map(str::to_owned))
                        .show_alert(alert)
                        .build();
                    if let Err(error) = bot.api.answer_callback_query(&params).await {
                        tracing::debug!("cannot answer a button press: {error}");
                    }
                    bot.done(id).await;
                });
            }
            _ => self.done_later(id),
        }
    }

    fn on_message(self: &Arc<Self>, id: i64, message: Message, origin: Origin) {
        let Some(user) = message.from.as_deref().cloned() else {
            self.done_later(id);
            return;
        };
        let chat_id = message.chat.id;
        if user.is_bot {
            self.done_later(id);
            return;
        }
        if !self.options.allowed_users.contains(&user.id) {
            let first = self
                .strangers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(user.id);
            tracing::warn!(
                user = user.id,
                username = user.username.as_deref().unwrap_or(""),
                "a message from a user not on the allow-list (telegram.allowedUsers) was refused"
            );
            if first {
                self.say_then_done(
                    id,
                    chat_id,
                    "Sorry, this is a personal assistant and I can only talk with the people it \
                     was set up for.",
                );
            } else {
                self.done_later(id);
            }
            return;
        }
        if message.chat.type_field != ChatType::Private {
            let first = self
                .public_chats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(chat_id);
            if first {
                self.say_then_done(
                    id,
                    chat_id,
                    "I only talk in private chats: write to me directly.",
                );
            } else {
                self.done_later(id);
            }
            return;
        }
        let Some(text) = message.text.clone().or(message.caption.clone()) else {
            self.say_then_done(id, chat_id, "I can only read text messages.");
            return;
        };
        let is_stop = command_line::is_stop(&text, self.me.username.as_deref());
        // Counted by when the user sent them, so a backlog delivered at
        // once (after a restart) is not mistaken for a flood; what a
        // previous run already took is not counted again.
        if !is_stop
            && origin == Origin::Received
            && let Some(wait) = self.over_rate_limit(user.id, message.date)
        {
            self.say_then_done(
                id,
                chat_id,
                &format!(
                    "That is a lot of messages at once: please wait {} s and send it again.",
                    wait.as_secs().max(1)
                ),
            );
            return;
        }
        if is_stop {
            let stopped = self.stop(chat_id);
            self.say_then_done(
                id,
                chat_id,
                if stopped {
                    "⏹ Stopping."
                } else {
                    "Nothing is running."
                },
            );
            return;
        }
        let mut handle = self.chat(chat_id);
        if handle.inputs.is_closed() && !self.shutdown.is_cancelled() {
            // Its worker is gone (it panicked): the chat gets a new one.
            tracing::warn!(
                chat = chat_id,
                "the chat's worker stopped; starting another"
            );
            self.chats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&chat_id);
            handle = self.chat(chat_id);
        }
        let busy = handle
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel
            .is_some()
            || handle.waiting.load(Ordering::SeqCst) > 0;
        handle.waiting.fetch_add(1, Ordering::SeqCst);
        let input = Input {
            update_id: id,
            message_id: message.message_id,
            user: user.id,
            text,
        };
        if handle.inputs.send(input).is_err() {
            // The bot is stopping: the message stays in the inbox.
            return;
        }
        if busy {
            let api = self.api.clone();
            self.tasks.spawn(async move {
                let chunk = Chunk {
                    html: "⏳ Queued: I will answer after the current message.".into(),
                    plain: "Queued: I will answer after the current message.".into(),
                };
                reply::send(&api, chat_id, Some(message.message_id), &chunk).await;
            });
        }
    }

    /// Sends a short text, then marks the update handled.
    fn say_then_done(self: &Arc<Self>, id: i64, chat_id: i64, text: &str) {
        let bot = self.clone();
        let chunk = Chunk {
            html: crate::html::escape(text),
            plain: text.to_owned(),
        };
        self.tasks.spawn(async move {
            reply::send(&bot.api, chat_id, None, &chunk).await;
            bot.done(id).await;
        });
    }

    /// How long `user` must wait, when the messages they sent in the
    /// minute up to `sent` (Telegram's date, in seconds) are over the limit.
    fn over_rate_limit(&self, user: u64, sent: u64) -> Option<Duration> {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let times = recent.entry(user).or_default();
        while times.front().is_some_and(|t| t + 60 <= sent) {
            times.pop_front();
        }
        if times.len() >= self.options.messages_per_minute as usize {
            let oldest = times.front().copied().unwrap_or(sent);
            return Some(Duration::from_secs((oldest + 60).saturating_sub(sent)));
        }
        times.push_back(sent);
        None
    }

    /// Cancels the chat's running statement; false when none runs.
    fn stop(&self, chat_id: i64) -> bool {
        let chats = self.chats.lock().unwrap_or_else(|p| p.into_inner());
        let Some(handle) = chats.get(&chat_id) else {
            return false;
        };
        let running = handle.running.lock().unwrap_or_else(|p| p.into_inner());
        match &running.cancel {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// The chat's worker, started on its first message.
    fn chat(self: &Arc<Self>, chat_id: i64) -> ChatHandleRef {
        let mut chats = self.chats.lock().unwrap_or_else(|p| p.into_inner());
        let handle = chats.entry(chat_id).or_insert_with(|| {
            let (inputs, receiver) = mpsc::unbounded_channel();
            let running = Arc::new(Mutex::new(Running::default()));
            let waiting = Arc::new(AtomicUsize::new(0));
            let worker = ChatWorker {
                bot: self.clone(),
                chat_id,
                running: running.clone(),
                waiting: waiting.clone(),
                agent: None,
                remembered: None,
            };
            self.tasks.spawn(worker.run(receiver));
            ChatHandle {
                inputs,
                running,
                waiting,
            }
        });
        ChatHandleRef {
            inputs: handle.inputs.clone(),
            running: handle.running.clone(),
            waiting: handle.waiting.clone(),
        }
    }

    /// The state key under which a chat's conversation id is kept.
    fn conversation_key(&self, chat_id: i64) -> String {
        format!("{}:chat:{chat_id}:conversation", self.channel)
    }
}

/// A clone of a [`ChatHandle`]'s parts, used outside the chats' lock.
struct ChatHandleRef {
    inputs: mpsc::UnboundedSender<Input>,
    running: Arc<Mutex<Running>>,
    waiting: Arc<AtomicUsize>,
}

/// One chat's conversation, running its messages one at a time.
pub(crate) struct ChatWorker {
    pub(crate) bot: Arc<Bot>,
    pub(crate) chat_id: i64,
    running: Arc<Mutex<Running>>,
    waiting: Arc<AtomicUsize>,
    pub(crate) agent: Option<Agent>,
    /// The conversation this worker last wrote as the chat's, so that a
    /// message that goes on with it writes nothing.
    remembered: Option<String>,
}

impl ChatWorker {
    async fn run(mut self, mut inputs: mpsc::UnboundedReceiver<Input>) {
        loop {
            let input = match tokio::time::timeout(self.bot.options.idle_chat, inputs.recv()).await
            {
                Ok(Some(input)) => input,
                Ok(None) => return,
                Err(_idle) => {
                    self.put_away();
                    continue;
                }
            };
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if self.bot.shutdown.is_cancelled() {
                // Left in the inbox for the next run.
                continue;
            }
            let update_id = input.update_id;
            let handled = if let Some(command) =
                command_line::parse(&input.text, self.bot.me.username.as_deref())
            {
                if let Err(error) = self.run_command(&input, command).await {
                    self.say(&format!("⚠️ {error:#}")).await;
                }
                true
            } else {
                self.statement(&input).await
            };
            if handled {
                self.bot.done(update_id).await;
            }
        }
    }

    /// A chat quiet for `idle_chat`: its conversation (history, tools,
    /// settings) is dropped and the memory given back; the next message
    /// takes the conversation up again from the record, as after a restart.
    fn put_away(&mut self) {
        if self.agent.take().is_some() {
            tracing::debug!(chat = self.chat_id, "idle chat: conversation put away");
            satchel_exec::give_back_freed_memory_soon();
        }
    }

    /// The chat's own memories: what the assistant remembers of one
    /// person is not recalled in another's chat.
    pub(crate) fn memory_namespace(&self) -> String {
        format!("telegram-{}", self.chat_id)
    }

    /// Sends a short plain text to the chat.
    pub(crate) async fn say(&self, text: &str) {
        let chunk = Chunk {
            html: crate::html::escape(text),
            plain: text.to_owned(),
        };
        reply::send(&self.bot.api, self.chat_id, None, &chunk).await;
    }

    /// The chat's conversation: the one it had before a restart, or new.
    pub(crate) async fn agent(&mut self, user: u64) -> anyhow::Result<&mut Agent> {
        if self.agent.is_none() {
            let key = self.bot.conversation_key(self.chat_id);
            let resume = self
                .bot
                .front
                .front_state(&key)
                .await?
                .filter(|id| !id.is_empty());
            let options = |resume| ConversationOptions {
                source: AuditSource::Telegram,
                caller: Some(format!("telegram:{user}")),
                memory_namespace: Some(self.memory_namespace()),
                consent: Arc::new(RememberingConsent::new(ButtonConsent {
                    api: self.bot.api.clone(),
                    chat_id: self.chat_id,
                    questions: self.bot.questions.clone(),
                    timeout: self.bot.options.consent_timeout,
                    running: self.running.clone(),
                })),
                display: Style::Markdown,
                resume,
            };
            let agent = match self.bot.host.conversation(options(resume.clone())).await {
                Ok(agent) => agent,
                Err(error) if resume.is_some() => {
                    tracing::warn!(
                        chat = self.chat_id,
                        "cannot go on with the chat's conversation ({error:#}); starting a new one"
                    );
                    self.bot.host.conversation(options(None)).await?
                }
                Err(error) => return Err(error),
            };
            // Going on with the conversation the store names: nothing to write.
            self.remembered = resume.filter(|id| agent.conversation_id() == Some(id.as_str()));
            self.agent = Some(agent);
        }
        self.agent
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no conversation"))
    }

    /// Forgets the conversation: the next message starts a new one.
    pub(crate) async fn new_conversation(&mut self) -> anyhow::Result<()> {
        // The old conversation's background processes end with it.
        if let Some(old) = self.agent.take()
            && let Some(id) = old.conversation_id()
        {
            self.bot.host.processes.end_owner(id).await;
        }
        let key = self.bot.conversation_key(self.chat_id);
        self.remembered = None;
        self.bot.front.set_front_state(&key, String::new()).await?;
        Ok(())
    }

    /// Remembers which conversation the chat continues (a write only
    /// when it changed).
    pub(crate) async fn remember_conversation(&mut self) {
        let Some(id) = self.agent.as_ref().and_then(Agent::conversation_id) else {
            return;
        };
        if self.remembered.as_deref() == Some(id) {
            return;
        }
        let id = id.to_owned();
        let key = self.bot.conversation_key(self.chat_id);
        if let Err(error) = self.bot.front.set_front_state(&key, id.clone()).await {
            tracing::warn!("cannot remember the chat's conversation: {error}");
            return;
        }
        // Every conversation the chat ever had, for what is the chat's own
        // (its code runs, in /codestats and /codefailures).
        let mut all = self.conversations().await;
        if !all.contains(&id) {
            all.push(id.clone());
            let key = format!("{key}s");
            let value = serde_json::to_string(&all).unwrap_or_default();
            if let Err(error) = self.bot.front.set_front_state(&key, value).await {
                tracing::warn!("cannot remember the chat's conversations: {error}");
                return;
            }
        }
        self.remembered = Some(id);
    }

    /// Every conversation this chat has had.
    pub(crate) async fn conversations(&self) -> Vec<String> {
        let key = format!("{}s", self.bot.conversation_key(self.chat_id));
        match self.bot.front.front_state(&key).await {
            Ok(Some(value)) => serde_json::from_str(&value).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Runs one statement, streaming its answer; false when the bot stopped
    /// under it (the message then runs again after a restart).
    async fn statement(&mut self, input: &Input) -> bool {
        // A message a previous run began and did not finish: say so, since
        // some of its tools may have run (the model sees that turn too).
        let started = format!("{}:update:{}:started", self.bot.channel, input.update_id);
        if let Ok(Some(_)) = self.bot.front.front_state(&started).await {
            self.say("⚠️ I was restarted while answering this; some of its tools may already have run. Answering it again.")
                .await;
        } else if let Err(error) = self.bot.front.set_front_state(&started, "1".into()).await {
            tracing::debug!("cannot mark update {} begun: {error}", input.update_id);
        }
        let cancel = self.bot.shutdown.child_token();
        {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            running.asker = input.user;
            running.cancel = Some(cancel.clone());
        }
        let live = LiveReply::start(self.bot.api.clone(), self.chat_id, Some(input.message_id));
        let sink = live.sink();
        let result = match self.agent(input.user).await {
            Ok(agent) => agent
                .statement(&input.text, &cancel, &sink)
                .await
                .map_err(anyhow::Error::from),
            Err(error) => Err(error),
        };
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel = None;
        // Cut short because the bot stops (a cancellation may surface as a
        // failure too): answered again after the restart.
        let stopped_by_shutdown = self.bot.shutdown.is_cancelled()
            && !matches!(&result, Ok(report) if matches!(report.outcome, Outcome::Answered | Outcome::TurnLimit));
        let ending = match &result {
            Ok(report) => match &report.outcome {
                Outcome::Answered | Outcome::TurnLimit => None,
                _ if stopped_by_shutdown => Some(
                    "⏹ Interrupted: the assistant is restarting; I will answer this again."
                        .to_owned(),
                ),
                Outcome::Cancelled => Some("⏹ Stopped.".to_owned()),
                Outcome::Failed(message) => Some(format!("⚠️ {message}")),
            },
            Err(_) if stopped_by_shutdown => Some(
                "⏹ Interrupted: the assistant is restarting; I will answer this again.".to_owned(),
            ),
            Err(error) => Some(format!("⚠️ {error:#}")),
        };
        if let Err(error) = &result {
            tracing::warn!(chat = self.chat_id, "a statement failed: {error:#}");
        }
        live.finish(ending).await;
        self.remember_conversation().await;
        !stopped_by_shutdown
    }
}
