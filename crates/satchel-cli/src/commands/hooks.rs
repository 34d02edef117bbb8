//! `satchel hooks list|trust`, and the REPL's question at start-up about
//! project hooks not yet approved.

use std::io::Write;
use std::process::ExitCode;

use satchel_host::Host;
use satchel_tools::hooks::{Hook, HookOrigin};
use serde_json::json;

use crate::cli::HooksCommand;

/// Characters of a hook's id shown (and enough to name it).
const SHORT_ID: usize = 12;

pub(crate) async fn run(command: HooksCommand, project: &Host) -> anyhow::Result<ExitCode> {
    let (set, warnings) = project.hooks()?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let approvals = project.hook_approvals();
    let mut out = std::io::stdout().lock();
    match command {
        HooksCommand::List(args) => {
            if args.json {
                let hooks: Vec<_> = set
                    .all()
                    .iter()
                    .map(|hook| {
                        json!({
                            "id": hook.id(),
                            "event": hook.event.name(),
                            "matcher": hook.matcher,
                            "command": hook.command,
                            "timeout_secs": hook.timeout.as_secs_f64(),
                            "on_failure": if hook.block_on_failure { "block" } else { "continue" },
                            "origin": hook.origin.to_string(),
                            "file": hook.file.display().to_string(),
                            "approved": approvals.is_approved(hook),
                        })
                    })
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&hooks)?)?;
            } else if set.is_empty() {
                writeln!(out, "no hooks")?;
            } else {
                for hook in set.all() {
                    writeln!(out, "{}", line(project, hook, approvals.is_approved(hook)))?;
                }
            }
        }
        HooksCommand::Trust(args) => {
            let chosen: Vec<&Hook> = set
                .all()
                .iter()
                .filter(|hook| hook.origin == HookOrigin::Project)
                .filter(|hook| {
                    if args.ids.is_empty() {
                        !approvals.is_approved(hook)
                    } else {
                        let id = hook.id();
                        args.ids
                            .iter()
                            .any(|wanted| id.starts_with(wanted.as_str()))
                    }
                })
                .collect();
            if chosen.is_empty() {
                writeln!(
                    out,
                    "{}",
                    if args.ids.is_empty() {
                        "nothing to approve: every project hook is approved"
                    } else {
                        "no project hook has such an id (see `satchel hooks list`)"
                    }
                )?;
                return Ok(if args.ids.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                });
            }
            approvals
                .approve(chosen.iter().copied())
                .map_err(anyhow::Error::msg)?;
            for hook in chosen {
                writeln!(out, "approved {}", line(project, hook, true))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One hook on one line: id, event and matcher, origin, approval,
/// command, file.
fn line(project: &Host, hook: &Hook, approved: bool) -> String {
    let id = hook.id();
    let matcher = if hook.matcher.is_empty() {
        String::new()
    } else {
        format!("[{}]", hook.matcher)
    };
    format!(
        "{}  {}{matcher}  {} {}  {}  ({})",
        &id[..SHORT_ID.min(id.len())],
        hook.event,
        hook.origin,
        if approved { "approved" } else { "NOT APPROVED" },
        hook.command,
        project.display_path(&hook.file)
    )
}

/// At a terminal, before the REPL starts: asks about each project hook
/// not yet approved; a hook approved here is remembered as `hooks trust`
/// would. Elsewhere unapproved hooks are skipped (and the user told).
pub(crate) fn ask_to_approve(project: &Host) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal};
    if !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let (set, _) = project.hooks()?;
    let approvals = project.hook_approvals();
    let pending: Vec<&Hook> = set
        .all()
        .iter()
        .filter(|hook| !approvals.is_approved(hook))
        .collect();
    let mut stderr = std::io::stderr();
    for hook in pending {
        write!(
            stderr,
            "The project's {} runs `{}` on {}{} (timeout {} s, in the sandbox).\nApprove this hook? [y/N] ",
            project.display_path(&hook.file),
            hook.command,
            hook.event,
            if hook.matcher.is_empty() {
                String::new()
            } else {
                format!(" for {}", hook.matcher)
            },
            hook.timeout.as_secs_f64()
        )?;
        stderr.flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if matches!(answer.trim(), "y" | "Y" | "yes") {
            approvals.approve([hook]).map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}
