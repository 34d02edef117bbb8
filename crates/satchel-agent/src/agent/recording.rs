//! What the loop writes to the store, in one place: log entries (what the
//! user saw), history rows (what the model got), usage rows of model calls
//! (and the calibration learned from them), and a turn's tool calls with
//! their log entries and the conversation's tally.
//!
//! The log and the history are separate records (see ARCHITECTURE.md);
//! keeping every write here makes it easy to check that each step of the
//! loop writes both, and nothing else does.

use std::sync::Arc;
use std::time::Instant;

use satchel_core::Message;
use satchel_llm::{Calibration, LlmError, Provider, Response, StopReason, TokenEstimate};
use satchel_store::{
    LogKind, NewLlmCall, NewLlmMessage, NewLogEntry, NewRecords, NewToolCall, Statement, Timestamp,
};
use satchel_tools::Registry;
use satchel_tools::Style;
use satchel_tools::format::{generic_result, generic_use};

use super::tool_calls::Finished;
use super::{Agent, AgentError};
use crate::history::{CallRecord, PROMPTED_REPLY_KEY, TurnRecord};

impl Agent {
    /// Appends a log entry of the statement.
    pub(super) async fn log(
        &self,
        conversation_id: &str,
        statement_id: &str,
        kind: LogKind,
        text: &str,
    ) -> Result<(), AgentError> {
        let mut entry = NewLogEntry::new(conversation_id, kind, text);
        entry.statement_id = Some(statement_id.to_owned());
        self.store.append_log_entry(entry).await?;
        Ok(())
    }

    /// The usage row of a turn's model call, written later with the
    /// answer's rows ([`answer_step`]); its usage is learned from now.
    pub(super) fn turn_call(
        &mut self,
        provider: &Arc<dyn Provider>,
        estimate: &TokenEstimate,
        started: Instant,
        result: &Result<Response, LlmError>,
        statement: &Statement,
        turn: u32,
    ) -> NewLlmCall {
        let mut call = llm_call_row(provider, "turn", estimate, started, result);
        call.conversation_id = Some(statement.conversation_id.clone());
        call.statement_id = Some(statement.id.clone());
        call.turn = Some(turn);
        self.learn_usage(&call);
        call
    }

    /// Records a model call, and learns from its usage how the model's own
    /// tokenizer compares with the estimate.
    pub(super) async fn record_call(&mut self, call: NewLlmCall) -> Result<(), AgentError> {
        self.learn_usage(&call);
        self.store.record_llm_call(call).await?;
        Ok(())
    }

    /// Learns from a call's usage how the model's own tokenizer compares
    /// with the estimate.
    fn learn_usage(&mut self, call: &NewLlmCall) {
        if let (Some(samples), Some(input)) = (self.usage_samples.as_mut(), call.input_tokens)
            && input > 0
            && call.estimate_tokens > 0
        {
            samples.push_front((call.estimate_tokens, input));
            samples.truncate(Calibration::WINDOW);
        }
    }

    /// Records a turn's tool calls (their rows, the end of their start
    /// records, a use and a result log entry each) and counts them in the
    /// conversation's tally and resources.
    pub(super) async fn record_calls(
        &mut self,
        registry: &Registry,
        statement_id: &str,
        turn: u32,
        finished: Vec<Finished>,
    ) -> Result<Vec<CallRecord>, AgentError> {
        let conversation_id = self.conversation_mut().id.clone();
        let rows = finished
            .iter()
            .map(|done| NewToolCall {
                source: self.source,
                caller: self.caller.clone(),
                conversation_id: Some(conversation_id.clone()),
                statement_id: Some(statement_id.to_owned()),
                turn: Some(turn),
                call: done.call.clone(),
                output: done.output.clone(),
                decision: done.decision.clone(),
                started_at: Timestamp::from_system_time(done.started_at),
                finished_at: Timestamp::from_system_time(done.started_at + done.duration),
                duration_us: u64::try_from(done.duration.as_micros()).unwrap_or(u64::MAX),
            })
            .collect();
        let starts = finished
            .iter()
            .filter_map(|done| done.start.clone())
            .collect();
        // The records and the calls' ends in one transaction.
        self.store.finish_calls(starts, rows).await?;
        let markdown = Style::Markdown;
        for done in &finished {
            let tool = registry.get(&done.call.name);
            let use_text = tool.map_or_else(
                || generic_use(&done.call.name, &done.call.input, markdown),
                |t| t.format_use(&done.call.input, markdown),
            );
            let result_text = tool.map_or_else(
                || generic_result(&done.output, markdown),
                |t| t.format_result(&done.output, markdown),
            );
            for (kind, text) in [
                (LogKind::ToolUse, use_text),
                (LogKind::ToolResult, result_text),
            ] {
                let mut entry = NewLogEntry::new(&conversation_id, kind, text);
                entry.statement_id = Some(statement_id.to_owned());
                entry.call_id = Some(done.call.id.clone());
                self.store.append_log_entry(entry).await?;
            }
        }
        let conversation = self.conversation_mut();
        for done in &finished {
            conversation
                .tally
                .add(&done.call.name, done.output.is_error);
            if !done.output.is_error {
                let spec = registry.get(&done.call.name).map(|t| t.spec());
                conversation.resources.add_call(spec, &done.call);
            }
        }
        Ok(finished
            .into_iter()
            .map(|done| CallRecord {
                call: done.call,
                output: done.output,
            })
            .collect())
    }

    /// Adds a finished turn to the transcript and records its messages.
    pub(super) async fn finish_turn(
        &mut self,
        conversation_id: &str,
        statement_id: &str,
        turn: u32,
        record: TurnRecord,
    ) -> Result<(), AgentError> {
        self.finish_turn_with(
            NewRecords::default(),
            conversation_id,
            statement_id,
            turn,
            record,
        )
        .await
    }

    /// [`Agent::finish_turn`], its messages written in one step with
    /// `step` (the answer's model call and log entries).
    pub(super) async fn finish_turn_with(
        &mut self,
        mut step: NewRecords,
        conversation_id: &str,
        statement_id: &str,
        turn: u32,
        record: TurnRecord,
    ) -> Result<(), AgentError> {
        let mut assistant = serde_json::to_value(Message::Assistant {
            content: record.assistant.clone(),
        })
        .unwrap_or_default();
        if let (Some(raw), Some(object)) = (&record.raw_reply, assistant.as_object_mut()) {
            // What was sent back is the reply as written; the parts are its reading.
            object.insert(PROMPTED_REPLY_KEY.into(), raw.clone().into());
        }
        let mut values = vec![assistant];
        values.extend(
            record
                .sent_results
                .iter()
                .map(|m| serde_json::to_value(m).unwrap_or_default()),
        );
        step.messages = value_rows(conversation_id, Some(statement_id), turn, values);
        self.store.append_records(step).await?;
        if let Some(statement) = self.conversation_mut().transcript.statements.last_mut() {
            statement.turns.push(record);
        }
        Ok(())
    }
}

/// A turn's answer as one step: its model call, then its thinking (an
/// auxiliary entry on the thinking side) and its text, each when not blank.
pub(super) fn answer_step(
    statement: &Statement,
    call: NewLlmCall,
    text: &str,
    thinking: &str,
) -> NewRecords {
    let entry = |kind, text: &str| NewLogEntry {
        statement_id: Some(statement.id.clone()),
        ..NewLogEntry::new(&statement.conversation_id, kind, text)
    };
    let mut log_entries = Vec::new();
    if !thinking.trim().is_empty() {
        log_entries.push(NewLogEntry {
            side_conversation: Some(satchel_store::THINKING_SIDE.into()),
            ..entry(LogKind::Auxiliary, thinking)
        });
    }
    if !text.trim().is_empty() {
        log_entries.push(entry(LogKind::Assistant, text));
    }
    NewRecords {
        statement: None,
        llm_calls: vec![call],
        log_entries,
        messages: Vec::new(),
    }
}

/// `messages` as history rows of a statement's turn (`statement_id` None:
/// the statement written in the same step).
pub(super) fn history_rows(
    conversation_id: &str,
    statement_id: Option<&str>,
    turn: u32,
    messages: &[Message],
) -> Vec<NewLlmMessage> {
    let values = messages
        .iter()
        .map(|m| serde_json::to_value(m).unwrap_or_default())
        .collect();
    value_rows(conversation_id, statement_id, turn, values)
}

/// Messages already turned into JSON as history rows.
fn value_rows(
    conversation_id: &str,
    statement_id: Option<&str>,
    turn: u32,
    values: Vec<serde_json::Value>,
) -> Vec<NewLlmMessage> {
    values
        .into_iter()
        .map(|content| NewLlmMessage {
            conversation_id: conversation_id.to_owned(),
            statement_id: statement_id.map(str::to_owned),
            turn,
            role: content
                .get("role")
                .and_then(|r| r.as_str())
                .unwrap_or("unknown")
                .to_owned(),
            content,
        })
        .collect()
}

/// The usage row of one request.
pub(super) fn llm_call_row(
    provider: &Arc<dyn Provider>,
    purpose: &str,
    estimate: &TokenEstimate,
    started: Instant,
    result: &Result<Response, LlmError>,
) -> NewLlmCall {
    let config = provider.config();
    let answered = match result {
        Ok(response) => Some(response),
        Err(error) => error.partial_response(),
    };
    let usage = answered.and_then(|r| r.usage);
    NewLlmCall {
        purpose: purpose.into(),
        provider: config.provider.display_name().into(),
        model: config.model.clone(),
        estimate_tokens: estimate.total,
        estimate_sections: serde_json::to_value(estimate.sections).unwrap_or_default(),
        context_window: estimate.context_window,
        input_tokens: usage.map(|u| u.input_tokens),
        output_tokens: usage.map(|u| u.output_tokens),
        cache_read_tokens: usage.map(|u| u.cache_read_tokens),
        cache_write_tokens: usage.map(|u| u.cache_write_tokens),
        stop_reason: answered.map(|r| stop_reason_name(&r.stop_reason)),
        error: result.as_ref().err().map(ToString::to_string),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ..NewLlmCall::default()
    }
}

/// A stop reason as stored and shown: its wire name (`end_turn`...).
pub(super) fn stop_reason_name(reason: &StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reason:?}"))
}
