//! Policy: which tool calls may run, which need the user's consent, which
//! are refused, and how often tools may be called.
//!
//! Rules come from `permissions: {allow, ask, deny, mode}` in every
//! agent.json layer (lists add up across files; each rule remembers its
//! file); a section with an unknown key, a value of the wrong type or a
//! rule that does not parse is an error, never a rule silently dropped. A
//! call is matched against deny rules, then ask, then allow; what
//! no rule matches gets the mode's default: in `default` mode, `allow` for
//! read-only tools and `ask` for destructive or open-world ones; `readonly`
//! refuses everything that is not read-only; `trust` allows it. A bash
//! command is judged command by command, after parsing (see [`shell`]);
//! the strictest verdict wins.
//!
//! This module decides; callers act: an interactive caller asks the user
//! on [`Verdict::Ask`], a non-interactive one answers `PERMISSION_DENIED`
//! ([`Decision::refusal`]).

mod mode;
mod nesting;
pub(crate) mod permissions;
mod rate;
mod rule;
pub mod shell;

use std::fmt;
use std::time::{Duration, Instant};

use satchel_core::edit_forms::{APPLY_PATCH, TEXT_EDITOR, native_equivalents};
use satchel_core::{ErrorCode, ToolOutput, ToolSpec};
use serde_json::{Map, Value, json};
use tokio::sync::OwnedSemaphorePermit;

pub use mode::Mode;
pub use rate::{Limit, ProcessSlots, RateLimiter};
pub use rule::{Rule, RuleKind, glob_matches};

use crate::Settings;
use crate::config::layer::ConfigError;
use crate::config::locate::JsonStep;
use crate::hints::json_type;
use permissions::Permissions;

/// What a call may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Run it only if the user agrees.
    Ask,
    /// Refuse it.
    Deny,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Allow => "allow",
            Verdict::Ask => "ask",
            Verdict::Deny => "deny",
        })
    }
}

/// The verdict on one part of a call: the call itself, or one command of
/// a bash script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// What was judged: the tool name, or a command line.
    pub subject: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The rule that decided, if a rule did.
    pub rule: Option<Rule>,
    /// Why, in words.
    pub reason: String,
}

/// The verdict on a whole call, with the judgements behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The tool called.
    pub tool: String,
    /// The strictest verdict among the judgements.
    pub verdict: Verdict,
    /// Every part judged, in order.
    pub judgements: Vec<Judgement>,
    /// Why the input cannot be checked at all (a bash script nested too
    /// deeply or too long to parse safely), when that is so. The verdict is
    /// then `Deny`, and the call is refused as invalid input
    /// ([`Decision::beyond_limits_output`]) whatever the rules and mode say.
    pub beyond_limits: Option<String>,
}

impl Decision {
    /// The judgement that decided the verdict (the first of the strictest).
    pub fn deciding(&self) -> Option<&Judgement> {
        self.judgements.iter().find(|j| j.verdict == self.verdict)
    }

    /// What decided, for the audit trail: ``deny rule `bash(rm *)` `` or
    /// `mode default` when no rule matched.
    pub fn rule_label(&self) -> String {
        match self.deciding().and_then(|j| j.rule.as_ref()) {
            Some(rule) => format!("{} rule `{}`", rule.kind, rule.text),
            None => "mode default".to_owned(),
        }
    }

    /// One sentence explaining the verdict.
    pub fn explanation(&self) -> String {
        self.deciding().map_or_else(
            || format!("`{}` is allowed", self.tool),
            |j| j.reason.clone(),
        )
    }

    /// The model's answer when the input is beyond what can be checked:
    /// `INVALID_PARAMS`, saying why and what to do instead.
    pub fn beyond_limits_output(&self) -> Option<ToolOutput> {
        let why = self.beyond_limits.as_ref()?;
        let mut details = Map::new();
        details.insert("limit".into(), json!(why));
        Some(
            ToolOutput::error_with(
                ErrorCode::InvalidParams,
                format!(
                    "invalid input for tool `{}`: {why}. Split it into smaller, flatter scripts \
                     (or write it to a file first) and call again.",
                    self.tool
                ),
                details,
            )
            .with_user_message(format!("refused `{}`: {why}", self.tool)),
        )
    }

    /// The model's answer when the call is refused: denied by policy, or
    /// needing consent that nobody can give (non-interactive modes).
    pub fn refusal(&self) -> ToolOutput {
        let explanation = self.explanation();
        let message = match self.verdict {
            Verdict::Ask => format!(
                "Permission denied: {explanation}, so this call needs the user's approval, and no one can approve it \
                 in this non-interactive session. Do not retry it; do without it or tell the user what you need."
            ),
            Verdict::Deny | Verdict::Allow => format!(
                "Permission denied: {explanation}. Do not retry this call; choose another approach or ask the user."
            ),
        };
        let mut details = Map::new();
        details.insert("verdict".into(), json!(self.verdict.to_string()));
        details.insert("rule".into(), json!(self.rule_label()));
        ToolOutput::error_with(ErrorCode::PermissionDenied, message, details)
            .with_user_message(format!("refused `{}`: {explanation}", self.tool))
    }
}

/// The narrowest allow rules that cover what `decision` asked about: for
/// a bash script, each asked command exactly (`bash(npm install)`; a `*`
/// in it still matches anything there); for another tool, the tool.
pub fn narrowest_rules(decision: &Decision) -> Vec<String> {
    let mut rules: Vec<String> = decision
        .judgements
        .iter()
        .filter(|j| j.verdict == Verdict::Ask)
        .map(|j| {
            if j.subject == decision.tool {
                decision.tool.clone()
            } else {
                format!("{}({})", decision.tool, j.subject)
            }
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    rules.retain(|rule| seen.insert(rule.clone()));
    rules
}

/// The start of a script too big to quote whole in a judgement.
fn preview(script: &str) -> String {
    const KEEP: usize = 200;
    match script.char_indices().nth(KEEP) {
        Some((at, _)) => format!("{}...", &script[..at]),
        None => script.to_owned(),
    }
}

/// Rules, mode and limits, as configured.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    mode: Mode,
    rate: RateLimiter,
    slots: ProcessSlots,
    process_wait: Duration,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::new(
            Vec::new(),
            Mode::default(),
            Vec::new(),
            DEFAULT_MAX_PROCESSES,
            DEFAULT_PROCESS_WAIT,
        )
    }
}

/// Built-in tools that confine their own writes to the writable paths
/// (an external tool can never take a built-in's name).
const CONFINED_WRITERS: &[&str] = &["write", "edit", TEXT_EDITOR, APPLY_PATCH];

/// Tool processes that may run at once unless configured.
const DEFAULT_MAX_PROCESSES: usize = 8;
/// How long a call waits for a process slot before it is refused.
const DEFAULT_PROCESS_WAIT: Duration = Duration::from_secs(10);

impl Policy {
    /// A policy from its parts; rules are tried deny, then ask, then allow,
    /// each list in the order given.
    pub fn new(
        mut rules: Vec<Rule>,
        mode: Mode,
        limits: Vec<(String, Limit)>,
        max_processes: usize,
        process_wait: Duration,
    ) -> Policy {
        rules.sort_by_key(|rule| rule.kind);
        Policy {
            rules,
            mode,
            rate: RateLimiter::new(limits),
            slots: ProcessSlots::new(max_processes.max(1)),
            process_wait,
        }
    }

    /// Reads `permissions` from every layer, then `rateLimits`,
    /// `maxConcurrentProcesses` and `processWaitMs`. A layer's invalid
    /// `permissions` is an error (its deny rules cannot be known); what
    /// cannot be understood in the other keys is a warning (file, line,
    /// key) and left out.
    pub fn from_settings(settings: &Settings) -> Result<(Policy, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let mut rules = Vec::new();
        let mut mode = Mode::default();
        for layer in &settings.layers {
            let permissions = Permissions::from_layer(layer)?;
            rules.extend(permissions.rules);
            // Like every other key, the last file that sets it wins.
            mode = permissions.mode.unwrap_or(mode);
        }
        let mut limits = Vec::new();
        match settings.value.get("rateLimits") {
            None => {}
            Some(Value::Object(map)) => {
                for (tool, limit) in map {
                    let at = || settings.describe(&[JsonStep::key("rateLimits"), JsonStep::key(tool)]);
                    match limit.as_str().map(Limit::parse) {
                        Some(Ok(limit)) => limits.push((tool.clone(), limit)),
                        Some(Err(error)) => warnings.push(format!(
                            "{}: `rateLimits.{tool}`: {error}; no limit for `{tool}`",
                            at()
                        )),
                        None => warnings.push(format!(
                            "{}: `rateLimits.{tool}`: {limit} is not a limit like \"10/min\"; no limit for `{tool}`",
                            at()
                        )),
                    }
                }
            }
            Some(other) => warnings.push(format!(
                "{}: `rateLimits` must be an object like {{\"search\": \"10/min\"}}, not {}; ignored",
                settings.describe(&[JsonStep::key("rateLimits")]),
                json_type(other)
            )),
        }
        let mut count = |key: &str| match settings.value.get(key) {
            None => None,
            Some(value) => value.as_u64().or_else(|| {
                warnings.push(format!(
                    "{}: `{key}` must be a non-negative integer, not {value}; using the default",
                    settings.describe(&[JsonStep::key(key)])
                ));
                None
            }),
        };
        let max_processes = count("maxConcurrentProcesses").map_or(DEFAULT_MAX_PROCESSES, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        });
        let process_wait =
            count("processWaitMs").map_or(DEFAULT_PROCESS_WAIT, Duration::from_millis);
        Ok((
            Policy::new(rules, mode, limits, max_processes, process_wait),
            warnings,
        ))
    }

    /// The mode for unmatched calls.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The rules, in the order they are tried.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Decides on a call without running it.
    pub fn decide(&self, spec: &ToolSpec, input: &Value) -> Decision {
        let tool = spec.name.as_str();
        let mut judgements = Vec::new();
        let mut beyond_limits = None;
        let command = (tool == "bash")
            .then(|| input.get("command").and_then(Value::as_str))
            .flatten();
        let path = rule::PATH_TOOLS
            .contains(&tool)
            .then(|| {
                input
                    .get("file_path")
                    .or_else(|| input.get("path"))
                    .and_then(Value::as_str)
            })
            .flatten();
        let native = native_equivalents(tool, input);
        match command.map(shell::simple_commands) {
            // A model-native editing call is judged as the `read`, `write`
            // or `edit` of each file it touches.
            None if native.is_some() => {
                for (as_tool, path) in native.unwrap_or_default() {
                    judgements.push(self.judge_path(spec, input, as_tool, &path));
                }
                if judgements.is_empty() {
                    judgements.push(self.judge(spec, input, tool, None));
                }
            }
            None if path.is_some() => {
                judgements.push(self.judge_path(spec, input, tool, path.unwrap_or_default()))
            }
            None => judgements.push(self.judge(spec, input, tool, None)),
            Some(Ok(commands)) if commands.is_empty() => {
                judgements.push(self.judge(spec, input, tool, None))
            }
            Some(Ok(commands)) => {
                for command in commands {
                    judgements.push(self.judge(
                        spec,
                        input,
                        &command.text(),
                        Some(&command.text()),
                    ));
                }
            }
            Some(Err(shell::ShellError::Opaque(why))) => {
                judgements.push(self.judge_opaque(spec, input, command.unwrap_or_default(), why))
            }
            Some(Err(shell::ShellError::BeyondLimits(why))) => {
                judgements.push(Judgement {
                    subject: preview(command.unwrap_or_default()),
                    verdict: Verdict::Deny,
                    rule: None,
                    reason: format!("the command cannot be checked before it runs ({why})"),
                });
                beyond_limits = Some(why);
            }
        }
        if let Some(typed) = typed_into_a_process(tool, input) {
            judgements.extend(self.judge_typed(typed));
        }
        let verdict = judgements
            .iter()
            .map(|j| j.verdict)
            .max()
            .unwrap_or(Verdict::Allow);
        Decision {
            tool: tool.to_owned(),
            verdict,
            judgements,
            beyond_limits,
        }
    }

    /// Text typed into a background process may be commands for the shell
    /// it runs: each command the text holds, read as a script, meets the
    /// `bash(...)` rules that deny or ask. Allow rules do not apply (the
    /// text may be for another program), nor does text that does not read
    /// as commands: the `process` tool's own judgement stands for those.
    /// Text too long or too deeply nested to read is asked about when such
    /// rules exist, as no rule could be checked against it.
    fn judge_typed(&self, typed: &str) -> Vec<Judgement> {
        let guarding = |rule: &&Rule| {
            rule.kind != RuleKind::Allow && !rule.is_tool_wide() && rule.matches_tool("bash")
        };
        let commands = match shell::simple_commands(typed) {
            Ok(commands) => commands,
            Err(shell::ShellError::BeyondLimits(why)) => {
                return self
                    .rules
                    .iter()
                    .find(guarding)
                    .map(|rule| Judgement {
                        subject: format!("process input `{}`", preview(typed)),
                        verdict: Verdict::Ask,
                        reason: format!(
                            "the typed text cannot be checked against the {rule} ({why})"
                        ),
                        rule: Some(rule.clone()),
                    })
                    .into_iter()
                    .collect();
            }
            Err(shell::ShellError::Opaque(_)) => return Vec::new(),
        };
        commands
            .iter()
            .filter_map(|command| {
                let text = command.text();
                let rule = self
                    .rules
                    .iter()
                    .find(|rule| guarding(rule) && rule.matches_command(&text))?;
                let verdict = match rule.kind {
                    RuleKind::Deny => Verdict::Deny,
                    _ => Verdict::Ask,
                };
                let subject = format!("process input `{}`", preview(&text));
                Some(Judgement {
                    reason: format!("{subject} matches the {rule}"),
                    subject,
                    verdict,
                    rule: Some(rule.clone()),
                })
            })
            .collect()
    }

    fn judge(
        &self,
        spec: &ToolSpec,
        input: &Value,
        subject: &str,
        command: Option<&str>,
    ) -> Judgement {
        let applies = |rule: &Rule| {
            rule.matches_tool(&spec.name)
                && command.map_or(rule.is_tool_wide(), |c| rule.matches_command(c))
        };
        if let Some(rule) = self.rules.iter().find(|rule| applies(rule)) {
            let verdict = match rule.kind {
                RuleKind::Deny => Verdict::Deny,
                RuleKind::Ask => Verdict::Ask,
                RuleKind::Allow => Verdict::Allow,
            };
            return Judgement {
                subject: subject.to_owned(),
                verdict,
                reason: format!("`{subject}` matches the {rule}"),
                rule: Some(rule.clone()),
            };
        }
        let (verdict, why) = self.mode_default(spec, input);
        Judgement {
            subject: subject.to_owned(),
            verdict,
            rule: None,
            reason: format!("no rule matches `{subject}`; {why}"),
        }
    }

    /// A file tool's call on `path`: rules with a path pattern match it
    /// (see [`Rule::matches_path`]), tool-wide rules match any path.
    fn judge_path(&self, spec: &ToolSpec, input: &Value, as_tool: &str, path: &str) -> Judgement {
        let subject = format!("{as_tool}({path})");
        if let Some(rule) = self.rules.iter().find(|rule| {
            (rule.matches_tool(as_tool) || rule.matches_tool(&spec.name)) && rule.matches_path(path)
        }) {
            let verdict = match rule.kind {
                RuleKind::Deny => Verdict::Deny,
                RuleKind::Ask => Verdict::Ask,
                RuleKind::Allow => Verdict::Allow,
            };
            return Judgement {
                reason: format!("`{subject}` matches the {rule}"),
                subject,
                verdict,
                rule: Some(rule.clone()),
            };
        }
        let (verdict, why) = if as_tool == "read" && as_tool != spec.name {
            // Viewing through a native form is judged as `read` is.
            let mut reading = spec.clone();
            reading.annotations.read_only_hint = Some(true);
            self.mode_default(&reading, input)
        } else {
            self.mode_default(spec, input)
        };
        Judgement {
            reason: format!("no rule matches `{subject}`; {why}"),
            subject,
            verdict,
            rule: None,
        }
    }

    /// A bash script the parser could not see through: only a tool-wide
    /// deny can refuse it; otherwise the mode decides, as for any command
    /// (the sandbox contains what the parser cannot see).
    fn judge_opaque(&self, spec: &ToolSpec, input: &Value, script: &str, why: String) -> Judgement {
        let subject = script.to_owned();
        if let Some(rule) = self
            .rules
            .iter()
            .find(|r| r.kind == RuleKind::Deny && r.is_tool_wide() && r.matches_tool(&spec.name))
        {
            return Judgement {
                subject,
                verdict: Verdict::Deny,
                reason: format!("`bash` matches the {rule}"),
                rule: Some(rule.clone()),
            };
        }
        // A deny or ask rule for this tool might match what the script
        // hides: only the user can tell.
        if let Some(rule) = self
            .rules
            .iter()
            .find(|r| r.kind != RuleKind::Allow && !r.is_tool_wide() && r.matches_tool(&spec.name))
        {
            return Judgement {
                subject,
                verdict: Verdict::Ask,
                reason: format!(
                    "the command cannot be checked before it runs ({why}), and the {rule} might match what it hides"
                ),
                rule: None,
            };
        }
        let (verdict, how) = self.mode_default(spec, input);
        Judgement {
            subject,
            verdict,
            rule: None,
            reason: format!("the command cannot be checked before it runs ({why}); {how}"),
        }
    }

    fn mode_default(&self, spec: &ToolSpec, input: &Value) -> (Verdict, String) {
        if let Some(decided) = self.sandbox_default(spec, input) {
            return decided;
        }
        // The built-in `write` and `edit` resolve their paths against the
        // mode's writable paths themselves (as the sandbox confines a
        // command): in `workspace` they write only there, without asking.
        if self.mode == Mode::Workspace && CONFINED_WRITERS.contains(&spec.name.as_str()) {
            return (
                Verdict::Allow,
                "the tool writes only beneath the writable paths of the `workspace` mode"
                    .to_owned(),
            );
        }
        let hints = &spec.annotations;
        let read_only = hints.read_only_hint == Some(true);
        // MCP's defaults: a tool not marked read-only may destroy and may reach out.
        let destructive = !read_only && hints.destructive_hint.unwrap_or(true);
        let open_world = hints.open_world_hint.unwrap_or(true);
        // Memory and the record are Satchel's own: changing them touches
        // no file of the user's and nothing outside.
        let own_records = !open_world
            && !spec.capabilities.writes.is_empty()
            && spec
                .capabilities
                .writes
                .iter()
                .all(|resource| *resource == satchel_core::Resource::MEMORY);
        let nature = match (read_only, destructive, open_world) {
            (true, _, _) => "the tool is read-only".to_owned(),
            _ if own_records => "the tool changes only Satchel's own memory".to_owned(),
            (false, true, true) => {
                "the tool may change or destroy data and reach the outside world".to_owned()
            }
            (false, true, false) => "the tool may change or destroy data".to_owned(),
            (false, false, true) => "the tool reaches the outside world".to_owned(),
            (false, false, false) => "the tool changes only what it owns".to_owned(),
        };
        let verdict = match self.mode {
            Mode::Trust => Verdict::Allow,
            Mode::ReadOnly | Mode::Workspace if read_only || own_records => Verdict::Allow,
            Mode::ReadOnly => Verdict::Deny,
            Mode::Workspace if !(destructive || open_world) => Verdict::Allow,
            Mode::Workspace => Verdict::Ask,
        };
        (
            verdict,
            format!("{nature}, and the mode is `{}`", self.mode),
        )
    }

    /// For tools whose processes run in the sandbox (those that write
    /// `execution`): contained calls run without asking; a call that asks
    /// to leave the sandbox, or a system that cannot sandbox, asks.
    fn sandbox_default(&self, spec: &ToolSpec, input: &Value) -> Option<(Verdict, String)> {
        let runs_processes = spec
            .capabilities
            .writes
            .contains(&satchel_core::Resource::EXECUTION);
        if !runs_processes || self.mode == Mode::Trust {
            return None;
        }
        if crate::sandbox::asks_to_leave(input) {
            let why = input
                .get("justification")
                .and_then(Value::as_str)
                .map_or_else(String::new, |j| format!(" (\"{j}\")"));
            return Some((
                Verdict::Ask,
                format!(
                    "the call asks to run outside the `{}` sandbox{why}",
                    self.mode
                ),
            ));
        }
        Some(match satchel_exec::sandbox::available() {
            Ok(()) => (
                Verdict::Allow,
                format!("it runs in the `{}` sandbox", self.mode),
            ),
            Err(cause) => (Verdict::Ask, format!("it would run unsandboxed: {cause}")),
        })
    }

    /// Admits a call under the rate limits and, for tools that start
    /// processes, the process cap; the permit is held for the call's run.
    /// A refusal is the `RATE_LIMITED` output for the model.
    pub async fn admit(
        &self,
        spec: &ToolSpec,
        starts_process: bool,
        now: Instant,
    ) -> Result<Option<OwnedSemaphorePermit>, ToolOutput> {
        if let Err(wait) = self.rate.acquire(&spec.name, now) {
            let secs = wait.as_secs_f64().ceil().max(1.0);
            let mut details = Map::new();
            details.insert("retry_after_secs".into(), json!(secs));
            return Err(ToolOutput::error_with(
                ErrorCode::RateLimited,
                format!(
                    "`{}` is over its rate limit; retry in {secs} s or do without it",
                    spec.name
                ),
                details,
            ));
        }
        if !starts_process {
            return Ok(None);
        }
        match self.slots.acquire(self.process_wait).await {
            Some(permit) => Ok(Some(permit)),
            None => {
                self.rate.refund(&spec.name, now);
                let mut details = Map::new();
                details.insert("retry_after_secs".into(), json!(1));
                Err(ToolOutput::error_with(
                    ErrorCode::RateLimited,
                    format!(
                        "{} tool processes are already running (the limit); retry `{}` when one has finished",
                        self.slots.capacity(),
                        spec.name
                    ),
                    details,
                ))
            }
        }
    }
}

/// The text of a `process` `input` call: what is typed into a background
/// process's stdin or terminal.
fn typed_into_a_process<'a>(tool: &str, input: &'a Value) -> Option<&'a str> {
    if tool != "process" || input.get("action").and_then(Value::as_str) != Some("input") {
        return None;
    }
    input.get("text").and_then(Value::as_str)
}
