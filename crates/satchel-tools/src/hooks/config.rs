//! Hook definitions as Claude Code writes them:
//! `hooks` → event → `[{matcher, hooks: [{type: "command", command, timeout}]}]`,
//! read from every agent.json layer and, as they are, from a project's
//! `.claude/settings.json` and `.codex/hooks.json`. Satchel adds one key
//! to a handler: `"onFailure": "block"`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::Settings;
use crate::config::{PROJECT_CONFIG, read_config_file};
use crate::hints::{json_type, nearest};

/// Claude Code's project settings, relative to the project.
pub const CLAUDE_SETTINGS: &str = ".claude/settings.json";
/// Codex's project hooks, relative to the project.
pub const CODEX_HOOKS: &str = ".codex/hooks.json";
/// A hook's deadline when it names none (Claude Code's: 60 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest deadline a hook may ask for (10 minutes).
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// When a hook runs; the names are Claude Code's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// Before a tool call runs: may deny, ask, allow or rewrite it.
    PreToolUse,
    /// After a tool call succeeded: may add context for the model.
    PostToolUse,
    /// After a tool call failed.
    PostToolUseFailure,
    /// When the user's statement arrives: may block it or add context.
    UserPromptSubmit,
    /// When the model answered without tools: may send it back to work.
    Stop,
    /// At a conversation's first statement (new or resumed).
    SessionStart,
    /// When the front end closes the conversation.
    SessionEnd,
    /// Before old statements are summarised.
    PreCompact,
    /// When Satchel needs the user (a permission prompt).
    Notification,
}

impl HookEvent {
    /// Every event, in Claude Code's documentation order.
    pub const ALL: [HookEvent; 9] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    /// The event's name, as in the configuration and `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    /// The event named `name`.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.name() == name)
    }

    /// Whether matchers apply (elsewhere every hook of the event runs).
    pub fn takes_matcher(self) -> bool {
        !matches!(self, HookEvent::UserPromptSubmit | HookEvent::Stop)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose a hook is: the user's own run as the user; a project's run only
/// once approved, and in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookOrigin {
    /// The user's agent.json (or the command line).
    User,
    /// A project's `.agents/agent.json`, `.claude/settings.json` or
    /// `.codex/hooks.json`.
    Project,
}

impl fmt::Display for HookOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HookOrigin::User => "user",
            HookOrigin::Project => "project",
        })
    }
}

/// One hook: a command for an event, with its matcher and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// When it runs.
    pub event: HookEvent,
    /// Which tools (or sources) it applies to; empty for all.
    pub matcher: String,
    /// The shell command (`sh -c`).
    pub command: String,
    /// Its deadline; the whole process group is killed then.
    pub timeout: Duration,
    /// A failure (exit code other than 0 and 2, bad JSON, a timeout, a
    /// missing script) blocks the action instead of letting it go on.
    pub block_on_failure: bool,
    /// Whose it is.
    pub origin: HookOrigin,
    /// The file it was defined in.
    pub file: PathBuf,
}

impl Hook {
    /// What approval is remembered by: SHA-256 of the event, the matcher
    /// and the command, so a changed hook asks again.
    pub fn id(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.event.name().as_bytes());
        hasher.update([0]);
        hasher.update(self.matcher.as_bytes());
        hasher.update([0]);
        hasher.update(self.command.as_bytes());
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A short label for messages and the record: `PreToolUse[Bash] cmd`.
    pub fn label(&self) -> String {
        let command: String = self.command.chars().take(80).collect();
        let cut = if command.len() < self.command.len() {
            "…"
        } else {
            ""
        };
        if self.matcher.is_empty() {
            format!("{} `{command}{cut}`", self.event)
        } else {
            format!("{}[{}] `{command}{cut}`", self.event, self.matcher)
        }
    }
}

/// Every hook in force, in definition order (user layer first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookSet {
    hooks: Vec<Hook>,
}

impl HookSet {
    /// The hooks of every agent.json layer of `settings`: a layer at
    /// `.agents/agent.json` is the project's, any other the user's.
    /// Returns what was wrong with them.
    pub fn from_settings(settings: &Settings) -> (HookSet, Vec<String>) {
        let mut set = HookSet::default();
        let mut warnings = Vec::new();
        for layer in &settings.layers {
            let Some(value) = layer.object.get("hooks") else {
                continue;
            };
            let origin = if layer.path.ends_with(PROJECT_CONFIG) {
                HookOrigin::Project
            } else {
                HookOrigin::User
            };
            let (hooks, problems) = parse(value, &layer.path, origin);
            set.extend(hooks);
            warnings.extend(problems);
        }
        (set, warnings)
    }

    /// The hooks of a project's `.claude/settings.json` and
    /// `.codex/hooks.json`, read as they are (a missing file is none).
    pub fn from_project_files(root: &Path) -> (HookSet, Vec<String>) {
        let mut set = HookSet::default();
        let mut warnings = Vec::new();
        for relative in [CLAUDE_SETTINGS, CODEX_HOOKS] {
            let path = root.join(relative);
            let text = match read_config_file(&path) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(error) => {
                    warnings.push(format!("hooks: {error}"));
                    continue;
                }
            };
            let object = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(object)) => object,
                Ok(other) => {
                    warnings.push(format!(
                        "{}: hooks: expected a JSON object, found {}",
                        path.display(),
                        json_type(&other)
                    ));
                    continue;
                }
                Err(error) => {
                    warnings.push(format!("{}: hooks: invalid JSON: {error}", path.display()));
                    continue;
                }
            };
            // `.codex/hooks.json` may hold the events at the top level.
            let value = match object.get("hooks") {
                Some(value) => value.clone(),
                None if object.keys().any(|key| HookEvent::parse(key).is_some()) => {
                    Value::Object(object)
                }
                None => continue,
            };
            let (hooks, problems) = parse(&value, &path, HookOrigin::Project);
            set.extend(hooks);
            warnings.extend(problems);
        }
        (set, warnings)
    }

    /// Adds `hooks`, leaving out any identical to one already here (same
    /// event, matcher and command): the first, the user's when both
    /// layers have it, is kept.
    pub fn extend(&mut self, hooks: impl IntoIterator<Item = Hook>) {
        for hook in hooks {
            let known = self.hooks.iter().any(|h| {
                h.event == hook.event && h.matcher == hook.matcher && h.command == hook.command
            });
            if !known {
                self.hooks.push(hook);
            }
        }
    }

    /// This set followed by `other`'s hooks not already in it.
    pub fn joined(&self, other: &HookSet) -> HookSet {
        let mut joined = self.clone();
        joined.extend(other.hooks.iter().cloned());
        joined
    }

    /// Every hook.
    pub fn all(&self) -> &[Hook] {
        &self.hooks
    }

    /// Whether there is no hook at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Whether some hook is defined for `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|hook| hook.event == event)
    }

    /// The hooks of `event` whose matcher takes one of `subjects`.
    pub fn matching(&self, event: HookEvent, subjects: &[String]) -> Vec<&Hook> {
        self.hooks
            .iter()
            .filter(|hook| hook.event == event)
            .filter(|hook| {
                !event.takes_matcher()
                    || super::matcher::matches(
                        &hook.matcher,
                        &subjects.iter().map(String::as_str).collect::<Vec<_>>(),
                    )
            })
            .collect()
    }
}

/// Reads one `hooks` object; what cannot be read is left out with a
/// warning naming the file and the place.
fn parse(value: &Value, file: &Path, origin: HookOrigin) -> (Vec<Hook>, Vec<String>) {
    let mut hooks = Vec::new();
    let mut warnings = Vec::new();
    let at = file.display();
    let Value::Object(events) = value else {
        warnings.push(format!(
            "{at}: `hooks` must be an object of events, not {}; no hook from it runs",
            json_type(value)
        ));
        return (hooks, warnings);
    };
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            let known: Vec<&str> = HookEvent::ALL.iter().map(|e| e.name()).collect();
            let hint = nearest(name, &known)
                .map(|near| format!(" (did you mean `{near}`?)"))
                .unwrap_or_default();
            warnings.push(format!(
                "{at}: `hooks.{name}` is not an event Satchel fires{hint}; ignored"
            ));
            continue;
        };
        let Value::Array(groups) = groups else {
            warnings.push(format!(
                "{at}: `hooks.{name}` must be a list of {{matcher, hooks}} groups; ignored"
            ));
            continue;
        };
        for (index, group) in groups.iter().enumerate() {
            let place = format!("hooks.{name}[{index}]");
            let Value::Object(group) = group else {
                warnings.push(format!("{at}: `{place}` must be an object; ignored"));
                continue;
            };
            let matcher = match group.get("matcher") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(matcher)) => matcher.clone(),
                Some(other) => {
                    warnings.push(format!(
                        "{at}: `{place}.matcher` must be a string, not {}; ignored",
                        json_type(other)
                    ));
                    continue;
                }
            };
            if let Err(error) = super::matcher::check(&matcher) {
                warnings.push(format!(
                    "{at}: `{place}.matcher` `{matcher}` is not a valid pattern ({error}); ignored"
                ));
                continue;
            }
            let Some(Value::Array(handlers)) = group.get("hooks") else {
                warnings.push(format!(
                    "{at}: `{place}.hooks` must be a list of handlers; ignored"
                ));
                continue;
            };
            for (number, handler) in handlers.iter().enumerate() {
                let place = format!("{place}.hooks[{number}]");
                match handler_of(handler) {
                    Ok((command, timeout, block_on_failure)) => hooks.push(Hook {
                        event,
                        matcher: matcher.clone(),
                        command,
                        timeout,
                        block_on_failure,
                        origin,
                        file: file.to_path_buf(),
                    }),
                    Err(why) => warnings.push(format!("{at}: `{place}`: {why}; ignored")),
                }
            }
        }
    }
    (hooks, warnings)
}

/// One handler: its command, deadline and failure behaviour.
fn handler_of(handler: &Value) -> Result<(String, Duration, bool), String> {
    let Value::Object(handler) = handler else {
        return Err(format!("must be an object, not {}", json_type(handler)));
    };
    match handler.get("type").and_then(Value::as_str) {
        Some("command") | None => {}
        Some(other) => {
            return Err(format!(
                "type `{other}` is not supported (Satchel runs `command` hooks)"
            ));
        }
    }
    let command = match handler.get("command") {
        Some(Value::String(command)) if !command.trim().is_empty() => command.clone(),
        _ => return Err("`command` must be a non-empty string".into()),
    };
    let timeout = timeout_of(handler)?;
    let block_on_failure = match handler.get("onFailure") {
        None => false,
        Some(Value::String(value)) if value == "block" => true,
        Some(Value::String(value)) if value == "continue" => false,
        Some(other) => {
            return Err(format!(
                "`onFailure` must be \"block\" or \"continue\", not {other}"
            ));
        }
    };
    Ok((command, timeout, block_on_failure))
}

fn timeout_of(handler: &Map<String, Value>) -> Result<Duration, String> {
    match handler.get("timeout") {
        None | Some(Value::Null) => Ok(DEFAULT_TIMEOUT),
        Some(Value::Number(seconds)) => match seconds.as_f64() {
            Some(seconds) if seconds > 0.0 && seconds.is_finite() => {
                Ok(Duration::from_secs_f64(seconds).min(MAX_TIMEOUT))
            }
            _ => Err("`timeout` must be a positive number of seconds".into()),
        },
        Some(other) => Err(format!(
            "`timeout` must be a number of seconds, not {}",
            json_type(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn claude_code_settings_read_as_they_are() {
        let value = json!({
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]},
                {"hooks": [{"type": "command", "command": "log.sh", "onFailure": "block"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "tests.sh"}]}],
            "PreToolUse2": [],
            "PostToolUse": [{"matcher": "(", "hooks": [{"command": "x"}]}]
        });
        let (hooks, warnings) = parse(&value, Path::new("s.json"), HookOrigin::Project);
        let brief: Vec<_> = hooks
            .iter()
            .map(|h| {
                (
                    h.event,
                    h.matcher.as_str(),
                    h.command.as_str(),
                    h.timeout.as_secs(),
                    h.block_on_failure,
                )
            })
            .collect();
        assert_eq!(
            brief,
            [
                (HookEvent::PreToolUse, "Bash", "guard.sh", 5, false),
                (HookEvent::PreToolUse, "", "log.sh", 60, true),
                (HookEvent::Stop, "", "tests.sh", 60, false),
            ]
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("did you mean `PreToolUse`"),
            "{warnings:?}"
        );
    }

    #[test]
    fn identical_hooks_are_kept_once_and_a_change_changes_the_id() {
        let value = json!({"Stop": [{"hooks": [{"command": "a"}, {"command": "a"}]}]});
        let (hooks, _) = parse(&value, Path::new("s.json"), HookOrigin::User);
        let mut set = HookSet::default();
        set.extend(hooks.clone());
        assert_eq!(set.all().len(), 1);
        let mut changed = hooks[0].clone();
        changed.command.push(' ');
        assert_ne!(changed.id(), hooks[0].id());
        assert_eq!(hooks[0].id(), hooks[1].id());
    }
}
