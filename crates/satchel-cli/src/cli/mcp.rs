//! Command-line syntax of `satchel mcp`: serving, connecting, logging in.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Subcommand};
use satchel_mcp::http::HttpLimits;

use super::{ListArgs, PolicyArgs};

pub(super) const MCP_EXAMPLES: &str = "\
Examples:
  satchel mcp serve
  satchel mcp serve --http 127.0.0.1:8765
  satchel mcp servers --json
  satchel mcp connect https://mcp.example.com/mcp
  satchel mcp login docs
  satchel mcp import --dry-run";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
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
    Serve(Box<ServeArgs>),
    /// List the MCP servers of mcp.json: state, tools, last error.
    ///
    /// Starts each server (as `tools list` does), waits for it to come up
    /// or fail, prints, and shuts them down.
    #[command(after_help = SERVERS_EXAMPLES)]
    Servers(ListArgs),
    /// Connect to a streamable-HTTP MCP server as Satchel's client would,
    /// print what it offers, and optionally call a tool.
    ///
    /// OAuth included: when the server asks for authorization, Satchel
    /// discovers its authorization server, registers, and completes the
    /// login headless when the server redirects without asking anyone,
    /// else prints the login URL (to stderr), opens the browser and waits
    /// for the redirect on 127.0.0.1. Tokens are stored as `satchel mcp
    /// login` stores them. A way to check a server before adding it to
    /// mcp.json.
    #[command(after_help = CONNECT_EXAMPLES)]
    Connect(Box<ConnectArgs>),
    /// Log in to a remote MCP server that uses OAuth, and store its tokens.
    ///
    /// SERVER is a name from mcp.json or a URL. The login URL is printed to
    /// stderr and opened in the browser; the browser's redirect comes back
    /// to a listener on 127.0.0.1. Tokens are stored in
    /// $XDG_DATA_HOME/satchel/mcp-oauth/ (owner-only, 0600) and refreshed
    /// before they expire.
    #[command(after_help = LOGIN_EXAMPLES)]
    Login(LoginArgs),
    /// Forget a remote MCP server's stored tokens and registration.
    Logout(LogoutArgs),
    /// Add the MCP servers other clients were given to mcp.json.
    ///
    /// Reads Claude Code (the project's .mcp.json, ~/.claude.json),
    /// Cursor (.cursor/mcp.json, ~/.cursor/mcp.json), VS Code
    /// (.vscode/mcp.json), Claude Desktop (claude_desktop_config.json) and
    /// Codex ($CODEX_HOME/config.toml), shows what it would add, and adds
    /// it to the user's mcp.json (--to-project: the project's). Environment
    /// variables and headers stay references (`${VAR}`); a secret written
    /// out in those files is replaced by a reference, and the variable to
    /// set is named. A server mcp.json already has is left alone.
    #[command(after_help = IMPORT_EXAMPLES)]
    Import(ImportArgs),
}

const IMPORT_EXAMPLES: &str = "\
Examples:
  satchel mcp import --dry-run
  satchel mcp import --from claude-code --from cursor
  satchel mcp import --to-project";

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// Only this client (repeatable): claude-desktop, claude-code, cursor,
    /// vscode, codex. Default: all of them.
    #[arg(long = "from", value_name = "CLIENT", value_parser = parse_source)]
    pub(crate) from: Vec<satchel_mcp::client::import::Source>,
    /// Write the project's .agents/mcp.json instead of the user's.
    #[arg(long)]
    pub(crate) to_project: bool,
    /// Show what would be added; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print what was found (and added) as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_source(name: &str) -> Result<satchel_mcp::client::import::Source, String> {
    satchel_mcp::client::import::Source::parse(name).ok_or_else(|| {
        format!(
            "unknown client `{name}`: one of claude-desktop, claude-code, cursor, vscode, codex"
        )
    })
}

const CONNECT_EXAMPLES: &str = "\
Examples:
  satchel mcp connect https://mcp.example.com/mcp
  satchel mcp connect http://127.0.0.1:8765/mcp --call echo '{\"message\": \"hi\"}'
  satchel mcp connect https://mcp.example.com/mcp --header 'X-Api-Key: $KEY' --json";

const LOGIN_EXAMPLES: &str = "\
Examples:
  satchel mcp login docs
  satchel mcp login https://mcp.example.com/mcp --no-browser
  satchel mcp logout docs";

#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    /// The server's streamable-HTTP endpoint, e.g. https://mcp.example.com/mcp.
    pub(crate) url: String,
    /// Call TOOL with JSON arguments (an object) and print the result.
    #[arg(long, num_args = 2, value_names = ["TOOL", "JSON"])]
    pub(crate) call: Option<Vec<String>>,
    /// A header sent with every request, 'Name: value' (repeatable). An
    /// Authorization header replaces OAuth.
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    pub(crate) headers: Vec<String>,
    /// The protocol: 2025-11-25 (initialize, sessions), 2026-07-28
    /// (stateless requests) or auto (ask, fall back) [default: auto].
    #[arg(long, value_name = "VERSION")]
    pub(crate) protocol_version: Option<String>,
    /// Print the login URL but do not open a browser.
    #[arg(long)]
    pub(crate) no_browser: bool,
    /// Print what the server offers (and the call's result) as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Diagnostic: run as the client of the official MCP conformance
    /// suite (reads MCP_CONFORMANCE_*; tokens kept in memory only).
    #[arg(long, hide = true)]
    pub(crate) conformance: bool,
}

#[derive(Debug, Args)]
pub(crate) struct LoginArgs {
    /// A server name from mcp.json, or a URL.
    pub(crate) server: String,
    /// Print the login URL but do not open a browser.
    #[arg(long)]
    pub(crate) no_browser: bool,
    /// Scopes to ask for (space-separated), instead of what the server suggests.
    #[arg(long, value_name = "SCOPES")]
    pub(crate) scope: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct LogoutArgs {
    /// A server name from mcp.json, or a URL.
    pub(crate) server: String,
}

const SERVE_EXAMPLES: &str = "\
Examples:
  satchel mcp serve
  claude mcp add satchel -- satchel -C ~/src/project mcp serve
  satchel mcp serve --http 127.0.0.1:8765
  SATCHEL_MCP_TOKEN=$(openssl rand -hex 16) satchel mcp serve --http 0.0.0.0:8765
  satchel mcp serve --http 127.0.0.1:8765 --allow-origin https://app.example.com
  satchel mcp serve --http 127.0.0.1:8765 --max-sessions 32 --session-idle 10m";

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
    /// Diagnostic: also serve the fixture tools, resources and prompts of
    /// the official MCP conformance suite (@modelcontextprotocol/conformance),
    /// so its scenarios can run against this server. Not for real clients:
    /// the fixtures ask, log, and start tasks just to be tested. Only in a
    /// build with the `satchel-mcp/conformance-fixtures` feature (the tests').
    #[arg(long, hide_short_help = true)]
    pub(crate) conformance_fixtures: bool,
    /// HTTP: most live sessions. Over it, a new client takes the place of
    /// the idlest session (whose client gets 404 and initializes again);
    /// when every session has a request in flight, `initialize` gets 503.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = HttpLimits::DEFAULT.max_sessions,
          value_parser = parse_count)]
    pub(crate) max_sessions: usize,
    /// HTTP: close a session unused for this long (e.g. 90s, 30m, 2h) [default: 30m].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    pub(crate) session_idle: Option<Duration>,
    /// HTTP: most open connections; more wait to be accepted.
    #[arg(long, value_name = "N", requires = "http",
          default_value_t = HttpLimits::DEFAULT.max_connections,
          value_parser = parse_count)]
    pub(crate) max_connections: usize,
    /// HTTP: time a client has to send a request's headers, and then its
    /// body (e.g. 10s, 500ms); idle keep-alive connections are closed after
    /// it too [default: 10s].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    pub(crate) read_timeout: Option<Duration>,
    /// HTTP: largest request body in bytes; larger ones get 413.
    #[arg(long, value_name = "BYTES", requires = "http",
          default_value_t = HttpLimits::DEFAULT.max_body_bytes,
          value_parser = parse_count)]
    pub(crate) max_body_bytes: usize,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

impl ServeArgs {
    /// The HTTP limits these arguments ask for.
    pub(crate) fn limits(&self) -> HttpLimits {
        let defaults = HttpLimits::DEFAULT;
        HttpLimits {
            max_sessions: self.max_sessions,
            session_idle: self.session_idle.unwrap_or(defaults.session_idle),
            max_connections: self.max_connections,
            read_timeout: self.read_timeout.unwrap_or(defaults.read_timeout),
            max_body_bytes: self.max_body_bytes,
        }
    }
}

/// A count of at least 1.
fn parse_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(count) if count > 0 => Ok(count),
        _ => Err(format!("`{text}` is not a whole number of at least 1")),
    }
}

/// A positive duration: `500ms`, `30s`, `15m`, `2h`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let error = || format!("`{text}` is not a duration like 500ms, 30s, 15m or 2h");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(error)?;
    let (digits, unit) = text.split_at(split);
    let count: u64 = digits.parse().map_err(|_| error())?;
    let millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(error()),
    };
    match count.checked_mul(millis) {
        Some(total) if total > 0 => Ok(Duration::from_millis(total)),
        _ => Err(error()),
    }
}

#[cfg(test)]
mod serve_args_tests {
    use super::*;

    #[test]
    fn durations_need_a_number_and_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "30", "0s", "s", "1.5s", "-1s", "3d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_count("256"), Ok(256));
        assert!(parse_count("0").is_err());
    }
}
