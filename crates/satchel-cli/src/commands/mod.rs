//! One module per command group; [`run()`] dispatches.

mod bench;
mod bench_history;
mod chat;
mod code;
mod config;
mod context;
mod db;
mod doctor;
mod edit_costs;
pub(crate) mod fetch;
mod hooks;
mod install;
mod log;
mod mcp;
mod mcp_import;
mod mcp_remote;
mod memory;
mod policy;
mod prompt;
mod records;
mod run;
mod search;
mod signals;
mod skills;
mod telegram;
mod tools;
mod web;

use std::process::ExitCode;

use std::sync::Arc;

use satchel_host::{Host, HostOptions};

use crate::cli::{Cli, Command};
use crate::paths;

/// Runs the parsed command line.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Generated from the command line alone: no project, no paths.
    match &cli.command {
        Command::Completions(args) => return install::completions(args),
        Command::Man(args) => return install::man(args),
        _ => {}
    }
    let root = std::path::absolute(&cli.project)?;
    let user_paths = paths::host_paths();
    let origin = crate::cli::Origin {
        project_flag: cli.project != std::path::Path::new("."),
        db_flag: cli
            .db
            .as_ref()
            .filter(|path| !path.as_os_str().is_empty())
            .map(|path| {
                crate::paths::var("SATCHEL_DB")
                    .is_none_or(|var| std::ffi::OsStr::new(&var) != path.as_os_str())
            }),
    };
    let db = match cli.db.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) if satchel_store::StoreLocation::is_url(path.as_os_str()) => Some(path),
        Some(path) => Some(std::path::absolute(path)?),
        None => user_paths.default_db(),
    };
    satchel_host::trust::init(user_paths.trust_store());
    if cli.trust_project {
        satchel_host::trust::trust_for_this_run();
    }
    if let Command::Trust(args) = &cli.command {
        return trust(args, &root);
    }
    // Copying a record needs nothing of the project (and must work where
    // its agent.json cannot be used).
    if let Command::Db(command) = cli.command {
        return db::run(command).await;
    }
    // Connecting to a URL needs nothing of the project, and the
    // conformance suite gives each run 30 s.
    if let Command::Mcp(crate::cli::McpCommand::Connect(args)) = cli.command {
        return mcp_remote::connect(*args, user_paths.data.as_deref()).await;
    }
    if matches!(cli.command, Command::Chat(_)) {
        ask_to_trust(&root)?;
    }
    if let Some(layer) = cli.command.policy_flags().and_then(|flags| flags.layer()) {
        satchel_tools::config::set_command_line(layer).map_err(satchel_host::refused)?;
    }
    let mut host = Host::open(HostOptions {
        root: root.clone(),
        db,
        paths: user_paths,
        env: paths::process_env(),
        fetcher: fetch::allowed()
            .then(|| Arc::new(fetch::Fetcher) as Arc<dyn satchel_host::ModelFetcher>),
    })?;
    if let Some(flags) = cli.command.tape_flags() {
        host.model_tape = match (&flags.record, &flags.replay) {
            (Some(path), _) => Some(satchel_llm::Tape::record(path, host.redactor.clone())?),
            (None, Some(path)) => Some(satchel_llm::Tape::replay(
                path,
                host.redactor.clone(),
                flags.replay_tools,
            )?),
            (None, None) => None,
        };
    }
    let project = Arc::new(host);
    crate::set_log_redactor(project.redactor.clone());
    project.log_warnings();
    match cli.command {
        Command::Chat(args) => chat::run(args, &project).await,
        Command::Run(args) => run::run(args, &project).await,
        Command::Context(args) => context::run(args, &project).await,
        Command::Tools(command) => tools::run(command, &project).await,
        Command::Mcp(command) => mcp::run(command, &project).await,
        Command::Telegram(args) => telegram::run(args, &project).await,
        Command::Web(args) => web::run(args, &project).await,
        Command::Policy(command) => policy::run(command, &project).await,
        Command::Search(args) => search::run(args, &project).await,
        Command::Code(command) => code::run(command, &project).await,
        Command::Log(args) => log::run(args, &project).await,
        Command::Conversations(args) => records::conversations(args, &project).await,
        Command::Audit(args) => records::audit(args, &project).await,
        Command::Export(args) => records::export(args, &project).await,
        Command::Memory(command) => memory::run(command, &project).await,
        Command::Bench(command) => bench::run(command, &project).await,
        Command::Trust(_) => unreachable!("handled before the project is loaded"),
        Command::Hooks(command) => hooks::run(command, &project).await,
        Command::Skills(command) => skills::run(command, &project).await,
        Command::Config(command) => config::run(command, &project, &origin).await,
        Command::Doctor(args) => doctor::run(args, &project).await,
        Command::Db(_) | Command::Completions(_) | Command::Man(_) => {
            unreachable!("handled before the project is loaded")
        }
    }
}

/// `satchel trust [PATH] [--forget]`.
fn trust(args: &crate::cli::TrustArgs, root: &std::path::Path) -> anyhow::Result<ExitCode> {
    let path = match &args.path {
        Some(path) => std::path::absolute(path)?,
        None => root.to_path_buf(),
    };
    if args.forget {
        let known = satchel_host::trust::forget(&path)?;
        println!(
            "{}: {}",
            path.display(),
            if known {
                "no longer trusted"
            } else {
                "was not trusted"
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    match satchel_host::trust::trust(&path)? {
        Some(additions) => println!("trusted {}: {}", path.display(), additions.describe()),
        None => println!("{} has no .agents/: nothing to trust", path.display()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The REPL asks, at a terminal, before an untrusted project's `.agents/`
/// is loaded; elsewhere the warning says how to trust it.
fn ask_to_trust(root: &std::path::Path) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal, Write};
    if satchel_host::trust::is_trusted(root) || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let Some(additions) = satchel_host::trust::additions(root) else {
        return Ok(());
    };
    let mut stderr = std::io::stderr();
    write!(
        stderr,
        "{}/.agents is not trusted yet. It would add: {}.\nTrust it and load it? [y/N] ",
        root.display(),
        additions.describe()
    )?;
    stderr.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        satchel_host::trust::trust(root)?;
    }
    Ok(())
}
