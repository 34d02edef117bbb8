//! Summarising old statements so a turn's request fits: when the
//! (calibrated) count of the prepared request is past `contextThreshold`
//! of the window (the turn loop checks, see `turn.rs`), the oldest past
//! statements beyond `keepRecentStatements` are summarised into one
//! message by a side request, recorded as a `summary` history row and an
//! auxiliary log entry, and the loop prepares the request again.
//!
//! The log keeps the summarised statements whole; only what the model
//! gets changes. The statement in progress is never summarised.

use std::sync::Arc;

use satchel_llm::Provider;
use satchel_store::{LogKind, NewLlmMessage, NewLogEntry};
use tokio_util::sync::CancellationToken;

use super::side_requests::{SideInput, side_request};
use super::{Agent, AgentError};
use crate::history::{Compaction, SUMMARY_ROLE, StatementRecord};
use crate::side::SideKind;
use crate::{AgentEvent, EventSink, Snapshot};

impl Agent {
    /// Summarises the oldest past statements into one message; false when
    /// there was nothing to summarise or the side request failed.
    pub(super) async fn compact(
        &mut self,
        snapshot: &Snapshot,
        provider: &Arc<dyn Provider>,
        statement_id: &str,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
    ) -> Result<bool, AgentError> {
        let keep = snapshot.agent.keep_recent_statements;
        let max_chars = snapshot.agent.tool_result_max_length;
        let parent = self.otel.clone();
        let conversation = self.conversation_mut();
        let transcript = &conversation.transcript;
        // The statement in progress is never summarised.
        let past: Vec<&StatementRecord> = transcript
            .unsummarised()
            .take(transcript.unsummarised().count().saturating_sub(1))
            .collect();
        let fold = past.len().saturating_sub(keep);
        if fold == 0 {
            return Ok(false);
        }
        let mut material = String::new();
        if let Some(previous) = &transcript.compaction {
            material.push_str("Summary so far:\n");
            material.push_str(&previous.text);
            material.push_str("\n\n");
        }
        for statement in &past[..fold] {
            material.push_str("User: ");
            material.push_str(&crate::history::user_text(&statement.user));
            material.push_str("\nAssistant: ");
            material.push_str(&crate::history::past_answer(statement, max_chars));
            material.push_str("\n\n");
        }
        let through = past[fold - 1].seq;
        let first = past[0].seq;
        let conversation_id = conversation.id.clone();
        let otel = crate::telemetry::start_compaction(&parent, fold);
        let result = side_request(
            provider.clone(),
            SideKind::Summary,
            SideInput::Standalone(material),
            cancel.clone(),
            &otel,
        )
        .await;
        crate::telemetry::end_compaction(&otel, result.text.as_ref().err());
        let mut call = result.call;
        call.conversation_id = Some(conversation_id.clone());
        call.statement_id = Some(statement_id.to_owned());
        self.record_call(call).await?;
        let text = match result.text {
            Ok(text) => text,
            Err(error) => {
                sink.emit(AgentEvent::Notice(format!(
                    "the history is past {:.0}% of the context window but could not be summarised: {error}",
                    snapshot.agent.context_threshold * 100.0
                )));
                return Ok(false);
            }
        };
        self.store
            .append_messages(vec![NewLlmMessage {
                conversation_id: conversation_id.clone(),
                statement_id: Some(statement_id.to_owned()),
                turn: 0,
                role: SUMMARY_ROLE.into(),
                content: serde_json::json!({"text": text, "through_statement": through}),
            }])
            .await?;
        let mut entry = NewLogEntry::new(&conversation_id, LogKind::Auxiliary, &text);
        entry.side_conversation = Some(SideKind::Summary.as_str().into());
        entry.statement_id = Some(statement_id.to_owned());
        self.store.append_log_entry(entry).await?;
        self.conversation_mut().transcript.compaction = Some(Compaction {
            text: text.clone(),
            through,
        });
        sink.emit(AgentEvent::Side {
            kind: SideKind::Summary,
            text,
        });
        sink.emit(AgentEvent::Notice(format!(
            "statements {first}-{through} were summarised to fit the context window; the log keeps them whole"
        )));
        Ok(true)
    }
}
