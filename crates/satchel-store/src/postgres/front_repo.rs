//! [`FrontEndStore`] on [`PgStore`]: the `inbox` and `front_state`
//! tables. An item's primary key keeps it once, whichever process
//! receives it.

use async_trait::async_trait;
use serde_json::Value;

use crate::postgres::rows::{all, first, json, read};
use crate::postgres::{PgStore, transact};
use crate::{FrontEndStore, StoreError};

/// How long a handled item is remembered (Telegram keeps undelivered
/// updates for a day).
const REMEMBER_MILLIS: i64 = 7 * 86_400_000;

#[async_trait]
impl FrontEndStore for PgStore {
    async fn inbox_accept(
        &self,
        channel: &str,
        items: Vec<(i64, Value)>,
    ) -> Result<Vec<i64>, StoreError> {
        let (ids, payloads): (Vec<i64>, Vec<Value>) = items.into_iter().unzip();
        let payloads = self.redacted(payloads);
        transact!(self, |tx, ctx| {
            let now = ctx.now().as_millis();
            tx.execute(
                "DELETE FROM inbox WHERE channel = $1 AND handled_at < $2",
                &[&channel, &(now - REMEMBER_MILLIS)],
            )
            .await?;
            let mut to_handle = Vec::new();
            for (id, payload) in ids.into_iter().zip(payloads) {
                tx.execute(
                    "INSERT INTO inbox (channel, id, payload, received_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (channel, id) DO NOTHING",
                    &[&channel, &id, &serde_json::to_string(&payload)?, &now],
                )
                .await?;
                let open: bool = tx
                    .query_one(
                        "SELECT handled_at IS NULL FROM inbox WHERE channel = $1 AND id = $2",
                        &[&channel, &id],
                    )
                    .await?
                    .try_get(0)?;
                if open {
                    to_handle.push(id);
                }
            }
            Ok(to_handle)
        })
    }

    async fn inbox_pending(&self, channel: &str) -> Result<Vec<(i64, Value)>, StoreError> {
        read!(self, |client| {
            all(
                client,
                "SELECT id, payload FROM inbox WHERE channel = $1 AND handled_at IS NULL ORDER BY id",
                &[&channel],
                |row| Ok((row.try_get(0)?, json(row, 1)?)),
            )
            .await
        })
    }

    async fn inbox_done(&self, channel: &str, id: i64) -> Result<(), StoreError> {
        transact!(self, |tx, ctx| {
            tx.execute(
                "UPDATE inbox SET handled_at = $3 WHERE channel = $1 AND id = $2 AND handled_at IS NULL",
                &[&channel, &id, &ctx.now().as_millis()],
            )
            .await?;
            Ok(())
        })
    }

    async fn front_state(&self, key: &str) -> Result<Option<String>, StoreError> {
        read!(self, |client| {
            first(
                client,
                "SELECT value FROM front_state WHERE key = $1",
                &[&key],
                |row| Ok(row.try_get(0)?),
            )
            .await
        })
    }

    async fn set_front_state(&self, key: &str, value: String) -> Result<(), StoreError> {
        let value = self.redacted(value);
        transact!(self, |tx, ctx| {
            tx.execute(
                "INSERT INTO front_state (key, value, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                &[&key, &value, &ctx.now().as_millis()],
            )
            .await?;
            Ok(())
        })
    }
}
