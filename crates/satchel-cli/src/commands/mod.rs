//! One module per command group; [`run`] dispatches.

mod db;
mod log;
mod records;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use satchel_tools::Settings;

use crate::cli::{Cli, Command};
use crate::paths;

/// What every command gets besides its own arguments.
pub(crate) struct Env {
    /// The project directory, absolute.
    pub(crate) project: PathBuf,
    /// agent.json layers, merged; their warnings are already logged.
    pub(crate) settings: Settings,
    /// The database file, absolute; `None` when no location can be found
    /// (no `--db`, `SATCHEL_DB`, `XDG_DATA_HOME` or `HOME`).
    pub(crate) db: Option<PathBuf>,
}

/// Runs the parsed command line.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let project = std::path::absolute(&cli.project)?;
    let settings = Settings::load(&Settings::default_paths(
        &project,
        paths::user_config_dir().as_deref(),
    ));
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    let db = match cli.db.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => Some(std::path::absolute(path)?),
        None => paths::default_db(),
    };
    let env = Env {
        project,
        settings,
        db,
    };
    match cli.command {
        Command::Tools(command) => tools::run(command, &env).await,
        Command::Log(args) => log::run(args, &env).await,
        Command::Conversations(args) => records::conversations(args, &env).await,
        Command::Audit(args) => records::audit(args, &env).await,
        Command::Export(args) => records::export(args, &env).await,
    }
}
