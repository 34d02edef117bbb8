//! The bot's commands: the REPL's, as Telegram commands. `/stop` is
//! handled as soon as it arrives (see the bot); the others wait their
//! turn in the chat like any message.

use anyhow::Context as _;
use satchel_builtins::code::{FailureSummary, code_stats};
use satchel_memory::RecallQuery;
use satchel_store::{CodeQuery, CodeStore as _, Timestamp};

use crate::bot::{ChatWorker, Input};
use crate::chart;
use crate::reply;

/// The commands and their descriptions, as `setMyCommands` registers them.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("start", "What this bot is"),
    ("help", "The commands"),
    ("new", "Start a new conversation"),
    (
        "newsession",
        "End the memory session and start a new one [name]",
    ),
    ("goal", "Show or set the conversation's goal [text]"),
    ("context", "Tokens of the next request, by section"),
    (
        "codestats",
        "What the code tool ran in the last 7 days, with a chart",
    ),
    ("codefailures", "The last failed code runs [n]"),
    ("tools", "The tools the model can call"),
    ("memory", "Memory counts, or what it recalls for [query]"),
    ("stop", "Stop the running answer and its processes"),
];

/// Days `/codestats` covers.
const STATS_DAYS: u32 = 7;

/// The most recent code runs looked through for a chat's own.
const OWN_RUNS_SCANNED: usize = 5000;

/// A command: its name (without `/` and `@bot`) and the rest of the line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) name: String,
    pub(crate) args: String,
}

/// The command in `text`, if it is one addressed to this bot
/// (`/name`, `/name@this_bot`).
pub(crate) fn parse(text: &str, username: Option<&str>) -> Option<Command> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (word, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(word, args)| (word, args.trim()));
    let (name, addressee) = word
        .split_once('@')
        .map_or((word, None), |(n, a)| (n, Some(a)));
    if let (Some(addressee), Some(username)) = (addressee, username)
        && !addressee.eq_ignore_ascii_case(username)
    {
        return None;
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(Command {
        name: name.to_ascii_lowercase(),
        args: args.to_owned(),
    })
}

/// True for `/stop`, which does not wait in the queue.
pub(crate) fn is_stop(text: &str, username: Option<&str>) -> bool {
    parse(text, username).is_some_and(|command| command.name == "stop")
}

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

/// Runs one command in its chat.
pub(crate) async fn run(
    chat: &mut ChatWorker,
    input: &Input,
    command: Command,
) -> anyhow::Result<()> {
    let api = chat.bot.api.clone();
    let chat_id = chat.chat_id;
    let args = command.args.as_str();
    match command.name.as_str() {
        "start" | "help" => reply::send_markdown(&api, chat_id, &help(), "help.md").await,
        "new" => {
            chat.new_conversation().await?;
            if !args.is_empty() {
                chat.agent(input.user)
                    .await?
                    .set_title(args.to_owned())
                    .await?;
                chat.remember_conversation().await;
            }
            chat.say("New conversation.").await;
        }
        "goal" => {
            let agent = chat.agent(input.user).await?;
            if args.is_empty() {
                let goal = agent.goal().unwrap_or("(not set yet)").to_owned();
                chat.say(&format!("Goal: {goal}")).await;
            } else {
                agent.set_goal(args.to_owned()).await?;
                chat.remember_conversation().await;
                chat.say(&format!("Goal set: {args}")).await;
            }
        }
        "context" => {
            let report = chat.agent(input.user).await?.context_report().await?;
            reply::send_markdown(
                &api,
                chat_id,
                &preformatted(&report.render()),
                "context.txt",
            )
            .await;
        }
        "tools" => {
            let registry = chat.agent(input.user).await?.tools().current();
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
            let mine = chat.conversations().await;
            let now = satchel_store::Clock::now(&satchel_store::SystemClock).as_millis();
            let since = Timestamp::from_millis(now - i64::from(STATS_DAYS) * 86_400_000);
            let executions = own_code_runs(
                chat,
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
            let mine = chat.conversations().await;
            let mut rows = own_code_runs(
                chat,
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
            let failures: Vec<FailureSummary> = rows.iter().rev().map(FailureSummary::of).collect();
            reply::send_markdown(
                &api,
                chat_id,
                &preformatted(&FailureSummary::render_all(&failures)),
                "codefailures.txt",
            )
            .await;
        }
        "newsession" => {
            let conversation = chat
                .agent(input.user)
                .await?
                .conversation_id()
                .map(str::to_owned);
            let Some(conversation) = conversation else {
                chat.say("Nothing to divide yet: the conversation starts with your first message.")
                    .await;
                return Ok(());
            };
            let memory = chat
                .bot
                .host
                .memory
                .get_in(Some(&chat.memory_namespace()))
                .await
                .map_err(anyhow::Error::msg)?;
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
            chat.say(&text).await;
        }
        "memory" => {
            let memory = chat
                .bot
                .host
                .memory
                .get_in(Some(&chat.memory_namespace()))
                .await
                .map_err(anyhow::Error::msg)?;
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
                let conversation = chat
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
            chat.say(&format!("Unknown command /{other}; /help lists them."))
                .await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed_for_this_bot_only() {
        assert_eq!(
            parse("/goal  write a poem ", Some("satchel_bot")),
            Some(Command {
                name: "goal".into(),
                args: "write a poem".into()
            })
        );
        assert_eq!(
            parse("/Stop@Satchel_Bot", Some("satchel_bot"))
                .unwrap()
                .name,
            "stop"
        );
        assert_eq!(parse("/stop@other_bot", Some("satchel_bot")), None);
        assert_eq!(parse("not /a command", None), None);
        assert_eq!(parse("/ nothing", None), None);
        assert_eq!(parse("/path/to/file is big", None), None);
        assert!(is_stop("/stop", None));
        assert!(!is_stop("/stopwatch", None));
    }
}
