//! [`AuditObserver`]: the audit trail of calls made outside a
//! conversation (MCP clients, `tools call`, `search`, `memory`), and
//! [`Host::recorded_call`], which runs such a call through it, so nothing
//! runs that is not on record.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use satchel_core::{ToolCall, ToolOutput};
use satchel_store::{
    AuditSource, AuditStore, Clock, NewCallStart, NewToolCall, SystemClock, Timestamp,
    ToolCallStore,
};
use satchel_tools::hooks::CallHooks;
use satchel_tools::{CallObserver, CallSource, Consent, Registry, ToolContext, observed_dispatch};

use crate::call_hooks::HostCallHooks;
use crate::{Host, LazyStore};

impl Host {
    /// Runs `call` through validation, policy (with `consent`), rate
    /// limits and the tool, with its start written before it runs and its
    /// record after ([`AuditObserver`] under `source`); a call whose start
    /// cannot be written is refused with the cause (`NOT_RECORDED`).
    pub async fn recorded_call(
        &self,
        registry: &Registry,
        consent: &dyn Consent,
        call: &ToolCall,
        ctx: &ToolContext,
        source: AuditSource,
    ) -> ToolOutput {
        let observer: Arc<dyn CallObserver> = Arc::new(
            AuditObserver::new(self.store.clone(), source).with_hooks(self.call_hooks(source)),
        );
        let channel = CallSource {
            channel: source.as_str().to_owned(),
            peer: None,
        };
        observed_dispatch(
            registry,
            &self.policy,
            consent,
            call,
            ctx,
            &channel,
            Some(&observer),
        )
        .await
    }
}

/// Puts calls made outside a conversation on the audit trail (an MCP
/// client's, a person's at the shell): its start before it runs (a call
/// that cannot be put on record is refused), its record and end after.
pub struct AuditObserver {
    store: Arc<LazyStore>,
    source: AuditSource,
    hooks: Option<HostCallHooks>,
}

impl AuditObserver {
    /// Records into `store` under `source`.
    pub fn new(store: Arc<LazyStore>, source: AuditSource) -> AuditObserver {
        AuditObserver {
            store,
            source,
            hooks: None,
        }
    }

    /// Fires `hooks` around each call, once it is on record.
    pub fn with_hooks(self, hooks: HostCallHooks) -> AuditObserver {
        AuditObserver {
            hooks: Some(hooks),
            ..self
        }
    }
}

#[async_trait::async_trait]
impl CallObserver for AuditObserver {
    async fn on_call(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        started: SystemTime,
        finished: SystemTime,
    ) -> bool {
        let millis = |at: SystemTime| {
            let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            Timestamp::from_millis(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
        };
        let duration = finished.duration_since(started).unwrap_or_default();
        let record = NewToolCall {
            source: self.source,
            // The client as it named itself (an MCP client's name and version).
            caller: source.peer.clone(),
            conversation_id: None,
            statement_id: None,
            turn: None,
            call: call.clone(),
            output: output.clone(),
            decision: decision.map(str::to_owned),
            started_at: millis(started),
            finished_at: millis(finished),
            duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
        };
        let recorded = match self.store.get().await {
            Ok(store) => store
                .record_tool_call(record)
                .await
                .map_err(|error| error.to_string()),
            Err(reason) => Err(reason),
        };
        match recorded {
            Ok(_) => true,
            Err(reason) => {
                tracing::warn!(
                    "this call ran but its end was not recorded: {reason} (its start stays on record as unfinished)"
                );
                false
            }
        }
    }

    async fn on_start(
        &self,
        _source: &CallSource,
        call: &ToolCall,
    ) -> Result<Option<String>, String> {
        let store = self.store.get().await?;
        let start = NewCallStart {
            source: self.source,
            caller: None,
            call: call.clone(),
            conversation_id: None,
            started_at: SystemClock.now(),
        };
        store
            .begin_call(start)
            .await
            .map(Some)
            .map_err(|error| error.to_string())
    }

    fn hooks(&self) -> Option<&dyn CallHooks> {
        self.hooks.as_ref().map(|hooks| hooks as &dyn CallHooks)
    }

    async fn on_end(&self, start: String) {
        if let Ok(store) = self.store.get().await
            && let Err(error) = store.end_calls(vec![start]).await
        {
            tracing::warn!("this call ran but its end was not recorded: {error}");
        }
    }
}
