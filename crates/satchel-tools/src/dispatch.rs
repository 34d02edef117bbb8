//! [`dispatch`]: one tool call from any caller (CLI, MCP server, agent
//! loop) through lookup, validation, policy, consent, limits and the run.
//!
//! Every caller goes through here, so every call gets the same checks and
//! leaves the same record ([`Dispatched`]), whoever made it.

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use satchel_core::{ErrorCode, Resource, ToolCall, ToolOutput, ToolSpec};
use serde_json::{Map, Value, json};

use crate::policy::{Decision, Policy, Verdict};
use crate::sandbox::Confinement;
use crate::{Registry, ToolContext, ToolSource};

/// The user's answer to a consent request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsentAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this call and, for the rest of the conversation, calls like it.
    AllowForConversation,
    /// Run this call; these allow rules, the narrowest that cover it, were
    /// written to the project's agent.json (see [`crate::policy::narrowest_rules`]).
    AllowForProject {
        /// The rules added.
        rules: Vec<String>,
    },
    /// The user refused, optionally saying why (the model is told).
    Deny {
        /// The user's reason.
        reason: Option<String>,
    },
    /// Nobody can answer here (`satchel run`, an MCP client without
    /// elicitation): refused, and the model is told why.
    Nobody,
    /// The user interrupted instead of answering (Ctrl-C): the call is
    /// cancelled, and so is the turn.
    Cancel,
}

/// Who answers when policy says "ask".
#[async_trait]
pub trait Consent: Send + Sync {
    /// Asks about `call`, which `decision` says needs consent.
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer;
}

/// Nobody can answer (`satchel run`, MCP server): "ask" means refused.
pub struct NonInteractive;

#[async_trait]
impl Consent for NonInteractive {
    async fn ask(&self, _call: &ToolCall, _decision: &Decision) -> ConsentAnswer {
        ConsentAnswer::Nobody
    }
}

/// The user made the call themselves (`satchel tools call`): asking them
/// again would be noise, so "ask" means allowed; "deny" still refuses.
pub struct UserInitiated;

#[async_trait]
impl Consent for UserInitiated {
    async fn ask(&self, _call: &ToolCall, _decision: &Decision) -> ConsentAnswer {
        ConsentAnswer::AllowOnce
    }
}

/// Remembers "allow for this conversation" answers, keyed by what was
/// judged (the tool, or each command line), in front of another consent.
pub struct RememberingConsent<C> {
    inner: C,
    allowed: Mutex<Vec<String>>,
}

impl<C: Consent> RememberingConsent<C> {
    /// Wraps `inner`, remembering nothing yet.
    pub fn new(inner: C) -> RememberingConsent<C> {
        RememberingConsent {
            inner,
            allowed: Mutex::default(),
        }
    }

    fn keys(call: &ToolCall, decision: &Decision) -> Vec<String> {
        decision
            .judgements
            .iter()
            .filter(|j| j.verdict == Verdict::Ask)
            .map(|j| format!("{}\u{1f}{}", call.name, j.subject))
            .collect()
    }
}

#[async_trait]
impl<C: Consent> Consent for RememberingConsent<C> {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let keys = Self::keys(call, decision);
        {
            let allowed = self
                .allowed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if keys.iter().all(|key| allowed.contains(key)) {
                return ConsentAnswer::AllowForConversation;
            }
        }
        let answer = self.inner.ask(call, decision).await;
        if answer == ConsentAnswer::AllowForConversation {
            self.allowed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .extend(keys);
        }
        answer
    }
}

/// What happened to one call, for the caller and the audit trail.
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// What the model (or the CLI user) gets.
    pub output: ToolOutput,
    /// The policy's decision; `None` when the call never reached policy
    /// (unknown tool, invalid input).
    pub decision: Option<Decision>,
    /// The user's answer, when they were asked.
    pub answer: Option<ConsentAnswer>,
    /// When the call arrived.
    pub started_at: SystemTime,
    /// How long it took, checks included.
    pub duration: Duration,
}

impl Dispatched {
    /// How the call was decided, in words for the audit row: the rule, or
    /// the user's answer.
    pub fn decision_label(&self) -> Option<String> {
        let decision = self.decision.as_ref()?;
        let rule = decision.rule_label();
        Some(match &self.answer {
            None => format!("{} by {rule}", decision.verdict),
            Some(ConsentAnswer::AllowOnce) => format!("ask by {rule}; user allowed once"),
            Some(ConsentAnswer::AllowForConversation) => {
                format!("ask by {rule}; user allowed for the conversation")
            }
            Some(ConsentAnswer::AllowForProject { rules }) => {
                format!(
                    "ask by {rule}; user allowed for the project: {}",
                    rules.join(", ")
                )
            }
            Some(ConsentAnswer::Nobody) => format!("ask by {rule}; nobody could consent"),
            Some(ConsentAnswer::Cancel) => format!("ask by {rule}; user interrupted"),
            Some(ConsentAnswer::Deny { reason: None }) => format!("ask by {rule}; user refused"),
            Some(ConsentAnswer::Deny {
                reason: Some(reason),
            }) => format!("ask by {rule}; user refused: {reason}"),
        })
    }
}

/// How an allowed call's processes are confined: the mode's sandbox,
/// unless the call asked to leave it (and a rule or the user allowed
/// that), or this system cannot sandbox (and a rule or the user allowed
/// running unsandboxed).
///
/// Only tools that write `execution` (bash, code) can leave: the policy
/// judges their requests to (`Policy::sandbox_default`). Other tools that
/// start processes (external tools) stay in the sandbox whatever their
/// input says, and fail where there is none.
fn confinement_of(
    policy: &Policy,
    spec: &ToolSpec,
    input: &Value,
    verdict: Verdict,
) -> Confinement {
    let mode = policy.mode().confinement();
    let judged = spec.capabilities.writes.contains(&Resource::EXECUTION);
    let allowed_out = judged
        && verdict != Verdict::Deny
        && (crate::sandbox::asks_to_leave(input) || satchel_exec::sandbox::available().is_err());
    if allowed_out {
        Confinement::Unconfined
    } else {
        mode
    }
}

/// The policy's decision as hooks steer it (see [`Steer`]).
fn steered(mut decision: Decision, steer: &Steer) -> Decision {
    use crate::policy::Judgement;
    match decision.verdict {
        Verdict::Deny => {}
        Verdict::Allow => {
            if let Some(reason) = &steer.ask {
                decision.verdict = Verdict::Ask;
                decision.judgements.insert(
                    0,
                    Judgement {
                        subject: decision.tool.clone(),
                        verdict: Verdict::Ask,
                        rule: None,
                        reason: if reason.is_empty() {
                            "a PreToolUse hook asks for the user's consent".to_owned()
                        } else {
                            format!("a PreToolUse hook asks for the user's consent: {reason}")
                        },
                    },
                );
            }
        }
        Verdict::Ask => {
            if steer.allow && steer.ask.is_none() {
                decision.verdict = Verdict::Allow;
                for judgement in &mut decision.judgements {
                    if judgement.verdict == Verdict::Ask {
                        judgement.verdict = Verdict::Allow;
                        judgement.rule = None;
                        judgement.reason =
                            format!("{} (a PreToolUse hook allowed it)", judgement.reason);
                    }
                }
            }
        }
    }
    decision
}

/// True for tools that start processes and so count against the cap.
fn starts_process(source: &ToolSource, writes_execution: bool) -> bool {
    matches!(source, ToolSource::External { .. }) || writes_execution
}

/// What PreToolUse hooks said about a call before the policy judges it:
/// they can make the user be asked, or spare them the question, but never
/// allow what a deny rule refuses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steer {
    /// A hook asks for the user's consent, with its reason.
    pub ask: Option<String>,
    /// A hook allows the call: a question the policy would ask is skipped.
    pub allow: bool,
}

/// Runs one call through every check. Never fails: each refusal is an
/// error output the model can act on, and a panic in a check (validation,
/// policy) or in the tool is a `TOOL_CRASHED` output for this call alone.
pub async fn dispatch(
    registry: &Registry,
    policy: &Policy,
    consent: &dyn Consent,
    call: &ToolCall,
    ctx: &ToolContext,
) -> Dispatched {
    dispatch_with(registry, policy, consent, call, ctx, &Steer::default()).await
}

/// [`dispatch`] with what hooks said ([`Steer`]): a hook's "ask" turns an
/// allowed call into a question; its "allow" skips the policy's question;
/// a deny stays a deny.
pub async fn dispatch_with(
    registry: &Registry,
    policy: &Policy,
    consent: &dyn Consent,
    call: &ToolCall,
    ctx: &ToolContext,
    steer: &Steer,
) -> Dispatched {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let finish = |output: ToolOutput, decision: Option<Decision>, answer: Option<ConsentAnswer>| {
        Dispatched {
            output: registry.with_notices(output, ctx),
            decision,
            answer,
            started_at,
            duration: clock.elapsed(),
        }
    };
    let checked = std::panic::catch_unwind(AssertUnwindSafe(|| {
        registry
            .check(&call.name, &call.input)
            .map(|tool| (tool, policy.decide(tool.spec(), &call.input)))
    }));
    let (tool, decision) = match checked {
        Ok(Ok(checked)) => checked,
        Ok(Err(output)) => return finish(*output, None, None),
        Err(panic) => {
            let reason = crate::registry::panic_message(panic.as_ref());
            tracing::error!(tool = %call.name, call_id = %call.id, %reason, "checking a call panicked");
            let output = ToolOutput::error(
                ErrorCode::ToolCrashed,
                format!(
                    "checking the call to `{}` failed: {reason}. This is a bug in Satchel, not in your input; try another approach.",
                    call.name
                ),
            );
            return finish(output, None, None);
        }
    };
    let spec = tool.spec();
    let decision = steered(decision, steer);
    if let Some(output) = decision.beyond_limits_output() {
        return finish(output, Some(decision), None);
    }
    let mut answer = None;
    match decision.verdict {
        Verdict::Allow => {}
        Verdict::Deny => {
            let output = decision.refusal();
            return finish(output, Some(decision), None);
        }
        Verdict::Ask => {
            let given = consent.ask(call, &decision).await;
            let refused = match &given {
                ConsentAnswer::AllowOnce
                | ConsentAnswer::AllowForConversation
                | ConsentAnswer::AllowForProject { .. } => None,
                ConsentAnswer::Nobody => Some(decision.refusal()),
                ConsentAnswer::Cancel => Some(ToolOutput::error(
                    ErrorCode::Cancelled,
                    "The user interrupted instead of answering; this call did not run.",
                )),
                ConsentAnswer::Deny { reason } => {
                    let mut details = Map::new();
                    let message = match reason {
                        Some(reason) => {
                            details.insert("user_reason".into(), json!(reason));
                            format!(
                                "The user refused this call: {reason}. Do not retry it; adapt to their answer."
                            )
                        }
                        None => "The user refused this call. Do not retry it; do without it or ask them what they want."
                            .to_owned(),
                    };
                    Some(
                        ToolOutput::error_with(ErrorCode::PermissionDenied, message, details)
                            .with_user_message(format!("refused `{}`", call.name)),
                    )
                }
            };
            if let Some(output) = refused {
                return finish(output, Some(decision), Some(given));
            }
            answer = Some(given);
        }
    }
    let writes_execution = spec.capabilities.writes.contains(&Resource::EXECUTION);
    let _permit = match policy
        .admit(
            spec,
            starts_process(&tool.source(), writes_execution),
            Instant::now(),
        )
        .await
    {
        Ok(permit) => permit,
        Err(output) => return finish(output, Some(decision), answer),
    };
    let confinement = confinement_of(policy, spec, &call.input, decision.verdict);
    let output = if confinement == ctx.confinement {
        Registry::run_checked(tool, call, ctx).await
    } else {
        let ctx = ToolContext {
            confinement,
            ..ctx.clone()
        };
        Registry::run_checked(tool, call, &ctx).await
    };
    let output = crate::result_cap::cap_results(output, &ctx.config.runner);
    finish(output, Some(decision), answer)
}
