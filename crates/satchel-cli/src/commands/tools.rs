//! `satchel tools ...`: list, show and call tools from a shell.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use satchel_core::{ToolCall, ToolOutput, ToolResults};
use satchel_store::{AuditSource, Clock, NewToolCall, SystemClock, ToolCallStore};
use satchel_tools::format::truncate_chars;
use satchel_tools::{Registry, Settings, Style, ToolContext, ToolsConfig, builtin_registry};
use serde_json::Value;

use crate::cli::{CallArgs, ToolsCommand};
use crate::commands::{Env, db};

/// Characters of a description shown by `tools list`.
const LIST_DESCRIPTION_CHARS: usize = 72;

pub(crate) async fn run(command: ToolsCommand, env: &Env) -> anyhow::Result<ExitCode> {
    let config = load_config(&env.settings);
    let registry = builtin_registry()?;
    let mut stdout = std::io::stdout().lock();
    match command {
        ToolsCommand::List(args) if args.json => {
            let specs: Vec<_> = registry.specs().collect();
            writeln!(stdout, "{}", serde_json::to_string_pretty(&specs)?)?;
        }
        ToolsCommand::List(_) => {
            let width = registry.names().map(str::len).max().unwrap_or(4).max(4);
            writeln!(stdout, "{:width$}  {:8}  DESCRIPTION", "NAME", "SOURCE")?;
            for spec in registry.specs() {
                let first_sentence = spec.description.split(". ").next().unwrap_or_default();
                let description =
                    truncate_chars(first_sentence.trim_end_matches('.'), LIST_DESCRIPTION_CHARS);
                writeln!(
                    stdout,
                    "{:width$}  {:8}  {description}",
                    spec.name, "builtin"
                )?;
            }
        }
        ToolsCommand::Show(args) => {
            let Some(tool) = registry.get(&args.name) else {
                bail!(
                    "no tool named `{}`; available tools: {}",
                    args.name,
                    names(&registry)
                );
            };
            writeln!(stdout, "{}", serde_json::to_string_pretty(tool.spec())?)?;
        }
        ToolsCommand::Call(args) => {
            drop(stdout);
            return call(&registry, args, env, config).await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn load_config(settings: &Settings) -> Arc<ToolsConfig> {
    let (config, warnings) = ToolsConfig::from_settings(settings);
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    Arc::new(config)
}

fn names(registry: &Registry) -> String {
    registry.names().collect::<Vec<_>>().join(", ")
}

async fn call(
    registry: &Registry,
    args: CallArgs,
    env: &Env,
    config: Arc<ToolsConfig>,
) -> anyhow::Result<ExitCode> {
    let input = read_input(args.input.as_deref())?;
    // The database opens while the tool runs; a failure to open costs the
    // record, never the result.
    let store = tokio::spawn(db::open_for_recording(
        env.db.clone(),
        db::redactor(&env.settings),
    ));
    let ctx = ToolContext::standalone(
        format!("cli-{}", std::process::id()),
        env.project.clone(),
        config,
    );
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        wait_for_interrupt().await;
        tracing::warn!("interrupted: stopping the tool");
        cancel.cancel();
    });
    let call = ToolCall {
        id: ctx.call_id.clone(),
        name: args.name.clone(),
        input,
    };
    let started_at = SystemClock.now();
    let clock = Instant::now();
    let output = registry.call(&call, &ctx).await;
    let duration_us = u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX);
    let record = NewToolCall {
        source: AuditSource::Cli,
        conversation_id: None,
        statement_id: None,
        turn: None,
        call: call.clone(),
        output: output.clone(),
        started_at,
        finished_at: SystemClock.now(),
        duration_us,
    };
    // Recorded before printing, so that a closed stdout cannot lose the record.
    record_call(store, record).await;

    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&output)?)?;
    } else if args.human {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let style = Style::Terminal { color };
        match registry.get(&call.name) {
            Some(tool) => {
                writeln!(stdout, "{}", tool.format_use(&call.input, style))?;
                writeln!(stdout, "{}", tool.format_result(&output, style))?;
            }
            None => writeln!(
                stdout,
                "{}",
                satchel_tools::format::generic_result(&output, style)
            )?,
        }
    } else {
        print_results(&mut stdout, &output)?;
        if let Some(note) = &output.response {
            tracing::warn!("{note}");
        }
    }
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Records a finished call; any failure is a warning, never an error.
async fn record_call(
    store: tokio::task::JoinHandle<Result<satchel_store::SqliteStore, String>>,
    record: NewToolCall,
) {
    let store = match store.await {
        Ok(Ok(store)) => store,
        Ok(Err(reason)) => {
            tracing::warn!("this call was not recorded: {reason}");
            return;
        }
        Err(error) => {
            tracing::warn!("this call was not recorded: opening the database failed: {error}");
            return;
        }
    };
    if let Err(error) = store.record_tool_call(record).await {
        tracing::warn!("this call was not recorded: {error}");
    }
    if let Err(error) = store.close().await {
        tracing::warn!("closing the database: {error}");
    }
}

/// The results alone: a JSON value pretty-printed, text as it is.
fn print_results(out: &mut impl Write, output: &ToolOutput) -> anyhow::Result<()> {
    match (&output.results, output.results.structured()) {
        (_, Some(value)) => writeln!(out, "{}", serde_json::to_string_pretty(value)?)?,
        (ToolResults::Text(text), None) => writeln!(out, "{}", text.trim_end_matches('\n'))?,
        (ToolResults::Parts(_), None) => writeln!(out, "{}", output.results.to_text())?,
    }
    Ok(())
}

fn read_input(argument: Option<&str>) -> anyhow::Result<Value> {
    let text = match argument {
        Some(text) if text != "-" => text.to_owned(),
        _ => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                bail!("give the tool's input as a JSON argument, or pipe it on stdin");
            }
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .context("reading the input from stdin")?;
            text
        }
    };
    let value: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "the input is not valid JSON: `{}`",
            truncate_chars(text.trim(), 200)
        )
    })?;
    if !value.is_object() {
        bail!("the input must be a JSON object, e.g. '{{\"command\": \"ls\"}}'");
    }
    Ok(value)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn wait_for_interrupt() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}
