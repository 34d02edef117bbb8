//! Command-line syntax of `satchel tools`: listing, showing, calling,
//! prompting and writing tools.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
#[command(defer = true)]
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
    /// Print what the configured model is shown for the current tools, and its token count.
    ///
    /// `prompted` is the compact text a system prompt carries for models
    /// without native tool calling; `native` is the tool definitions exactly
    /// as the configured provider sends them (JSON). Without --format, the
    /// model's own mode: `llm.toolCalling` in agent.json, where `auto` means
    /// native for models known to call tools and prompted for the others.
    /// Tokens are counted with the model's tokenizer.
    #[command(after_help = PROMPT_EXAMPLES)]
    Prompt(PromptArgs),
}

const PROMPT_EXAMPLES: &str = "\
Examples:
  satchel tools prompt
  satchel tools prompt --format native --json | jq .tokens
  satchel tools prompt --compare --builtin";

#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    /// What to show: the compact text or the native JSON definitions.
    #[arg(long, value_enum)]
    pub(crate) format: Option<PromptFormat>,
    /// Compare the token counts of every form: compact, native (OpenAI and
    /// Anthropic) and a prose description, with both tokenizers.
    #[arg(long, conflicts_with = "format")]
    pub(crate) compare: bool,
    /// Only the built-in tools (bash, code, conversation, search), whatever else is installed.
    #[arg(long)]
    pub(crate) builtin: bool,
    /// Print JSON: the text and its figures, or the comparison's rows.
    #[arg(long)]
    pub(crate) json: bool,
}

/// How tools are presented to a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PromptFormat {
    /// Compact text for the system prompt, with the call instruction.
    Prompted,
    /// The provider's JSON tool definitions.
    Native,
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
    /// The spec with its input schema in the form this consumer is sent
    /// (the schema as written is what every call is validated against).
    #[arg(long = "for", value_name = "CONSUMER")]
    pub(crate) consumer: Option<SchemaConsumerArg>,
}

/// A consumer of tool schemas, as `tools show --for` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SchemaConsumerArg {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI and the OpenAI-compatible servers that follow it.
    Openai,
    /// Gemini's OpenAI-compatible endpoint.
    Gemini,
    /// An MCP client of `satchel mcp serve` (before protocol 2026-07-28).
    Mcp,
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
