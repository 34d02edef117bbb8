//! How a statement fails: the no-loop streak's change of the next turn
//! and its end ([`super::super::streak`]), a model that failed or was
//! interrupted mid-answer, and the statement ended with an error on
//! record. Kept apart from the turn loop itself.

use satchel_core::AssistantPart;
use satchel_llm::LlmError;
use satchel_store::LogKind;

use super::super::answer::Answer;
use super::super::model::calibrated_total;
use super::super::streak::{Adjust, Failure, adjustment, give_up_message};
use super::super::{Agent, AgentError, Outcome};
use super::{CUT_OFF_MARK, MIN_ANSWER_ROOM, Run, Turn};
use crate::history::TurnRecord;
use crate::{AgentEvent, EventSink};

impl Agent {
    /// Ends the statement as failed with `message`, logged as its error.
    pub(super) async fn fail_statement(
        &mut self,
        run: &mut Run,
        message: &str,
    ) -> Result<(), AgentError> {
        self.log(
            &run.statement.conversation_id,
            &run.statement.id,
            LogKind::Error,
            message,
        )
        .await?;
        run.report.outcome = Outcome::Failed(message.to_owned());
        Ok(())
    }

    /// The same failure came as often in a row as it may
    /// ([`Failure::give_up_at`]): the turn is
    /// kept (without calls, none of which runs) and the statement fails
    /// with what happened and what to change.
    pub(super) async fn give_up(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        answer: Answer,
    ) -> Result<(), AgentError> {
        let Some(failure) = run.streak.last().cloned() else {
            return Ok(());
        };
        let parts = answer
            .parts
            .into_iter()
            .filter(|p| !matches!(p, AssistantPart::ToolCall(_)))
            .collect();
        self.finish_turn(
            &run.statement.conversation_id,
            &run.statement.id,
            turn.number,
            TurnRecord {
                assistant: parts,
                raw_reply: answer.raw_reply,
                ..TurnRecord::default()
            },
        )
        .await?;
        let message = give_up_message(&failure, turn.provider.config());
        self.fail_statement(run, &message).await
    }

    /// After a turn that failed as the one before may have: the third time
    /// in a row ends the statement (true); the second changes the next
    /// turn ([`adjustment`]), and says so.
    pub(super) async fn after_failure(
        &mut self,
        run: &mut Run,
        turn: &Turn,
        estimate: &satchel_llm::TokenEstimate,
        sink: &dyn EventSink,
    ) -> Result<bool, AgentError> {
        let Some(failure) = run.streak.last().cloned() else {
            return Ok(false);
        };
        let config = turn.provider.config();
        if run.streak.count() >= failure.give_up_at() {
            let message = give_up_message(&failure, config);
            self.fail_statement(run, &message).await?;
            return Ok(true);
        }
        if run.streak.count() < failure.adjust_at() {
            run.adjust = Adjust::None;
            return Ok(false);
        }
        let prompt = calibrated_total(estimate, self.calibration());
        let room = u64::from(config.context_window).saturating_sub(prompt + MIN_ANSWER_ROOM);
        run.adjust = adjustment(&failure, config, room);
        let what = match &failure {
            Failure::CutOff { looping: true } => {
                "the reply was cut off at the output limit while it repeated itself"
            }
            Failure::CutOff { looping: false } => "the reply was cut off at the output limit",
            Failure::Unreadable(_) => "the reply could not be read",
            Failure::InvalidInput { .. } => "the same tool call was refused as invalid",
            Failure::Repeated { error: Some(_), .. } => "the same tool call failed the same way",
            Failure::Repeated { error: None, .. } => "the same tool call gave the same result",
        };
        let change = match &run.adjust {
            Adjust::MoreOutput(max) => format!("the next reply may take {max} tokens"),
            Adjust::AnswerOnly => "the next reply is asked for the answer alone".to_owned(),
            Adjust::OnlyTools(names) => format!("the next turn offers only {}", names.join(", ")),
            Adjust::None => "nothing changes".to_owned(),
        };
        let times = match run.streak.count() {
            1 => String::new(),
            2 => " twice in a row".to_owned(),
            n => format!(" {n} times in a row"),
        };
        let end = match failure.give_up_at().saturating_sub(run.streak.count()) {
            1 => "once more ends the statement".to_owned(),
            n => format!("{n} more times in a row end the statement"),
        };
        self.tell(run, &format!("{what}{times}: {change}; {end}"), sink)
            .await?;
        Ok(false)
    }

    /// `note` shown to the user and kept in the log, as an auxiliary entry
    /// of the statement.
    pub(super) async fn tell(
        &self,
        run: &Run,
        note: &str,
        sink: &dyn EventSink,
    ) -> Result<(), AgentError> {
        sink.emit(AgentEvent::Notice(note.to_owned()));
        self.log(
            &run.statement.conversation_id,
            &run.statement.id,
            LogKind::Auxiliary,
            note,
        )
        .await
    }

    /// The model failed or the user interrupted the answer: what had
    /// arrived is kept in the history, marked as cut off and without its
    /// unfinished calls (none of which runs); the log says why it ended.
    pub(super) async fn stop_on_model_error(
        &mut self,
        run: &mut Run,
        turn: u32,
        error: &LlmError,
    ) -> Result<(), AgentError> {
        let (conversation_id, statement_id) = (&run.statement.conversation_id, &run.statement.id);
        let outcome = match error {
            LlmError::Cancelled => Outcome::Cancelled,
            other => Outcome::Failed(other.to_string()),
        };
        if let Some(partial) = error.partial_response() {
            // Keep what arrived, marked, without its unfinished calls.
            let mut parts: Vec<AssistantPart> = partial
                .content
                .iter()
                .filter(|p| !matches!(p, AssistantPart::ToolCall(_)))
                .cloned()
                .collect();
            parts.push(AssistantPart::Text {
                text: CUT_OFF_MARK.into(),
            });
            run.report.answer = partial.text();
            self.finish_turn(
                conversation_id,
                statement_id,
                turn,
                TurnRecord {
                    assistant: parts,
                    ..TurnRecord::default()
                },
            )
            .await?;
        }
        let message = match &outcome {
            Outcome::Cancelled => "interrupted by the user".to_owned(),
            _ => error.to_string(),
        };
        self.log(conversation_id, statement_id, LogKind::Error, &message)
            .await?;
        run.report.outcome = outcome;
        Ok(())
    }
}
