//! [`ToolCallStore`] and [`AuditStore`] on [`SqliteStore`]: tool-call
//! records, the audit trail, and calls on record before they run.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use satchel_core::{ErrorCode, ToolOutput};

use crate::sqlite::failure::{Failure, column_error};
use crate::sqlite::rows::{UnknownName, all, json, timestamp, touch_conversation};
use crate::sqlite::writer::WriteCtx;
use crate::sqlite::{Redact, SqliteStore, When};
use crate::{
    AuditQuery, AuditRecord, AuditSource, AuditStore, CallStartRecord, NewAudit, NewCallStart,
    NewToolCall, StoreError, Timestamp, ToolCallRecord, ToolCallStore,
};

const TOOL_CALL_COLUMNS: &str = "id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us";
const AUDIT_COLUMNS: &str = "id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller";
const INSERT_TOOL_CALL: &str = "INSERT INTO tool_calls (id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
const INSERT_AUDIT: &str = "INSERT INTO audit (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";

fn tool_call_row(row: &Row<'_>) -> rusqlite::Result<ToolCallRecord> {
    let results: String = row.get(7)?;
    let error_code: Option<String> = row.get(11)?;
    let error_code = error_code.and_then(|name| {
        let code = ErrorCode::parse(&name);
        if code.is_none() {
            tracing::warn!(code = %name, "a stored tool call has an error code this build does not know");
        }
        code
    });
    Ok(ToolCallRecord {
        id: row.get(0)?,
        conversation_id: row.get(1)?,
        statement_id: row.get(2)?,
        turn: row.get(3)?,
        call_id: row.get(4)?,
        tool: row.get(5)?,
        input: json(row, 6)?,
        output: ToolOutput {
            results: serde_json::from_str(&results).map_err(|error| column_error(7, error))?,
            response: row.get(8)?,
            user_message: row.get(9)?,
            is_error: row.get(10)?,
            error_code,
        },
        started_at: timestamp(row, 12)?,
        finished_at: timestamp(row, 13)?,
        duration_us: row.get(14)?,
    })
}

/// The audit source in column `index`.
fn audit_source(row: &Row<'_>, index: usize) -> rusqlite::Result<AuditSource> {
    let source: String = row.get(index)?;
    AuditSource::parse(&source).ok_or_else(|| {
        column_error(
            index,
            UnknownName {
                what: "audit source",
                value: source,
            },
        )
    })
}

fn audit_row(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    Ok(AuditRecord {
        id: row.get(0)?,
        source: audit_source(row, 1)?,
        tool: row.get(2)?,
        input: json(row, 3)?,
        is_error: row.get(4)?,
        error_code: row.get(5)?,
        decision: row.get(6)?,
        conversation_id: row.get(7)?,
        tool_call_id: row.get(8)?,
        started_at: timestamp(row, 9)?,
        finished_at: timestamp(row, 10)?,
        duration_us: row.get(11)?,
        caller: row.get(12)?,
    })
}

fn insert_tool_call(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    new: NewToolCall,
) -> Result<String, Failure> {
    if let Some(conversation_id) = &new.conversation_id {
        touch_conversation(tx, conversation_id, ctx.now())?;
    }
    let id = ctx.new_id();
    let input = serde_json::to_string(&new.call.input)?;
    let results = serde_json::to_string(&new.output.results)?;
    let error_code = new.output.error_code.map(ErrorCode::as_str);
    tx.prepare_cached(INSERT_TOOL_CALL)?.execute(params![
        id,
        new.conversation_id,
        new.statement_id,
        new.turn,
        new.call.id,
        new.call.name,
        input,
        results,
        new.output.response,
        new.output.user_message,
        new.output.is_error,
        error_code,
        new.started_at.as_millis(),
        new.finished_at.as_millis(),
        new.duration_us,
    ])?;
    tx.prepare_cached(INSERT_AUDIT)?.execute(params![
        ctx.new_id(),
        new.source.as_str(),
        new.call.name,
        input,
        new.output.is_error,
        error_code,
        new.decision,
        new.conversation_id,
        id,
        new.started_at.as_millis(),
        new.finished_at.as_millis(),
        new.duration_us,
        new.caller,
    ])?;
    Ok(id)
}

pub(super) fn select_tool_calls(
    conn: &Connection,
    conversation_id: &str,
) -> Result<Vec<ToolCallRecord>, Failure> {
    let sql = format!(
        "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE conversation_id = ?1 ORDER BY started_at, id"
    );
    all(conn, &sql, [conversation_id], tool_call_row)
}

impl SqliteStore {
    /// [`AuditStore::finish_calls`], handed to the writer before this
    /// returns (behind every write queued before it): the future only
    /// waits for the commit. A caller that does not wait still has the
    /// write done before the store closes.
    pub fn queue_finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send + 'static {
        self.enqueue(records, move |tx, ctx, records| {
            finish(tx, ctx, &ended, records)
        })
    }

    /// [`SqliteStore::queue_finish_calls`] for a caller that does not wait
    /// for it (a served call whose answer has gone): the writer holds it
    /// up to [`StoreOptions::hold`](super::StoreOptions::hold) (10 ms by
    /// default) to commit it with other such
    /// writes, if need be after writes queued later. It still commits
    /// before the store closes; a process killed first leaves the calls
    /// begun and never ended.
    pub fn finish_calls_later(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send + 'static {
        self.enqueue_as(When::Later, records, move |tx, ctx, records| {
            finish(tx, ctx, &ended, records)
        })
    }
}

/// Puts a call's start on record as `id`.
fn insert_start(tx: &Transaction<'_>, id: &str, start: &NewCallStart) -> Result<String, Failure> {
    tx.prepare_cached(
        "INSERT INTO call_starts (id, source, tool, call_id, input, conversation_id, started_at, caller)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        start.source.as_str(),
        start.call.name,
        start.call.id,
        serde_json::to_string(&start.call.input)?,
        start.conversation_id,
        start.started_at.as_millis(),
        start.caller,
    ])?;
    Ok(id.to_owned())
}

/// The records of finished calls, and their starts ended.
fn finish(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    ended: &[String],
    records: Vec<NewToolCall>,
) -> Result<Vec<String>, Failure> {
    let ids = records
        .into_iter()
        .map(|record| insert_tool_call(tx, ctx, record))
        .collect::<Result<Vec<String>, Failure>>()?;
    let mut delete = tx.prepare_cached("DELETE FROM call_starts WHERE id = ?1")?;
    for id in ended {
        delete.execute(params![id])?;
    }
    Ok(ids)
}

#[async_trait]
impl ToolCallStore for SqliteStore {
    async fn record_tool_call(&self, new: NewToolCall) -> Result<String, StoreError> {
        self.write(new, insert_tool_call).await
    }

    async fn record_tool_calls(&self, new: Vec<NewToolCall>) -> Result<Vec<String>, StoreError> {
        self.write(new, |tx, ctx, new| {
            new.into_iter()
                .map(|call| insert_tool_call(tx, ctx, call))
                .collect()
        })
        .await
    }

    async fn tool_call(&self, id: &str) -> Result<Option<ToolCallRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            let sql = format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = ?1");
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([id], tool_call_row)
                .optional()?)
        })
        .await
    }

    async fn tool_calls(&self, conversation_id: &str) -> Result<Vec<ToolCallRecord>, StoreError> {
        let id = conversation_id.to_owned();
        self.read(move |conn| select_tool_calls(conn, &id)).await
    }
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn record_audit(&self, new: NewAudit) -> Result<String, StoreError> {
        self.write(new, |tx, ctx, new| {
            let id = ctx.new_id();
            tx.prepare_cached(INSERT_AUDIT)?.execute(params![
                id,
                new.source.as_str(),
                new.tool,
                serde_json::to_string(&new.input)?,
                new.is_error,
                new.error_code,
                new.decision,
                new.conversation_id,
                None::<String>,
                new.started_at.as_millis(),
                new.finished_at.as_millis(),
                new.duration_us,
                new.caller,
            ])?;
            Ok(id)
        })
        .await
    }

    async fn begin_call(&self, start: NewCallStart) -> Result<String, StoreError> {
        let Some(journal) = self.journal() else {
            // Read-only: the writer refuses it as it refuses every write.
            return self
                .write(start, |tx, ctx, start| {
                    insert_start(tx, &ctx.new_id(), &start)
                })
                .await;
        };
        self.check_open()?;
        if journal.refusing() {
            // The last fold of journaled starts failed (a full disk, a
            // read-only or locked file): try again, and while it still
            // fails refuse the call, whose record could not be written.
            self.write((), |_, _, ()| Ok(())).await?;
            if let Some(error) = journal.refusal() {
                return Err(error);
            }
        }
        let start = start.redact(self.redactor());
        let id = journal.append(&start, self.options().clock.now())?;
        self.note_start()?;
        Ok(id)
    }

    async fn end_calls(&self, ids: Vec<String>) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.write(ids, |tx, _ctx, ids| {
            let mut delete = tx.prepare_cached("DELETE FROM call_starts WHERE id = ?1")?;
            for id in ids {
                delete.execute(params![id])?;
            }
            Ok(())
        })
        .await
    }

    async fn finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> Result<Vec<String>, StoreError> {
        self.queue_finish_calls(ended, records).await
    }

    async fn unfinished_calls(&self) -> Result<Vec<CallStartRecord>, StoreError> {
        // The starts journaled and the ends held, committed first.
        self.write((), |_, _, ()| Ok(())).await?;
        self.read(|conn| {
            all(
                conn,
                "SELECT id, source, tool, call_id, input, conversation_id, started_at, caller
                 FROM call_starts ORDER BY started_at, id",
                [],
                |row| {
                    Ok(CallStartRecord {
                        id: row.get(0)?,
                        source: audit_source(row, 1)?,
                        tool: row.get(2)?,
                        call_id: row.get(3)?,
                        input: json(row, 4)?,
                        conversation_id: row.get(5)?,
                        started_at: timestamp(row, 6)?,
                        caller: row.get(7)?,
                    })
                },
            )
        })
        .await
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {AUDIT_COLUMNS} FROM audit
                 WHERE (?1 IS NULL OR tool = ?1)
                   AND (?2 IS NULL OR source = ?2)
                   AND (?3 IS NULL OR started_at >= ?3)
                   AND (?4 = 0 OR is_error = 1)
                 ORDER BY started_at DESC, id DESC
                 LIMIT ?5"
            );
            let limit = query
                .limit
                .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
            let mut rows = all(
                conn,
                &sql,
                params![
                    query.tool,
                    query.source.map(AuditSource::as_str),
                    query.since.map(Timestamp::as_millis),
                    query.failed_only,
                    limit,
                ],
                audit_row,
            )?;
            rows.reverse();
            Ok(rows)
        })
        .await
    }
}
