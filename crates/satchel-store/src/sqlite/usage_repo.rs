//! [`LlmCallStore`] on [`SqliteStore`]: the `llm_calls` table.

use async_trait::async_trait;
use rusqlite::{Row, Transaction, params};

use super::failure::Failure;
use super::rows::{all, timestamp};
use super::writer::WriteCtx;
use super::{Redact, SqliteStore};
use crate::redact::Redactor;
use crate::{LlmCallRecord, LlmCallStore, NewLlmCall, StoreError, UsageSample};

const COLUMNS: &str = "id, conversation_id, statement_id, turn, purpose, provider, model, estimate_tokens, estimate_sections, context_window, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, stop_reason, error, duration_ms, created_at";

impl Redact for NewLlmCall {
    fn redact(self, redactor: &Redactor) -> NewLlmCall {
        NewLlmCall {
            error: self.error.redact(redactor),
            ..self
        }
    }
}

fn row(row: &Row<'_>) -> rusqlite::Result<LlmCallRecord> {
    let sections: String = row.get(8)?;
    Ok(LlmCallRecord {
        id: row.get(0)?,
        call: NewLlmCall {
            conversation_id: row.get(1)?,
            statement_id: row.get(2)?,
            turn: row.get(3)?,
            purpose: row.get(4)?,
            provider: row.get(5)?,
            model: row.get(6)?,
            estimate_tokens: row.get(7)?,
            estimate_sections: serde_json::from_str(&sections).unwrap_or_default(),
            context_window: row.get(9)?,
            input_tokens: row.get(10)?,
            output_tokens: row.get(11)?,
            cache_read_tokens: row.get(12)?,
            cache_write_tokens: row.get(13)?,
            stop_reason: row.get(14)?,
            error: row.get(15)?,
            duration_ms: row.get(16)?,
        },
        created_at: timestamp(row, 17)?,
    })
}

/// Records one request to a model; returns its id.
pub(super) fn insert_llm_call(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    new: NewLlmCall,
) -> Result<String, Failure> {
    let id = ctx.new_id();
    tx.prepare_cached(&format!(
        "INSERT INTO llm_calls ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
    ))?
    .execute(params![
        id,
        new.conversation_id,
        new.statement_id,
        new.turn,
        new.purpose,
        new.provider,
        new.model,
        new.estimate_tokens,
        serde_json::to_string(&new.estimate_sections)?,
        new.context_window,
        new.input_tokens,
        new.output_tokens,
        new.cache_read_tokens,
        new.cache_write_tokens,
        new.stop_reason,
        new.error,
        new.duration_ms,
        ctx.now().as_millis(),
    ])?;
    Ok(id)
}

#[async_trait]
impl LlmCallStore for SqliteStore {
    async fn record_llm_call(&self, new: NewLlmCall) -> Result<String, StoreError> {
        self.write(new, insert_llm_call).await
    }

    async fn llm_calls(&self, conversation_id: &str) -> Result<Vec<LlmCallRecord>, StoreError> {
        let conversation_id = conversation_id.to_owned();
        self.read(move |conn| {
            let sql = format!(
                "SELECT {COLUMNS} FROM llm_calls WHERE conversation_id = ?1 ORDER BY created_at, id"
            );
            all(conn, &sql, params![conversation_id], row)
        })
        .await
    }

    async fn usage_samples(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<UsageSample>, StoreError> {
        let model = model.to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            all(
                conn,
                "SELECT estimate_tokens, input_tokens FROM llm_calls \
                 WHERE model = ?1 AND input_tokens > 0 AND estimate_tokens > 0 \
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
                params![model, limit],
                |row| {
                    Ok(UsageSample {
                        estimate_tokens: row.get(0)?,
                        input_tokens: row.get(1)?,
                    })
                },
            )
        })
        .await
    }
}
