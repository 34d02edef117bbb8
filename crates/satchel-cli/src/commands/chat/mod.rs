//! `satchel chat`: the REPL. A line is a statement for the agent, or a
//! slash command; Ctrl-C interrupts a running turn (and kills its
//! processes) without leaving, Ctrl-D leaves. Input history is kept in
//! Satchel's data directory.

mod consent;
mod elicit;
mod markdown;
mod screen;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use satchel_agent::{AgentEvent, Outcome};
use satchel_builtins::conversation::{select, timeline};
use satchel_store::{AuditSource, LogStore, StatementStore, ToolCallStore};
use satchel_tools::Style;
use tokio_util::sync::CancellationToken;

use crate::cli::{ChatArgs, CodeFailuresArgs, CodeStatsArgs, NewSessionArgs};
use consent::TerminalConsent;
use satchel_agent::Agent;
use satchel_host::ConversationOptions;
use satchel_host::Host;
use screen::SharedScreen;

/// The line editor, shared by the prompt and consent questions.
pub(crate) type LineEditor = Arc<Mutex<DefaultEditor>>;

const HELP: &str = "\
Commands:
  /help              this list
  /tools             the tools the model can call
  /refresh           look for new or changed tools now
  /resources [SERVER URI]      the MCP servers' resources, or one read
  /prompts [SERVER NAME [JSON]] the MCP servers' prompts, or one's messages
  /goal [TEXT]       show or set the conversation goal
  /context           tokens of the next request, by section
  /history [N]       the last N events (default 20) as the conversation tool sees them
  /new [TITLE]       start a new conversation (the old one's background processes end)
  /codestats         what the code tool has run (last 7 days)
  /codefailures [N]  the last N failed code runs
  /newsession [NAME] end the memory session and start a new one
  /ps                background processes (bash with background: true)
  /kill ID           end a background process and everything it started
  /exit              leave (or Ctrl-D)
Anything else is sent to the model. Ctrl-C interrupts a running turn.";

pub(crate) async fn run(args: ChatArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let color = crate::paths::color(&std::io::stdout());
    let editor: LineEditor = Arc::new(Mutex::new(DefaultEditor::new()?));
    let history = history_file(project);
    if let Some(path) = &history {
        let _ = editor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .load_history(path);
    }
    // Before anything runs: the project's hooks the user has not approved.
    super::hooks::ask_to_approve(project)?;
    let screen = SharedScreen::new(color);
    let consent = Arc::new(TerminalConsent::new(
        editor.clone(),
        screen.clone(),
        project.root.join(satchel_tools::config::PROJECT_CONFIG),
    ));
    let mut agent = project
        .conversation(ConversationOptions {
            source: AuditSource::Repl,
            caller: None,
            memory_namespace: None,
            consent: consent.clone(),
            display: Style::Terminal { color },
            resume: args.resume,
        })
        .await?;
    // The MCP servers' questions come to this prompt too, and their
    // sampling requests, which the model answers if the user agrees.
    let asker = Arc::new(elicit::TerminalAsker::new(editor.clone(), screen.clone()));
    project.set_mcp_asker(Some(asker.clone()));
    project.set_mcp_sampling_consent(Some(asker));
    let spinner = screen.spawn_spinner();
    greet(&agent, &screen);
    loop {
        let prompt = if color { "\x1b[1;32m›\x1b[0m " } else { "> " };
        let line = read_line(&editor, prompt).await;
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                screen
                    .lock()
                    .line(&format!("error: cannot read the terminal: {error}"));
                break;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        {
            let mut editor = editor.lock().unwrap_or_else(|p| p.into_inner());
            let _ = editor.add_history_entry(line);
            if let Some(path) = &history {
                let _ = editor.save_history(path);
            }
        }
        if let Some(command) = line.strip_prefix('/') {
            match slash(command, &mut agent, &screen, &consent, project).await {
                Ok(true) => continue,
                Ok(false) => break,
                Err(error) => {
                    screen.lock().line(&format!("error: {error:#}"));
                    continue;
                }
            }
        }
        statement(line, &mut agent, &screen, &consent).await;
    }
    let sink = {
        let screen = screen.clone();
        move |event: AgentEvent| screen.show(event)
    };
    agent.end_session("prompt_input_exit", &sink).await;
    spinner.abort();
    project.close().await;
    Ok(ExitCode::SUCCESS)
}

async fn read_line(editor: &LineEditor, prompt: &str) -> Result<String, ReadlineError> {
    let editor = editor.clone();
    let prompt = prompt.to_owned();
    tokio::task::spawn_blocking(move || {
        editor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .readline(&prompt)
    })
    .await
    .unwrap_or(Err(ReadlineError::Eof))
}

/// Lines of at most `width` characters, broken between words (a word
/// longer than a line gets a line of its own).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if !line.is_empty() && needed > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

fn greet(agent: &Agent, screen: &SharedScreen) {
    let snapshot = agent.config();
    // What the model section resolves to, with SATCHEL_MODEL and the
    // endpoint's defaults applied, as the loop will use it.
    let env: std::collections::HashMap<String, String> =
        crate::paths::process_env().into_iter().collect();
    let model = match snapshot.llm.resolve(&env) {
        Ok(model) => format!(
            "model {} at {} ({} tool calling)",
            model.model,
            model.base_url,
            format!("{:?}", model.tool_mode()).to_lowercase()
        ),
        Err(error) => format!("no usable model ({error})"),
    };
    let resumed = match agent.conversation_id() {
        Some(id) => format!(
            "; resuming {}{}",
            id,
            agent.title().map(|t| format!(" ({t})")).unwrap_or_default()
        ),
        None => String::new(),
    };
    screen.lock().line(&format!(
        "satchel chat: {} tools, {model}{resumed}. /help for commands, Ctrl-D to leave.",
        agent.tools().current().len()
    ));
}

/// Runs one statement; Ctrl-C cancels it and its processes.
async fn statement(
    text: &str,
    agent: &mut Agent,
    screen: &SharedScreen,
    consent: &TerminalConsent,
) {
    let cancel = CancellationToken::new();
    consent.set_running(Some(cancel.clone()));
    let interrupt = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        })
    };
    let sink = {
        let screen = screen.clone();
        move |event: AgentEvent| screen.show(event)
    };
    screen.lock().waiting(true);
    let result = agent.statement(text, &cancel, &sink).await;
    interrupt.abort();
    consent.set_running(None);
    let mut screen = screen.lock();
    screen.waiting(false);
    screen.flush_text();
    match result {
        Ok(report) => match report.outcome {
            Outcome::Answered | Outcome::TurnLimit => {}
            Outcome::Cancelled => screen.line("interrupted."),
            Outcome::Failed(message) => screen.line(&format!("error: {message}")),
        },
        Err(error) => screen.line(&format!("error: {error}")),
    }
}

/// `/resources` and `/prompts`: every server's list, or one resource read
/// (`SERVER URI`), or one prompt's messages (`SERVER NAME [JSON arguments]`).
async fn offers(prompts: bool, rest: &str, project: &Host) -> String {
    let Some(offers) = project.mcp_offers() else {
        return "no MCP servers are running (declare them in .agents/mcp.json)".to_owned();
    };
    let mut words = rest.splitn(3, char::is_whitespace);
    let (server, item, extra) = (words.next(), words.next(), words.next());
    let parts = match (server.filter(|s| !s.is_empty()), item) {
        (None, _) => {
            let listed = if prompts {
                offers.prompts().await
            } else {
                offers.resources().await
            };
            if listed.is_empty() {
                return format!(
                    "no running MCP server offers {}",
                    if prompts { "prompts" } else { "resources" }
                );
            }
            let mut text = String::new();
            for server in listed {
                text.push_str(&format!("{}:\n", server.server));
                match server.entries {
                    Ok(entries) => {
                        for entry in entries {
                            let id = ["uri", "uriTemplate", "name"]
                                .iter()
                                .find_map(|key| entry.get(*key).and_then(|v| v.as_str()))
                                .unwrap_or("?");
                            let about = entry
                                .get("description")
                                .and_then(|v| v.as_str())
                                .or_else(|| entry.get("name").and_then(|v| v.as_str()))
                                .unwrap_or_default();
                            text.push_str(&format!("  {id}  {about}\n"));
                        }
                    }
                    Err(error) => text.push_str(&format!("  (failed: {error})\n")),
                }
            }
            return elicit::printable(&text);
        }
        (Some(_), None) => {
            return format!(
                "usage: /{} SERVER {}",
                if prompts { "prompts" } else { "resources" },
                if prompts {
                    "NAME [JSON arguments]"
                } else {
                    "URI"
                }
            );
        }
        (Some(server), Some(item)) if prompts => {
            let arguments = match extra.map(serde_json::from_str::<serde_json::Value>) {
                None => serde_json::Map::new(),
                Some(Ok(serde_json::Value::Object(map))) => map,
                Some(_) => return "the arguments must be a JSON object".to_owned(),
            };
            offers.get(server, item, arguments).await
        }
        (Some(server), Some(uri)) => offers.read(server, uri).await,
    };
    // What servers send is shown without its control characters.
    elicit::printable(&match parts {
        Ok(parts) => parts
            .iter()
            .map(satchel_core::Content::to_text)
            .collect::<Vec<_>>()
            .join("\n"),
        Err(error) => format!("error: {error}"),
    })
}

/// Handles `/command args`; false means leave.
async fn slash(
    command: &str,
    agent: &mut Agent,
    screen: &SharedScreen,
    consent: &TerminalConsent,
    project: &Host,
) -> anyhow::Result<bool> {
    let (name, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(n, r)| (n, r.trim()));
    match name {
        "help" | "?" => screen.lock().line(HELP),
        "exit" | "quit" | "q" => return Ok(false),
        "tools" => {
            let registry = agent.tools().current();
            let mut text = String::new();
            let width = crate::paths::var("COLUMNS")
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(100)
                .max(40);
            for spec in registry
                .specs()
                .filter(|spec| !satchel_core::edit_forms::is_native_form(&spec.name))
            {
                let first = spec.description.lines().next().unwrap_or_default();
                let lines = wrap_words(first, width - 24);
                for (index, line) in lines.iter().enumerate() {
                    let name = if index == 0 { spec.name.as_str() } else { "" };
                    text.push_str(&format!("  {name:20}  {line}\n"));
                }
            }
            screen.lock().line(text.trim_end());
        }
        "refresh" => {
            let report = agent.tools().refresh(true).await?;
            screen.lock().line(&format!(
                "{} tools{}",
                agent.tools().current().len(),
                if report.is_change() { " (changed)" } else { "" }
            ));
        }
        "resources" | "prompts" => {
            let text = offers(name == "prompts", rest, project).await;
            screen.lock().line(text.trim_end());
        }
        "goal" if rest.is_empty() => {
            let goal = agent.goal().unwrap_or("(not set yet)").to_owned();
            screen.lock().line(&format!("goal: {goal}"));
        }
        "goal" => {
            agent.set_goal(rest.to_owned()).await?;
            screen.lock().line(&format!("goal set: {rest}"));
        }
        "history" => {
            let count = if rest.is_empty() {
                DEFAULT_HISTORY_EVENTS
            } else {
                rest.parse::<usize>()
                    .ok()
                    .filter(|count| *count > 0)
                    .ok_or_else(|| {
                        anyhow::anyhow!("/history takes a number of events, not `{rest}`")
                    })?
            };
            let text = show_history(agent, project, count, screen.color()).await?;
            screen.lock().line(&text);
        }
        "context" => {
            let report = agent.context_report().await?;
            screen.lock().line(report.render().trim_end());
        }
        "new" => {
            // The old conversation's background processes end with it.
            if let Some(old) = agent.conversation_id().map(str::to_owned) {
                project.processes.end_owner(&old).await;
            }
            let sink = {
                let screen = screen.clone();
                move |event: AgentEvent| screen.show(event)
            };
            agent.end_session("clear", &sink).await;
            agent.new_conversation();
            consent.forget();
            if !rest.is_empty() {
                agent.set_title(rest.to_owned()).await?;
            }
            screen.lock().line("new conversation.");
        }
        "codestats" => {
            screen.lock().flush_text();
            super::code::stats(
                CodeStatsArgs {
                    days: 7,
                    json: false,
                },
                project,
            )
            .await?;
        }
        "newsession" => {
            let memory = project
                .memory
                .get()
                .await
                .map_err(|reason| anyhow::anyhow!(reason))?;
            screen.lock().flush_text();
            super::memory::new_session(
                &memory,
                NewSessionArgs {
                    name: (!rest.is_empty()).then(|| rest.to_owned()),
                    json: false,
                },
            )
            .await?;
        }
        "codefailures" => {
            let count = if rest.is_empty() { 5 } else { rest.parse()? };
            screen.lock().flush_text();
            super::code::failures(CodeFailuresArgs { count, json: false }, project).await?;
        }
        "ps" => {
            let text = process_list(&project.processes.list_all());
            screen.lock().line(text.trim_end());
        }
        "kill" => {
            let Some(process) = project.processes.find(rest) else {
                screen
                    .lock()
                    .line(&format!("no background process `{rest}`; /ps lists them"));
                return Ok(true);
            };
            let state = process.kill().await;
            screen.lock().line(&format!(
                "{} (`{}`): {}",
                rest,
                process.command(),
                state.describe()
            ));
        }
        other => screen
            .lock()
            .line(&format!("unknown command /{other}; /help lists them")),
    }
    Ok(true)
}

/// `/ps`: one line per background process.
fn process_list(processes: &[(String, satchel_exec::background::ProcessInfo)]) -> String {
    if processes.is_empty() {
        return "no background processes".to_owned();
    }
    let mut text = format!(
        "  {:6} {:>8} {:18} {:>7} {:>9}  command\n",
        "id", "pid", "state", "age", "unread"
    );
    for (_, p) in processes {
        text.push_str(&format!(
            "  {:6} {:>8} {:18} {:>6}s {:>9}  {}\n",
            p.id,
            p.pid,
            p.state.describe(),
            p.age.as_secs(),
            p.unread_bytes,
            p.command.lines().next().unwrap_or_default()
        ));
    }
    text
}

/// Events `/history` shows when not told how many.
const DEFAULT_HISTORY_EVENTS: usize = 20;

/// The last `count` events of the conversation's timeline, as the
/// `conversation` tool builds it, through the tools' terminal formatters.
async fn show_history(
    agent: &Agent,
    project: &Host,
    count: usize,
    color: bool,
) -> anyhow::Result<String> {
    let Some(id) = agent.conversation_id() else {
        return Ok("nothing yet: the conversation starts with your first message.".to_owned());
    };
    let store = project
        .store
        .get()
        .await
        .map_err(|reason| anyhow::anyhow!(reason))?;
    let (statements, log, calls) = tokio::try_join!(
        store.statements(id),
        store.log_entries(id),
        store.tool_calls(id)
    )?;
    let events = timeline(&log, &calls, &statements);
    let chosen = select(&events, None, Some(count));
    if chosen.is_empty() {
        return Ok("nothing recorded yet.".to_owned());
    }
    let registry = agent.tools().current();
    let mut text = super::log::render_timeline(&chosen, &registry, Style::Terminal { color });
    if chosen.len() < events.len() {
        text = format!(
            "(the last {} of {} events; /history N shows more)\n\n{text}",
            chosen.len(),
            events.len()
        );
    }
    Ok(text)
}

/// Where input history is kept: beside a database file, else (a
/// PostgreSQL database) in Satchel's data directory.
fn history_file(project: &Host) -> Option<PathBuf> {
    let dir = match super::db::location(project.db.as_ref()?.as_os_str()).ok()? {
        satchel_store::StoreLocation::File(file) => file.parent()?.to_path_buf(),
        satchel_store::StoreLocation::Postgres(_) => project.paths.data.clone()?,
    };
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("chat-history.txt"))
}

#[cfg(test)]
mod tests {
    use super::wrap_words;

    /// Issue #22: `/tools` lines wrapped mid-word.
    #[test]
    fn lines_break_between_words() {
        assert_eq!(
            wrap_words("Run a bash command in the project directory", 16),
            ["Run a bash", "command in the", "project", "directory"]
        );
        assert_eq!(wrap_words("", 10), [""]);
    }
}
