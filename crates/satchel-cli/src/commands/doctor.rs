//! `satchel doctor`: every dependency checked, each problem with its fix.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use satchel_builtins::code::{Language, resolve};
use satchel_llm::LlmConfig;
use serde::Serialize;
use serde_json::json;

use super::fetch;
use crate::cli::DoctorArgs;
use satchel_host::{Host, read_settings};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

/// One check: what, how it went, what was found, and how to fix it.
#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    status: Status,
    summary: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

fn check(name: &'static str, status: Status, summary: impl Into<String>) -> Check {
    Check {
        name,
        status,
        summary: summary.into(),
        details: Vec::new(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    fn details(mut self, details: Vec<String>) -> Check {
        self.details = details;
        self
    }
}

pub(crate) async fn run(args: DoctorArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let mut checks = vec![trust(project), configuration(project)];
    checks.push(model_endpoint(project, args.offline).await);
    checks.push(embedding_model(project, args.fix).await);
    checks.push(runtimes(project, args.fix).await);
    checks.push(sandbox());
    checks.push(database(project).await);
    checks.push(search(project));
    let live = Arc::new(project.tools(false).await?);
    checks.push(external_tools(&live));
    checks.push(mcp_servers(&live, project, args.offline).await);
    project.store.close().await;

    let failed = checks.iter().any(|c| c.status == Status::Fail);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let value = json!({"ok": !failed, "checks": checks});
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        for check in &checks {
            let mark = match check.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
                Status::Skip => "skip",
            };
            writeln!(stdout, "{mark}  {:16} {}", check.name, check.summary)?;
            for detail in &check.details {
                writeln!(stdout, "      {:16} {detail}", "")?;
            }
            if let Some(fix) = &check.fix {
                writeln!(stdout, "      {:16} fix: {fix}", "")?;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether the project's `.agents/` is loaded (workspace trust).
fn trust(project: &Host) -> Check {
    match satchel_host::trust::additions(&project.root) {
        None => check("project trust", Status::Ok, "no .agents/ in the project"),
        Some(_) if satchel_host::trust::is_trusted(&project.root) => check(
            "project trust",
            Status::Ok,
            ".agents/ is trusted: its settings, tools and MCP servers load",
        ),
        Some(additions) => check(
            "project trust",
            Status::Warn,
            format!(
                ".agents/ is not trusted, so nothing from it loads ({})",
                additions.describe()
            ),
        )
        .fix("review .agents/, then `satchel trust` (or --trust-project for one run)"),
    }
}

fn configuration(project: &Host) -> Check {
    if project.warnings.is_empty() {
        return check(
            "configuration",
            Status::Ok,
            "agent.json read without a warning",
        );
    }
    check(
        "configuration",
        Status::Warn,
        format!("{} warning(s) in agent.json", project.warnings.len()),
    )
    .details(
        project
            .warnings
            .iter()
            .flat_map(|w| w.lines().map(str::to_owned))
            .collect(),
    )
    .fix("edit the keys named; `satchel config show` prints what is in force")
}

async fn model_endpoint(project: &Host, offline: bool) -> Check {
    let settings = match read_settings(&project.root, &project.paths, &project.env) {
        Ok(settings) => settings,
        Err(error) => return check("model", Status::Fail, error.to_string()),
    };
    let (config, warning) = settings.section::<LlmConfig>("llm");
    let env: HashMap<String, String> = settings.env.clone().into_iter().collect();
    let model = match config.resolve(&env) {
        Ok(model) => model,
        Err(error) => {
            return check("model", Status::Fail, error.to_string()).fix(
                "set llm.baseUrl and llm.model in .agents/agent.json, or the API key's variable",
            );
        }
    };
    let mut details: Vec<String> = warning.into_iter().collect();
    let model = if offline {
        model
    } else {
        satchel_llm::ask_server(model).await
    };
    let mode = format!("{:?}", model.tool_mode()).to_lowercase();
    let summary = format!(
        "{} at {} ({mode} tool calling, {} token window)",
        model.model, model.base_url, model.context_window
    );
    details.push(format!(
        "window: {} tokens, {}",
        model.context_window, model.window_source
    ));
    details.push(format!(
        "answers: up to {} tokens, {}",
        model
            .max_output_tokens
            .map_or_else(|| "no limit".to_owned(), |max| max.to_string()),
        model.output_source
    ));
    if let Some(num_ctx) = model.num_ctx {
        details.push(format!(
            "Ollama: every request asks for num_ctx {num_ctx}; if the server ignores it \
             (its OpenAI-compatible endpoint may), start it with OLLAMA_CONTEXT_LENGTH={num_ctx} \
             or more"
        ));
    }
    if offline {
        return check("model", Status::Skip, summary).details(details);
    }
    let client = match satchel_http::client_builder()
        .map_err(|e| e.to_string())
        .and_then(|b| {
            b.timeout(Duration::from_secs(5))
                .build()
                .map_err(|e| e.to_string())
        }) {
        Ok(client) => client,
        Err(error) => return check("model", Status::Fail, error),
    };
    let mut request = client.get(format!("{}/models", model.base_url));
    if let Some(key) = &model.api_key {
        request = match model.provider {
            satchel_llm::ProviderKind::Anthropic => request
                .header("x-api-key", key.expose())
                .header("anthropic-version", "2023-06-01"),
            satchel_llm::ProviderKind::OpenAi => request.bearer_auth(key.expose()),
        };
    }
    match request
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
    {
        Err(error) => check("model", Status::Fail, format!("{summary}: unreachable"))
            .details({
                details.push(error.to_string());
                details
            })
            .fix(
                "start the model server, or set llm.baseUrl (or OPENAI_BASE_URL) to where it runs",
            ),
        Ok(response) => {
            let listed: Vec<String> = response
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|body| body["data"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect();
            if listed.is_empty() || listed.iter().any(|id| id == &model.model) {
                check("model", Status::Ok, summary).details(details)
            } else {
                details.push(format!("the server serves: {}", listed.join(", ")));
                check(
                    "model",
                    Status::Fail,
                    format!("{summary}: the server does not serve `{}`", model.model),
                )
                .details(details)
                .fix("set llm.model (or SATCHEL_MODEL) to one the server serves")
            }
        }
    }
}

async fn embedding_model(project: &Host, fix: bool) -> Check {
    let Some(dir) = project.memory.config().model_dir else {
        return check(
            "embedding model",
            Status::Warn,
            "no model directory (no XDG_DATA_HOME or HOME)",
        )
        .fix("set memory.modelDir in agent.json");
    };
    let mut wrong = fetch::unverified(&dir, &fetch::MINILM);
    if !wrong.is_empty() && fix {
        if let Err(error) = fetch::fetch(
            &fetch::index_url(),
            &dir,
            &fetch::MINILM,
            "`doctor --fix` asked for it; memory stores and recalls by meaning with it",
        )
        .await
        {
            return check(
                "embedding model",
                Status::Fail,
                format!("the fetch failed: {error}"),
            );
        }
        wrong = fetch::unverified(&dir, &fetch::MINILM);
    }
    if wrong.is_empty() {
        check(
            "embedding model",
            Status::Ok,
            format!("all-MiniLM-L6-v2 verified in {}", dir.display()),
        )
    } else {
        check(
            "embedding model",
            Status::Warn,
            format!(
                "missing or damaged in {} ({}): memory recall uses keywords only",
                dir.display(),
                wrong.join(", ")
            ),
        )
        .fix("`satchel doctor --fix` fetches it (it is also fetched on first use)")
    }
}

/// The bun version `scripts/install-js-runtime.sh` installs.
const BUN_VERSION: &str = "1.4.5";

async fn runtimes(project: &Host, fix: bool) -> Check {
    let code = satchel_builtins::code_config(&project.tools_config);
    let mut search_path = code.search_path.clone();
    let resolve_all = |search_path: &str| {
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for language in [
            Language::Python,
            Language::Javascript,
            Language::Typescript,
            Language::Bash,
        ] {
            match resolve(language, code.js_runtime, &code.runtimes, search_path) {
                Ok(runtime) => found.push(format!(
                    "{}: {}",
                    language.as_str(),
                    runtime.program.display()
                )),
                Err(reason) => missing.push((language, format!("{}: {reason}", language.as_str()))),
            }
        }
        (found, missing)
    };
    let (mut found, mut missing) = resolve_all(&search_path);
    let needs_js = missing
        .iter()
        .any(|(l, _)| matches!(l, Language::Javascript | Language::Typescript));
    let mut notes = Vec::new();
    if fix && needs_js {
        match install_bun(&project.paths).await {
            Ok(bin) => {
                search_path = format!("{search_path}:{}", bin.display());
                (found, missing) = resolve_all(&search_path);
                notes.push(format!(
                    "installed bun {BUN_VERSION} into {}",
                    bin.display()
                ));
            }
            Err(reason) => notes.push(format!("bun could not be installed: {reason}")),
        }
    }
    let status = if missing.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let summary = format!("{} of 4 languages can run", found.len());
    let mut details = found;
    details.extend(missing.iter().map(|(_, reason)| reason.clone()));
    details.extend(notes);
    let checked = check("code runtimes", status, summary).details(details);
    if missing.is_empty() {
        checked
    } else if needs_js {
        checked.fix("`satchel doctor --fix` installs bun from npm (needs npm); or set code.runtimes in agent.json")
    } else {
        checked.fix("install the missing runtime (python3), or set code.runtimes in agent.json")
    }
}

/// Installs bun from the npm registry into Satchel's runtimes directory
/// (as `scripts/install-js-runtime.sh` does into a clone); returns the
/// directory of its executable.
async fn install_bun(paths: &satchel_host::HostPaths) -> Result<std::path::PathBuf, String> {
    let dir = paths
        .js_runtime_dir()
        .ok_or("no data directory (XDG_DATA_HOME or HOME)")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!(
        "installing bun {BUN_VERSION} from npm into {}",
        dir.display()
    );
    // A one-off install the user asked for, watched by them: not a tool
    // call, so not through the runner's limits and sandbox.
    #[expect(
        clippy::disallowed_methods,
        reason = "`doctor --fix` runs npm in the foreground for the user"
    )]
    let status = tokio::process::Command::new("npm")
        .arg("install")
        .arg("--prefix")
        .arg(&dir)
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .arg(format!("bun@{BUN_VERSION}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("cannot run npm ({e}); install nodejs and npm first"))?;
    if !status.success() {
        return Err(format!("npm install failed ({status})"));
    }
    Ok(dir.join("node_modules/.bin"))
}

/// What the kernel lets the sandbox enforce: Landlock (writes; TCP from
/// ABI 4), seccomp for sockets, and namespaces.
fn sandbox() -> Check {
    let support = satchel_exec::sandbox::probe();
    let mut details = vec![
        format!("Landlock ABI {}", support.landlock_abi),
        match &support.namespaces {
            Ok(()) => {
                "user, mount and PID namespaces: yes (processes end with the command)".to_owned()
            }
            Err(reason) => format!("namespaces: no ({reason})"),
        },
        format!(
            "network containment: seccomp blocks IPv4/IPv6 sockets{}",
            if support.landlock_abi >= 4 {
                ", Landlock TCP rules too"
            } else {
                ""
            }
        ),
        format!(
            "process limit per sandbox: {}",
            if support.process_limit {
                "yes"
            } else {
                "no (Linux 6.14 or later)"
            }
        ),
    ];
    match support.available() {
        Err(reason) => {
            details.remove(0);
            check("sandbox", Status::Fail, reason)
                .details(details)
                .fix("run on Linux 5.13 or later with Landlock enabled (or allowed by the container); until then bash commands are refused")
        }
        Ok(()) if support.namespaces.is_err() => check(
            "sandbox",
            Status::Warn,
            format!("Landlock ABI {}, without namespaces", support.landlock_abi),
        )
        .details(details)
        .fix("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or the container's seccomp profile) for processes that end with the command"),
        Ok(()) => check(
            "sandbox",
            Status::Ok,
            format!("Landlock ABI {}, namespaces, socket filter", support.landlock_abi),
        )
        .details(details),
    }
}

async fn database(project: &Host) -> Check {
    let Some(path) = &project.db else {
        return check(
            "database",
            Status::Fail,
            "no location: set --db, SATCHEL_DB, XDG_DATA_HOME or HOME",
        );
    };
    // Shown as the location says it: a URL without its password.
    let shown = match super::db::location(path.as_os_str()) {
        Ok(location) => location.display(),
        Err(error) => return check("database", Status::Fail, format!("{error}")),
    };
    let size = std::fs::metadata(path).map(|m| m.len()).ok();
    match super::db::open_for_reading(Some(path)).await {
        Err(error) => check("database", Status::Fail, format!("{shown}: {error:#}"))
            .fix("move the file away (Satchel starts a new one), or point --db elsewhere"),
        Ok(None) => check(
            "database",
            Status::Ok,
            format!("{shown} (created on first use)"),
        ),
        Ok(Some(store)) => {
            let problems = store.integrity_problems().await;
            let _ = store.close().await;
            let (version, fix) = if store.is_postgres() {
                (
                    satchel_store::PG_SCHEMA_VERSION,
                    "the server's own tools (pg_amcheck, a restore) repair it",
                )
            } else {
                (
                    satchel_store::SCHEMA_VERSION,
                    "copy it aside and recover with `sqlite3 FILE .recover`",
                )
            };
            let mut summary = format!("{shown}, schema version {version}");
            if let Some(size) = size {
                summary.push_str(&format!(", {:.1} MB", size as f64 / 1e6));
            }
            match problems {
                Ok(problems) if problems.is_empty() => check("database", Status::Ok, summary),
                Ok(problems) => check("database", Status::Fail, format!("{summary}: damaged"))
                    .details(problems)
                    .fix(fix),
                Err(error) => check("database", Status::Fail, format!("{summary}: {error}")),
            }
        }
    }
}

fn search(project: &Host) -> Check {
    let names = satchel_builtins::search_config(&project.tools_config).backend_names();
    if names.is_empty() {
        check("search", Status::Warn, "no backend: the search tool answers TOOL_UNAVAILABLE")
            .fix("set SEARXNG_URL, BRAVE_API_KEY or TAVILY_API_KEY, or \"search\": {\"backends\": [\"duckduckgo\"]} in agent.json")
    } else {
        check(
            "search",
            Status::Ok,
            format!("backends: {}", names.join(", ")),
        )
    }
}

fn external_tools(live: &satchel_tools::LiveRegistry) -> Check {
    let broken: Vec<String> = live
        .skipped()
        .iter()
        .filter(|s| s.broken)
        .map(|s| format!("{}: {}", s.path.display(), s.reason))
        .collect();
    let count = live.current().len();
    if broken.is_empty() {
        check(
            "external tools",
            Status::Ok,
            format!("{count} tools, none broken"),
        )
    } else {
        check(
            "external tools",
            Status::Warn,
            format!("{} broken (they answer TOOL_UNAVAILABLE)", broken.len()),
        )
        .details(broken)
        .fix("fix each tool's `--schema` answer, then `satchel tools refresh`")
    }
}

async fn mcp_servers(
    live: &Arc<satchel_tools::LiveRegistry>,
    project: &Host,
    offline: bool,
) -> Check {
    let config = satchel_host::loaders::load_mcp_config(project);
    if config.servers.is_empty() && config.warnings.is_empty() {
        return check("mcp servers", Status::Ok, "none configured");
    }
    if offline {
        return check(
            "mcp servers",
            Status::Skip,
            format!(
                "{} configured, not started (--offline)",
                config.servers.len()
            ),
        )
        .details(config.warnings.clone());
    }
    let manager = satchel_host::loaders::start_mcp_in_background(live, project);
    manager.ready().await;
    let statuses = manager.statuses();
    manager.shutdown().await;
    let mut details = config.warnings.clone();
    let mut failed = 0;
    for status in &statuses {
        let ok = !status.tools.is_empty() || status.state.label() == "running";
        if !ok {
            failed += 1;
        }
        details.push(format!(
            "{}: {} ({} tools)",
            status.name,
            status.state.label(),
            status.tools.len()
        ));
        details.extend(
            status
                .notes
                .iter()
                .map(|note| format!("{}: {note}", status.name)),
        );
    }
    let status = if failed > 0 {
        Status::Fail
    } else if details.len() > statuses.len() {
        Status::Warn
    } else {
        Status::Ok
    };
    let checked = check(
        "mcp servers",
        status,
        format!("{} of {} started", statuses.len() - failed, statuses.len()),
    )
    .details(details);
    if failed > 0 {
        checked.fix(
            "`satchel mcp servers` shows each server's last error; fix or disable it in mcp.json",
        )
    } else {
        checked
    }
}
