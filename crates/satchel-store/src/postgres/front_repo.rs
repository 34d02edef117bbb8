//! [`FrontEndStore`] on [`PgStore`]: the `inbox`, `inbox_channels` and
//! `front_state` tables. The channel's row is locked while items are
//! accepted, so two processes receiving the same update keep it once.

use async_trait::async_trait;
use serde_json::Value;

use crate::postgres::repo::{all, first, json, read};
use crate::postgres::{PgStore, transact};
use crate::{FrontEndStore, StoreError};

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
            tx.execute(
                "INSERT INTO inbox_channels (channel, high_water) VALUES ($1, $2)
                 ON CONFLICT (channel) DO NOTHING",
                &[&channel, &i64::MIN],
            )
            .await?;
            let mut high: i64 = tx
                .query_one(
                    "SELECT high_water FROM inbox_channels WHERE channel = $1 FOR UPDATE",
                    &[&channel],
                )
                .await?
                .try_get(0)?;
            let mut kept = Vec::new();
            for (id, payload) in ids.into_iter().zip(payloads) {
                if id <= high {
                    continue;
                }
                tx.execute(
                    "INSERT INTO inbox (channel, id, payload, received_at) VALUES ($1, $2, $3, $4)",
                    &[
                        &channel,
                        &id,
                        &serde_json::to_string(&payload)?,
                        &ctx.now().as_millis(),
                    ],
                )
                .await?;
                high = id;
                kept.push(id);
            }
            tx.execute(
                "UPDATE inbox_channels SET high_water = $2 WHERE channel = $1",
                &[&channel, &high],
            )
            .await?;
            Ok(kept)
        })
    }

    async fn inbox_pending(&self, channel: &str) -> Result<Vec<(i64, Value)>, StoreError> {
        read!(self, |client| {
            all(
                client,
                "SELECT id, payload FROM inbox WHERE channel = $1 ORDER BY id",
                &[&channel],
                |row| Ok((row.try_get(0)?, json(row, 1)?)),
            )
            .await
        })
    }

    async fn inbox_done(&self, channel: &str, id: i64) -> Result<(), StoreError> {
        transact!(self, |tx, _ctx| {
            tx.execute(
                "DELETE FROM inbox WHERE channel = $1 AND id = $2",
                &[&channel, &id],
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
