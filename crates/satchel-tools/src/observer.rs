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
use satchel_core::{ErrorCode, ToolCall, ToolOutput};

use crate::hooks::{Before, CallHooks, HookPlace, add_note};
use crate::policy::Policy;
use crate::{Consent, Registry, ToolContext, dispatch, dispatch_with};

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
    /// Returns whether the call's record was written: only then is its
    /// start ended ([`CallObserver::on_end`]), so a call that ran but could
    /// not be recorded stays on record as unfinished.
    async fn on_call(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        started: SystemTime,
        finished: SystemTime,
    ) -> bool;

    /// Called before the call runs, to put it on record; `Err` (why it
    /// could not be recorded) means the call must not run. Returns what
    /// [`CallObserver::on_end`] gets once the call's own record is written.
    async fn on_start(
        &self,
        _source: &CallSource,
        _call: &ToolCall,
    ) -> Result<Option<String>, String> {
        Ok(None)
    }

    /// Called after [`CallObserver::on_call`] wrote the call's record, with
    /// what `on_start` returned.
    async fn on_end(&self, _start: String) {}

    /// The hooks to fire around each call, once it is on record
    /// (`PreToolUse` before it runs, `PostToolUse` after); none by default.
    fn hooks(&self) -> Option<&dyn CallHooks> {
        None
    }

    /// Called once per call that ran, with what `on_start` returned: its
    /// record written, then its start ended. By default
    /// [`CallObserver::on_call`], then [`CallObserver::on_end`] when the
    /// record was written; a store that can do both in one transaction
    /// overrides this.
    #[allow(clippy::too_many_arguments, reason = "on_call's, and the start")]
    async fn on_finish(
        &self,
        start: Option<String>,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        started: SystemTime,
        finished: SystemTime,
    ) {
        let recorded = self
            .on_call(source, call, output, decision, started, finished)
            .await;
        if recorded && let Some(start) = start {
            self.on_end(start).await;
        }
    }
}

/// The output of a call that was not run because it could not be put on
/// record first.
pub fn not_recorded(reason: &str) -> ToolOutput {
    ToolOutput::error(
        ErrorCode::NotRecorded,
        format!(
            "the call was not run: it could not be put on record first ({reason}); nothing runs \
             that is not on record. Try again once the database is writable."
        ),
    )
}

/// Puts `call` on record with `observer` (refusing it, not run, when that
/// fails), runs it through [`dispatch`] (lookup, validation, policy with
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
    let start = match observer {
        Some(observer) => match observer.on_start(source, call).await {
            Ok(start) => start,
            Err(reason) => return not_recorded(&reason),
        },
        None => None,
    };
    let hooks = observer.and_then(|observer| observer.hooks());
    let place = HookPlace {
        registry,
        policy,
        ctx,
    };
    let started_at = SystemTime::now();
    let clock = std::time::Instant::now();
    // Copied only when a hook may rewrite its input.
    let mut call = std::borrow::Cow::Borrowed(call);
    let (output, decision) = match hooks {
        None => {
            let dispatched = dispatch(registry, policy, consent, &call, ctx).await;
            let decision = dispatched.decision_label();
            (dispatched.output, decision)
        }
        Some(hooks) => match hooks.before(place, call.to_mut()).await {
            Before::Refused(output, label) => (output, Some(label)),
            Before::Go(steer, hook_label, context) => {
                let dispatched = dispatch_with(registry, policy, consent, &call, ctx, &steer).await;
                let decision = match (dispatched.decision_label(), hook_label) {
                    (Some(label), Some(hook)) => Some(format!("{label} ({hook})")),
                    (label, hook) => label.or(hook),
                };
                let mut output = dispatched.output;
                add_note(&mut output, context.into_iter().collect());
                hooks.after(place, &call, &mut output).await;
                (output, decision)
            }
        },
    };
    if let Some(observer) = observer {
        observer
            .on_finish(
                start,
                source,
                &call,
                &output,
                decision.as_deref(),
                started_at,
                started_at + clock.elapsed(),
            )
            .await;
    }
    output
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use serde_json::json;

    use std::time::Duration;

    use super::*;
    use satchel_core::ToolSpec;

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
        ) -> bool {
            self.calls.lock().unwrap().push((
                source.clone(),
                call.name.clone(),
                output.is_error,
                started <= finished,
            ));
            true
        }
    }

    /// `touch`: creates the file `path` names, so a test can see it ran.
    struct Touch(ToolSpec);

    fn touch_registry() -> Registry {
        let spec = ToolSpec {
            name: "touch".into(),
            title: None,
            description: "creates a file".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            }),
            output_schema: None,
            annotations: Default::default(),
            capabilities: Default::default(),
        };
        let mut registry = Registry::new();
        registry.register(Touch(spec)).unwrap();
        registry
    }

    #[async_trait]
    impl crate::Tool for Touch {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        async fn run(
            &self,
            input: serde_json::Value,
            _: &ToolContext,
        ) -> Result<ToolOutput, crate::ToolError> {
            let path = input["path"].as_str().unwrap_or_default();
            std::fs::write(path, "")
                .map_err(|e| crate::ToolError::new(ErrorCode::ToolCrashed, e.to_string()))?;
            Ok(ToolOutput::success(
                satchel_core::ToolResults::json(json!("done")),
                "done",
            ))
        }
    }

    /// An observer whose store cannot write.
    struct Unwritable;

    #[async_trait]
    impl CallObserver for Unwritable {
        async fn on_call(
            &self,
            _: &CallSource,
            _: &ToolCall,
            _: &ToolOutput,
            _: Option<&str>,
            _: SystemTime,
            _: SystemTime,
        ) -> bool {
            panic!("a call that was not on record ran");
        }

        async fn on_start(&self, _: &CallSource, _: &ToolCall) -> Result<Option<String>, String> {
            Err("database is locked".into())
        }
    }

    #[tokio::test]
    async fn a_call_that_cannot_be_put_on_record_does_not_run() {
        let registry = touch_registry();
        let policy = Policy::new(Vec::new(), Mode::Trust, Vec::new(), 4, Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let ctx = ToolContext::standalone(
            "c1",
            dir.path().to_path_buf(),
            Arc::new(ToolsConfig::default()),
        );
        let call = ToolCall {
            id: "c1".into(),
            name: "touch".into(),
            input: json!({"path": marker}),
        };
        let observer: Arc<dyn CallObserver> = Arc::new(Unwritable);
        let source = CallSource {
            channel: "test".into(),
            peer: None,
        };
        let output = observed_dispatch(
            &registry,
            &policy,
            &NonInteractive,
            &call,
            &ctx,
            &source,
            Some(&observer),
        )
        .await;
        assert_eq!(output.error_code, Some(ErrorCode::NotRecorded));
        assert!(output.results.to_text().contains("database is locked"));
        assert!(!marker.exists(), "the call ran");
    }

    #[tokio::test]
    async fn every_call_reaches_the_observer_failures_included() {
        let registry = touch_registry();
        let policy = Policy::new(Vec::new(), Mode::Trust, Vec::new(), 4, Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let recorder = Arc::new(Recorder::default());
        let observer: Arc<dyn CallObserver> = recorder.clone();
        let ctx =
            ToolContext::standalone("c1", PathBuf::from("/"), Arc::new(ToolsConfig::default()));
        let source = CallSource {
            channel: "test".into(),
            peer: Some("unit".into()),
        };
        for (name, input) in [
            ("touch", json!({"path": dir.path().join("a")})),
            ("nope", json!({})),
            ("touch", json!({"path": 1})),
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
                (source.clone(), "touch".into(), false, true),
                (source.clone(), "nope".into(), true, true),
                (source, "touch".into(), true, true),
            ]
        );
    }

    /// Starts its calls, then fails to write their records.
    #[derive(Default)]
    struct LosesRecords {
        ended: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl CallObserver for LosesRecords {
        async fn on_call(
            &self,
            _: &CallSource,
            _: &ToolCall,
            _: &ToolOutput,
            _: Option<&str>,
            _: SystemTime,
            _: SystemTime,
        ) -> bool {
            false
        }

        async fn on_start(&self, _: &CallSource, _: &ToolCall) -> Result<Option<String>, String> {
            Ok(Some("start-1".into()))
        }

        async fn on_end(&self, start: String) {
            self.ended.lock().unwrap().push(start);
        }
    }

    #[tokio::test]
    async fn a_call_whose_record_was_lost_keeps_its_start() {
        let registry = touch_registry();
        let policy = Policy::new(Vec::new(), Mode::Trust, Vec::new(), 4, Duration::ZERO);
        let dir = tempfile::tempdir().unwrap();
        let observer = Arc::new(LosesRecords::default());
        let dynamic: Arc<dyn CallObserver> = observer.clone();
        let ctx = ToolContext::standalone(
            "c1",
            dir.path().to_path_buf(),
            Arc::new(ToolsConfig::default()),
        );
        let call = ToolCall {
            id: "c1".into(),
            name: "touch".into(),
            input: json!({"path": dir.path().join("a")}),
        };
        let source = CallSource {
            channel: "test".into(),
            peer: None,
        };
        let output = observed_dispatch(
            &registry,
            &policy,
            &NonInteractive,
            &call,
            &ctx,
            &source,
            Some(&dynamic),
        )
        .await;
        assert!(!output.is_error, "{output:?}");
        assert!(
            observer.ended.lock().unwrap().is_empty(),
            "its start was ended"
        );
    }
}
