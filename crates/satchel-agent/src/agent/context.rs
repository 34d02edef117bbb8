//! [`ContextReport`]: the breakdown of the request the next statement
//! would start with, for `/context` and `satchel context`. It is built
//! exactly as a turn's request is (same history, same provider, counted on
//! the same bytes) but never sent, so what it shows is what a turn would
//! cost.

use std::fmt::Write as _;

use satchel_llm::{
    Calibration, ChatRequest, LimitSource, Mode, Section, TokenEstimate, count_tokens, model_info,
};

use super::model::calibrated_total;
use super::{Agent, AgentError, Conversation};
use crate::history::Phase;
use crate::summary::tool_call_line;

/// The breakdown of the next request, for `/context` and `satchel context`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextReport {
    /// The model it would go to.
    pub model: String,
    /// Where the window's figure came from (configured, the server, the
    /// table, a guess).
    pub window_source: LimitSource,
    /// The largest answer asked for.
    pub max_output_tokens: Option<u32>,
    /// Where that limit came from.
    pub output_source: LimitSource,
    /// Tokens per section, counted on the request's bytes.
    pub estimate: TokenEstimate,
    /// Of the message tokens, those of past turns' `[Tool: ...]` lines.
    pub tool_summary_tokens: u64,
    /// Of the system prompt's tokens, those of the project instructions
    /// (`AGENTS.md`, `CLAUDE.md`).
    pub instruction_tokens: u64,
    /// The instruction files read, outermost first.
    pub instruction_files: Vec<std::path::PathBuf>,
    /// The instructions were cut at their cap.
    pub instructions_truncated: bool,
    /// Of the system prompt's tokens, those of the skills' listing.
    pub skill_tokens: u64,
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

    /// The breakdown as a small table.
    pub fn render(&self) -> String {
        let report = self;
        let estimate = &report.estimate;
        let window = estimate.context_window.max(1);
        let mut text = format!(
            "Next request to {}: {} tokens of a {}-token window ({:.1}%); old turns are summarised past {:.0}%.\n",
            report.model,
            estimate.total,
            estimate.context_window,
            estimate.total as f64 * 100.0 / window as f64,
            report.threshold * 100.0
        );
        let _ = writeln!(
            text,
            "  Window: {}. Answers: up to {} tokens ({}).",
            report.window_source,
            report
                .max_output_tokens
                .map_or_else(|| "no limit".to_owned(), |max| max.to_string()),
            report.output_source
        );
        match report.calibration {
            Some(calibration) => {
                let _ = writeln!(
                    text,
                    "  Counted with {} (this model's own tokenizer is not embedded); calibrated to the \
                     server's counts: {} tokens (×{:.2}, from the last {} call(s) that reported usage). \
                     The threshold uses the calibrated figure.",
                    estimate.encoding,
                    report.calibrated_total(),
                    calibration.ratio,
                    calibration.samples
                );
            }
            None if !model_info(&report.model).exact_tokenizer => {
                let _ = writeln!(
                    text,
                    "  Counted with {} (this model's own tokenizer is not embedded); not calibrated \
                     yet: no call to it has reported usage.",
                    estimate.encoding
                );
            }
            None => {}
        }
        for section in Section::ALL {
            let tokens = estimate.section(section);
            let _ = writeln!(
                text,
                "  {:18} {:>8}  {:>5.1}%",
                section.label(),
                tokens,
                tokens as f64 * 100.0 / window as f64
            );
            if section == Section::System {
                for (label, tokens) in [
                    ("of which instructions", report.instruction_tokens),
                    ("of which skills", report.skill_tokens),
                ] {
                    if tokens > 0 {
                        let _ = writeln!(
                            text,
                            "    {label:16} {tokens:>8}  {:>5.1}%",
                            tokens as f64 * 100.0 / window as f64
                        );
                    }
                }
            }
            if section == Section::Messages && report.tool_summary_tokens > 0 {
                let _ = writeln!(
                    text,
                    "    {:16} {:>8}  {:>5.1}%",
                    "of which tool summaries",
                    report.tool_summary_tokens,
                    report.tool_summary_tokens as f64 * 100.0 / window as f64
                );
            }
        }
        if !report.instruction_files.is_empty() {
            let files: Vec<String> = report
                .instruction_files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            let _ = writeln!(
                text,
                "  Instructions from {}{}",
                files.join(", "),
                if report.instructions_truncated {
                    " (cut at 32 KiB)"
                } else {
                    ""
                }
            );
        }
        let _ = writeln!(
            text,
            "  {} messages from {} statements{}",
            report.messages,
            report.statements,
            match report.summarised_through {
                Some(through) => format!("; statements 1-{through} are summarised"),
                None => String::new(),
            }
        );
        text
    }
}

impl Agent {
    /// The breakdown of the request the next statement would start with
    /// (without its user message).
    pub async fn context_report(&mut self) -> Result<ContextReport, AgentError> {
        let snapshot = self.config.current();
        let provider = self.provider(&snapshot).await?;
        self.load_usage_samples(&provider).await?;
        let calibration = self.calibration();
        let registry = self.tools.current();
        let mut empty = Conversation::default();
        let conversation = match self.conversation.as_mut() {
            Some(conversation) => conversation,
            None => &mut empty,
        };
        let specs = crate::tool_index::offer(
            &registry,
            &snapshot.agent.tool_index,
            &conversation.loaded_tools,
            provider.config().context_window,
            provider.config().encoding,
            provider.config().edit_form(),
        )
        .specs;
        let additions = self.context.read();
        let system = additions.system_prompt(snapshot.agent.system_prompt());
        let conversation = match self.conversation.as_mut() {
            Some(conversation) => conversation,
            None => &mut empty,
        };
        let history =
            conversation
                .transcript
                .history(&system, snapshot.agent.history_shape(), Phase::Idle);
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
            window_source: provider.config().window_source.clone(),
            max_output_tokens: provider.config().max_output_tokens,
            output_source: provider.config().output_source.clone(),
            estimate: prepared.estimate().clone(),
            tool_summary_tokens,
            instruction_tokens: additions
                .instructions
                .as_ref()
                .map_or(0, |i| count_tokens(encoding, &i.text)),
            instruction_files: additions
                .instructions
                .as_ref()
                .map(|i| i.files.clone())
                .unwrap_or_default(),
            instructions_truncated: additions.instructions.as_ref().is_some_and(|i| i.truncated),
            skill_tokens: additions
                .skills
                .as_ref()
                .map_or(0, |s| count_tokens(encoding, s)),
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
