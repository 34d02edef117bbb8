//! `satchel tools ...`: list, show, call, refresh and create tools from a
//! shell, and show what a model is shown of them (`prompt`, in `prompt.rs`).

use std::io::{IsTerminal, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use satchel_builtins::{BuiltinDeps, builtin_tools};
use satchel_core::edit_forms::is_native_form;
use satchel_core::portable::{SchemaConsumer, rule_violations, schema_for};
use satchel_core::{ToolCall, ToolOutput, ToolResults, ToolSpec, is_valid_tool_name};
use satchel_tools::external::{
    Language, SpecCache, ToolDirs, discover, skeleton, tool_name_for_file,
};
use satchel_tools::format::truncate_chars;
use satchel_tools::{LiveRegistry, Registry, Style, ToolContext, ToolSource, UserInitiated};
use serde_json::{Value, json};

use satchel_store::AuditSource;

use super::prompt;
use crate::cli::{CallArgs, Lang, ListArgs, NewArgs, SchemaConsumerArg, ToolsCommand};
use satchel_host::{Host, PROJECT_TOOLS};

/// Characters of a description shown by `tools list`.
const LIST_DESCRIPTION_CHARS: usize = 60;

pub(crate) async fn run(command: ToolsCommand, project: &Host) -> anyhow::Result<ExitCode> {
    let reprobe = matches!(command, ToolsCommand::Refresh(_));
    let live = match command {
        ToolsCommand::New(args) => return new_tool(args, project).await,
        ToolsCommand::Prompt(args) if args.builtin => {
            let specs: Vec<ToolSpec> = builtin_tools(&BuiltinDeps::default())
                .iter()
                .map(|tool| tool.spec().clone())
                .collect();
            return prompt::run(&specs, &args, project);
        }
        _ => Arc::new(project.tools(reprobe).await?),
    };
    // Imported MCP tools: started unless the named tool is already known.
    let wanted = match &command {
        ToolsCommand::Show(args) => Some(args.name.as_str()),
        ToolsCommand::Call(args) => Some(args.name.as_str()),
        _ => None,
    };
    let servers = match wanted {
        Some(name) if live.current().get(name).is_some() => None,
        _ => Some(satchel_host::loaders::start_mcp_servers(&live, project).await),
    };
    let code = run_with(command, &live, project).await;
    if let Some(servers) = servers {
        servers.shutdown().await;
    }
    code
}

async fn run_with(
    command: ToolsCommand,
    live: &LiveRegistry,
    project: &Host,
) -> anyhow::Result<ExitCode> {
    let registry = live.current();
    match command {
        ToolsCommand::List(args) | ToolsCommand::Refresh(args) => {
            print_list(live, &registry, project, &args)?
        }
        ToolsCommand::Show(args) => {
            let Some(tool) = registry.get(&args.name) else {
                bail!(
                    "no tool named `{}`; available tools: {}",
                    args.name,
                    names(&registry)
                );
            };
            let spec = match args.consumer {
                None => tool.spec().clone(),
                Some(consumer) => spec_for(tool.spec(), consumer_of(consumer))?,
            };
            writeln!(
                std::io::stdout(),
                "{}",
                serde_json::to_string_pretty(&spec)?
            )?;
        }
        ToolsCommand::Call(args) => return call(&registry, args, project).await,
        ToolsCommand::Prompt(args) => {
            let specs: Vec<ToolSpec> = registry.specs().cloned().collect();
            return prompt::run(&specs, &args, project);
        }
        ToolsCommand::New(_) => {}
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn names(registry: &Registry) -> String {
    listed(registry).collect::<Vec<_>>().join(", ")
}

/// The tools `tools list` shows: all but the editing tools' model-native
/// forms, which stand in for `edit` and `write` in a model's request
/// (`llm.editTool`) and are named in a note under the list.
fn listed(registry: &Registry) -> impl Iterator<Item = &str> {
    registry.names().filter(|name| !is_native_form(name))
}

fn source_label(source: &ToolSource, project: &Host) -> String {
    match source {
        ToolSource::Builtin => "builtin".to_owned(),
        ToolSource::External { level, path } => format!("{level} {}", project.display_path(path)),
        ToolSource::Extra { group, origin } => format!("{group} {origin}"),
    }
}

fn print_list(
    live: &LiveRegistry,
    registry: &Registry,
    project: &Host,
    args: &ListArgs,
) -> anyhow::Result<()> {
    // One write for the whole table, not one per line.
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        let tools: Vec<Value> = listed(registry)
            .filter_map(|name| registry.get(name))
            .map(|tool| {
                let mut value = serde_json::to_value(tool.spec()).unwrap_or(Value::Null);
                let (source, path) = match tool.source() {
                    ToolSource::Builtin => ("builtin".to_owned(), Value::Null),
                    ToolSource::External { level, path } => (level.to_string(), json!(path)),
                    ToolSource::Extra { group, origin } => (group, json!(origin)),
                };
                if let Value::Object(map) = &mut value {
                    map.insert("source".into(), json!(source));
                    map.insert("path".into(), path);
                }
                value
            })
            .collect();
        writeln!(stdout, "{}", serde_json::to_string_pretty(&tools)?)?;
        stdout.flush()?;
        return Ok(());
    }
    let width = listed(registry).map(str::len).max().unwrap_or(4).max(4);
    let rows: Vec<(String, String, String)> = listed(registry)
        .filter_map(|name| registry.get(name))
        .map(|tool| {
            let spec = tool.spec();
            let first_sentence = spec
                .description
                .split(". ")
                .next()
                .unwrap_or_default()
                .trim_end_matches('.');
            (
                spec.name.clone(),
                truncate_chars(first_sentence, LIST_DESCRIPTION_CHARS),
                source_label(&tool.source(), project),
            )
        })
        .collect();
    let description_width = rows
        .iter()
        .map(|(_, d, _)| d.chars().count())
        .max()
        .unwrap_or(11)
        .max(11);
    writeln!(
        stdout,
        "{:width$}  {:description_width$}  SOURCE",
        "NAME", "DESCRIPTION"
    )?;
    for (name, description, source) in rows {
        writeln!(
            stdout,
            "{name:width$}  {description:description_width$}  {source}"
        )?;
    }
    let native: Vec<&str> = registry.names().filter(|n| is_native_form(n)).collect();
    if !native.is_empty() {
        writeln!(
            stdout,
            "\nAlso {}: `edit` and `write` in the forms Claude and OpenAI models are trained on \
             (`llm.editTool`; `satchel tools prompt` shows which a model gets).",
            native.join(" and ")
        )?;
    }
    let skipped = live.skipped();
    if !skipped.is_empty() {
        writeln!(stdout, "\nNot tools ({}):", skipped.len())?;
        for entry in skipped.iter() {
            let mark = if entry.broken { "!" } else { "-" };
            writeln!(
                stdout,
                "  {mark} {} {}: {}",
                entry.level,
                project.display_path(&entry.path),
                entry.reason
            )?;
        }
    }
    stdout.flush()?;
    Ok(())
}

async fn call(registry: &Registry, args: CallArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let input = read_input(args.input.as_deref())?;
    let ctx = ToolContext::standalone(
        format!("cli-{}", std::process::id()),
        project.root.clone(),
        project.tools_config.clone(),
    );
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        super::signals::wait_for_interrupt().await;
        tracing::warn!("interrupted: stopping the tool");
        cancel.cancel();
    });
    // The call is recorded before it runs: open the database on its own
    // thread while this one compiles the tool's input schema. This command
    // runs on one thread: yielding once lets the open start that thread,
    // and the interrupt handler above install, before the compile.
    project.store.open_in_background();
    tokio::task::yield_now().await;
    project.processes.loopback_on_demand();
    registry.prepare(&args.name);
    let call = ToolCall {
        id: ctx.call_id.clone(),
        name: args.name.clone(),
        input,
    };
    // The user typed this call: "ask" rules need no further consent, but
    // deny rules and rate limits hold. Recorded before printing, so that a
    // closed stdout cannot lose the record.
    let content = satchel_agent::telemetry::ContentPolicy {
        log_content: project
            .telemetry
            .as_ref()
            .is_some_and(satchel_host::otel::Telemetry::log_content),
        redactor: project.redactor.clone(),
    };
    let recorded = project.recorded_call(registry, &UserInitiated, &call, &ctx, AuditSource::Cli);
    let output = satchel_agent::telemetry::traced_tool_call(&call, &content, recorded).await;

    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&output)?)?;
    } else if args.human {
        let color = crate::paths::color(&std::io::stdout());
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
    drop(stdout);
    // A one-shot process would kill the jobs it started by exiting: the
    // job id is printed at once, then the process stays until they finish.
    if project.code_jobs.running() > 0 {
        tracing::info!(
            "waiting for {} background job(s) to finish",
            project.code_jobs.running()
        );
        tokio::select! {
            () = project.code_jobs.wait_all() => {}
            () = super::signals::wait_for_interrupt() => tracing::warn!("interrupted: background jobs stopped"),
        }
    }
    // As every command that runs tools ends: background processes ended,
    // memory's backfill finished, the record closed, spans exported.
    project.close().await;
    Ok(if output.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
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

pub(crate) fn read_input(argument: Option<&str>) -> anyhow::Result<Value> {
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

/// `satchel tools new`: writes the skeleton, then checks that it answers
/// `--schema` the way discovery will ask it.
async fn new_tool(args: NewArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let name = tool_name_for_file(&args.name).map_err(anyhow::Error::msg)?;
    if !is_valid_tool_name(&args.name) {
        bail!(
            "`{}` cannot be a file name for a tool; use letters, digits, `_` and `-`",
            args.name
        );
    }
    let language = match args.lang {
        Lang::Bash => Language::Bash,
        Lang::Python => Language::Python,
    };
    let dir = project.root.join(PROJECT_TOOLS);
    let path = dir.join(&args.name);
    if path.exists() && !args.force {
        bail!(
            "{} already exists; pass --force to overwrite it",
            project.display_path(&path)
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&path, skeleton(&name, language))
        .with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;

    let dirs = ToolDirs {
        project: Some(dir),
        user: None,
        system: None,
    };
    let discovery = discover(
        &dirs,
        &SpecCache::in_memory(),
        &project.tools_config.external,
    )
    .await;
    if let Some(problem) = discovery.skipped.iter().find(|s| s.path == path) {
        bail!(
            "wrote {}, but it fails its own check: {}",
            project.display_path(&path),
            problem.reason
        );
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "created {} ({language}): tool `{name}`",
        project.display_path(&path)
    )?;
    writeln!(
        stdout,
        "try it:  satchel tools call {name} '{{\"text\": \"hello\"}}'"
    )?;
    writeln!(
        stdout,
        "then edit its schema and code; `satchel tools list` shows it."
    )?;
    Ok(ExitCode::SUCCESS)
}

fn consumer_of(arg: SchemaConsumerArg) -> SchemaConsumer {
    match arg {
        SchemaConsumerArg::Anthropic => SchemaConsumer::Anthropic,
        SchemaConsumerArg::Openai => SchemaConsumer::OpenAi,
        SchemaConsumerArg::Gemini => SchemaConsumer::Gemini,
        SchemaConsumerArg::Mcp => SchemaConsumer::Mcp,
    }
}

/// `spec` with its input schema as `consumer` gets it; what was repaired
/// goes to stderr, and a schema with no accepted form is the error.
fn spec_for(spec: &ToolSpec, consumer: SchemaConsumer) -> anyhow::Result<ToolSpec> {
    let repaired = rule_violations(&spec.input_schema, consumer);
    let schema = schema_for(&spec.input_schema, consumer).map_err(|why| {
        anyhow::anyhow!(
            "tool `{}` is left out of what {consumer} is sent: {why}",
            spec.name
        )
    })?;
    if !repaired.is_empty() {
        let mut stderr = std::io::stderr().lock();
        writeln!(stderr, "translated for {consumer}: {}", repaired.join("; "))?;
    }
    Ok(ToolSpec {
        input_schema: schema.into_owned(),
        ..spec.clone()
    })
}
