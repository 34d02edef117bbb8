//! `satchel memory ...`: the memory tool from a shell (store, recall, list
//! and forget go through the tool, its validation and policy), stats,
//! starting a new session, and [`LazyMemory`](satchel_host::LazyMemory), the memory the `memory` tool
//! and these commands share within one process.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use satchel_core::{ToolCall, ToolOutput};
use satchel_memory::Memory;
use satchel_store::AuditSource;
use satchel_tools::format::{paint, truncate_chars};
use satchel_tools::{Style, ToolContext, UserInitiated};
use serde_json::{Value, json};

use super::db;
use crate::cli::MemoryCommand;
use satchel_host::Host;

/// Characters of a memory shown in a table row.
const CONTENT_CHARS: usize = 80;

pub(crate) async fn run(command: MemoryCommand, project: &Host) -> anyhow::Result<ExitCode> {
    let memory = project
        .memory
        .get()
        .await
        .map_err(anyhow::Error::msg)
        .context("memory needs the database")?;
    let result = match command {
        MemoryCommand::Store(args) => {
            let mut input =
                json!({"action": "store", "layer": args.layer.name(), "content": args.content});
            if let Some(category) = args.category {
                input["category"] = json!(category);
            }
            if let Some(certainty) = args.certainty {
                input["certainty"] = json!(certainty);
            }
            call(project, input, args.json).await
        }
        MemoryCommand::Recall(args) => {
            let mut input = json!({"action": "recall", "query": args.query, "limit": args.limit});
            add_filters(&mut input, args.layer.map(|l| l.name()), args.category);
            for (key, value) in [("since", args.since), ("until", args.until)] {
                if let Some(value) = value {
                    input[key] = json!(value);
                }
            }
            call(project, input, args.json).await
        }
        MemoryCommand::List(args) if args.all => list_all(&memory, args).await,
        MemoryCommand::List(args) => {
            let mut input = json!({"action": "list", "limit": args.limit.clamp(1, 100)});
            add_filters(&mut input, args.layer.map(|l| l.name()), args.category);
            call(project, input, args.json).await
        }
        MemoryCommand::Forget(args) => {
            let input = json!({"action": "forget", "memory_id": args.id});
            call(project, input, args.json).await
        }
        MemoryCommand::Stats(args) => stats(project, &memory, args.json).await,
        MemoryCommand::NewSession(args) => new_session(&memory, args).await,
    };
    drop(memory);
    project.close().await;
    result
}

pub(crate) async fn new_session(
    memory: &Memory,
    args: crate::cli::NewSessionArgs,
) -> anyhow::Result<ExitCode> {
    let change = memory.new_session(None, args.name, "user").await?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&change)?)?;
    } else {
        if let Some(ended) = &change.ended {
            writeln!(
                stdout,
                "ended session {} ({} memories archived)",
                ended.id, change.archived
            )?;
        }
        if let Some(reason) = &change.summary_skipped {
            writeln!(stdout, "no summary: {reason}")?;
        }
        if let Some(started) = &change.started {
            writeln!(stdout, "started session {}", started.id)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn add_filters(input: &mut Value, layer: Option<&str>, category: Option<String>) {
    if let Some(layer) = layer {
        input["layer"] = json!(layer);
    }
    if let Some(category) = category {
        input["category"] = json!(category);
    }
}

/// Runs one memory tool call through dispatch and prints it.
async fn call(project: &Host, input: Value, as_json: bool) -> anyhow::Result<ExitCode> {
    let registry = project.tools(false).await?.current();
    let ctx = ToolContext::standalone(
        format!("cli-memory-{}", std::process::id()),
        project.root.clone(),
        project.tools_config.clone(),
    );
    let call = ToolCall {
        id: ctx.call_id.clone(),
        name: "memory".into(),
        input,
    };
    let output = project
        .recorded_call(&registry, &UserInitiated, &call, &ctx, AuditSource::Cli)
        .await;
    print_output(&output, as_json)?;
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn style() -> Style {
    Style::Terminal {
        color: crate::paths::color(&std::io::stdout()),
    }
}

fn print_output(output: &ToolOutput, as_json: bool) -> anyhow::Result<()> {
    let value = output
        .results
        .structured()
        .cloned()
        .unwrap_or_else(|| json!({"error": output.results.to_text()}));
    let mut stdout = std::io::stdout().lock();
    if as_json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(());
    }
    if output.is_error {
        let reason = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or(&output.user_message);
        eprintln!("error: {reason}");
        return Ok(());
    }
    // A notice (keywords only) was already logged by the memory itself.
    let memories = value
        .get("memories")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let action = value.get("action").and_then(Value::as_str).unwrap_or("");
    if matches!(action, "recalled" | "listed") {
        print_table(&mut stdout, &memories, action == "recalled")?;
    } else {
        for memory in &memories {
            writeln!(stdout, "{}", memory["id"].as_str().unwrap_or_default())?;
        }
    }
    if let Some(message) = value.get("message").and_then(Value::as_str) {
        writeln!(stdout, "{message}")?;
    }
    writeln!(stdout, "{}", paint(style(), "2", &output.user_message))?;
    Ok(())
}

fn print_table(out: &mut impl Write, memories: &[Value], relevance: bool) -> anyhow::Result<()> {
    if memories.is_empty() {
        writeln!(out, "no memories")?;
        return Ok(());
    }
    let score = if relevance { "  SCORE" } else { "" };
    writeln!(
        out,
        "{:36}  {:7}  {:10}  {:12}{score}  CONTENT",
        "ID", "LAYER", "DATE", "CATEGORY"
    )?;
    for memory in memories {
        let field = |key: &str| memory.get(key).and_then(Value::as_str).unwrap_or_default();
        let date = field("created_at").get(..10).unwrap_or_default().to_owned();
        let score = match memory.get("relevance").and_then(Value::as_f64) {
            Some(r) if relevance => format!("  {r:5.3}"),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:36}  {:7}  {:10}  {:12}{score}  {}",
            field("id"),
            field("layer"),
            date,
            // `relationship` and `preference` whole; longer free text cut.
            truncate_chars(field("category"), 12),
            truncate_chars(field("content"), CONTENT_CHARS)
        )?;
    }
    Ok(())
}

/// `list --all`: expired and archived memories too, straight from the store.
async fn list_all(memory: &Memory, args: crate::cli::MemoryListArgs) -> anyhow::Result<ExitCode> {
    let layers = args
        .layer
        .and_then(|l| satchel_store::MemoryLayer::parse(l.name()))
        .into_iter()
        .collect();
    let listed = memory
        .list(
            satchel_memory::ListQuery {
                layers,
                category: args.category,
                since: None,
                until: None,
                limit: args.limit,
                include_inactive: true,
            },
            None,
        )
        .await?;
    let memories: Vec<Value> = listed
        .iter()
        .map(|m| {
            let mut value = satchel_builtins::memory::memory_json(m, None);
            value["expires_at"] = json!(m.expires_at);
            value["archived_at"] = json!(m.archived_at);
            value
        })
        .collect();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let value = json!({"success": true, "action": "listed", "memories": memories});
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        print_table(&mut stdout, &memories, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn stats(project: &Host, memory: &Memory, as_json: bool) -> anyhow::Result<ExitCode> {
    let stats = memory.stats().await?;
    let model_dir = project.memory.config().model_dir.clone();
    let model_present = model_dir
        .as_deref()
        .is_some_and(satchel_memory::Embedder::files_present);
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let mut value = serde_json::to_value(&stats)?;
        value["model_dir"] = json!(model_dir);
        value["semantic_recall"] = json!(model_present);
        value["embedding_backlog"] = json!(stats.without_embedding);
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(stdout, "namespace        {}", stats.namespace)?;
    writeln!(stdout, "memories         {}", stats.total)?;
    for (layer, count) in &stats.by_layer {
        writeln!(stdout, "  {layer:14} {count}")?;
    }
    writeln!(stdout, "expired          {} (purged soon)", stats.expired)?;
    writeln!(stdout, "archived         {}", stats.archived)?;
    let backlog = match (stats.without_embedding, model_present) {
        (0, _) => "0".to_owned(),
        (n, true) => format!("{n} (being embedded now, in the background)"),
        (n, false) => format!("{n} (embedded once the model is there: `satchel doctor --fix`)"),
    };
    writeln!(stdout, "to embed         {backlog}")?;
    writeln!(
        stdout,
        "sessions         {} ({} open)",
        stats.sessions, stats.open_sessions
    )?;
    if let (Some(oldest), Some(newest)) = (stats.oldest, stats.newest) {
        writeln!(
            stdout,
            "dated            {} to {}",
            db::table_time(oldest),
            db::table_time(newest)
        )?;
    }
    let model = match (&model_dir, model_present) {
        (Some(dir), true) => format!("{} (semantic recall on)", dir.display()),
        (Some(dir), false) => format!(
            "missing in {} (keyword recall only; `satchel doctor --fix` fetches it)",
            dir.display()
        ),
        (None, _) => "not configured (keyword recall only)".to_owned(),
    };
    writeln!(stdout, "model            {model}")?;
    Ok(ExitCode::SUCCESS)
}
