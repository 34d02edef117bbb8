//! `satchel skills list`: the skills the model can load, as it sees them
//! listed, with their folders.

use std::io::Write;
use std::process::ExitCode;

use satchel_host::Host;
use serde_json::json;

use crate::cli::SkillsCommand;

pub(crate) async fn run(command: SkillsCommand, project: &Host) -> anyhow::Result<ExitCode> {
    let SkillsCommand::List(args) = command;
    let (skills, warnings) = project.skill_dirs().discover();
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let listed: Vec<_> = skills
            .iter()
            .map(|skill| {
                json!({
                    "name": skill.name,
                    "description": skill.description,
                    "dir": skill.dir.display().to_string(),
                    "level": skill.level.to_string(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
    } else if skills.is_empty() {
        writeln!(
            out,
            "no skills (folders with a SKILL.md under .agents/skills/, .claude/skills/ or {})",
            project.skill_dirs().user.map_or_else(
                || "the user's config directory".to_owned(),
                |d| d.display().to_string()
            )
        )?;
    } else {
        for skill in &skills {
            writeln!(
                out,
                "{}  ({})  {}\n    {}",
                skill.name,
                skill.level,
                project.display_path(&skill.dir),
                skill.description
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
