//! [`LlmCallStore`] on [`PgStore`]: the `llm_calls` table.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::postgres::failure::PgFailure;
use crate::postgres::rows::{all, big, limit, optional_unsigned, read, timestamp, unsigned};
use crate::postgres::{Ctx, PgStore, transact};
use crate::{LlmCallRecord, LlmCallStore, NewLlmCall, StoreError, UsageSample};

const COLUMNS: &str = "id, conversation_id, statement_id, turn, purpose, provider, model, estimate_tokens, estimate_sections, context_window, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, stop_reason, error, duration_ms, created_at";

fn row(row: &Row) -> Result<LlmCallRecord, PgFailure> {
    let sections: String = row.try_get(8)?;
    let turn: Option<i64> = row.try_get(3)?;
    Ok(LlmCallRecord {
        id: row.try_get(0)?,
        call: NewLlmCall {
            conversation_id: row.try_get(1)?,
            statement_id: row.try_get(2)?,
            turn: turn.and_then(|turn| u32::try_from(turn).ok()),
            purpose: row.try_get(4)?,
            provider: row.try_get(5)?,
            model: row.try_get(6)?,
            estimate_tokens: unsigned(row, 7)?,
            estimate_sections: serde_json::from_str(&sections).unwrap_or_default(),
            context_window: unsigned(row, 9)?,
            input_tokens: optional_unsigned(row, 10)?,
            output_tokens: optional_unsigned(row, 11)?,
            cache_read_tokens: optional_unsigned(row, 12)?,
            cache_write_tokens: optional_unsigned(row, 13)?,
            stop_reason: row.try_get(14)?,
            error: row.try_get(15)?,
            duration_ms: unsigned(row, 16)?,
        },
        created_at: timestamp(row, 17)?,
    })
}

/// Records one request to a model; returns its id.
pub(super) async fn insert_llm_call<C: GenericClient + Sync>(
    tx: &C,
    ctx: &Ctx<'_>,
    new: NewLlmCall,
) -> Result<String, PgFailure> {
    let id = ctx.new_id();
    let sql = format!(
        "INSERT INTO llm_calls ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
    );
    tx.execute(
        &sql,
        &[
            &id,
            &new.conversation_id,
            &new.statement_id,
            &new.turn.map(i64::from),
            &new.purpose,
            &new.provider,
            &new.model,
            &big(new.estimate_tokens),
            &serde_json::to_string(&new.estimate_sections)?,
            &big(new.context_window),
            &new.input_tokens.map(big),
            &new.output_tokens.map(big),
            &new.cache_read_tokens.map(big),
            &new.cache_write_tokens.map(big),
            &new.stop_reason,
            &new.error,
            &big(new.duration_ms),
            &ctx.now().as_millis(),
        ],
    )
    .await?;
    Ok(id)
}

#[async_trait]
impl LlmCallStore for PgStore {
    async fn record_llm_call(&self, new: NewLlmCall) -> Result<String, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| insert_llm_call(&tx, &ctx, new).await)
    }

    async fn llm_calls(&self, conversation_id: &str) -> Result<Vec<LlmCallRecord>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {COLUMNS} FROM llm_calls WHERE conversation_id = $1 ORDER BY created_at, id"
            );
            all(client, &sql, &[&conversation_id], row).await
        })
    }

    async fn usage_samples(
        &self,
        model: &str,
        limit_to: usize,
    ) -> Result<Vec<UsageSample>, StoreError> {
        read!(self, |client| {
            all(
                client,
                "SELECT estimate_tokens, input_tokens FROM llm_calls \
                 WHERE model = $1 AND input_tokens > 0 AND estimate_tokens > 0 \
                 ORDER BY created_at DESC, id DESC LIMIT $2",
                &[&model, &limit(limit_to)],
                |row| {
                    Ok(UsageSample {
                        estimate_tokens: unsigned(row, 0)?,
                        input_tokens: unsigned(row, 1)?,
                    })
                },
            )
            .await
        })
    }
}
