//! [`ToolCallStore`] and [`AuditStore`] on [`PgStore`]: tool-call
//! records, the audit trail, and calls on record before they run.
//!
//! Calls are written in one statement for up to [`CHUNK`] of them: their
//! columns go as arrays, `unnest` makes the rows, and one `INSERT` each
//! fills `tool_calls` and `audit` (and a `DELETE` ends the call's start).
//! One call (and the one start it ends) has a statement of its own, from
//! scalars. One call with no conversation is that one statement alone,
//! one round trip in autocommit; anything else runs in a transaction.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use satchel_core::{ErrorCode, ToolOutput};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::postgres::failure::PgFailure;
use crate::postgres::rows::{
    Unreadable, all, big, first, json, limit, optional_small, read, timestamp, touch_conversation,
    unsigned,
};
use crate::postgres::{Ctx, PgStore, search, transact};
use crate::{
    AuditQuery, AuditRecord, AuditSource, AuditStore, CallStartRecord, NewAudit, NewCallStart,
    NewToolCall, StoreError, Timestamp, ToolCallRecord, ToolCallStore,
};

/// Most calls written by one statement.
const CHUNK: usize = 1000;

/// Writes calls and their audit rows from arrays (one element a call), and
/// ends the starts in `$21`.
const INSERT_CALLS: &str = "WITH new_rows AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::bigint[], $14::bigint[], $15::bigint[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[])
        AS r(id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us, search_text, audit_id, source, decision, caller)
), calls AS (
    INSERT INTO tool_calls (id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us, search)
    SELECT id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us,
        CASE WHEN conversation_id IS NULL THEN NULL ELSE to_tsvector('simple', search_text) END
    FROM new_rows
), ended AS (
    DELETE FROM call_starts WHERE id = ANY($21::text[])
)
INSERT INTO audit (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller)
SELECT audit_id, source, tool, input, is_error, error_code, decision, conversation_id, id, started_at, finished_at, duration_us, caller
FROM new_rows";

/// [`INSERT_CALLS`] for one call and at most one start ended: the same
/// rows from scalars. One call is what every host writes as a call ends,
/// and the server runs this in less time than arrays it must unnest (one
/// call's p50 2.40 -> 2.01x SQLite's in `cargo bench -p satchel-store
/// --bench backends`).
const INSERT_ONE: &str = "WITH calls AS (
    INSERT INTO tool_calls (id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us, search)
    VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text, $11::boolean, $12::text, $13::bigint, $14::bigint, $15::bigint,
        CASE WHEN $2::text IS NULL THEN NULL ELSE to_tsvector('simple', $16::text) END)
), ended AS (
    DELETE FROM call_starts WHERE id = $21::text
)
INSERT INTO audit (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller)
VALUES ($17::text, $18::text, $6::text, $7::text, $11::boolean, $12::text, $19::text, $2::text, $1::text, $13::bigint, $14::bigint, $15::bigint, $20::text)";

/// Puts a call on record before it runs.
const INSERT_START: &str = "INSERT INTO call_starts (id, source, tool, call_id, input, conversation_id, started_at, caller)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// The columns of calls to write, one array a column.
#[derive(Default)]
struct Columns {
    id: Vec<String>,
    conversation_id: Vec<Option<String>>,
    statement_id: Vec<Option<String>>,
    turn: Vec<Option<i64>>,
    call_id: Vec<String>,
    tool: Vec<String>,
    input: Vec<String>,
    results: Vec<String>,
    response: Vec<Option<String>>,
    user_message: Vec<String>,
    is_error: Vec<bool>,
    error_code: Vec<Option<&'static str>>,
    started_at: Vec<i64>,
    finished_at: Vec<i64>,
    duration_us: Vec<i64>,
    search_text: Vec<Option<String>>,
    audit_id: Vec<String>,
    source: Vec<&'static str>,
    decision: Vec<Option<String>>,
    caller: Vec<Option<String>>,
}

impl Columns {
    /// Adds one call, with new ids for its record and its audit row.
    fn push(&mut self, ctx: &Ctx<'_>, new: NewToolCall) -> Result<(), PgFailure> {
        // Only a conversation's calls are searched (as one row of SQLite's index).
        let search_text = new.conversation_id.as_ref().map(|_| {
            search::tool_call_text(
                &new.call.name,
                &new.call.input,
                &new.output.results,
                new.output.response.as_deref(),
            )
        });
        self.id.push(ctx.new_id());
        self.audit_id.push(ctx.new_id());
        self.input.push(serde_json::to_string(&new.call.input)?);
        self.results
            .push(serde_json::to_string(&new.output.results)?);
        self.conversation_id.push(new.conversation_id);
        self.statement_id.push(new.statement_id);
        self.turn.push(new.turn.map(i64::from));
        self.call_id.push(new.call.id);
        self.tool.push(new.call.name);
        self.response.push(new.output.response);
        self.user_message.push(new.output.user_message);
        self.is_error.push(new.output.is_error);
        self.error_code
            .push(new.output.error_code.map(ErrorCode::as_str));
        self.started_at.push(new.started_at.as_millis());
        self.finished_at.push(new.finished_at.as_millis());
        self.duration_us.push(big(new.duration_us));
        self.search_text.push(search_text);
        self.source.push(new.source.as_str());
        self.decision.push(new.decision);
        self.caller.push(new.caller);
        Ok(())
    }
}

/// Writes `calls` (at most [`CHUNK`]) and ends `ended` in one statement;
/// returns the records' ids in order.
async fn insert_calls<C: GenericClient + Sync>(
    client: &C,
    ctx: &Ctx<'_>,
    calls: Vec<NewToolCall>,
    ended: &[String],
) -> Result<Vec<String>, PgFailure> {
    let mut c = Columns::default();
    for call in calls {
        c.push(ctx, call)?;
    }
    if c.id.len() == 1 && ended.len() <= 1 {
        return insert_one(client, c, ended).await;
    }
    let statement = client.prepare_cached(INSERT_CALLS).await?;
    let params: [&(dyn ToSql + Sync); 21] = [
        &c.id,
        &c.conversation_id,
        &c.statement_id,
        &c.turn,
        &c.call_id,
        &c.tool,
        &c.input,
        &c.results,
        &c.response,
        &c.user_message,
        &c.is_error,
        &c.error_code,
        &c.started_at,
        &c.finished_at,
        &c.duration_us,
        &c.search_text,
        &c.audit_id,
        &c.source,
        &c.decision,
        &c.caller,
        &ended,
    ];
    client.execute(&statement, &params).await?;
    Ok(c.id)
}

/// Writes the one call in `c` by [`INSERT_ONE`].
async fn insert_one<C: GenericClient + Sync>(
    client: &C,
    c: Columns,
    ended: &[String],
) -> Result<Vec<String>, PgFailure> {
    let statement = client.prepare_cached(INSERT_ONE).await?;
    let params: [&(dyn ToSql + Sync); 21] = [
        &c.id[0],
        &c.conversation_id[0],
        &c.statement_id[0],
        &c.turn[0],
        &c.call_id[0],
        &c.tool[0],
        &c.input[0],
        &c.results[0],
        &c.response[0],
        &c.user_message[0],
        &c.is_error[0],
        &c.error_code[0],
        &c.started_at[0],
        &c.finished_at[0],
        &c.duration_us[0],
        &c.search_text[0],
        &c.audit_id[0],
        &c.source[0],
        &c.decision[0],
        &c.caller[0],
        &ended.first(),
    ];
    client.execute(&statement, &params).await?;
    Ok(c.id)
}

impl PgStore {
    /// Writes `calls` with their audit rows and ends the starts `ended`,
    /// all or nothing; returns the records' ids in order.
    async fn record_calls(
        &self,
        ended: Vec<String>,
        calls: Vec<NewToolCall>,
    ) -> Result<Vec<String>, StoreError> {
        if calls.is_empty() && ended.is_empty() {
            return Ok(Vec::new());
        }
        let calls = self.redacted(calls);
        let mut conversations: Vec<String> = calls
            .iter()
            .filter_map(|call| call.conversation_id.clone())
            .collect();
        conversations.sort();
        conversations.dedup();
        if conversations.is_empty() && calls.len() <= CHUNK {
            // One statement is one transaction: no BEGIN and COMMIT to wait for.
            let client = self.writer().await?;
            let ctx = self.ctx();
            return insert_calls(&client, &ctx, calls, &ended)
                .await
                .map_err(|failure| self.error(failure));
        }
        transact!(self, |tx, ctx| {
            // Each conversation touched once, in order (no lock cycles).
            for id in &conversations {
                touch_conversation(&tx, id, ctx.now()).await?;
            }
            let mut ids = Vec::with_capacity(calls.len());
            let mut rest = calls;
            let mut ended = ended;
            if rest.is_empty() {
                insert_calls(&tx, &ctx, Vec::new(), &ended).await?;
            }
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(CHUNK));
                ids.extend(insert_calls(&tx, &ctx, rest, &ended).await?);
                ended.clear();
                rest = tail;
            }
            Ok(ids)
        })
    }
}

const TOOL_CALL_COLUMNS: &str = "id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us";
const AUDIT_COLUMNS: &str = "id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller";
const INSERT_AUDIT: &str = "INSERT INTO audit (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us, caller) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

fn tool_call_row(row: &Row) -> Result<ToolCallRecord, PgFailure> {
    let results: String = row.try_get(7)?;
    let error_code: Option<String> = row.try_get(11)?;
    let error_code = error_code.and_then(|name| {
        let code = ErrorCode::parse(&name);
        if code.is_none() {
            tracing::warn!(code = %name, "a stored tool call has an error code this build does not know");
        }
        code
    });
    Ok(ToolCallRecord {
        id: row.try_get(0)?,
        conversation_id: row.try_get(1)?,
        statement_id: row.try_get(2)?,
        turn: optional_small(row, 3)?,
        call_id: row.try_get(4)?,
        tool: row.try_get(5)?,
        input: json(row, 6)?,
        output: ToolOutput {
            results: serde_json::from_str(&results)?,
            response: row.try_get(8)?,
            user_message: row.try_get(9)?,
            is_error: row.try_get(10)?,
            error_code,
        },
        started_at: timestamp(row, 12)?,
        finished_at: timestamp(row, 13)?,
        duration_us: unsigned(row, 14)?,
    })
}

fn audit_source(row: &Row, index: usize) -> Result<AuditSource, PgFailure> {
    let source: String = row.try_get(index)?;
    Ok(AuditSource::parse(&source).ok_or(Unreadable {
        what: "audit source",
        value: source.clone(),
    })?)
}

fn audit_row(row: &Row) -> Result<AuditRecord, PgFailure> {
    Ok(AuditRecord {
        id: row.try_get(0)?,
        source: audit_source(row, 1)?,
        tool: row.try_get(2)?,
        input: json(row, 3)?,
        is_error: row.try_get(4)?,
        error_code: row.try_get(5)?,
        decision: row.try_get(6)?,
        conversation_id: row.try_get(7)?,
        tool_call_id: row.try_get(8)?,
        started_at: timestamp(row, 9)?,
        finished_at: timestamp(row, 10)?,
        duration_us: unsigned(row, 11)?,
        caller: row.try_get(12)?,
    })
}

pub(super) async fn select_tool_calls<C: GenericClient + Sync>(
    client: &C,
    conversation_id: &str,
) -> Result<Vec<ToolCallRecord>, PgFailure> {
    let sql = format!(
        "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE conversation_id = $1 ORDER BY started_at, id"
    );
    all(client, &sql, &[&conversation_id], tool_call_row).await
}

#[async_trait]
impl ToolCallStore for PgStore {
    async fn record_tool_call(&self, new: NewToolCall) -> Result<String, StoreError> {
        let ids = self.record_calls(Vec::new(), vec![new]).await?;
        ids.into_iter().next().ok_or(StoreError::Closed)
    }

    async fn record_tool_calls(&self, new: Vec<NewToolCall>) -> Result<Vec<String>, StoreError> {
        self.record_calls(Vec::new(), new).await
    }

    async fn tool_call(&self, id: &str) -> Result<Option<ToolCallRecord>, StoreError> {
        read!(self, |client| {
            let sql = format!("SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = $1");
            first(client, &sql, &[&id], tool_call_row).await
        })
    }

    async fn tool_calls(&self, conversation_id: &str) -> Result<Vec<ToolCallRecord>, StoreError> {
        read!(self, |client| select_tool_calls(client, conversation_id)
            .await)
    }
}

#[async_trait]
impl AuditStore for PgStore {
    async fn record_audit(&self, new: NewAudit) -> Result<String, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let id = ctx.new_id();
            let statement = tx.prepare_cached(INSERT_AUDIT).await?;
            tx.execute(
                &statement,
                &[
                    &id,
                    &new.source.as_str(),
                    &new.tool,
                    &serde_json::to_string(&new.input)?,
                    &new.is_error,
                    &new.error_code,
                    &new.decision,
                    &new.conversation_id,
                    &None::<String>,
                    &new.started_at.as_millis(),
                    &new.finished_at.as_millis(),
                    &big(new.duration_us),
                    &new.caller,
                ],
            )
            .await?;
            Ok(id)
        })
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {AUDIT_COLUMNS} FROM audit
                 WHERE ($1::text IS NULL OR tool = $1)
                   AND ($2::text IS NULL OR source = $2)
                   AND ($3::bigint IS NULL OR started_at >= $3)
                   AND (NOT $4::boolean OR is_error)
                 ORDER BY started_at DESC, id DESC
                 LIMIT $5"
            );
            let mut rows = all(
                client,
                &sql,
                &[
                    &query.tool,
                    &query.source.map(AuditSource::as_str),
                    &query.since.map(Timestamp::as_millis),
                    &query.failed_only,
                    &query.limit.map(limit),
                ],
                audit_row,
            )
            .await?;
            rows.reverse();
            Ok(rows)
        })
    }

    async fn begin_call(&self, start: NewCallStart) -> Result<String, StoreError> {
        let start = self.redacted(start);
        // One statement in autocommit: one round trip, no BEGIN or COMMIT.
        let client = self.writer().await?;
        let id = self.ctx().new_id();
        let written: Result<u64, PgFailure> = async {
            let input = serde_json::to_string(&start.call.input)?;
            let statement = client.prepare_cached(INSERT_START).await?;
            Ok(client
                .execute(
                    &statement,
                    &[
                        &id,
                        &start.source.as_str(),
                        &start.call.name,
                        &start.call.id,
                        &input,
                        &start.conversation_id,
                        &start.started_at.as_millis(),
                        &start.caller,
                    ],
                )
                .await?)
        }
        .await;
        written.map_err(|failure| self.error(failure))?;
        Ok(id)
    }

    async fn end_calls(&self, ids: Vec<String>) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let client = self.writer().await?;
        let ended: Result<u64, PgFailure> = async {
            let statement = client
                .prepare_cached("DELETE FROM call_starts WHERE id = ANY($1)")
                .await?;
            Ok(client.execute(&statement, &[&ids]).await?)
        }
        .await;
        ended.map_err(|failure| self.error(failure))?;
        Ok(())
    }

    async fn finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> Result<Vec<String>, StoreError> {
        self.record_calls(ended, records).await
    }

    async fn unfinished_calls(&self) -> Result<Vec<CallStartRecord>, StoreError> {
        read!(self, |client| {
            all(
                client,
                "SELECT id, source, tool, call_id, input, conversation_id, started_at, caller
                 FROM call_starts ORDER BY started_at, id",
                &[],
                |row| {
                    Ok(CallStartRecord {
                        id: row.try_get(0)?,
                        source: audit_source(row, 1)?,
                        tool: row.try_get(2)?,
                        call_id: row.try_get(3)?,
                        input: json(row, 4)?,
                        conversation_id: row.try_get(5)?,
                        started_at: timestamp(row, 6)?,
                        caller: row.try_get(7)?,
                    })
                },
            )
            .await
        })
    }
}
