//! One module per command group; [`run`] dispatches.

mod policy;
mod project;
mod search;
mod tools;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let project = std::path::absolute(&cli.project)?;
    match cli.command {
        Command::Tools(command) => tools::run(command, &project).await,
        Command::Policy(command) => policy::run(command, &project).await,
        Command::Search(args) => search::run(args, &project).await,
    }
}
