//! Command-line syntax: every command, flag and example.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod extend;
mod install;
mod mcp;
mod tools;

pub(crate) use extend::*;
use extend::{HOOKS_EXAMPLES, SKILLS_EXAMPLES};
pub(crate) use install::*;
use mcp::MCP_EXAMPLES;
pub(crate) use mcp::*;
pub(crate) use tools::*;

/// Satchel: tools, memory and a notebook for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "satchel", version = VERSION, about, long_about = None, after_help = EXAMPLES)]
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
    /// The database: a file [default: $XDG_DATA_HOME/satchel/satchel.db],
    /// or a postgres:// URL.
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "SATCHEL_DB",
        hide_env_values = true
    )]
    pub(crate) db: Option<PathBuf>,
    /// Load the project's `.agents/` (settings, tools, MCP servers) for this
    /// run even if it is not trusted (see `satchel trust`).
    #[arg(long, global = true, env = "SATCHEL_TRUST_PROJECT", value_parser = clap::builder::FalseyValueParser::new())]
    pub(crate) trust_project: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

const EXAMPLES: &str = "\
Examples:
  satchel tools list
  satchel tools call bash '{\"command\": \"ls -la\"}'
  echo '{\"command\": \"git status\"}' | satchel tools call bash --json
  satchel audit --since 1d --failed
  satchel --db /tmp/scratch.db tools call bash '{\"command\": \"date\"}'
  satchel mcp serve";

const CHAT_EXAMPLES: &str = "\
Examples:
  satchel chat
  satchel chat --resume            # the most recent conversation
  satchel chat --resume 0193a4";

const RUN_EXAMPLES: &str = "\
Examples:
  satchel run \"list the five largest files here\"
  satchel run --json \"what does this project do?\" | jq .answer
  SATCHEL_MODEL=qwen3:8b satchel run \"summarise README.md\"";

const CONTEXT_EXAMPLES: &str = "\
Examples:
  satchel context
  satchel context 0193a4 --json";

const TOOLS_EXAMPLES: &str = "\
Examples:
  satchel tools list
  satchel tools call bash '{\"command\": \"ls -la\"}'
  echo '{\"command\": \"git status\"}' | satchel tools call bash --json";

const DB_EXAMPLES: &str = "\
Examples:
  satchel db copy --from ~/.local/share/satchel/satchel.db --to postgres://satchel@db.example/satchel
  satchel db copy --from postgres://satchel@db.example/satchel --to /tmp/backup.db";

/// `satchel db ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum DbCommand {
    /// Copy every record (conversations, log, history, tool calls, audit,
    /// code runs, model requests, memories, sessions) into a new file or an
    /// empty PostgreSQL database, then check the counts of every table.
    Copy(DbCopyArgs),
}

// `satchel db copy`.
#[derive(Debug, Args)]
pub(crate) struct DbCopyArgs {
    /// The database to read: a file or a postgres:// URL (PG* variables fill in the rest).
    #[arg(long, value_name = "FILE|URL")]
    pub(crate) from: std::ffi::OsString,
    /// The database to write: a new file or an empty database.
    #[arg(long, value_name = "FILE|URL")]
    pub(crate) to: std::ffi::OsString,
    /// Print the counts as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

// `defer` on every subcommand enum: a command's arguments are built only
// when it is the one run (or for help and completions), not on every start.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    /// Talk with the configured model in a REPL; it uses the tools.
    ///
    /// Answers stream as they are written; tool calls show as they run
    /// (Ctrl-C interrupts the turn and its processes, Ctrl-D leaves).
    /// Slash commands: /help lists them.
    #[command(after_help = CHAT_EXAMPLES)]
    Chat(ChatArgs),
    /// Run one statement without a terminal: the model works with the
    /// tools until it answers; the answer goes to stdout.
    ///
    /// Permission rules that say "ask" refuse, since nobody can answer.
    /// Exit status: 0 answered, 1 the model failed, 3 the turn budget ran
    /// out, 130 interrupted.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Show what the next request of a conversation would cost: tokens of
    /// the system prompt, tool definitions, messages and tool summaries,
    /// and the share of the context window.
    #[command(after_help = CONTEXT_EXAMPLES)]
    Context(ContextArgs),
    /// List, inspect and call tools.
    #[command(subcommand, after_help = TOOLS_EXAMPLES)]
    Tools(ToolsCommand),
    /// What the `code` tool has run: totals and recent failures.
    #[command(subcommand, after_help = CODE_EXAMPLES)]
    Code(CodeCommand),
    /// Search the web or the news with the configured backends.
    #[command(after_help = SEARCH_EXAMPLES)]
    Search(SearchArgs),
    /// Explain permission decisions.
    #[command(subcommand, after_help = POLICY_EXAMPLES)]
    Policy(PolicyCommand),
    /// Print a conversation's log as the user saw it.
    ///
    /// Tool calls are shown with each tool's own formatter. Without a
    /// CONVERSATION, the most recently updated one is shown.
    #[command(after_help = LOG_EXAMPLES)]
    Log(LogArgs),
    /// List conversations, most recently updated first.
    #[command(
        after_help = "Examples:\n  satchel conversations\n  satchel conversations --limit 5\n  satchel conversations --json | jq -r '.[0].id'"
    )]
    Conversations(ConversationsArgs),
    /// List recorded tool calls from every source (CLI, REPL, runs, MCP).
    ///
    /// The most recent calls are shown, oldest first.
    #[command(after_help = AUDIT_EXAMPLES)]
    Audit(AuditArgs),
    /// Write everything recorded about a conversation as JSON lines.
    ///
    /// One JSON object per line, each with a `type`: the conversation, then
    /// its statements, log entries, LLM messages and tool calls.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
    /// Serve Satchel's tools over MCP, and list the MCP servers Satchel uses.
    #[command(subcommand, after_help = MCP_EXAMPLES)]
    Mcp(McpCommand),
    /// Run the assistant as a Telegram bot (token from TELEGRAM_BOT_TOKEN).
    ///
    /// Each private chat is a conversation; only the users on the
    /// allow-list (agent.json's telegram.allowedUsers, or --allow-user)
    /// reach the model. Long polling by default; --webhook serves a
    /// webhook behind your HTTPS proxy. Ctrl-C stops it; messages not
    /// answered yet are answered after the next start.
    #[command(after_help = TELEGRAM_EXAMPLES)]
    Telegram(TelegramArgs),
    /// Serve the record in a browser: conversations (each tool call as its
    /// tool formats it), code executions, memory and the audit trail.
    ///
    /// Loopback by default; any other address requires a token. Every
    /// page reads a JSON endpoint under /api/ that scripts can read too.
    #[command(after_help = WEB_EXAMPLES)]
    Web(WebArgs),
    /// Store, recall, list and forget memories (the `memory` tool's store).
    #[command(subcommand, after_help = MEMORY_EXAMPLES)]
    Memory(MemoryCommand),
    /// Measure Satchel: memory recall quality and latency.
    #[command(subcommand, after_help = BENCH_EXAMPLES)]
    Bench(BenchCommand),
    /// Trust a project's `.agents/` (settings, tools, MCP servers), as it is
    /// now, so Satchel loads it; any later change asks again.
    #[command(
        after_help = "Examples:\n  satchel trust\n  satchel trust ~/src/cloned-repo\n  satchel trust --forget"
    )]
    Trust(TrustArgs),
    /// List hooks (agent.json's, `.claude/settings.json`'s,
    /// `.codex/hooks.json`'s) and approve a project's, one by one.
    #[command(subcommand, after_help = HOOKS_EXAMPLES)]
    Hooks(HooksCommand),
    /// List the skills the model can load (`SKILL.md` folders).
    #[command(subcommand, after_help = SKILLS_EXAMPLES)]
    Skills(SkillsCommand),
    /// Show the effective configuration and where each value came from,
    /// or print agent.json's JSON Schema.
    #[command(subcommand, after_help = CONFIG_EXAMPLES)]
    Config(ConfigCommand),
    /// Check everything Satchel depends on and say how to fix what is wrong:
    /// the model endpoint, the embedding model, the `code` tool's runtimes,
    /// the sandbox, the database, search, MCP servers and external tools.
    ///
    /// Exit status: 0 when nothing failed (warnings allowed), 1 otherwise.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// Move the whole record between databases (an SQLite file and a
    /// PostgreSQL server, either way).
    #[command(subcommand, after_help = DB_EXAMPLES)]
    Db(DbCommand),
    /// Print a shell's completion script for satchel (bash, zsh, fish...).
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions(CompletionsArgs),
    /// Print the manual page (roff), or write one per subcommand.
    #[command(hide = true)]
    Man(ManArgs),
}

const CONFIG_EXAMPLES: &str = "\
Examples:
  satchel config show
  satchel config show --json | jq '.values[] | select(.source != \"default\")'
  satchel config schema > agent.schema.json   # then \"$schema\": \"./agent.schema.json\" in agent.json";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  satchel doctor
  satchel doctor --json | jq '.checks[] | select(.status != \"ok\")'
  satchel doctor --fix        # fetch the embedding model and whatever else needs no question";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum ConfigCommand {
    /// Every value agent.json, the environment or a flag can set, with its
    /// source: default, user file, project file, environment or flag.
    Show(JsonArgs),
    /// Print the JSON Schema of agent.json (for editors, through `$schema`).
    Schema,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also fix what can be fixed without asking (fetch the embedding model).
    #[arg(long)]
    pub(crate) fix: bool,
    /// Skip checks that start MCP servers or call the model endpoint.
    #[arg(long)]
    pub(crate) offline: bool,
}

/// Where the global options came from, for `config show`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    /// `-C` was given.
    pub(crate) project_flag: bool,
    /// `--db` (true) or `SATCHEL_DB` (false) set the database; `None`: default.
    pub(crate) db_flag: Option<bool>,
}

#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// The project [default: the project directory, -C].
    pub(crate) path: Option<PathBuf>,
    /// Stop trusting it.
    #[arg(long)]
    pub(crate) forget: bool,
}

const MEMORY_EXAMPLES: &str = "\
Examples:
  satchel memory store long \"The user prefers tabs over spaces\" --category preference
  satchel memory recall \"indentation style\" -n 5
  satchel memory list --layer mid --json
  satchel memory forget 0196f0c2-8a3b-7c4d-9e5f-0123456789ab
  satchel memory stats

Semantic recall needs the embedding model, fetched on first use (or by `satchel doctor --fix`).";

const BENCH_EXAMPLES: &str = "\
Examples:
  satchel bench memory --dataset ../shared/data/locomo-dev.json
  satchel bench memory --dataset locomo.json --limit-conversations 2 --json
  satchel bench memory --synthetic 100000
  satchel bench history
  satchel bench history --cassette session.jsonl --recent-turns 3 --json";

/// A memory layer, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LayerArg {
    /// Permanent facts, preferences, relationships.
    Long,
    /// Goals, plans, projects (90 days).
    Mid,
    /// Recent context and summaries (14 days).
    Short,
    /// The current session.
    Session,
}

impl LayerArg {
    /// The layer's name in the tool's input.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LayerArg::Long => "long",
            LayerArg::Mid => "mid",
            LayerArg::Short => "short",
            LayerArg::Session => "session",
        }
    }
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum MemoryCommand {
    /// Store a memory; a near-duplicate of the same layer is updated instead.
    #[command(
        after_help = "Examples:\n  satchel memory store long \"Alice is the user's sister\" --category relationship\n  satchel memory store mid \"Ship v2 by March\" --category goal --certainty 0.8 --json"
    )]
    Store(MemoryStoreArgs),
    /// Recall the memories most relevant to a query (meaning and keywords).
    #[command(
        after_help = "Examples:\n  satchel memory recall \"what does the user like to eat\"\n  satchel memory recall \"deadlines\" --layer mid --since 30d -n 5 --json"
    )]
    Recall(MemoryRecallArgs),
    /// List memories, newest first.
    #[command(
        after_help = "Examples:\n  satchel memory list\n  satchel memory list --layer long --category preference --json\n  satchel memory list --all"
    )]
    List(MemoryListArgs),
    /// Delete a memory for good.
    #[command(
        after_help = "Examples:\n  satchel memory forget 0196f0c2-8a3b-7c4d-9e5f-0123456789ab\n  satchel memory forget \"$(satchel memory list --json | jq -r '.memories[0].id')\" --json"
    )]
    Forget(MemoryForgetArgs),
    /// Counts: memories per layer, expired, archived, sessions, the model.
    #[command(after_help = "Examples:\n  satchel memory stats\n  satchel memory stats --json")]
    Stats(JsonArgs),
    /// End the current memory session (archiving its memories) and start a new one.
    #[command(
        after_help = "Examples:\n  satchel memory new-session\n  satchel memory new-session \"release week\" --json"
    )]
    NewSession(NewSessionArgs),
}

#[derive(Debug, Args)]
pub(crate) struct JsonArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MemoryStoreArgs {
    /// The layer.
    #[arg(value_enum)]
    pub(crate) layer: LayerArg,
    /// What to remember.
    pub(crate) content: String,
    /// long: fact, preference, relationship; mid: goal, plan, project; or free text.
    #[arg(long)]
    pub(crate) category: Option<String>,
    /// How sure, 0 to 1 [default: 1].
    #[arg(long)]
    pub(crate) certainty: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MemoryRecallArgs {
    /// What to look for.
    pub(crate) query: String,
    /// Only this layer.
    #[arg(long, value_enum)]
    pub(crate) layer: Option<LayerArg>,
    /// Only this category.
    #[arg(long)]
    pub(crate) category: Option<String>,
    /// Only memories dated at or after: RFC 3339, YYYY-MM-DD or an age like 7d.
    #[arg(long)]
    pub(crate) since: Option<String>,
    /// Only memories dated before: RFC 3339, YYYY-MM-DD or an age like 7d.
    #[arg(long)]
    pub(crate) until: Option<String>,
    /// At most this many (1-100).
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub(crate) limit: u8,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MemoryListArgs {
    /// Only this layer.
    #[arg(long, value_enum)]
    pub(crate) layer: Option<LayerArg>,
    /// Only this category.
    #[arg(long)]
    pub(crate) category: Option<String>,
    /// At most this many.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Include expired and archived memories.
    #[arg(long)]
    pub(crate) all: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct MemoryForgetArgs {
    /// The memory's id.
    pub(crate) id: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct NewSessionArgs {
    /// A name for the new session.
    pub(crate) name: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum BenchCommand {
    /// Memory recall: evidence recall@5/10/25 on a LoCoMo-format file, ingest
    /// rate and recall latency; or latency at scale on a synthetic corpus.
    ///
    /// Every dialogue turn is stored as a memory dated by its session (one
    /// namespace per conversation, in a temporary database), then every
    /// question is recalled within its conversation. Weights come from the
    /// `memory.recall` section of agent.json, so they can be tuned without a
    /// rebuild.
    #[command(after_help = BENCH_EXAMPLES)]
    Memory(BenchMemoryArgs),
    /// What history costs: prompt tokens per turn and in all of a recorded
    /// session (a cassette) under Satchel's history, full history and
    /// observation masking, and whether each fact a later turn used was
    /// still in its prompt. Needs no model and no network.
    #[command(after_help = BENCH_EXAMPLES)]
    History(BenchHistoryArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BenchHistoryArgs {
    /// The session [default: bench/history/gemini-3-pro-pytest-7490.jsonl
    /// in the project].
    #[arg(long, value_name = "FILE")]
    pub(crate) cassette: Option<std::path::PathBuf>,
    /// Observation masking keeps this many latest results verbatim.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) mask_window: usize,
    /// Satchel's `recentToolTurns` [default: the built-in default].
    #[arg(long, value_name = "N")]
    pub(crate) recent_turns: Option<usize>,
    /// Satchel's `recentReasoningTurns` [default: the built-in default].
    #[arg(long, value_name = "N")]
    pub(crate) reasoning_turns: Option<usize>,
    /// Satchel's `toolResultMaxLength` [default: the built-in default].
    #[arg(long, value_name = "N")]
    pub(crate) result_chars: Option<usize>,
    /// Print the measurements as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Which conversations of a dataset to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SplitArg {
    /// Every conversation.
    All,
    /// Conversations 1, 3, 5... of the file.
    Odd,
    /// Conversations 2, 4, 6... of the file.
    Even,
}

#[derive(Debug, Args)]
pub(crate) struct BenchMemoryArgs {
    /// A LoCoMo-format JSON file.
    #[arg(long, value_name = "FILE", required_unless_present = "synthetic")]
    pub(crate) dataset: Option<PathBuf>,
    /// Run only the first N conversations.
    #[arg(long, value_name = "N")]
    pub(crate) limit_conversations: Option<usize>,
    /// Run only half of the conversations (to tune on one half and check on the other).
    #[arg(long, value_enum, default_value_t = SplitArg::All)]
    pub(crate) split: SplitArg,
    /// Measure recall latency over this many synthetic memories instead.
    #[arg(long, value_name = "N", conflicts_with_all = ["limit_conversations", "split"])]
    pub(crate) synthetic: Option<usize>,
    /// Queries timed in a synthetic run.
    #[arg(long, default_value_t = 200)]
    pub(crate) queries: usize,
    /// The embedding model's directory [default: the configured one].
    #[arg(long, value_name = "DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    /// Rank by keywords only (BM25), as a baseline.
    #[arg(long)]
    pub(crate) keywords_only: bool,
    /// Write each question, its evidence and what recall returned (rank,
    /// text and scores) to FILE as JSON lines, to study the misses.
    #[arg(long, value_name = "FILE", conflicts_with = "synthetic")]
    pub(crate) details: Option<PathBuf>,
    /// Keep the benchmark database here instead of a temporary file.
    #[arg(long, value_name = "PATH")]
    pub(crate) bench_db: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

const POLICY_EXAMPLES: &str = "\
Examples:
  satchel policy check bash '{\"command\": \"git push --force\"}'
  satchel policy check memory '{\"action\": \"forget\", \"memory_id\": \"m1\"}' --json";

const CODE_EXAMPLES: &str = "\
Examples:
  satchel code stats
  satchel code stats --days 30 --json
  satchel code failures -n 10";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum CodeCommand {
    /// Totals, success rate, durations and the most common error categories.
    #[command(after_help = CODE_EXAMPLES)]
    Stats(CodeStatsArgs),
    /// The most recent failed runs, with their code and error, shortened.
    #[command(after_help = CODE_EXAMPLES)]
    Failures(CodeFailuresArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CodeStatsArgs {
    /// How many days back to count.
    #[arg(long, default_value_t = 7)]
    pub(crate) days: u32,
    /// Print the totals as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CodeFailuresArgs {
    /// How many failures to show.
    #[arg(short = 'n', long, default_value_t = 5)]
    pub(crate) count: usize,
    /// Print them as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

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
#[command(defer = true)]
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

const LOG_EXAMPLES: &str = "\
Examples:
  satchel log
  satchel log 0196f0c2-8a3b
  satchel log 0196f0c2-8a3b --format md > conversation.md
  satchel log --json | jq '.entries[].kind'";

const AUDIT_EXAMPLES: &str = "\
Examples:
  satchel audit
  satchel audit --tool bash --since 2h
  satchel audit --failed --since 1d
  satchel audit --source mcp --limit 500 --json | jq '.[].input'";

const EXPORT_EXAMPLES: &str = "\
Examples:
  satchel export 0196f0c2-8a3b > conversation.jsonl
  satchel export 0196f0c2-8a3b -o conversation.jsonl
  satchel export \"$(satchel conversations --json | jq -r '.[0].id')\" | jq -c 'select(.type == \"tool_call\")'";

/// How `satchel log` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For a terminal (colour when stdout is one).
    Terminal,
    /// Markdown.
    Md,
}

#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// The conversation's id or a unique prefix of it; the latest when absent.
    pub(crate) conversation: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Terminal, conflicts_with = "json")]
    pub(crate) format: LogFormat,
    /// Print the conversation, its entries and its tool calls as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ConversationsArgs {
    /// Show at most this many.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Print them as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Only calls of this tool.
    #[arg(long, value_name = "TOOL")]
    pub(crate) tool: Option<String>,
    /// Only calls started this long ago or later: 30s, 15m, 2h, 1d, 1w, or an
    /// RFC 3339 time (2025-01-02T03:04:05Z).
    #[arg(long, value_name = "AGE", value_parser = parse_since)]
    pub(crate) since: Option<Since>,
    /// Only failed calls.
    #[arg(long)]
    pub(crate) failed: bool,
    /// Only calls from this source.
    #[arg(long, value_enum)]
    pub(crate) source: Option<SourceArg>,
    /// Show at most this many (the most recent).
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
    /// Only calls that began and never ended: put on record before they
    /// ran, whose process stopped or whose end could not be recorded.
    #[arg(long)]
    pub(crate) unfinished: bool,
    /// Print the rows as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Where a call came from, as `--source` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SourceArg {
    /// `satchel tools call`.
    Cli,
    /// The REPL.
    Repl,
    /// One-shot runs.
    Run,
    /// MCP clients.
    Mcp,
    /// The Telegram bot's users.
    Telegram,
    /// The web view's users.
    Web,
}

/// A `--since` value: an age back from now, or a fixed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Since {
    /// This long before now.
    Ago(std::time::Duration),
    /// This time.
    At(satchel_store::Timestamp),
}

/// Parses `30s`, `15m`, `2h`, `1d`, `1w` or an RFC 3339 UTC time.
pub(crate) fn parse_since(text: &str) -> Result<Since, String> {
    if let Some(at) = satchel_store::Timestamp::parse_rfc3339(text) {
        return Ok(Since::At(at));
    }
    let error = || {
        format!(
            "`{text}` is not an age like 30s, 15m, 2h, 1d, 1w or an RFC 3339 time like 2025-01-02T03:04:05Z"
        )
    };
    satchel_store::parse_age(text)
        .map(Since::Ago)
        .ok_or_else(error)
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The conversation's id or a unique prefix of it.
    pub(crate) conversation: String,
    /// Write to this file (created user-only) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

const TELEGRAM_EXAMPLES: &str = "\
Examples:
  TELEGRAM_BOT_TOKEN=123:abc satchel telegram --allow-user 42
  satchel telegram --webhook https://bot.example.org/telegram --listen 127.0.0.1:8443
  satchel telegram --api-url http://127.0.0.1:8081   # a local Bot API server";

#[derive(Debug, Args)]
pub(crate) struct TelegramArgs {
    /// A Telegram user id that may talk to the bot (repeatable; added to
    /// agent.json's telegram.allowedUsers).
    #[arg(long = "allow-user", value_name = "ID")]
    pub(crate) allow_user: Vec<u64>,
    /// The Bot API's base URL [default: telegram.apiUrl, else https://api.telegram.org].
    #[arg(long, value_name = "URL")]
    pub(crate) api_url: Option<String>,
    /// Receive updates by webhook at this public HTTPS URL instead of
    /// long polling.
    #[arg(long, value_name = "URL")]
    pub(crate) webhook: Option<String>,
    /// Where the webhook listens (your proxy forwards the URL here).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8443",
        requires = "webhook"
    )]
    pub(crate) listen: SocketAddr,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

const WEB_EXAMPLES: &str = "\
Examples:
  satchel web                       # http://127.0.0.1:8700/
  satchel web --addr 0.0.0.0:8700 --token \"$(openssl rand -hex 16)\"
  curl -s http://127.0.0.1:8700/api/conversations | jq '.conversations[0]'";

#[derive(Debug, Args)]
pub(crate) struct WebArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8700")]
    pub(crate) addr: SocketAddr,
    /// The token browsers and scripts must give; required off loopback.
    #[arg(long, env = "SATCHEL_WEB_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Another name the Host header may hold (a reverse proxy's); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_host: Vec<String>,
}

#[cfg(test)]
mod tests;

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// Continue a stored conversation: its id or a unique prefix; without
    /// a value, the most recently updated one.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub(crate) resume: Option<String>,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    #[command(flatten)]
    pub(crate) tape: TapeArgs,
}

// Recording model traffic, or replaying it with no model.
#[derive(Debug, Args, Default)]
pub(crate) struct TapeArgs {
    /// Write every model request and its streamed response to FILE, a
    /// cassette (JSON lines; credentials left out, bodies redacted).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub(crate) record: Option<std::path::PathBuf>,
    /// Answer the model requests from the cassette FILE, in order, with no
    /// model and no network; a request that differs from the recorded one
    /// fails the run, naming it and the first difference. Tools run for
    /// real unless `--replay-tools` is given.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Option<std::path::PathBuf>,
    /// With `--replay`: answer each tool call from the cassette too (the
    /// output it gave when recorded), so nothing runs; a call the cassette
    /// does not hold gets an error naming it.
    #[arg(long, requires = "replay")]
    pub(crate) replay_tools: bool,
}

// Policy for this run only, on top of every agent.json: what a script or
// another agent grants without writing a file.
#[derive(Debug, Args, Default)]
pub(crate) struct PolicyArgs {
    /// How commands are confined: `readonly` (sandbox, writes only to a
    /// private temporary directory), `workspace` (sandbox, writes in the
    /// project; the default) or `trust` (no sandbox, no asking).
    #[arg(long, value_name = "MODE", value_parser = ["readonly", "workspace", "trust"])]
    pub(crate) mode: Option<String>,
    /// Allow calls matching RULE without asking, e.g. 'bash(npm install*)'
    /// (repeatable; a matching call may also leave the sandbox).
    #[arg(long = "allow", value_name = "RULE")]
    pub(crate) allow: Vec<String>,
    /// Refuse calls matching RULE, e.g. 'bash(git push*)' (repeatable; deny
    /// always wins).
    #[arg(long = "deny", value_name = "RULE")]
    pub(crate) deny: Vec<String>,
}

impl PolicyArgs {
    /// The agent.json layer (`{"permissions": ...}`) these flags add, when
    /// they add anything.
    pub(crate) fn layer(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        if self.mode.is_none() && self.allow.is_empty() && self.deny.is_empty() {
            return None;
        }
        let mut permissions = serde_json::Map::new();
        if let Some(mode) = &self.mode {
            permissions.insert("mode".into(), mode.clone().into());
        }
        if !self.allow.is_empty() {
            permissions.insert("allow".into(), self.allow.clone().into());
        }
        if !self.deny.is_empty() {
            permissions.insert("deny".into(), self.deny.clone().into());
        }
        let mut layer = serde_json::Map::new();
        layer.insert("permissions".into(), permissions.into());
        Some(layer)
    }
}

impl Command {
    /// Whether the command lives on to serve or converse: its runtime gets
    /// a worker thread per core. Every other command does one thing and
    /// exits, on this thread alone, sparing its start the workers' threads
    /// and the cgroup files read to count the cores.
    pub(crate) fn serves(&self) -> bool {
        matches!(
            self,
            Command::Chat(_)
                | Command::Run(_)
                | Command::Mcp(_)
                | Command::Telegram(_)
                | Command::Web(_)
                | Command::Memory(_)
                | Command::Bench(_)
        )
    }

    /// The `--record`/`--replay` flags of the commands that talk to a model.
    pub(crate) fn tape_flags(&self) -> Option<&TapeArgs> {
        match self {
            Command::Chat(args) => Some(&args.tape),
            Command::Run(args) => Some(&args.tape),
            _ => None,
        }
    }

    /// The policy flags of the commands that take them.
    pub(crate) fn policy_flags(&self) -> Option<&PolicyArgs> {
        match self {
            Command::Chat(args) => Some(&args.policy),
            Command::Run(args) => Some(&args.policy),
            Command::Mcp(McpCommand::Serve(args)) => Some(&args.policy),
            Command::Telegram(args) => Some(&args.policy),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// What to ask.
    pub(crate) prompt: String,
    /// Write the whole transcript as JSON (log entries, tool calls, usage)
    /// instead of streaming the answer.
    #[arg(long)]
    pub(crate) json: bool,
    /// Continue a stored conversation (id or unique prefix) instead of
    /// starting one.
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    #[command(flatten)]
    pub(crate) tape: TapeArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ContextArgs {
    /// The conversation (id or unique prefix) [default: the latest].
    pub(crate) conversation: Option<String>,
    /// Print the breakdown as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}
