//! `satchel completions SHELL` and `satchel man`: what packagers put beside
//! the binary, generated from the command line's own definition so they
//! never drift from it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};

/// Prints the completion script for `args.shell` on stdout.
pub(crate) fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics on a failed write, and a
    // reader that closes early (`| head`) is no reason to panic.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "satchel", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Prints satchel.1, or writes every page into `args.out_dir`.
pub(crate) fn man(args: &ManArgs) -> anyhow::Result<ExitCode> {
    let command = Cli::command();
    match &args.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            clap_mangen::Man::new(command).render(&mut stdout)?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
