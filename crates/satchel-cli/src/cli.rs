//! Command-line syntax: every command, flag and example.

use std::net::SocketAddr;
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
  echo '{\"command\": \"git status\"}' | satchel tools call bash --json
  satchel mcp serve
  satchel mcp servers";

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List, inspect and call tools.
    #[command(subcommand, after_help = EXAMPLES)]
    Tools(ToolsCommand),
    /// Serve Satchel's tools over MCP, and list the MCP servers Satchel uses.
    #[command(subcommand, after_help = MCP_EXAMPLES)]
    Mcp(McpCommand),
}

const MCP_EXAMPLES: &str = "\
Examples:
  satchel mcp serve
  satchel mcp serve --http 127.0.0.1:8765
  satchel mcp servers --json";

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Serve every tool (built-in, external, imported) to an MCP client.
    ///
    /// Over stdio by default: only protocol goes to stdout, logs go to
    /// stderr. With --http, serves streamable HTTP at http://ADDR/mcp:
    /// loopback needs no token; any other address requires one, and
    /// requests from browser origins other than localhost (or those given
    /// with --allow-origin) are refused. Tools imported from the servers in
    /// mcp.json are served too.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// List the MCP servers of mcp.json: state, tools, last error.
    ///
    /// Starts each server (as `tools list` does), waits for it to come up
    /// or fail, prints, and shuts them down.
    #[command(after_help = SERVERS_EXAMPLES)]
    Servers(ListArgs),
}

const SERVE_EXAMPLES: &str = "\
Examples:
  satchel mcp serve
  claude mcp add satchel -- satchel -C ~/src/project mcp serve
  satchel mcp serve --http 127.0.0.1:8765
  SATCHEL_MCP_TOKEN=$(openssl rand -hex 16) satchel mcp serve --http 0.0.0.0:8765
  satchel mcp serve --http 127.0.0.1:8765 --allow-origin https://app.example.com";

const SERVERS_EXAMPLES: &str = "\
Examples:
  satchel mcp servers
  satchel mcp servers --json | jq '.[] | {name, state, tools: [.tools[].name]}'";

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
    /// Bearer token HTTP clients must send; required off loopback.
    #[arg(long, env = "SATCHEL_MCP_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// A browser origin to accept besides localhost (repeatable), e.g. https://app.example.com.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origins: Vec<String>,
    /// Also serve `echo`, a diagnostic tool that returns its input (for latency checks).
    #[arg(long)]
    pub(crate) echo_tool: bool,
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
