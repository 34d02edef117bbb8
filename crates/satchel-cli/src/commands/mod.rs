//! One module per command group; [`run`] dispatches.

mod bench;
mod chat;
mod code;
mod context;
mod db;
mod log;
mod mcp;
mod memory;
mod model;
mod policy;
mod project;
mod prompt;
mod records;
mod run;
mod search;
mod session;
mod setup;
mod tools;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::paths;
use project::Project;

/// Runs the parsed command line.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let root = std::path::absolute(&cli.project)?;
    let db = match cli.db.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => Some(std::path::absolute(path)?),
        None => paths::default_db(),
    };
    if let Some(layer) = cli.command.policy_flags().and_then(|flags| flags.layer()) {
        satchel_tools::config::set_command_line(layer).map_err(project::refused)?;
    }
    let project = Project::load(&root, db)?;
    match cli.command {
        Command::Chat(args) => chat::run(args, &project).await,
        Command::Run(args) => run::run(args, &project).await,
        Command::Context(args) => context::run(args, &project).await,
        Command::Tools(command) => tools::run(command, &project).await,
        Command::Mcp(command) => mcp::run(command, &project).await,
        Command::Policy(command) => policy::run(command, &project).await,
        Command::Search(args) => search::run(args, &project).await,
        Command::Code(command) => code::run(command, &project).await,
        Command::Log(args) => log::run(args, &project).await,
        Command::Conversations(args) => records::conversations(args, &project).await,
        Command::Audit(args) => records::audit(args, &project).await,
        Command::Export(args) => records::export(args, &project).await,
        Command::Memory(command) => memory::run(command, &project).await,
        Command::Bench(command) => bench::run(command, &project).await,
    }
}
