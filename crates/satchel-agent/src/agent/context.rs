//! [`ContextReport`]: the breakdown of the request the next statement
//! would start with, for `/context` and `satchel context`. It is built
//! exactly as a turn's request is (same history, same provider, counted on
//! the same bytes) but never sent, so what it shows is what a turn would
//! cost.

use satchel_core::ToolSpec;
use satchel_llm::{Calibration, ChatRequest, Mode, TokenEstimate, count_tokens};

use super::model::calibrated_total;
use super::{Agent, AgentError, Conversation};
use crate::history::Phase;
use crate::summary::tool_call_line;

/// The breakdown of the next request, for `/context` and `satchel context`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextReport {
    /// The model it would go to.
    pub model: String,
    /// Tokens per section, counted on the request's bytes.
    pub estimate: TokenEstimate,
    /// Of the message tokens, those of past turns' `[Tool: ...]` lines.
    pub tool_summary_tokens: u64,
    /// Messages in the history.
    pub messages: usize,
    /// Statements in the conversation.
    pub statements: usize,
    /// Statements folded into the summary.
    pub summarised_through: Option<u32>,
    /// The share of the window past which old turns are summarised.
    pub threshold: f64,
    /// How the model's own tokenizer compares with the estimate, learned
    /// from reported usage; `None` when the tokenizer is embedded or no
    /// call has reported usage yet.
    pub calibration: Option<Calibration>,
}

impl ContextReport {
    /// The total as the model's own tokenizer would count it.
    pub fn calibrated_total(&self) -> u64 {
        calibrated_total(&self.estimate, self.calibration)
    }
}

impl Agent {
    /// The breakdown of the request the next statement would start with
    /// (without its user message).
    pub async fn context_report(&mut self) -> Result<ContextReport, AgentError> {
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot)?;
        self.load_usage_samples(&provider).await?;
        let calibration = self.calibration();
        let registry = self.tools.current();
        let specs: Vec<ToolSpec> = registry.specs().cloned().collect();
        let mut empty = Conversation::default();
        let conversation = match self.conversation.as_mut() {
            Some(conversation) => conversation,
            None => &mut empty,
        };
        let history = conversation.transcript.history(
            snapshot.agent.system_prompt(),
            snapshot.agent.tool_result_max_length,
            Phase::Idle,
        );
        let request = ChatRequest::new(&history, &specs);
        let prepared = provider.prepare(&request, Mode::Stream)?;
        let encoding = provider.config().encoding;
        let through = conversation
            .transcript
            .compaction
            .as_ref()
            .map_or(0, |c| c.through);
        let tool_summary_tokens = conversation
            .transcript
            .statements
            .iter()
            .filter(|s| s.seq > through)
            .flat_map(|s| &s.turns)
            .flat_map(|t| &t.calls)
            .map(|record| {
                count_tokens(
                    encoding,
                    &tool_call_line(
                        &record.call,
                        &record.output,
                        snapshot.agent.tool_result_max_length,
                    ),
                )
            })
            .sum();
        Ok(ContextReport {
            model: provider.config().model.clone(),
            estimate: prepared.estimate().clone(),
            tool_summary_tokens,
            messages: history.len(),
            statements: conversation.transcript.statements.len(),
            summarised_through: conversation
                .transcript
                .compaction
                .as_ref()
                .map(|c| c.through),
            threshold: snapshot.agent.context_threshold,
            calibration,
        })
    }
}
