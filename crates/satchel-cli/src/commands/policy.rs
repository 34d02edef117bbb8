//! `satchel policy ...`: explain what policy would do with a call.

use std::io::Write;
use std::process::ExitCode;

use satchel_tools::policy::Decision;
use serde_json::{Value, json};

use super::tools::{names, read_input};
use crate::cli::{CheckArgs, PolicyCommand};
use satchel_host::Host;

pub(crate) async fn run(command: PolicyCommand, project: &Host) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Check(args) => check(project, args).await,
    }
}

async fn check(project: &Host, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let input = read_input(args.input.as_deref())?;
    let registry = project.tools(false).await?.current();
    let mut stdout = std::io::stdout().lock();
    let tool = match registry.check(&args.name, &input) {
        Ok(tool) => tool,
        Err(output) => {
            // The call would never reach policy: say why instead.
            let reason = output
                .results
                .structured()
                .and_then(|v| v.get("error"))
                .and_then(Value::as_str);
            anyhow::bail!(
                "{}",
                reason.map_or_else(
                    || format!(
                        "no tool named `{}`; available: {}",
                        args.name,
                        names(&registry)
                    ),
                    str::to_owned
                )
            );
        }
    };
    let decision = project.policy.decide(tool.spec(), &input);
    if args.json {
        writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(&decision_json(&decision, project))?
        )?;
    } else {
        writeln!(stdout, "{}: {}", decision.tool, decision.verdict)?;
        writeln!(stdout, "  {}", decision.explanation())?;
        if decision.judgements.len() > 1 {
            writeln!(stdout, "\nEach command:")?;
            for judgement in &decision.judgements {
                writeln!(
                    stdout,
                    "  {:5}  {}",
                    judgement.verdict.to_string(),
                    judgement.reason
                )?;
            }
        }
        writeln!(
            stdout,
            "\nmode: {}; {} rules",
            project.policy.mode(),
            project.policy.rules().len()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn decision_json(decision: &Decision, project: &Host) -> Value {
    let judgements: Vec<Value> = decision
        .judgements
        .iter()
        .map(|j| {
            json!({
                "subject": j.subject,
                "verdict": j.verdict.to_string(),
                "rule": j.rule.as_ref().map(|r| r.text.clone()),
                "rule_file": j.rule.as_ref().and_then(|r| r.origin.as_ref()).map(|p| p.display().to_string()),
                "reason": j.reason,
            })
        })
        .collect();
    json!({
        "tool": decision.tool,
        "verdict": decision.verdict.to_string(),
        "decided_by": decision.rule_label(),
        "explanation": decision.explanation(),
        "mode": project.policy.mode().to_string(),
        "judgements": judgements,
    })
}
