//! Command-line syntax: every command, flag and example.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Satchel: tools, memory and a notebook for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "satchel", version, about, long_about = None, after_help = EXAMPLES)]
pub(crate) struct Cli {
    /// Project directory: where `.agents/` is read and relative paths start.
    #[arg(
        short = 'C',
        long,
        global = true,
        value_name = "DIR",
        default_value = "."
    )]
    pub(crate) project: PathBuf,
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG wins.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

const EXAMPLES: &str = "\
Examples:
  satchel tools list
  satchel tools call bash '{\"command\": \"ls -la\"}'
  echo '{\"command\": \"git status\"}' | satchel tools call bash --json";

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List, inspect and call tools.
    #[command(subcommand, after_help = EXAMPLES)]
    Tools(ToolsCommand),
    /// Search the web or the news with the configured backends.
    #[command(after_help = SEARCH_EXAMPLES)]
    Search(SearchArgs),
    /// Explain permission decisions.
    #[command(subcommand, after_help = POLICY_EXAMPLES)]
    Policy(PolicyCommand),
}

const POLICY_EXAMPLES: &str = "\
Examples:
  satchel policy check bash '{\"command\": \"git push --force\"}'
  satchel policy check memory '{\"action\": \"forget\", \"memory_id\": \"m1\"}' --json";

const SEARCH_EXAMPLES: &str = "\
Examples:
  SEARXNG_URL=http://localhost:8888 satchel search \"rust async runtime\"
  satchel search \"sqlite release\" --news -n 3
  satchel search \"tokio\" --json | jq '.results[].url'

Backends: SEARXNG_URL, BRAVE_API_KEY, TAVILY_API_KEY in the environment, or
\"search\": {\"backends\": [\"searxng\", \"brave\", \"tavily\", \"duckduckgo\"]} in .agents/agent.json.";

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// What to search for.
    pub(crate) query: String,
    /// Search news instead of web pages.
    #[arg(long)]
    pub(crate) news: bool,
    /// Number of results (1-10).
    #[arg(short = 'n', long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub(crate) max_results: u8,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Say whether a call would be allowed, asked about or denied, and by
    /// which rule, without running it.
    ///
    /// Rules come from `permissions: {allow, ask, deny, mode}` in
    /// .agents/agent.json and $XDG_CONFIG_HOME/satchel/agent.json. A bash
    /// command is parsed and each command inside it is judged.
    #[command(after_help = POLICY_EXAMPLES)]
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The tool's name.
    pub(crate) name: String,
    /// The input as a JSON object; read from stdin when absent or `-`.
    pub(crate) input: Option<String>,
    /// Print the decision as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List every tool with a one-line description.
    #[command(
        after_help = "Examples:\n  satchel tools list\n  satchel tools list --json | jq '.[].name'"
    )]
    List(ListArgs),
    /// Print a tool's spec (name, description, inputSchema...) as JSON.
    #[command(
        after_help = "Examples:\n  satchel tools show bash\n  satchel tools show bash | jq .inputSchema"
    )]
    Show(ShowArgs),
    /// Call a tool with JSON input and print its results.
    ///
    /// The input is validated against the tool's inputSchema first. The exit
    /// status is 1 when the call fails (is_error), 2 when the command itself
    /// is wrong (e.g. the input is not JSON).
    #[command(after_help = CALL_EXAMPLES)]
    Call(CallArgs),
    /// Re-read the tool directories, asking every external tool for its spec again.
    #[command(after_help = "Examples:\n  satchel tools refresh\n  satchel tools refresh --json")]
    Refresh(ListArgs),
    /// Write a working skeleton tool into the project's .agents/tools/.
    #[command(after_help = NEW_EXAMPLES)]
    New(NewArgs),
}

const NEW_EXAMPLES: &str = "\
Examples:
  satchel tools new weather --lang python
  satchel tools new git-summary --lang bash
  satchel tools call git_summary '{\"text\": \"hello\"}'";

#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The tool's file name (hyphens become underscores in the tool name).
    pub(crate) name: String,
    /// The language of the skeleton.
    #[arg(long, value_enum, default_value = "bash")]
    pub(crate) lang: Lang,
    /// Overwrite an existing file.
    #[arg(long)]
    pub(crate) force: bool,
}

/// Skeleton languages.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Lang {
    /// Bash with jq.
    Bash,
    /// Python 3.
    Python,
}

const CALL_EXAMPLES: &str = "\
Examples:
  satchel tools call bash '{\"command\": \"uname -a\"}'
  satchel tools call bash '{\"command\": \"make test\", \"timeout\": 300}' --json
  echo '{\"command\": \"ls\", \"working_dir\": \"src\"}' | satchel tools call bash
  satchel tools call bash '{\"command\": \"git log -3\"}' --human";

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Print the specs as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The tool's name.
    pub(crate) name: String,
}

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The tool's name.
    pub(crate) name: String,
    /// The input as a JSON object; read from stdin when absent or `-`.
    pub(crate) input: Option<String>,
    /// Print the whole ToolOutput (results, response, user_message, is_error) as JSON.
    #[arg(long, conflicts_with = "human")]
    pub(crate) json: bool,
    /// Print the call and its result as a person would read them.
    #[arg(long)]
    pub(crate) human: bool,
}
