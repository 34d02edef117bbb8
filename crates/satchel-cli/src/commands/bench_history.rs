//! `satchel bench history`: what a long, tool-heavy session costs in prompt
//! tokens under Satchel's history (`satchel_agent::Transcript::history`,
//! the code the loop sends with) and two baselines measured in the same
//! run: full history, and observation masking (the last N tool results
//! verbatim, older ones replaced by a placeholder, as in "The Complexity
//! Trap", 2025). The session is a cassette (`--record`, or a converted
//! public trajectory): its last request holds the whole conversation, and
//! each request's prompt is rebuilt from the turns before it.
//!
//! Needed facts: a word that reads as code (a name with `_` or an inner
//! capital, a path or dotted name, a number of 3 digits or more) first seen
//! in a tool result and used again by the model in a later turn. For each
//! strategy the bench says whether that word was still in the prompt the
//! model answered from when it used it. Plain words are left out: that a
//! model writes "otherwise" after a file said it is no fact it needed.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use regex::Regex;
use satchel_agent::history::{CallRecord, StatementRecord, TurnRecord};
use satchel_agent::{Phase, Shape, Transcript};
use satchel_core::{AssistantPart, Content, Message, ToolCall, ToolOutput, ToolResults, ToolSpec};
use satchel_llm::cassette::read_interactions;
use satchel_llm::{ChatRequest, LlmConfig, Mode, Provider};
use serde_json::{Value, json};

use crate::cli::BenchHistoryArgs;

/// The placeholder of observation masking (the wording of "The Complexity
/// Trap"'s SWE-agent configuration).
fn placeholder(lines: usize) -> String {
    format!("Old environment output: ({lines} lines omitted)")
}

/// A session read from a cassette.
struct Session {
    system: String,
    opening: Vec<Content>,
    tools: Vec<ToolSpec>,
    model: String,
    turns: Vec<TurnRecord>,
}

/// One strategy's prompt at each turn.
struct Measured {
    name: &'static str,
    tokens: Vec<u64>,
    /// Needed facts still in the prompt, of all needed facts.
    kept: usize,
    lost: Vec<String>,
}

pub(crate) async fn run(args: BenchHistoryArgs, root: &Path) -> anyhow::Result<ExitCode> {
    let path = match &args.cassette {
        Some(path) => path.clone(),
        None => root.join("bench/history/gemini-3-pro-pytest-7490.jsonl"),
    };
    let session = read_session(&path)?;
    let config = satchel_agent::AgentConfig::default();
    let shape = Shape {
        result_chars: args.result_chars.unwrap_or(config.tool_result_max_length),
        recent_turns: args.recent_turns.unwrap_or(config.recent_tool_turns),
        reasoning_turns: args
            .reasoning_turns
            .unwrap_or(config.recent_reasoning_turns),
    };
    let provider = counting_provider(&session.model)?;
    let facts = needed_facts(&session);
    let strategies: [(&'static str, Strategy); 3] = [
        ("full history", Strategy::Full),
        ("observation masking", Strategy::Masking(args.mask_window)),
        ("satchel", Strategy::Satchel(shape)),
    ];
    let mut results = Vec::new();
    for (name, strategy) in strategies {
        let mut measured = Measured {
            name,
            tokens: Vec::new(),
            kept: 0,
            lost: Vec::new(),
        };
        for request in 0..session.turns.len() {
            let history = prompt(&session, request, strategy);
            let chat = ChatRequest::new(&history, &session.tools);
            let prepared = provider.prepare(&chat, Mode::Stream)?;
            measured.tokens.push(prepared.estimate().total);
            let text = serde_json::to_string(&history)?;
            for fact in facts.iter().filter(|f| f.needed_at == request) {
                if text.contains(&fact.word) {
                    measured.kept += 1;
                } else {
                    measured.lost.push(format!(
                        "{} (seen in turn {}, used in turn {})",
                        fact.word,
                        fact.seen_in + 1,
                        fact.needed_at + 1
                    ));
                }
            }
        }
        results.push(measured);
    }
    report(&args, &path, &session, shape, facts.len(), &results)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy)]
enum Strategy {
    Full,
    Masking(usize),
    Satchel(Shape),
}

/// The messages of request `request` (0-based): the turns before it.
fn prompt(session: &Session, request: usize, strategy: Strategy) -> Vec<Message> {
    let statement = StatementRecord {
        seq: 1,
        user: session.opening.clone(),
        turns: session.turns[..request].to_vec(),
    };
    let mut transcript = Transcript::from_statements(vec![statement]);
    let whole = Shape {
        result_chars: usize::MAX,
        recent_turns: 0,
        reasoning_turns: 0,
    };
    match strategy {
        Strategy::Full => transcript.history(&session.system, whole, Phase::InStatement),
        Strategy::Satchel(shape) => transcript.history(&session.system, shape, Phase::InStatement),
        Strategy::Masking(window) => {
            let mut messages = transcript.history(&session.system, whole, Phase::InStatement);
            let results = messages
                .iter()
                .filter(|m| matches!(m, Message::Tool(_)))
                .count();
            let mut seen = 0;
            for message in &mut messages {
                if let Message::Tool(result) = message {
                    seen += 1;
                    if seen + window <= results {
                        let lines = result.content.to_text().lines().count();
                        result.content = ToolResults::Text(placeholder(lines));
                    }
                }
            }
            messages
        }
    }
}

/// A provider used only to write and count request bodies as Satchel sends
/// them (nothing is sent).
fn counting_provider(model: &str) -> anyhow::Result<std::sync::Arc<dyn Provider>> {
    let config: LlmConfig = serde_json::from_value(json!({
        "provider": "openai",
        "baseUrl": "http://127.0.0.1:9/v1",
        "model": model,
    }))?;
    let resolved = config.resolve(&std::collections::HashMap::new())?;
    Ok(satchel_llm::connect(resolved)?)
}

/// The session in `path`: the last request's conversation plus its answer.
fn read_session(path: &Path) -> anyhow::Result<Session> {
    let interactions = read_interactions(path)?;
    let Some(last) = interactions.last() else {
        bail!("{}: no model requests", path.display());
    };
    let body = &last.request.body;
    let model = body["model"].as_str().unwrap_or("gpt-4").to_owned();
    let tools = body["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|tool| {
            let function = &tool["function"];
            serde_json::from_value::<ToolSpec>(json!({
                "name": function["name"],
                "description": function["description"],
                "inputSchema": function["parameters"],
            }))
        })
        .collect::<Result<Vec<_>, _>>()
        .context("the tools of the last request")?;
    let messages = body["messages"]
        .as_array()
        .with_context(|| format!("{}: the last request has no messages", path.display()))?;
    let mut system = Vec::new();
    let mut opening = Vec::new();
    let mut turns: Vec<TurnRecord> = Vec::new();
    for message in messages {
        let text = message_text(&message["content"]);
        match message["role"].as_str() {
            Some("system") => system.push(text),
            Some("user") if turns.is_empty() => opening.push(Content::Text { text }),
            Some("assistant") => turns.push(assistant_turn(message, text)?),
            // An agent's reply to an answer it refused (no command, or
            // several): a user message between turns, kept as it was.
            Some("user") => {
                let Some(turn) = turns.last_mut() else {
                    bail!("{}: a user message before any answer", path.display());
                };
                turn.sent_results.push(Message::User {
                    content: vec![Content::Text { text }],
                });
            }
            Some("tool") => {
                let Some(turn) = turns.last_mut() else {
                    bail!("{}: a tool result before any answer", path.display());
                };
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let output = ToolOutput::success(ToolResults::Text(text), "");
                if let Some(record) = turn.calls.iter_mut().find(|r| r.call.id == id) {
                    record.output = output.clone();
                }
                turn.sent_results.push(Message::tool_result(id, &output));
            }
            other => bail!("{}: unknown role {other:?}", path.display()),
        }
    }
    // The last answer, from its recorded stream.
    let answer = last
        .response
        .events
        .as_ref()
        .map(|events| answer_from_events(events))
        .unwrap_or_else(|| json!({"role": "assistant", "content": ""}));
    let text = message_text(&answer["content"]);
    turns.push(assistant_turn(&answer, text)?);
    Ok(Session {
        system: system.join("\n\n"),
        opening,
        tools,
        model,
        turns,
    })
}

/// The text of an OpenAI message's `content` (a string or text parts).
fn message_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn assistant_turn(message: &Value, text: String) -> anyhow::Result<TurnRecord> {
    let mut assistant = Vec::new();
    if !text.is_empty() {
        assistant.push(AssistantPart::Text { text });
    }
    let mut calls = Vec::new();
    for call in message["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        let call = ToolCall {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            name: call["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            input: serde_json::from_str(arguments).unwrap_or(Value::String(arguments.into())),
        };
        assistant.push(AssistantPart::ToolCall(call.clone()));
        calls.push(CallRecord {
            call,
            output: ToolOutput::success(ToolResults::Text(String::new()), ""),
        });
    }
    Ok(TurnRecord {
        assistant,
        calls,
        ..TurnRecord::default()
    })
}

/// An OpenAI streamed answer put back together as one message.
fn answer_from_events(events: &[String]) -> Value {
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    for event in events {
        let Some(data) = event.trim().strip_prefix("data:") else {
            continue;
        };
        let Ok(chunk) = serde_json::from_str::<Value>(data.trim()) else {
            continue;
        };
        let delta = &chunk["choices"][0]["delta"];
        if let Some(text) = delta["content"].as_str() {
            content.push_str(text);
        }
        for call in delta["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            while calls.len() <= index {
                calls.push(json!({"id": "", "function": {"name": "", "arguments": ""}}));
            }
            let slot = &mut calls[index];
            if let Some(id) = call["id"].as_str() {
                slot["id"] = id.into();
            }
            for key in ["name", "arguments"] {
                if let Some(part) = call["function"][key].as_str() {
                    let joined = format!("{}{part}", slot["function"][key].as_str().unwrap_or(""));
                    slot["function"][key] = joined.into();
                }
            }
        }
    }
    json!({"role": "assistant", "content": content, "tool_calls": calls})
}

/// A word first seen in a tool result and used again by the model later.
struct Fact {
    word: String,
    /// The turn whose result it first appeared in (0-based).
    seen_in: usize,
    /// The request whose answer used it (0-based).
    needed_at: usize,
}

fn needed_facts(session: &Session) -> Vec<Fact> {
    let Ok(words) = Regex::new(
        r"[A-Za-z_][A-Za-z0-9_]*(?:[./][A-Za-z0-9_]+)+|\b[A-Za-z0-9]*_[A-Za-z0-9_]*\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b|\b[0-9]{3,}\b",
    ) else {
        return Vec::new();
    };
    let found = |text: &str| -> BTreeSet<String> {
        words
            .find_iter(text)
            .map(|m| m.as_str().to_owned())
            .collect()
    };
    let answer_text =
        |turn: &TurnRecord| serde_json::to_string(&turn.assistant).unwrap_or_default();
    let mut known = found(&session.system);
    for part in &session.opening {
        known.extend(found(&part.to_text()));
    }
    // Where each word first appeared in a result, by turn.
    let mut origins: Vec<(String, usize)> = Vec::new();
    for (index, turn) in session.turns.iter().enumerate() {
        known.extend(found(&answer_text(turn)));
        for record in &turn.calls {
            for word in found(&record.output.results.to_text()) {
                if known.insert(word.clone()) {
                    origins.push((word, index));
                }
            }
        }
    }
    let mut facts = Vec::new();
    for (word, seen_in) in origins {
        // The model answered request `later` after reading turn `seen_in`'s results.
        if let Some(needed_at) = (seen_in + 1..session.turns.len())
            .find(|&later| answer_text(&session.turns[later]).contains(&word))
        {
            facts.push(Fact {
                word,
                seen_in,
                needed_at,
            });
        }
    }
    facts
}

fn report(
    args: &BenchHistoryArgs,
    path: &Path,
    session: &Session,
    shape: Shape,
    needed: usize,
    results: &[Measured],
) -> anyhow::Result<()> {
    let total = |m: &Measured| m.tokens.iter().sum::<u64>();
    let full = results.first().map_or(1, total).max(1);
    let mut out = std::io::stdout().lock();
    if args.json {
        let strategies: Vec<Value> = results
            .iter()
            .map(|m| {
                json!({
                    "strategy": m.name,
                    "tokens_per_turn": m.tokens,
                    "total_tokens": total(m),
                    "ratio_to_full": total(m) as f64 / full as f64,
                    "needed_facts_kept": m.kept,
                    "needed_facts_lost": m.lost,
                })
            })
            .collect();
        let value = json!({
            "cassette": path.display().to_string(),
            "turns": session.turns.len(),
            "needed_facts": needed,
            "satchel": {
                "toolResultMaxLength": shape.result_chars,
                "recentToolTurns": shape.recent_turns,
                "recentReasoningTurns": shape.reasoning_turns,
            },
            "mask_window": args.mask_window,
            "strategies": strategies,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{}: {} turns, {} needed facts; satchel: recentToolTurns {}, recentReasoningTurns {}; masking: last {} results\n",
        path.display(),
        session.turns.len(),
        needed,
        shape.recent_turns,
        shape.reasoning_turns,
        args.mask_window
    )?;
    write!(out, "| turn |")?;
    for m in results {
        write!(out, " {} |", m.name)?;
    }
    writeln!(out)?;
    writeln!(out, "|---:|{}", "---:|".repeat(results.len()))?;
    for turn in 0..session.turns.len() {
        write!(out, "| {} |", turn + 1)?;
        for m in results {
            write!(out, " {} |", m.tokens.get(turn).copied().unwrap_or(0))?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "| strategy | prompt tokens | ÷ full history | needed facts kept |"
    )?;
    writeln!(out, "|---|---:|---:|---:|")?;
    for m in results {
        writeln!(
            out,
            "| {} | {} | {:.3} | {}/{} |",
            m.name,
            total(m),
            total(m) as f64 / full as f64,
            m.kept,
            needed
        )?;
    }
    for m in results.iter().filter(|m| !m.lost.is_empty()) {
        writeln!(out, "\n{} lost: {}", m.name, m.lost.join(", "))?;
    }
    Ok(())
}
