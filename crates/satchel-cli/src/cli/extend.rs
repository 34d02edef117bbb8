//! Syntax of the commands about what extends the agent: `satchel hooks`
//! and `satchel skills`.

use clap::{Args, Subcommand};

pub(crate) const HOOKS_EXAMPLES: &str = "\
Examples:
  satchel hooks list
  satchel hooks list --json | jq '.[] | select(.approved | not)'
  satchel hooks trust            # approve every project hook as it is now
  satchel hooks trust 3f2a9c     # approve one, by the start of its id";

pub(crate) const SKILLS_EXAMPLES: &str = "\
Examples:
  satchel skills list
  satchel skills list --json | jq -r '.[].name'";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum HooksCommand {
    /// Every hook, where it comes from (user or project file), and whether
    /// it is approved to run.
    List(HooksListArgs),
    /// Approve project hooks as they are now (all, or those whose id
    /// starts with one given); a hook that changes later asks again.
    Trust(HooksTrustArgs),
}

#[derive(Debug, Args)]
pub(crate) struct HooksListArgs {
    /// Print the hooks as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct HooksTrustArgs {
    /// Ids (or their first characters, as `hooks list` shows them) of the
    /// hooks to approve [default: every project hook not yet approved].
    pub(crate) ids: Vec<String>,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum SkillsCommand {
    /// Every skill the model can load: its name, description and folder.
    List(HooksListArgs),
}
