//! Rebuilding a conversation's [`Transcript`] from the store, so a stored
//! conversation can be resumed (`satchel chat --resume`) or measured
//! (`satchel context`).
//!
//! The history rows give the user messages and assistant answers per turn;
//! the tool-call rows give each call's whole output (the history rows hold
//! results as sent, feedback block and cuts included); the latest
//! `summary` row gives the compaction.

use std::collections::HashMap;

use satchel_core::{AssistantPart, Content, ErrorCode, Message, ToolOutput};
use satchel_store::{Store, StoreError};
use satchel_tools::Registry;

use crate::history::{
    CallRecord, Compaction, PROMPTED_REPLY_KEY, SUMMARY_ROLE, StatementRecord, Transcript,
    TurnRecord,
};
use crate::{Resources, ToolTally};

/// A conversation as read back from the store.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Its statements and turns.
    pub transcript: Transcript,
    /// Tool use so far.
    pub tally: ToolTally,
    /// Resources touched so far.
    pub resources: Resources,
    /// The latest statement objective.
    pub objective: Option<String>,
}

/// Reads conversation `id` back; `registry` tells which tools touch what.
pub async fn load_transcript(
    store: &dyn Store,
    id: &str,
    registry: &Registry,
) -> Result<Loaded, StoreError> {
    let statements = store.statements(id).await?;
    let messages = store.messages(id).await?;
    let calls = store.tool_calls(id).await?;
    let objective = store.current_objective(id).await?;

    let mut outputs: HashMap<(Option<&str>, &str), ToolOutput> = HashMap::new();
    let mut tally = ToolTally::default();
    let mut resources = Resources::default();
    for record in &calls {
        outputs.insert(
            (record.statement_id.as_deref(), record.call_id.as_str()),
            record.output.clone(),
        );
        tally.add(&record.tool, record.output.is_error);
        if !record.output.is_error {
            let spec = registry.get(&record.tool).map(|t| t.spec());
            resources.add_call(spec, &record.call());
        }
    }

    let seq_of: HashMap<&str, u32> = statements.iter().map(|s| (s.id.as_str(), s.seq)).collect();
    let mut transcript = Transcript::default();
    let mut by_statement: HashMap<&str, StatementRecord> = HashMap::new();
    for row in &messages {
        let Some(statement_id) = row.statement_id.as_deref() else {
            continue;
        };
        let Some(&seq) = seq_of.get(statement_id) else {
            continue;
        };
        if row.role == SUMMARY_ROLE {
            let text = row
                .content
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or_default();
            let through = row
                .content
                .get("through_statement")
                .and_then(|t| t.as_u64())
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(0);
            transcript.compaction = Some(Compaction {
                text: text.to_owned(),
                through,
            });
            continue;
        }
        let Ok(message) = serde_json::from_value::<Message>(row.content.clone()) else {
            continue;
        };
        let statement = by_statement
            .entry(statement_id)
            .or_insert_with(|| StatementRecord {
                seq,
                user: Vec::new(),
                turns: Vec::new(),
            });
        match message {
            Message::User { content } if statement.user.is_empty() => statement.user = content,
            Message::Assistant { content } => {
                let calls = content
                    .iter()
                    .filter_map(|part| match part {
                        AssistantPart::ToolCall(call) => Some(CallRecord {
                            call: call.clone(),
                            output: outputs
                                .get(&(Some(statement_id), call.id.as_str()))
                                .cloned()
                                .unwrap_or_else(|| {
                                    ToolOutput::error(
                                        ErrorCode::ToolCrashed,
                                        "no result was recorded for this call (Satchel stopped before it finished)",
                                    )
                                }),
                        }),
                        _ => None,
                    })
                    .collect();
                statement.turns.push(TurnRecord {
                    assistant: content,
                    calls,
                    sent_results: Vec::new(),
                    raw_reply: row
                        .content
                        .get(PROMPTED_REPLY_KEY)
                        .and_then(|raw| raw.as_str())
                        .map(str::to_owned),
                });
            }
            tool @ Message::Tool(_) => {
                if let Some(turn) = statement.turns.last_mut() {
                    turn.sent_results.push(tool);
                }
            }
            _ => {}
        }
    }
    let mut records: Vec<StatementRecord> = by_statement.into_values().collect();
    records.sort_by_key(|s| s.seq);
    for record in &mut records {
        if record.user.is_empty() {
            record.user = vec![Content::Text {
                text: String::new(),
            }];
        }
    }
    transcript.statements = records;
    Ok(Loaded {
        transcript,
        tally,
        resources,
        objective,
    })
}
