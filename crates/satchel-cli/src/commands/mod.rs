//! One module per command group; [`run`] dispatches.

mod mcp;
mod setup;
mod tools;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let project = std::path::absolute(&cli.project)?;
    match cli.command {
        Command::Tools(command) => tools::run(command, &project).await,
        Command::Mcp(command) => mcp::run(command, &project).await,
    }
}
