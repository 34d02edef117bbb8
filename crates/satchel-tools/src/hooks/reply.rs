//! What a hook answered, read as Claude Code reads it, and the answers of
//! several hooks merged.
//!
//! Exit code 2 blocks, with stderr as the reason. Exit code 0 may print
//! JSON: `decision: "block"` with a `reason`; `continue: false` with a
//! `stopReason`; `hookSpecificOutput.permissionDecision` (`allow`, `deny`,
//! `ask`) with `permissionDecisionReason`, `updatedInput` and
//! `additionalContext`. Plain stdout is context on `UserPromptSubmit` and
//! `SessionStart`. Anything else (another exit code, JSON that does not
//! parse, a timeout, a command that cannot start) is a failure: the
//! action goes on, unless the hook says `"onFailure": "block"`.

use serde_json::Value;

use super::HookEvent;

/// A PreToolUse hook's say on the call, strictest last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Skip the policy's question (deny rules still refuse).
    Allow,
    /// Ask the user through Satchel's consent.
    Ask,
    /// Refuse the call.
    Deny,
}

impl Permission {
    /// The word Claude Code uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        }
    }
}

/// One hook's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookReply {
    /// It blocks the action (exit 2, `decision: "block"`, `continue:
    /// false`, a failure of a hook that blocks on failure), with the reason.
    pub block: Option<String>,
    /// Its PreToolUse permission decision and reason.
    pub permission: Option<(Permission, String)>,
    /// The call's new input (PreToolUse).
    pub updated_input: Option<Value>,
    /// Text for the model.
    pub context: Option<String>,
    /// A message for the user (`systemMessage`).
    pub system_message: Option<String>,
    /// It asked the agent to stop (`continue: false`), with the reason.
    pub halt: Option<String>,
    /// Why the hook failed, when it did (the action went on unless `block`).
    pub failure: Option<String>,
}

impl HookReply {
    /// The decision in a few words, for the record.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(reason) = &self.block {
            parts.push(format!("block: {reason}"));
        }
        if let Some((permission, reason)) = &self.permission {
            if reason.is_empty() {
                parts.push(permission.as_str().to_owned());
            } else {
                parts.push(format!("{}: {reason}", permission.as_str()));
            }
        }
        if self.updated_input.is_some() {
            parts.push("updated input".to_owned());
        }
        if self.context.is_some() {
            parts.push("context".to_owned());
        }
        if let Some(reason) = &self.halt {
            parts.push(format!("stop: {reason}"));
        }
        if let Some(why) = &self.failure {
            parts.push(format!("failed: {why}"));
        }
        if parts.is_empty() {
            "no decision".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

/// Text cut to `max` characters, for reasons and context.
fn bounded(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}… [cut to {max} characters]")
}

/// Longest reason or context kept from one hook.
const MAX_TEXT: usize = 10_000;

/// Reads what one run of a hook for `event` answered: its exit code
/// (`None` when it did not exit by itself: a timeout, a signal, a
/// failure to start, described by `failure`), stdout and stderr.
pub fn read_reply(
    event: HookEvent,
    exit: Option<i32>,
    stdout: &str,
    stderr: &str,
    failure: Option<String>,
    block_on_failure: bool,
) -> HookReply {
    let failed = |why: String| HookReply {
        block: block_on_failure.then(|| format!("the hook failed and blocks on failure: {why}")),
        failure: Some(why),
        ..HookReply::default()
    };
    if let Some(why) = failure {
        return failed(why);
    }
    match exit {
        Some(0) => {}
        Some(2) => {
            let reason = if stderr.trim().is_empty() {
                "blocked by a hook (it gave no reason)".to_owned()
            } else {
                bounded(stderr, MAX_TEXT)
            };
            return block_is_deny(
                event,
                HookReply {
                    block: Some(reason),
                    ..HookReply::default()
                },
            );
        }
        Some(code) => {
            let detail = stderr.trim();
            return failed(if detail.is_empty() {
                format!("exit code {code}")
            } else {
                format!("exit code {code}: {}", bounded(detail, 500))
            });
        }
        None => return failed("it did not exit by itself".into()),
    }
    let text = stdout.trim();
    let plain_context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
    if !text.starts_with('{') {
        return HookReply {
            context: (plain_context && !text.is_empty()).then(|| bounded(text, MAX_TEXT)),
            ..HookReply::default()
        };
    }
    let object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        Ok(_) | Err(_) if plain_context => {
            return HookReply {
                context: Some(bounded(text, MAX_TEXT)),
                ..HookReply::default()
            };
        }
        Ok(_) => return failed("its output is JSON but not an object".into()),
        Err(error) => return failed(format!("its output is not valid JSON ({error})")),
    };
    let string =
        |value: Option<&Value>| value.and_then(Value::as_str).map(|s| bounded(s, MAX_TEXT));
    let mut reply = HookReply {
        system_message: string(object.get("systemMessage")),
        ..HookReply::default()
    };
    if object.get("continue") == Some(&Value::Bool(false)) {
        reply.halt = Some(
            string(object.get("stopReason"))
                .unwrap_or_else(|| "a hook asked the agent to stop".into()),
        );
    }
    let reason = string(object.get("reason"));
    match object.get("decision").and_then(Value::as_str) {
        Some("block") => {
            reply.block = Some(
                reason
                    .clone()
                    .unwrap_or_else(|| "blocked by a hook".to_owned()),
            );
        }
        // Claude Code's older PreToolUse words.
        Some("approve") if event == HookEvent::PreToolUse => {
            reply.permission = Some((Permission::Allow, reason.clone().unwrap_or_default()));
        }
        _ => {}
    }
    if let Some(Value::Object(specific)) = object.get("hookSpecificOutput") {
        if event == HookEvent::PreToolUse {
            let why = string(specific.get("permissionDecisionReason")).unwrap_or_default();
            let permission = match specific.get("permissionDecision").and_then(Value::as_str) {
                Some("allow") => Some(Permission::Allow),
                Some("ask") => Some(Permission::Ask),
                Some("deny") => Some(Permission::Deny),
                _ => None,
            };
            if let Some(permission) = permission {
                reply.permission = Some((permission, why));
            }
            if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
                reply.updated_input = Some(input.clone());
            }
        }
        reply.context = string(specific.get("additionalContext"));
    }
    block_is_deny(event, reply)
}

/// A PreToolUse block is a deny (the strictest permission decision).
fn block_is_deny(event: HookEvent, mut reply: HookReply) -> HookReply {
    if event == HookEvent::PreToolUse
        && let Some(reason) = reply.block.take()
    {
        reply.permission = Some((Permission::Deny, reason));
    }
    reply
}

/// Several hooks' answers as one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    /// Every block's reason; the action is blocked when there is one.
    pub blocks: Vec<String>,
    /// The strictest permission decision (deny > ask > allow) and the
    /// reasons of the hooks that gave it.
    pub permission: Option<(Permission, Vec<String>)>,
    /// The last `updatedInput` given; a hook that says nothing does not
    /// erase another's.
    pub updated_input: Option<Value>,
    /// Every context, in order.
    pub context: Vec<String>,
    /// Messages for the user.
    pub system_messages: Vec<String>,
    /// Reasons hooks gave for stopping the agent.
    pub halts: Vec<String>,
}

impl Merged {
    /// The context as one text for the model, if any.
    pub fn context_text(&self) -> Option<String> {
        (!self.context.is_empty()).then(|| self.context.join("\n"))
    }
}

/// Merges answers given in definition order.
pub fn merge<'a>(replies: impl IntoIterator<Item = &'a HookReply>) -> Merged {
    let mut merged = Merged::default();
    for reply in replies {
        if let Some(reason) = &reply.block {
            merged.blocks.push(reason.clone());
        }
        if let Some((permission, reason)) = &reply.permission {
            match &mut merged.permission {
                Some((strictest, reasons)) if *strictest == *permission => {
                    if !reason.is_empty() {
                        reasons.push(reason.clone());
                    }
                }
                Some((strictest, _)) if *strictest > *permission => {}
                slot => {
                    *slot = Some((
                        *permission,
                        (!reason.is_empty())
                            .then(|| reason.clone())
                            .into_iter()
                            .collect(),
                    ))
                }
            }
        }
        if let Some(input) = &reply.updated_input {
            merged.updated_input = Some(input.clone());
        }
        merged.context.extend(reply.context.clone());
        merged.system_messages.extend(reply.system_message.clone());
        merged.halts.extend(reply.halt.clone());
    }
    merged
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn exit_two_blocks_with_stderr_and_other_codes_only_fail() {
        let blocked = read_reply(
            HookEvent::PreToolUse,
            Some(2),
            "",
            "no rm -rf\n",
            None,
            false,
        );
        assert_eq!(
            blocked.permission,
            Some((Permission::Deny, "no rm -rf".into()))
        );
        let failed = read_reply(HookEvent::PreToolUse, Some(1), "", "oops", None, false);
        assert_eq!(failed.block, None);
        assert_eq!(failed.failure.as_deref(), Some("exit code 1: oops"));
        let strict = read_reply(HookEvent::PostToolUse, Some(1), "", "", None, true);
        assert!(strict.block.is_some());
        let bad = read_reply(HookEvent::PreToolUse, Some(0), "{nope", "", None, false);
        assert!(bad.failure.unwrap().contains("not valid JSON"));
    }

    #[test]
    fn json_decisions_merge_deny_over_ask_over_allow_and_keep_updated_input() {
        let rewrite = read_reply(
            HookEvent::PreToolUse,
            Some(0),
            &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "allow", "updatedInput": {"command": "ls -a"}}})
            .to_string(),
            "",
            None,
            false,
        );
        let silent = read_reply(HookEvent::PreToolUse, Some(0), "", "", None, false);
        let merged = merge([&rewrite, &silent]);
        assert_eq!(merged.updated_input, Some(json!({"command": "ls -a"})));
        assert_eq!(merged.permission, Some((Permission::Allow, vec![])));
        let ask = read_reply(
            HookEvent::PreToolUse,
            Some(0),
            r#"{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}"#,
            "",
            None,
            false,
        );
        let deny = read_reply(
            HookEvent::PreToolUse,
            Some(0),
            r#"{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}"#,
            "",
            None,
            false,
        );
        assert_eq!(
            merge([&rewrite, &ask, &deny, &silent]).permission,
            Some((Permission::Deny, vec!["no".to_owned()]))
        );
        assert_eq!(
            merge([&ask, &rewrite]).permission,
            Some((Permission::Ask, vec!["sure?".to_owned()]))
        );
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_code_takes_it() {
        let prompt = read_reply(
            HookEvent::UserPromptSubmit,
            Some(0),
            "today is Friday\n",
            "",
            None,
            false,
        );
        assert_eq!(prompt.context.as_deref(), Some("today is Friday"));
        let post = read_reply(
            HookEvent::PostToolUse,
            Some(0),
            "formatted\n",
            "",
            None,
            false,
        );
        assert_eq!(post.context, None);
        let stop = read_reply(
            HookEvent::Stop,
            Some(0),
            r#"{"decision": "block", "reason": "tests fail"}"#,
            "",
            None,
            false,
        );
        assert_eq!(stop.block.as_deref(), Some("tests fail"));
    }
}
