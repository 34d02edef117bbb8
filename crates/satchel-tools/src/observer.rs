//! The audit hook: [`CallObserver`] and [`observed_dispatch`], through which
//! calls that must be recorded (MCP) go: every check of [`dispatch`], then
//! the observer. There is no public way to run a caller's call without the
//! policy.
//!
//! What lives here: the trait a store implements to record calls, and the
//! wrapper that hands a dispatched call to the observer. What does not:
//! storage. `Registry::call` stays unobserved so that tests and benches
//! measure the registry alone.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use satchel_core::{ToolCall, ToolOutput};

use crate::policy::Policy;
use crate::{Consent, Registry, ToolContext, dispatch};

/// Who made a call, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSource {
    /// The way the call came in, e.g. `mcp-stdio`, `mcp-http`, `cli`.
    pub channel: String,
    /// The caller as it named itself (an MCP client's `clientInfo`), when known.
    pub peer: Option<String>,
}

/// Something that records finished calls: the audit trail's entry point.
///
/// Implementations should return quickly (queue the write); the caller
/// waits for `on_call` before it answers.
#[async_trait]
pub trait CallObserver: Send + Sync + 'static {
    /// Called once per call, after the output is known, whatever it is;
    /// `decision` says how policy decided (the rule), when it was asked.
    async fn on_call(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        started: SystemTime,
        finished: SystemTime,
    );
}

/// Runs `call` through [`dispatch`] (lookup, validation, policy with
/// `consent`, limits, run) and reports it, with the policy's decision, to
/// `observer`. Non-interactive servers pass [`crate::NonInteractive`], so
/// whatever policy says to ask about is refused with a reason.
///
/// # Caveats
/// Dropping the future cancels the run (the tool's own drop behaviour
/// applies) and the observer is not told: a call that never finished has
/// no output to record.
pub async fn observed_dispatch(
    registry: &Registry,
    policy: &Policy,
    consent: &dyn Consent,
    call: &ToolCall,
    ctx: &ToolContext,
    source: &CallSource,
    observer: Option<&Arc<dyn CallObserver>>,
) -> ToolOutput {
    let dispatched = dispatch(registry, policy, consent, call, ctx).await;
    if let Some(observer) = observer {
        let decision = dispatched.decision_label();
        observer
            .on_call(
                source,
                call,
                &dispatched.output,
                decision.as_deref(),
                dispatched.started_at,
                dispatched.started_at + dispatched.duration,
            )
            .await;
    }
    dispatched.output
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use serde_json::json;

    use std::time::Duration;

    use super::*;
    use crate::policy::Mode;
    use crate::{NonInteractive, ToolsConfig};

    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<(CallSource, String, bool, bool)>>,
    }

    #[async_trait]
    impl CallObserver for Recorder {
        async fn on_call(
            &self,
            source: &CallSource,
            call: &ToolCall,
            output: &ToolOutput,
            _decision: Option<&str>,
            started: SystemTime,
            finished: SystemTime,
        ) {
            self.calls.lock().unwrap().push((
                source.clone(),
                call.name.clone(),
                output.is_error,
                started <= finished,
            ));
        }
    }

    #[tokio::test]
    async fn every_call_reaches_the_observer_failures_included() {
        let registry = crate::builtin_registry().unwrap();
        let policy = Policy::new(Vec::new(), Mode::Trust, Vec::new(), 4, Duration::ZERO);
        let recorder = Arc::new(Recorder::default());
        let observer: Arc<dyn CallObserver> = recorder.clone();
        let ctx =
            ToolContext::standalone("c1", PathBuf::from("/"), Arc::new(ToolsConfig::default()));
        let source = CallSource {
            channel: "test".into(),
            peer: Some("unit".into()),
        };
        for (name, input) in [
            ("bash", json!({"command": "true"})),
            ("nope", json!({})),
            ("bash", json!({"command": 1})),
        ] {
            let call = ToolCall {
                id: "c1".into(),
                name: name.into(),
                input,
            };
            observed_dispatch(
                &registry,
                &policy,
                &NonInteractive,
                &call,
                &ctx,
                &source,
                Some(&observer),
            )
            .await;
        }
        let calls = recorder.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                (source.clone(), "bash".into(), false, true),
                (source.clone(), "nope".into(), true, true),
                (source, "bash".into(), true, true),
            ]
        );
    }
}
