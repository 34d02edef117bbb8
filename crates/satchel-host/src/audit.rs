//! [`AuditObserver`]: the audit trail of calls made outside a
//! conversation (MCP clients, `tools call`, `search`, `memory`), and
//! [`Host::recorded_call`], which runs such a call through it, so nothing
//! runs that is not on record.

use std::sync::Arc;
use std::time::SystemTime;

use satchel_core::{ToolCall, ToolOutput};
use satchel_store::{
    AuditSource, AuditStore, Clock, NewCallStart, NewToolCall, SystemClock, Timestamp,
};
use satchel_tools::hooks::CallHooks;
use satchel_tools::{CallObserver, CallSource, Consent, Registry, ToolContext, observed_dispatch};

use crate::call_hooks::HostCallHooks;
use crate::{Host, LazyStore};

impl Host {
    /// Runs `call` through validation, policy (with `consent`), rate
    /// limits and the tool, with its start written before it runs and its
    /// record and end after, in one transaction ([`AuditObserver`] under `source`); a call whose start
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
    /// Whether a call's answer waits for its end's commit.
    wait_for_end: bool,
}

impl AuditObserver {
    /// Records into `store` under `source`; a call's answer waits for its
    /// end (record, audit row, start ended: one transaction) to commit.
    pub fn new(store: Arc<LazyStore>, source: AuditSource) -> AuditObserver {
        AuditObserver {
            store,
            source,
            hooks: None,
            wait_for_end: true,
        }
    }

    /// Fires `hooks` around each call, once it is on record.
    pub fn with_hooks(self, hooks: HostCallHooks) -> AuditObserver {
        AuditObserver {
            hooks: Some(hooks),
            ..self
        }
    }

    /// For a running server: on SQLite a call's end is handed to the
    /// store's writer before the call answers, and committed within 10 ms
    /// together with the other ends of that time (or at the store's
    /// close), without the answer waiting; the next call's start does not
    /// wait for it either. A process killed in between leaves that call on
    /// record as begun and never ended.
    pub fn answering_before_the_end_commits(mut self) -> AuditObserver {
        self.wait_for_end = false;
        self
    }
}

impl AuditObserver {
    /// The record of a finished call.
    fn record(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        started: SystemTime,
        finished: SystemTime,
    ) -> NewToolCall {
        let millis = Timestamp::from_system_time;
        let duration = finished.duration_since(started).unwrap_or_default();
        NewToolCall {
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
        }
    }

    /// Writes `record` and ends `start` in one transaction; whether it was
    /// written (when not, the start stays on record as unfinished).
    async fn write(&self, start: Option<String>, record: NewToolCall) -> bool {
        let written = match self.store.get().await {
            Ok(store) => store
                .finish_calls(start.into_iter().collect(), vec![record])
                .await
                .map_err(|error| error.to_string()),
            Err(reason) => Err(reason),
        };
        match written {
            Ok(_) => true,
            Err(reason) => {
                unrecorded(&reason);
                false
            }
        }
    }
}

/// Logs that a call's end could not be written.
fn unrecorded(reason: &str) {
    tracing::warn!(
        "this call ran but its end was not recorded: {reason} (its start stays on record as unfinished)"
    );
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
        let record = self.record(source, call, output, decision, started, finished);
        self.write(None, record).await
    }

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
        let record = self.record(source, call, output, decision, started, finished);
        let store = match self.store.get().await {
            Ok(store) => store,
            Err(reason) => return unrecorded(&reason),
        };
        let ended = start.into_iter().collect();
        if self.wait_for_end || !store.queues_writes() {
            let finish = store.queue_finish_calls(ended, vec![record]);
            if let Err(error) = finish.await {
                unrecorded(&error.to_string());
            }
            return;
        }
        // SQLite: the write is in the writer's queue before the answer
        // goes, and commits within 10 ms with the other ends of that time,
        // or at the store's close; the answer does not wait for it. Killed
        // before it commits, the call stays on record as unfinished.
        let finish = store.finish_calls_later(ended, vec![record]);
        tokio::spawn(async move {
            if let Err(error) = finish.await {
                unrecorded(&error.to_string());
            }
        });
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
