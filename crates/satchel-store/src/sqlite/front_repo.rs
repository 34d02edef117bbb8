//! [`FrontEndStore`] on [`SqliteStore`]: the `inbox` and `front_state`
//! tables.

use async_trait::async_trait;
use rusqlite::{OptionalExtension as _, params};
use serde_json::Value;

use crate::sqlite::SqliteStore;
use crate::sqlite::rows::{all, json};
use crate::{FrontEndStore, StoreError};

/// How long a handled item is remembered (Telegram keeps undelivered
/// updates for a day).
const REMEMBER_MILLIS: i64 = 7 * 86_400_000;

#[async_trait]
impl FrontEndStore for SqliteStore {
    async fn inbox_accept(
        &self,
        channel: &str,
        items: Vec<(i64, Value)>,
    ) -> Result<Vec<i64>, StoreError> {
        let (ids, payloads): (Vec<i64>, Vec<Value>) = items.into_iter().unzip();
        let channel = channel.to_owned();
        self.write(payloads, move |tx, ctx, payloads| {
            let now = ctx.now().as_millis();
            tx.prepare_cached("DELETE FROM inbox WHERE channel = ?1 AND handled_at < ?2")?
                .execute(params![channel, now - REMEMBER_MILLIS])?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO inbox (channel, id, payload, received_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (channel, id) DO NOTHING",
            )?;
            let mut pending = tx.prepare_cached(
                "SELECT handled_at IS NULL FROM inbox WHERE channel = ?1 AND id = ?2",
            )?;
            let mut to_handle = Vec::new();
            for (id, payload) in ids.into_iter().zip(payloads) {
                insert.execute(params![channel, id, serde_json::to_string(&payload)?, now])?;
                let open: bool = pending.query_row(params![channel, id], |row| row.get(0))?;
                if open {
                    to_handle.push(id);
                }
            }
            Ok(to_handle)
        })
        .await
    }

    async fn inbox_pending(&self, channel: &str) -> Result<Vec<(i64, Value)>, StoreError> {
        let channel = channel.to_owned();
        self.read(move |conn| {
            all(
                conn,
                "SELECT id, payload FROM inbox WHERE channel = ?1 AND handled_at IS NULL ORDER BY id",
                params![channel],
                |row| Ok((row.get(0)?, json(row, 1)?)),
            )
        })
        .await
    }

    async fn inbox_done(&self, channel: &str, id: i64) -> Result<(), StoreError> {
        self.write(channel.to_owned(), move |tx, ctx, channel| {
            tx.prepare_cached(
                "UPDATE inbox SET handled_at = ?3 WHERE channel = ?1 AND id = ?2 AND handled_at IS NULL",
            )?
            .execute(params![channel, id, ctx.now().as_millis()])?;
            Ok(())
        })
        .await
    }

    async fn front_state(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT value FROM front_state WHERE key = ?1")?
                .query_row(params![key], |row| row.get(0))
                .optional()?)
        })
        .await
    }

    async fn set_front_state(&self, key: &str, value: String) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.write(value, move |tx, ctx, value| {
            tx.prepare_cached(
                "INSERT INTO front_state (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )?
            .execute(params![key, value, ctx.now().as_millis()])?;
            Ok(())
        })
        .await
    }
}
