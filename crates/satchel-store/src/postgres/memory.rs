//! [`MemoryStore`] on [`PgStore`]: memories with their embeddings (the
//! same little-endian `f32` bytes as SQLite), revisions for the recall
//! indexes of every process, and memory sessions.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::postgres::failure::PgFailure;
use crate::postgres::rows::{Unreadable, all, first, limit, optional_time, read, timestamp};
use crate::postgres::{Ctx, PgStore, transact};
use crate::{
    MemoryChanges, MemoryFilter, MemoryIndexRow, MemoryLayer, MemoryRecord, MemorySession,
    MemoryStats, MemoryStore, MemoryUpdate, NewMemory, NewMemorySession, StoreError, Timestamp,
};

const MEMORY_COLUMNS: &str = "m.seq, m.id, m.namespace, m.layer, m.content, m.category, m.certainty, m.session_id, m.conversation_id, m.created_at, m.updated_at, m.expires_at, m.archived_at";
const SESSION_COLUMNS: &str =
    "id, namespace, conversation_id, name, started_at, ended_at, end_reason, summary_memory_id";
const INDEX_COLUMNS: &str = "seq, content, namespace, layer, category, certainty, session_id, created_at, expires_at, archived_at IS NOT NULL, embedding";

/// A boxed query parameter, for queries built from a filter.
type Param = Box<dyn ToSql + Sync + Send>;

fn layer(row: &Row, index: usize) -> Result<MemoryLayer, PgFailure> {
    let name: String = row.try_get(index)?;
    Ok(MemoryLayer::parse(&name).ok_or(Unreadable {
        what: "memory layer",
        value: name.clone(),
    })?)
}

fn memory_row(row: &Row) -> Result<MemoryRecord, PgFailure> {
    Ok(MemoryRecord {
        seq: row.try_get(0)?,
        id: row.try_get(1)?,
        namespace: row.try_get(2)?,
        layer: layer(row, 3)?,
        content: row.try_get(4)?,
        category: row.try_get(5)?,
        certainty: row.try_get(6)?,
        session_id: row.try_get(7)?,
        conversation_id: row.try_get(8)?,
        created_at: timestamp(row, 9)?,
        updated_at: timestamp(row, 10)?,
        expires_at: optional_time(row, 11)?,
        archived_at: optional_time(row, 12)?,
    })
}

fn session_row(row: &Row) -> Result<MemorySession, PgFailure> {
    Ok(MemorySession {
        id: row.try_get(0)?,
        namespace: row.try_get(1)?,
        conversation_id: row.try_get(2)?,
        name: row.try_get(3)?,
        started_at: timestamp(row, 4)?,
        ended_at: optional_time(row, 5)?,
        end_reason: row.try_get(6)?,
        summary_memory_id: row.try_get(7)?,
    })
}

fn index_row(row: &Row) -> Result<MemoryIndexRow, PgFailure> {
    let bytes: Option<Vec<u8>> = row.try_get(10)?;
    Ok(MemoryIndexRow {
        seq: row.try_get(0)?,
        content: row.try_get(1)?,
        namespace: row.try_get(2)?,
        layer: layer(row, 3)?,
        category: row.try_get(4)?,
        certainty: row.try_get(5)?,
        session_id: row.try_get(6)?,
        created_at: timestamp(row, 7)?,
        expires_at: optional_time(row, 8)?,
        archived: row.try_get(9)?,
        embedding: bytes.map(|bytes| decode_embedding(&bytes)).transpose()?,
    })
}

pub(crate) fn encode_embedding(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

fn decode_embedding(bytes: &[u8]) -> Result<Vec<f32>, PgFailure> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Unreadable {
            what: "embedding of this many bytes",
            value: bytes.len().to_string(),
        }
        .into());
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect())
}

fn certainty(value: f32) -> f32 {
    value.clamp(0.0, 1.0)
}

/// Takes the next revision for this write (the row lock orders writers,
/// so revisions commit in order; the trigger announces it at commit).
async fn next_rev<C: GenericClient + Sync>(tx: &C) -> Result<i64, PgFailure> {
    let statement = tx
        .prepare_cached("UPDATE memory_state SET rev = rev + 1 WHERE id = 1 RETURNING rev")
        .await?;
    Ok(tx.query_one(&statement, &[]).await?.try_get(0)?)
}

/// The `WHERE` clause (over `memories m`) and its parameters for a filter;
/// placeholders are numbered from `$1`.
fn filter_sql(filter: &MemoryFilter) -> (String, Vec<Param>) {
    let mut values: Vec<Param> = vec![Box::new(filter.namespace.clone())];
    let mut clauses = vec!["m.namespace = $1".to_owned()];
    let mark = |values: &mut Vec<Param>, value: Param| {
        values.push(value);
        format!("${}", values.len())
    };
    if !filter.layers.is_empty() {
        let layers: Vec<String> = filter
            .layers
            .iter()
            .map(|layer| layer.as_str().to_owned())
            .collect();
        clauses.push(format!(
            "m.layer = ANY({})",
            mark(&mut values, Box::new(layers))
        ));
    }
    if let Some(category) = &filter.category {
        clauses.push(format!(
            "lower(m.category) = lower({})",
            mark(&mut values, Box::new(category.clone()))
        ));
    }
    if let Some(since) = filter.since {
        clauses.push(format!(
            "m.created_at >= {}",
            mark(&mut values, Box::new(since.as_millis()))
        ));
    }
    if let Some(until) = filter.until {
        clauses.push(format!(
            "m.created_at < {}",
            mark(&mut values, Box::new(until.as_millis()))
        ));
    }
    if let Some(now) = filter.live_at {
        clauses.push(format!(
            "(m.expires_at IS NULL OR m.expires_at > {})",
            mark(&mut values, Box::new(now.as_millis()))
        ));
    }
    if !filter.include_archived {
        clauses.push("m.archived_at IS NULL".into());
    }
    if let Some(session) = &filter.session_id {
        clauses.push(format!(
            "(m.layer <> 'session' OR m.session_id = {})",
            mark(&mut values, Box::new(session.clone()))
        ));
    }
    (clauses.join(" AND "), values)
}

fn params(values: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| &**value as &(dyn ToSql + Sync))
        .collect()
}

async fn select_memory<C: GenericClient + Sync>(
    client: &C,
    id: &str,
) -> Result<Option<MemoryRecord>, PgFailure> {
    let sql = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1");
    first(client, &sql, &[&id], memory_row).await
}

async fn select_session<C: GenericClient + Sync>(
    client: &C,
    id: &str,
) -> Result<Option<MemorySession>, PgFailure> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE id = $1");
    first(client, &sql, &[&id], session_row).await
}

async fn insert_memory<C: GenericClient + Sync>(
    tx: &C,
    ctx: &Ctx<'_>,
    rev: i64,
    new: NewMemory,
) -> Result<MemoryRecord, PgFailure> {
    let created_at = new.created_at.unwrap_or(ctx.now());
    let id = ctx.new_id();
    let embedding = new.embedding.as_deref().map(encode_embedding);
    let statement = tx
        .prepare_cached(
            "INSERT INTO memories (id, namespace, layer, content, category, certainty, session_id, conversation_id, created_at, updated_at, expires_at, archived_at, embedding, rev)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13) RETURNING seq",
        )
        .await?;
    let seq: i64 = tx
        .query_one(
            &statement,
            &[
                &id,
                &new.namespace,
                &new.layer.as_str(),
                &new.content,
                &new.category,
                &certainty(new.certainty),
                &new.session_id,
                &new.conversation_id,
                &created_at.as_millis(),
                &ctx.now().as_millis(),
                &new.expires_at.map(Timestamp::as_millis),
                &embedding,
                &rev,
            ],
        )
        .await?
        .try_get(0)?;
    Ok(MemoryRecord {
        id,
        seq,
        namespace: new.namespace,
        layer: new.layer,
        content: new.content,
        category: new.category,
        certainty: certainty(new.certainty),
        session_id: new.session_id,
        conversation_id: new.conversation_id,
        created_at,
        updated_at: ctx.now(),
        expires_at: new.expires_at,
        archived_at: None,
    })
}

/// Deletes the rows `condition` selects (over `memories`, placeholders
/// from `$1`), recording their keys under a new revision; returns their
/// ids and the revision taken, if any.
async fn delete_where<C: GenericClient + Sync>(
    tx: &C,
    condition: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Result<(Vec<String>, Option<i64>), PgFailure> {
    // Every memory write takes `memory_state` before memory rows (see
    // `next_rev`); so must this one, or a purge here and an update
    // elsewhere each hold what the other waits for.
    tx.execute("SELECT rev FROM memory_state WHERE id = 1 FOR UPDATE", &[])
        .await?;
    let sql = format!("SELECT seq, id FROM memories WHERE {condition} FOR UPDATE");
    let doomed = all(tx, &sql, values, |row| {
        Ok((row.try_get::<_, i64>(0)?, row.try_get::<_, String>(1)?))
    })
    .await?;
    if doomed.is_empty() {
        return Ok((Vec::new(), None));
    }
    let rev = next_rev(tx).await?;
    let seqs: Vec<i64> = doomed.iter().map(|(seq, _)| *seq).collect();
    tx.execute("DELETE FROM memories WHERE seq = ANY($1)", &[&seqs])
        .await?;
    tx.execute(
        "INSERT INTO memory_deletions (rev, seq) SELECT $1, unnest($2::bigint[])",
        &[&rev, &seqs],
    )
    .await?;
    Ok((doomed.into_iter().map(|(_, id)| id).collect(), Some(rev)))
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn insert_memories(&self, new: Vec<NewMemory>) -> Result<Vec<MemoryRecord>, StoreError> {
        let new = self.redacted(new);
        let (stored, rev) = transact!(self, |tx, ctx| {
            let rev = next_rev(&tx).await?;
            let mut stored = Vec::with_capacity(new.len());
            for memory in new {
                stored.push(insert_memory(&tx, &ctx, rev, memory).await?);
            }
            Ok((stored, rev))
        })?;
        self.saw_revision(rev);
        Ok(stored)
    }

    async fn update_memory(&self, update: MemoryUpdate) -> Result<MemoryRecord, StoreError> {
        let update = self.redacted(update);
        let (record, rev) = transact!(self, |tx, ctx| {
            let rev = next_rev(&tx).await?;
            let changed = tx
                .execute(
                    "UPDATE memories SET content = $2, category = $3, certainty = $4, expires_at = $5,
                        embedding = coalesce($6, embedding), updated_at = $7, rev = $8 WHERE id = $1",
                    &[
                        &update.id,
                        &update.content,
                        &update.category,
                        &certainty(update.certainty),
                        &update.expires_at.map(Timestamp::as_millis),
                        &update.embedding.as_deref().map(encode_embedding),
                        &ctx.now().as_millis(),
                        &rev,
                    ],
                )
                .await?;
            let missing = || StoreError::NotFound {
                kind: "memory",
                id: update.id.clone(),
            };
            if changed == 0 {
                return Err(missing().into());
            }
            let record = select_memory(&tx, &update.id).await?.ok_or_else(missing)?;
            Ok((record, rev))
        })?;
        self.saw_revision(rev);
        Ok(record)
    }

    async fn memories_without_embedding(
        &self,
        limit_to: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        read!(self, |client| {
            all(
                client,
                "SELECT id, content FROM memories WHERE embedding IS NULL ORDER BY seq LIMIT $1",
                &[&limit(limit_to)],
                |row| Ok((row.try_get(0)?, row.try_get(1)?)),
            )
            .await
        })
    }

    async fn set_memory_embedding(
        &self,
        id: &str,
        content: &str,
        embedding: Vec<f32>,
    ) -> Result<bool, StoreError> {
        // The text compared was read from the store: already redacted.
        let (set, rev) = transact!(self, |tx, _ctx| {
            let rev = next_rev(&tx).await?;
            let changed = tx
                .execute(
                    "UPDATE memories SET embedding = $3, rev = $4
                     WHERE id = $1 AND content = $2 AND embedding IS NULL",
                    &[&id, &content, &encode_embedding(&embedding), &rev],
                )
                .await?;
            Ok((changed == 1, rev))
        })?;
        self.saw_revision(rev);
        Ok(set)
    }

    async fn delete_memories(
        &self,
        namespace: &str,
        ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (deleted, rev) = transact!(self, |tx, _ctx| {
            delete_where(&tx, "namespace = $1 AND id = ANY($2)", &[&namespace, &ids]).await
        })?;
        if let Some(rev) = rev {
            self.saw_revision(rev);
        }
        Ok(deleted)
    }

    async fn purge_expired_memories(&self, now: Timestamp) -> Result<u64, StoreError> {
        let (deleted, rev) = transact!(self, |tx, _ctx| {
            delete_where(
                &tx,
                "expires_at IS NOT NULL AND expires_at <= $1",
                &[&now.as_millis()],
            )
            .await
        })?;
        if let Some(rev) = rev {
            self.saw_revision(rev);
        }
        Ok(deleted.len() as u64)
    }

    async fn memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        read!(self, |client| select_memory(client, id).await)
    }

    async fn memories_by_seq(&self, seqs: Vec<i64>) -> Result<Vec<MemoryRecord>, StoreError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let found = read!(self, |client| {
            let sql = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq = ANY($1)");
            all(client, &sql, &[&seqs], memory_row).await
        })?;
        let mut by_seq: std::collections::HashMap<i64, MemoryRecord> =
            found.into_iter().map(|m| (m.seq, m)).collect();
        Ok(seqs.iter().filter_map(|seq| by_seq.remove(seq)).collect())
    }

    async fn list_memories(
        &self,
        filter: MemoryFilter,
        limit_to: usize,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        let (condition, mut values) = filter_sql(&filter);
        values.push(Box::new(limit(limit_to)));
        let sql = format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} ORDER BY m.created_at DESC, m.seq DESC LIMIT ${}",
            values.len()
        );
        read!(self, |client| all(
            client,
            &sql,
            &params(&values),
            memory_row
        )
        .await)
    }

    async fn memories_with_text(
        &self,
        filter: MemoryFilter,
        content: &str,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        let (condition, mut values) = filter_sql(&filter);
        values.push(Box::new(content.trim().to_owned()));
        let sql = format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} AND lower(trim(m.content)) = lower(${}) ORDER BY m.created_at DESC",
            values.len()
        );
        read!(self, |client| all(
            client,
            &sql,
            &params(&values),
            memory_row
        )
        .await)
    }

    async fn memory_changes(&self, since: i64) -> Result<MemoryChanges, StoreError> {
        let mut object = self.reader().await?;
        let tx = self.snapshot(&mut object).await?;
        let result: Result<_, PgFailure> = async {
            // One snapshot: the revision and the rows agree.
            let rev: i64 = tx
                .query_one("SELECT rev FROM memory_state WHERE id = 1", &[])
                .await?
                .try_get(0)?;
            let sql = format!("SELECT {INDEX_COLUMNS} FROM memories WHERE rev > $1 ORDER BY seq");
            let upserts = all(&tx, &sql, &[&since], index_row).await?;
            let deleted = if since == 0 {
                Vec::new()
            } else {
                all(
                    &tx,
                    "SELECT seq FROM memory_deletions WHERE rev > $1",
                    &[&since],
                    |row| Ok(row.try_get::<_, i64>(0)?),
                )
                .await?
            };
            Ok(MemoryChanges {
                rev,
                upserts,
                deleted,
            })
        }
        .await;
        let changes = result.map_err(|failure| self.error(failure))?;
        tx.commit()
            .await
            .map_err(|error| self.error(error.into()))?;
        self.saw_revision(changes.rev);
        Ok(changes)
    }

    async fn memory_revision(&self) -> Result<i64, StoreError> {
        self.current_revision().await
    }

    async fn memory_stats(
        &self,
        namespace: &str,
        now: Timestamp,
    ) -> Result<MemoryStats, StoreError> {
        let mut object = self.reader().await?;
        let tx = self.snapshot(&mut object).await?;
        let result: Result<_, PgFailure> = async {
            let mut stats = MemoryStats {
                namespace: namespace.to_owned(),
                ..MemoryStats::default()
            };
            let row = tx
                .query_one(
                    "SELECT count(*), count(*) FILTER (WHERE expires_at IS NOT NULL AND expires_at <= $2),
                        count(*) FILTER (WHERE archived_at IS NOT NULL), count(*) FILTER (WHERE embedding IS NULL),
                        min(created_at), max(created_at)
                     FROM memories WHERE namespace = $1",
                    &[&namespace, &now.as_millis()],
                )
                .await?;
            let count = |index: usize| -> Result<u64, PgFailure> {
                Ok(u64::try_from(row.try_get::<_, i64>(index)?).unwrap_or(0))
            };
            stats.total = count(0)?;
            stats.expired = count(1)?;
            stats.archived = count(2)?;
            stats.without_embedding = count(3)?;
            stats.oldest = optional_time(&row, 4)?;
            stats.newest = optional_time(&row, 5)?;
            for row in tx
                .query(
                    "SELECT layer, count(*) FROM memories WHERE namespace = $1 GROUP BY layer",
                    &[&namespace],
                )
                .await?
            {
                let count: i64 = row.try_get(1)?;
                stats
                    .by_layer
                    .insert(row.try_get(0)?, u64::try_from(count).unwrap_or(0));
            }
            let row = tx
                .query_one(
                    "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL) FROM memory_sessions WHERE namespace = $1",
                    &[&namespace],
                )
                .await?;
            stats.sessions = u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0);
            stats.open_sessions = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
            Ok(stats)
        }
        .await;
        let stats = result.map_err(|failure| self.error(failure))?;
        tx.commit()
            .await
            .map_err(|error| self.error(error.into()))?;
        Ok(stats)
    }

    async fn start_session(&self, new: NewMemorySession) -> Result<MemorySession, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let session = MemorySession {
                id: ctx.new_id(),
                namespace: new.namespace,
                conversation_id: new.conversation_id,
                name: new.name,
                started_at: new.started_at.unwrap_or(ctx.now()),
                ended_at: None,
                end_reason: None,
                summary_memory_id: None,
            };
            tx.execute(
                "INSERT INTO memory_sessions (id, namespace, conversation_id, name, started_at) VALUES ($1, $2, $3, $4, $5)",
                &[
                    &session.id,
                    &session.namespace,
                    &session.conversation_id,
                    &session.name,
                    &session.started_at.as_millis(),
                ],
            )
            .await?;
            Ok(session)
        })
    }

    async fn open_session(
        &self,
        namespace: &str,
        conversation_id: Option<&str>,
    ) -> Result<Option<MemorySession>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE namespace = $1 AND conversation_id IS NOT DISTINCT FROM $2 AND ended_at IS NULL
                 ORDER BY started_at DESC, id DESC LIMIT 1"
            );
            first(client, &sql, &[&namespace, &conversation_id], session_row).await
        })
    }

    async fn end_session(
        &self,
        id: &str,
        at: Timestamp,
        reason: &str,
        archive_expires_at: Option<Timestamp>,
    ) -> Result<(MemorySession, Vec<MemoryRecord>), StoreError> {
        let reason = self.redacted(reason.to_owned());
        let (ended, rev) = transact!(self, |tx, ctx| {
            let missing = || StoreError::NotFound {
                kind: "memory session",
                id: id.to_owned(),
            };
            // Locks the session: two processes ending it at once end it once.
            let sql =
                format!("SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE id = $1 FOR UPDATE");
            let Some(session) = first(&tx, &sql, &[&id], session_row).await? else {
                return Err(missing().into());
            };
            if session.ended_at.is_some() {
                return Ok(((session, Vec::new()), None));
            }
            tx.execute(
                "UPDATE memory_sessions SET ended_at = $2, end_reason = $3 WHERE id = $1",
                &[&id, &at.as_millis(), &reason],
            )
            .await?;
            let rev = next_rev(&tx).await?;
            let sql = format!(
                "UPDATE memories AS m SET archived_at = $2, expires_at = $3, updated_at = $4, rev = $5
                 WHERE m.session_id = $1 AND m.layer = 'session' AND m.archived_at IS NULL
                 RETURNING {MEMORY_COLUMNS}"
            );
            let mut archived = all(
                &tx,
                &sql,
                &[
                    &id,
                    &at.as_millis(),
                    &archive_expires_at.map(Timestamp::as_millis),
                    &ctx.now().as_millis(),
                    &rev,
                ],
                memory_row,
            )
            .await?;
            archived.sort_by_key(|memory| memory.seq);
            let session = select_session(&tx, id).await?.ok_or_else(missing)?;
            Ok(((session, archived), Some(rev)))
        })?;
        if let Some(rev) = rev {
            self.saw_revision(rev);
        }
        Ok(ended)
    }

    async fn set_session_summary(&self, id: &str, memory_id: &str) -> Result<(), StoreError> {
        transact!(self, |tx, _ctx| {
            let changed = tx
                .execute(
                    "UPDATE memory_sessions SET summary_memory_id = $2 WHERE id = $1",
                    &[&id, &memory_id],
                )
                .await?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    kind: "memory session",
                    id: id.to_owned(),
                }
                .into());
            }
            Ok(())
        })
    }

    async fn sessions(
        &self,
        namespace: &str,
        limit_to: usize,
    ) -> Result<Vec<MemorySession>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE namespace = $1 ORDER BY started_at DESC, id DESC LIMIT $2"
            );
            all(client, &sql, &[&namespace, &limit(limit_to)], session_row).await
        })
    }
}
