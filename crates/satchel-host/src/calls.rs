//! Calls a person makes outside a conversation (`satchel tools call`,
//! `satchel search`, `satchel memory ...`): run through `dispatch` and put
//! on record like the agent's, so nothing runs that is not on record.

use satchel_core::{ToolCall, ToolOutput};
use satchel_store::{
    AuditSource, AuditStore, Clock, NewCallStart, NewToolCall, SystemClock, ToolCallStore,
};
use satchel_tools::{Consent, Registry, ToolContext, dispatch, not_recorded};

use crate::Host;

impl Host {
    /// Runs `call` through validation, policy (with `consent`), rate
    /// limits and the tool, with its start written before it runs and its
    /// record after; a call whose start cannot be written is refused with
    /// the cause (`NOT_RECORDED`), and one whose end cannot be written is
    /// a warning (its start stays on record as unfinished).
    pub async fn recorded_call(
        &self,
        registry: &Registry,
        consent: &dyn Consent,
        call: &ToolCall,
        ctx: &ToolContext,
        source: AuditSource,
    ) -> ToolOutput {
        let started_at = SystemClock.now();
        let start = match self.store.get().await {
            Err(reason) => Err(reason),
            Ok(store) => store
                .begin_call(NewCallStart {
                    source,
                    call: call.clone(),
                    conversation_id: None,
                    started_at,
                })
                .await
                .map_err(|error| error.to_string()),
        };
        let start = match start {
            Ok(start) => start,
            Err(reason) => return not_recorded(&reason),
        };
        let dispatched = dispatch(registry, &self.policy, consent, call, ctx).await;
        let record = NewToolCall {
            source,
            conversation_id: None,
            statement_id: None,
            turn: None,
            call: call.clone(),
            output: dispatched.output.clone(),
            decision: dispatched.decision_label(),
            started_at,
            finished_at: SystemClock.now(),
            duration_us: u64::try_from(dispatched.duration.as_micros()).unwrap_or(u64::MAX),
        };
        let recorded = match self.store.get().await {
            Ok(store) => match store.record_tool_call(record).await {
                Ok(_) => store
                    .end_calls(vec![start])
                    .await
                    .map_err(|e| e.to_string()),
                Err(error) => Err(error.to_string()),
            },
            Err(reason) => Err(reason),
        };
        if let Err(reason) = recorded {
            tracing::warn!("this call ran but its end was not recorded: {reason}");
        }
        dispatched.output
    }
}
