//! The audit hook: [`CallObserver`] and [`observed_call`], the one function
//! through which calls that must be recorded (MCP, and later the agent) go.
//!
//! What lives here: the trait a store implements to record calls, and the
//! wrapper that times a call and hands it to the observer. What does not:
//! storage. `Registry::call` stays unobserved so that tests and benches
//! measure the registry alone.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use satchel_core::{ToolCall, ToolOutput};

use crate::{Registry, ToolContext};

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
    /// Called once per call, after the output is known, whatever it is.
    async fn on_call(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        started: SystemTime,
        finished: SystemTime,
    );
}

/// Runs `call` through `registry` (lookup, validation, run; see
/// [`Registry::call`]) and reports it to `observer`, when there is one.
///
/// # Caveats
/// Dropping the future cancels the run (the tool's own drop behaviour
/// applies) and the observer is not told: a call that never finished has
/// no output to record.
pub async fn observed_call(
    registry: &Registry,
    call: &ToolCall,
    ctx: &ToolContext,
    source: &CallSource,
    observer: Option<&Arc<dyn CallObserver>>,
) -> ToolOutput {
    let started = SystemTime::now();
    let output = registry.call(call, ctx).await;
    if let Some(observer) = observer {
        observer
            .on_call(source, call, &output, started, SystemTime::now())
            .await;
    }
    output
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::ToolsConfig;

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
            observed_call(&registry, &call, &ctx, &source, Some(&observer)).await;
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
