//! [`MemoryStore`] on [`SqliteStore`]: memories, their embeddings as
//! little-endian `f32` blobs, revisions for the recall index (which lives
//! in memory, outside the file), and memory sessions.

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params, params_from_iter};

use crate::redact::Redactor;
use crate::sqlite::failure::{Failure, column_error};
use crate::sqlite::writer::WriteCtx;
use crate::sqlite::{Redact, SqliteStore};
use crate::{
    MemoryChanges, MemoryFilter, MemoryIndexRow, MemoryLayer, MemoryRecord, MemorySession,
    MemoryStats, MemoryStore, MemoryUpdate, NewMemory, NewMemorySession, StoreError, Timestamp,
};

const MEMORY_COLUMNS: &str = "m.seq, m.id, m.namespace, m.layer, m.content, m.category, m.certainty, m.session_id, m.conversation_id, m.created_at, m.updated_at, m.expires_at, m.archived_at";
const SESSION_COLUMNS: &str =
    "id, namespace, conversation_id, name, started_at, ended_at, end_reason, summary_memory_id";
const INDEX_COLUMNS: &str = "seq, content, namespace, layer, category, certainty, session_id, created_at, expires_at, archived_at IS NOT NULL, embedding";

/// A stored layer name this build does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown memory layer `{0}`")]
struct UnknownLayer(String);

/// An embedding blob whose length is not a whole number of `f32`s.
#[derive(Debug, thiserror::Error)]
#[error("an embedding of {0} bytes is not a list of 4-byte floats")]
struct BadEmbedding(usize);

impl Redact for NewMemory {
    fn redact(self, redactor: &Redactor) -> NewMemory {
        NewMemory {
            content: self.content.redact(redactor),
            category: self.category.redact(redactor),
            ..self
        }
    }
}

impl Redact for MemoryUpdate {
    fn redact(self, redactor: &Redactor) -> MemoryUpdate {
        MemoryUpdate {
            content: self.content.redact(redactor),
            category: self.category.redact(redactor),
            ..self
        }
    }
}

impl Redact for NewMemorySession {
    fn redact(self, redactor: &Redactor) -> NewMemorySession {
        NewMemorySession {
            name: self.name.redact(redactor),
            ..self
        }
    }
}

/// Nothing to redact: ids and times.
impl Redact for () {
    fn redact(self, _: &Redactor) {}
}

fn layer(row: &Row<'_>, index: usize) -> rusqlite::Result<MemoryLayer> {
    let name: String = row.get(index)?;
    MemoryLayer::parse(&name).ok_or_else(|| column_error(index, UnknownLayer(name)))
}

fn optional_time(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<Timestamp>> {
    Ok(row
        .get::<_, Option<i64>>(index)?
        .map(Timestamp::from_millis))
}

fn memory_row(row: &Row<'_>) -> rusqlite::Result<MemoryRecord> {
    Ok(MemoryRecord {
        seq: row.get(0)?,
        id: row.get(1)?,
        namespace: row.get(2)?,
        layer: layer(row, 3)?,
        content: row.get(4)?,
        category: row.get(5)?,
        certainty: row.get::<_, f64>(6)? as f32,
        session_id: row.get(7)?,
        conversation_id: row.get(8)?,
        created_at: Timestamp::from_millis(row.get(9)?),
        updated_at: Timestamp::from_millis(row.get(10)?),
        expires_at: optional_time(row, 11)?,
        archived_at: optional_time(row, 12)?,
    })
}

fn session_row(row: &Row<'_>) -> rusqlite::Result<MemorySession> {
    Ok(MemorySession {
        id: row.get(0)?,
        namespace: row.get(1)?,
        conversation_id: row.get(2)?,
        name: row.get(3)?,
        started_at: Timestamp::from_millis(row.get(4)?),
        ended_at: optional_time(row, 5)?,
        end_reason: row.get(6)?,
        summary_memory_id: row.get(7)?,
    })
}

fn index_row(row: &Row<'_>) -> rusqlite::Result<MemoryIndexRow> {
    let blob: Option<Vec<u8>> = row.get(10)?;
    Ok(MemoryIndexRow {
        seq: row.get(0)?,
        content: row.get(1)?,
        namespace: row.get(2)?,
        layer: layer(row, 3)?,
        category: row.get(4)?,
        certainty: row.get::<_, f64>(5)? as f32,
        session_id: row.get(6)?,
        created_at: Timestamp::from_millis(row.get(7)?),
        expires_at: optional_time(row, 8)?,
        archived: row.get(9)?,
        embedding: blob.map(|bytes| decode_embedding(&bytes, 10)).transpose()?,
    })
}

fn encode_embedding(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

fn decode_embedding(bytes: &[u8], index: usize) -> rusqlite::Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(column_error(index, BadEmbedding(bytes.len())));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect())
}

fn certainty(value: f32) -> f64 {
    f64::from(value.clamp(0.0, 1.0))
}

/// Takes the next revision for this write.
fn next_rev(tx: &Transaction<'_>) -> Result<i64, Failure> {
    Ok(tx
        .prepare_cached("UPDATE memory_state SET rev = rev + 1 WHERE id = 1 RETURNING rev")?
        .query_row([], |row| row.get(0))?)
}

/// The `WHERE` clause (over `memories m`) and its parameters for a filter.
fn filter_sql(filter: &MemoryFilter) -> (String, Vec<SqlValue>) {
    let mut clauses = vec!["m.namespace = ?".to_owned()];
    let mut values = vec![SqlValue::Text(filter.namespace.clone())];
    if !filter.layers.is_empty() {
        let marks = vec!["?"; filter.layers.len()].join(", ");
        clauses.push(format!("m.layer IN ({marks})"));
        values.extend(
            filter
                .layers
                .iter()
                .map(|layer| SqlValue::Text(layer.as_str().to_owned())),
        );
    }
    if let Some(category) = &filter.category {
        clauses.push("m.category = ? COLLATE NOCASE".into());
        values.push(SqlValue::Text(category.clone()));
    }
    if let Some(since) = filter.since {
        clauses.push("m.created_at >= ?".into());
        values.push(SqlValue::Integer(since.as_millis()));
    }
    if let Some(until) = filter.until {
        clauses.push("m.created_at < ?".into());
        values.push(SqlValue::Integer(until.as_millis()));
    }
    if let Some(now) = filter.live_at {
        clauses.push("(m.expires_at IS NULL OR m.expires_at > ?)".into());
        values.push(SqlValue::Integer(now.as_millis()));
    }
    if !filter.include_archived {
        clauses.push("m.archived_at IS NULL".into());
    }
    if let Some(session) = &filter.session_id {
        clauses.push("(m.layer <> 'session' OR m.session_id = ?)".into());
        values.push(SqlValue::Text(session.clone()));
    }
    (clauses.join(" AND "), values)
}

fn select_memory(conn: &Connection, id: &str) -> Result<Option<MemoryRecord>, Failure> {
    let sql = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], memory_row)
        .optional()?)
}

fn select_session(conn: &Connection, id: &str) -> Result<Option<MemorySession>, Failure> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], session_row)
        .optional()?)
}

fn insert_memory(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    rev: i64,
    new: NewMemory,
) -> Result<MemoryRecord, Failure> {
    let created_at = new.created_at.unwrap_or(ctx.now());
    let id = ctx.new_id();
    let embedding = new.embedding.as_deref().map(encode_embedding);
    let seq: i64 = tx
        .prepare_cached(
            "INSERT INTO memories (id, namespace, layer, content, category, certainty, session_id, conversation_id, created_at, updated_at, expires_at, archived_at, embedding, rev)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, NULL, ?12, ?13) RETURNING seq",
        )?
        .query_row(
            params![
                id,
                new.namespace,
                new.layer.as_str(),
                new.content,
                new.category,
                certainty(new.certainty),
                new.session_id,
                new.conversation_id,
                created_at.as_millis(),
                ctx.now().as_millis(),
                new.expires_at.map(Timestamp::as_millis),
                embedding,
                rev,
            ],
            |row| row.get(0),
        )?;
    Ok(MemoryRecord {
        id,
        seq,
        namespace: new.namespace,
        layer: new.layer,
        content: new.content,
        category: new.category,
        certainty: new.certainty.clamp(0.0, 1.0),
        session_id: new.session_id,
        conversation_id: new.conversation_id,
        created_at,
        updated_at: ctx.now(),
        expires_at: new.expires_at,
        archived_at: None,
    })
}

/// Deletes the rows `condition` selects (over `memories`), recording their
/// keys under a new revision; returns their ids.
fn delete_where(
    tx: &Transaction<'_>,
    condition: &str,
    values: Vec<SqlValue>,
) -> Result<Vec<String>, Failure> {
    let doomed: Vec<(i64, String)> = {
        let sql = format!("SELECT seq, id FROM memories WHERE {condition}");
        let mut statement = tx.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(values), |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    if doomed.is_empty() {
        return Ok(Vec::new());
    }
    let rev = next_rev(tx)?;
    let mut delete = tx.prepare_cached("DELETE FROM memories WHERE seq = ?1")?;
    let mut record =
        tx.prepare_cached("INSERT INTO memory_deletions (rev, seq) VALUES (?1, ?2)")?;
    for (seq, _) in &doomed {
        delete.execute([seq])?;
        record.execute([rev, *seq])?;
    }
    Ok(doomed.into_iter().map(|(_, id)| id).collect())
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn insert_memories(&self, new: Vec<NewMemory>) -> Result<Vec<MemoryRecord>, StoreError> {
        self.write(new, |tx, ctx, new| {
            let rev = next_rev(tx)?;
            new.into_iter()
                .map(|memory| insert_memory(tx, ctx, rev, memory))
                .collect()
        })
        .await
    }

    async fn memories_without_embedding(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut statement = conn.prepare_cached(
                "SELECT id, content FROM memories WHERE embedding IS NULL ORDER BY seq LIMIT ?1",
            )?;
            let rows = statement.query_map([limit], |row| Ok((row.get(0)?, row.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn set_memory_embedding(
        &self,
        id: &str,
        content: &str,
        embedding: Vec<f32>,
    ) -> Result<bool, StoreError> {
        // The text compared was read from the store: already redacted.
        let (id, content) = (id.to_owned(), content.to_owned());
        self.write((), move |tx, _, ()| {
            let rev = next_rev(tx)?;
            let changed = tx
                .prepare_cached(
                    "UPDATE memories SET embedding = ?3, rev = ?4
                     WHERE id = ?1 AND content = ?2 AND embedding IS NULL",
                )?
                .execute(params![id, content, encode_embedding(&embedding), rev])?;
            Ok(changed == 1)
        })
        .await
    }

    async fn update_memory(&self, update: MemoryUpdate) -> Result<MemoryRecord, StoreError> {
        self.write(update, |tx, ctx, update| {
            let rev = next_rev(tx)?;
            let changed = tx
                .prepare_cached(
                    "UPDATE memories SET content = ?2, category = ?3, certainty = ?4, expires_at = ?5,
                        embedding = coalesce(?6, embedding), updated_at = ?7, rev = ?8 WHERE id = ?1",
                )?
                .execute(params![
                    update.id,
                    update.content,
                    update.category,
                    certainty(update.certainty),
                    update.expires_at.map(Timestamp::as_millis),
                    update.embedding.as_deref().map(encode_embedding),
                    ctx.now().as_millis(),
                    rev,
                ])?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    kind: "memory",
                    id: update.id,
                }
                .into());
            }
            select_memory(tx, &update.id)?.ok_or_else(|| {
                Failure::from(StoreError::NotFound {
                    kind: "memory",
                    id: update.id.clone(),
                })
            })
        })
        .await
    }

    async fn delete_memories(
        &self,
        namespace: &str,
        ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        let namespace = namespace.to_owned();
        self.write((), move |tx, _, ()| {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let marks = vec!["?"; ids.len()].join(", ");
            let mut values = vec![SqlValue::Text(namespace)];
            values.extend(ids.into_iter().map(SqlValue::Text));
            delete_where(tx, &format!("namespace = ? AND id IN ({marks})"), values)
        })
        .await
    }

    async fn purge_expired_memories(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write((), move |tx, _, ()| {
            let deleted = delete_where(
                tx,
                "expires_at IS NOT NULL AND expires_at <= ?",
                vec![SqlValue::Integer(now.as_millis())],
            )?;
            Ok(deleted.len() as u64)
        })
        .await
    }

    async fn memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| select_memory(conn, &id)).await
    }

    async fn memories_by_seq(&self, seqs: Vec<i64>) -> Result<Vec<MemoryRecord>, StoreError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        self.read(move |conn| {
            let marks = vec!["?"; seqs.len()].join(", ");
            let sql = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN ({marks})");
            let mut statement = conn.prepare(&sql)?;
            let found: Vec<MemoryRecord> = statement
                .query_map(params_from_iter(seqs.iter()), memory_row)?
                .collect::<Result<_, _>>()?;
            let mut by_seq: std::collections::HashMap<i64, MemoryRecord> =
                found.into_iter().map(|m| (m.seq, m)).collect();
            Ok(seqs.iter().filter_map(|seq| by_seq.remove(seq)).collect())
        })
        .await
    }

    async fn list_memories(
        &self,
        filter: MemoryFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        self.read(move |conn| {
            let (condition, mut values) = filter_sql(&filter);
            values.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
            let sql = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} ORDER BY m.created_at DESC, m.seq DESC LIMIT ?"
            );
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map(params_from_iter(values), memory_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

    async fn memories_with_text(
        &self,
        filter: MemoryFilter,
        content: &str,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        let content = content.trim().to_owned();
        self.read(move |conn| {
            let (condition, mut values) = filter_sql(&filter);
            values.push(SqlValue::Text(content));
            let sql = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} AND lower(trim(m.content)) = lower(?) ORDER BY m.created_at DESC"
            );
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map(params_from_iter(values), memory_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

    async fn memory_changes(&self, since: i64) -> Result<MemoryChanges, StoreError> {
        self.read(move |conn| {
            // One snapshot: the revision and the rows agree.
            let tx = conn.unchecked_transaction()?;
            let rev: i64 = tx
                .prepare_cached("SELECT rev FROM memory_state WHERE id = 1")?
                .query_row([], |row| row.get(0))?;
            let sql = format!("SELECT {INDEX_COLUMNS} FROM memories WHERE rev > ?1 ORDER BY seq");
            let upserts = tx
                .prepare_cached(&sql)?
                .query_map([since], index_row)?
                .collect::<Result<Vec<_>, _>>()?;
            let deleted = if since == 0 {
                Vec::new()
            } else {
                tx.prepare_cached("SELECT seq FROM memory_deletions WHERE rev > ?1")?
                    .query_map([since], |row| row.get(0))?
                    .collect::<Result<Vec<i64>, _>>()?
            };
            tx.commit()?;
            Ok(MemoryChanges {
                rev,
                upserts,
                deleted,
            })
        })
        .await
    }

    async fn memory_revision(&self) -> Result<i64, StoreError> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached("SELECT rev FROM memory_state WHERE id = 1")?
                .query_row([], |row| row.get(0))?)
        })
        .await
    }

    async fn memory_stats(
        &self,
        namespace: &str,
        now: Timestamp,
    ) -> Result<MemoryStats, StoreError> {
        let namespace = namespace.to_owned();
        self.read(move |conn| {
            let tx = conn.unchecked_transaction()?;
            let mut stats = MemoryStats {
                namespace: namespace.clone(),
                ..MemoryStats::default()
            };
            let (total, expired, archived, without, oldest, newest): (
                u64,
                u64,
                u64,
                u64,
                Option<i64>,
                Option<i64>,
            ) = tx
                .prepare_cached(
                    "SELECT count(*), coalesce(sum(expires_at IS NOT NULL AND expires_at <= ?2), 0),
                        coalesce(sum(archived_at IS NOT NULL), 0), coalesce(sum(embedding IS NULL), 0),
                        min(created_at), max(created_at)
                     FROM memories WHERE namespace = ?1",
                )?
                .query_row(params![namespace, now.as_millis()], |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                    ))
                })?;
            stats.total = total;
            stats.expired = expired;
            stats.archived = archived;
            stats.without_embedding = without;
            stats.oldest = oldest.map(Timestamp::from_millis);
            stats.newest = newest.map(Timestamp::from_millis);
            let mut statement = tx.prepare_cached(
                "SELECT layer, count(*) FROM memories WHERE namespace = ?1 GROUP BY layer",
            )?;
            let rows = statement.query_map([&namespace], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?))
            })?;
            for row in rows {
                let (layer, count) = row?;
                stats.by_layer.insert(layer, count);
            }
            drop(statement);
            let (sessions, open): (u64, u64) = tx
                .prepare_cached(
                    "SELECT count(*), coalesce(sum(ended_at IS NULL), 0) FROM memory_sessions WHERE namespace = ?1",
                )?
                .query_row([&namespace], |row| Ok((row.get(0)?, row.get(1)?)))?;
            stats.sessions = sessions;
            stats.open_sessions = open;
            tx.commit()?;
            Ok(stats)
        })
        .await
    }

    async fn start_session(&self, new: NewMemorySession) -> Result<MemorySession, StoreError> {
        self.write(new, |tx, ctx, new| {
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
            tx.prepare_cached(
                "INSERT INTO memory_sessions (id, namespace, conversation_id, name, started_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                session.id,
                session.namespace,
                session.conversation_id,
                session.name,
                session.started_at.as_millis(),
            ])?;
            Ok(session)
        })
        .await
    }

    async fn open_session(
        &self,
        namespace: &str,
        conversation_id: Option<&str>,
    ) -> Result<Option<MemorySession>, StoreError> {
        let namespace = namespace.to_owned();
        let conversation_id = conversation_id.map(str::to_owned);
        self.read(move |conn| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE namespace = ?1 AND conversation_id IS ?2 AND ended_at IS NULL
                 ORDER BY started_at DESC, id DESC LIMIT 1"
            );
            Ok(conn
                .prepare_cached(&sql)?
                .query_row(params![namespace, conversation_id], session_row)
                .optional()?)
        })
        .await
    }

    async fn end_session(
        &self,
        id: &str,
        at: Timestamp,
        reason: &str,
        archive_expires_at: Option<Timestamp>,
    ) -> Result<(MemorySession, Vec<MemoryRecord>), StoreError> {
        let id = id.to_owned();
        let reason = reason.to_owned();
        self.write((), move |tx, ctx, ()| {
            let Some(session) = select_session(tx, &id)? else {
                return Err(StoreError::NotFound {
                    kind: "memory session",
                    id,
                }
                .into());
            };
            if session.ended_at.is_some() {
                return Ok((session, Vec::new()));
            }
            tx.prepare_cached(
                "UPDATE memory_sessions SET ended_at = ?2, end_reason = ?3 WHERE id = ?1",
            )?
            .execute(params![id, at.as_millis(), reason])?;
            let rev = next_rev(tx)?;
            // RETURNING cannot name the table's alias.
            let returning = MEMORY_COLUMNS.replace("m.", "");
            let sql = format!(
                "UPDATE memories AS m SET archived_at = ?2, expires_at = ?3, updated_at = ?4, rev = ?5
                 WHERE m.session_id = ?1 AND m.layer = 'session' AND m.archived_at IS NULL
                 RETURNING {returning}"
            );
            let archived = tx
                .prepare(&sql)?
                .query_map(
                    params![
                        id,
                        at.as_millis(),
                        archive_expires_at.map(Timestamp::as_millis),
                        ctx.now().as_millis(),
                        rev
                    ],
                    memory_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            let session = select_session(tx, &id)?.ok_or_else(|| {
                Failure::from(StoreError::NotFound {
                    kind: "memory session",
                    id: id.clone(),
                })
            })?;
            Ok((session, archived))
        })
        .await
    }

    async fn set_session_summary(&self, id: &str, memory_id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        let memory_id = memory_id.to_owned();
        self.write((), move |tx, _, ()| {
            let changed = tx
                .prepare_cached("UPDATE memory_sessions SET summary_memory_id = ?2 WHERE id = ?1")?
                .execute(params![id, memory_id])?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    kind: "memory session",
                    id,
                }
                .into());
            }
            Ok(())
        })
        .await
    }

    async fn sessions(
        &self,
        namespace: &str,
        limit: usize,
    ) -> Result<Vec<MemorySession>, StoreError> {
        let namespace = namespace.to_owned();
        self.read(move |conn| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM memory_sessions WHERE namespace = ?1 ORDER BY started_at DESC, id DESC LIMIT ?2"
            );
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map(
                params![namespace, i64::try_from(limit).unwrap_or(i64::MAX)],
                session_row,
            )?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }
}
