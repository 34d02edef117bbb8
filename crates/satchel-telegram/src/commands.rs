//! What the bot's commands do: the REPL's, as Telegram commands, run by a
//! chat's worker ([`ChatWorker::run_command`]). `/stop` is handled as soon
//! as it arrives (see the bot); the others wait their turn in the chat
//! like any message. Which commands there are, and reading one, is
//! `command_line`'s.

use std::sync::Arc;

use anyhow::Context as _;
use satchel_builtins::code::{FailureSummary, code_stats};
use satchel_memory::{Memory, RecallQuery};
use satchel_store::{CodeQuery, CodeStore as _, Timestamp};

use crate::bot::{ChatWorker, Input};
use crate::chart;
use crate::command_line::{COMMANDS, Command};
use crate::reply;

/// Days `/codestats` covers.
const STATS_DAYS: u32 = 7;

/// The most recent code runs looked through for a chat's own.
const OWN_RUNS_SCANNED: usize = 5000;

fn help() -> String {
    let mut text = String::from(
        "I am Satchel, an assistant with tools (a shell, code, memory, search). Write to me and \
         I answer, using the tools when it helps; when a tool needs your permission I ask with \
         buttons.\n\nCommands:\n",
    );
    for (command, description) in COMMANDS {
        text.push_str(&format!("/{command} — {description}\n"));
    }
    text
}

/// Markdown as a code block, for tables made of spaces.
fn preformatted(text: &str) -> String {
    format!("```\n{}\n```", text.trim_end().replace("```", "'''"))
}

/// The code runs `query` selects that belong to this chat's conversations
/// (what other people, or the owner at a terminal, ran is not shown here).
async fn own_code_runs(
    chat: &ChatWorker,
    query: CodeQuery,
    conversations: &[String],
) -> anyhow::Result<Vec<satchel_store::CodeExecution>> {
    let store = chat
        .bot
        .host
        .store
        .get()
        .await
        .map_err(anyhow::Error::msg)?;
    let rows = store.code_executions(query).await?;
    Ok(rows
        .into_iter()
        .filter(|row| {
            row.conversation_id
                .as_ref()
                .is_some_and(|id| conversations.contains(id))
        })
        .collect())
}

impl ChatWorker {
    /// The chat's own memories (its namespace: [`ChatWorker::memory_namespace`]).
    async fn memory(&self) -> anyhow::Result<Arc<Memory>> {
        self.bot
            .host
            .memory
            .get_in(Some(&self.memory_namespace()))
            .await
            .map_err(anyhow::Error::msg)
    }

    /// Runs one command in this chat.
    pub(crate) async fn run_command(
        &mut self,
        input: &Input,
        command: Command,
    ) -> anyhow::Result<()> {
        let api = self.bot.api.clone();
        let chat_id = self.chat_id;
        let args = command.args.as_str();
        match command.name.as_str() {
            "start" | "help" => reply::send_markdown(&api, chat_id, &help(), "help.md").await,
            "new" => {
                self.new_conversation().await?;
                if !args.is_empty() {
                    self.agent(input.user)
                        .await?
                        .set_title(args.to_owned())
                        .await?;
                    self.remember_conversation().await;
                }
                self.say("New conversation.").await;
            }
            "goal" => {
                let agent = self.agent(input.user).await?;
                if args.is_empty() {
                    let goal = agent.goal().unwrap_or("(not set yet)").to_owned();
                    self.say(&format!("Goal: {goal}")).await;
                } else {
                    agent.set_goal(args.to_owned()).await?;
                    self.remember_conversation().await;
                    self.say(&format!("Goal set: {args}")).await;
                }
            }
            "context" => {
                let report = self.agent(input.user).await?.context_report().await?;
                reply::send_markdown(
                    &api,
                    chat_id,
                    &preformatted(&report.render()),
                    "context.txt",
                )
                .await;
            }
            "tools" => {
                let registry = self.agent(input.user).await?.tools().current();
                let mut text = String::new();
                // One line each: the first sentence. The editing tools'
                // model-native forms stand in for `edit` and `write` and are
                // not listed apart.
                for spec in registry
                    .specs()
                    .filter(|spec| !satchel_core::edit_forms::is_native_form(&spec.name))
                {
                    let first = spec.description.lines().next().unwrap_or_default();
                    let first = first.split(". ").next().unwrap_or_default();
                    text.push_str(&format!("• **{}** — {}\n", spec.name, first));
                }
                reply::send_markdown(&api, chat_id, &text, "tools.md").await;
            }
            "codestats" => {
                let mine = self.conversations().await;
                let now = satchel_store::Clock::now(&satchel_store::SystemClock).as_millis();
                let since = Timestamp::from_millis(now - i64::from(STATS_DAYS) * 86_400_000);
                let executions = own_code_runs(
                    self,
                    CodeQuery {
                        since: Some(since),
                        limit: Some(OWN_RUNS_SCANNED),
                        ..CodeQuery::default()
                    },
                    &mine,
                )
                .await?;
                let stats = code_stats(&executions);
                reply::send_markdown(
                    &api,
                    chat_id,
                    &preformatted(&stats.render(STATS_DAYS)),
                    "codestats.txt",
                )
                .await;
                if let Some(png) = chart::code_stats_png(&stats, STATS_DAYS) {
                    reply::send_file(
                        &api,
                        chat_id,
                        reply::Upload::Photo,
                        ("codestats.png", &png),
                        "Last 7 days",
                    )
                    .await;
                }
            }
            "codefailures" => {
                let count = if args.is_empty() {
                    5
                } else {
                    args.parse::<usize>()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .with_context(|| {
                            format!("/codefailures takes a number from 1 to 100, not `{args}`")
                        })?
                };
                let mine = self.conversations().await;
                let mut rows = own_code_runs(
                    self,
                    CodeQuery {
                        failed_only: true,
                        limit: Some(OWN_RUNS_SCANNED),
                        ..CodeQuery::default()
                    },
                    &mine,
                )
                .await?;
                // Newest first from the store; the last `count`, oldest first.
                rows.truncate(count);
                let failures: Vec<FailureSummary> =
                    rows.iter().rev().map(FailureSummary::of).collect();
                reply::send_markdown(
                    &api,
                    chat_id,
                    &preformatted(&FailureSummary::render_all(&failures)),
                    "codefailures.txt",
                )
                .await;
            }
            "newsession" => {
                let conversation = self
                    .agent(input.user)
                    .await?
                    .conversation_id()
                    .map(str::to_owned);
                let Some(conversation) = conversation else {
                    self.say(
                        "Nothing to divide yet: the conversation starts with your first message.",
                    )
                    .await;
                    return Ok(());
                };
                let memory = self.memory().await?;
                let name = (!args.is_empty()).then(|| args.to_owned());
                let change = memory
                    .new_session(Some(&conversation), name, "user")
                    .await?;
                let mut text = String::from("New memory session started.");
                if let Some(ended) = &change.ended {
                    text.push_str(&format!(
                        " Ended “{}”: {} memories archived.",
                        ended.name.as_deref().unwrap_or(&ended.id),
                        change.archived
                    ));
                }
                if let Some(summary) = &change.summary {
                    text.push_str(&format!("\n\nSummary: {}", summary.content));
                }
                self.say(&text).await;
            }
            "memory" => {
                let memory = self.memory().await?;
                if args.is_empty() {
                    let stats = memory.stats().await?;
                    let mut text = format!("{} memories", stats.total);
                    for (layer, count) in &stats.by_layer {
                        text.push_str(&format!("\n  {layer:12} {count}"));
                    }
                    text.push_str(&format!(
                        "\n{} archived, {} expired, {} without an embedding (keyword recall only)",
                        stats.archived, stats.expired, stats.without_embedding
                    ));
                    reply::send_markdown(&api, chat_id, &preformatted(&text), "memory.txt").await;
                } else {
                    let conversation = self
                        .agent
                        .as_ref()
                        .and_then(|a| a.conversation_id())
                        .map(str::to_owned);
                    let recall = memory
                        .recall(RecallQuery {
                            limit: 5,
                            conversation_id: conversation,
                            ..RecallQuery::new(args)
                        })
                        .await?;
                    let mut text = String::new();
                    if let Some(notice) = &recall.notice {
                        text.push_str(&format!("_{notice}_\n\n"));
                    }
                    if recall.memories.is_empty() {
                        text.push_str("Nothing recalled.");
                    }
                    for recalled in &recall.memories {
                        text.push_str(&format!(
                            "• {} _({}, relevance {:.2})_\n",
                            recalled.memory.content,
                            recalled.memory.layer.as_str(),
                            recalled.relevance
                        ));
                    }
                    reply::send_markdown(&api, chat_id, &text, "memory.md").await;
                }
            }
            other => {
                self.say(&format!("Unknown command /{other}; /help lists them."))
                    .await;
            }
        }
        Ok(())
    }
}
