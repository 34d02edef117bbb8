//! [`CodeStore`] on [`PgStore`]: the `code_executions` and `code_jobs` tables.

use async_trait::async_trait;
use tokio_postgres::Row;

use crate::postgres::failure::PgFailure;
use crate::postgres::rows::{
    Unreadable, all, big, first, limit, optional_time, read, timestamp, unsigned,
};
use crate::postgres::{PgStore, transact};
use crate::{
    CodeExecution, CodeJob, CodeQuery, CodeStore, JobStatus, NewCodeExecution, NewCodeJob,
    StoreError, Timestamp,
};

const EXECUTION_COLUMNS: &str = "id, language, runtime, code, stdout, stderr, exit_code, duration_ms, success, error_category, error_message, sandbox, conversation_id, session_id, tool_call_id, trigger_message, reasoning, created_at";
const JOB_COLUMNS: &str = "id, task, context, language, generator, status, result, error, conversation_id, runner, created_at, started_at, finished_at";

fn execution_row(row: &Row) -> Result<CodeExecution, PgFailure> {
    Ok(CodeExecution {
        id: row.try_get(0)?,
        language: row.try_get(1)?,
        runtime: row.try_get(2)?,
        code: row.try_get(3)?,
        stdout: row.try_get(4)?,
        stderr: row.try_get(5)?,
        exit_code: row.try_get(6)?,
        duration_ms: unsigned(row, 7)?,
        success: row.try_get(8)?,
        error_category: row.try_get(9)?,
        error_message: row.try_get(10)?,
        sandbox: row.try_get(11)?,
        conversation_id: row.try_get(12)?,
        session_id: row.try_get(13)?,
        tool_call_id: row.try_get(14)?,
        trigger_message: row.try_get(15)?,
        reasoning: row.try_get(16)?,
        created_at: timestamp(row, 17)?,
    })
}

fn job_row(row: &Row) -> Result<CodeJob, PgFailure> {
    let status: String = row.try_get(5)?;
    Ok(CodeJob {
        id: row.try_get(0)?,
        task: row.try_get(1)?,
        context: row.try_get(2)?,
        language: row.try_get(3)?,
        generator: row.try_get(4)?,
        status: JobStatus::parse(&status).ok_or(Unreadable {
            what: "job status",
            value: status.clone(),
        })?,
        result: row.try_get(6)?,
        error: row.try_get(7)?,
        conversation_id: row.try_get(8)?,
        runner: row.try_get(9)?,
        created_at: timestamp(row, 10)?,
        started_at: optional_time(row, 11)?,
        finished_at: optional_time(row, 12)?,
    })
}

#[async_trait]
impl CodeStore for PgStore {
    async fn record_execution(&self, new: NewCodeExecution) -> Result<String, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let id = ctx.new_id();
            let sql = format!(
                "INSERT INTO code_executions ({EXECUTION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
            );
            tx.execute(
                &sql,
                &[
                    &id,
                    &new.language,
                    &new.runtime,
                    &new.code,
                    &new.stdout,
                    &new.stderr,
                    &new.exit_code,
                    &big(new.duration_ms),
                    &new.success,
                    &new.error_category,
                    &new.error_message,
                    &new.sandbox,
                    &new.conversation_id,
                    &new.session_id,
                    &new.tool_call_id,
                    &new.trigger_message,
                    &new.reasoning,
                    &ctx.now().as_millis(),
                ],
            )
            .await?;
            Ok(id)
        })
    }

    async fn code_executions(&self, query: CodeQuery) -> Result<Vec<CodeExecution>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {EXECUTION_COLUMNS} FROM code_executions
                 WHERE ($1::bigint IS NULL OR created_at >= $1) AND (NOT $2::boolean OR NOT success)
                 ORDER BY created_at DESC, id DESC LIMIT $3"
            );
            let mut rows = all(
                client,
                &sql,
                &[
                    &query.since.map(Timestamp::as_millis),
                    &query.failed_only,
                    &query.limit.map(limit),
                ],
                execution_row,
            )
            .await?;
            rows.reverse();
            Ok(rows)
        })
    }

    async fn create_job(&self, new: NewCodeJob) -> Result<CodeJob, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let id = ctx.new_id();
            let now = ctx.now();
            tx.execute(
                "INSERT INTO code_jobs (id, task, context, language, generator, status, conversation_id, runner, created_at)
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8)",
                &[
                    &id,
                    &new.task,
                    &new.context,
                    &new.language,
                    &new.generator,
                    &new.conversation_id,
                    &new.runner,
                    &now.as_millis(),
                ],
            )
            .await?;
            Ok(CodeJob {
                id,
                task: new.task,
                context: new.context,
                language: new.language,
                generator: new.generator,
                status: JobStatus::Queued,
                result: None,
                error: None,
                conversation_id: new.conversation_id,
                runner: new.runner,
                created_at: now,
                started_at: None,
                finished_at: None,
            })
        })
    }

    async fn update_job(
        &self,
        id: &str,
        status: JobStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<Option<CodeJob>, StoreError> {
        let result = self.redacted(result);
        let error = self.redacted(error);
        transact!(self, |tx, ctx| {
            let now = ctx.now().as_millis();
            let (started, finished) = match status {
                JobStatus::Queued => (None, None),
                JobStatus::Running => (Some(now), None),
                JobStatus::Done | JobStatus::Failed => (None, Some(now)),
            };
            tx.execute(
                "UPDATE code_jobs SET status = $2, result = COALESCE($3, result), error = COALESCE($4, error),
                    started_at = COALESCE($5, started_at), finished_at = COALESCE($6, finished_at)
                 WHERE id = $1",
                &[&id, &status.as_str(), &result, &error, &started, &finished],
            )
            .await?;
            let sql = format!("SELECT {JOB_COLUMNS} FROM code_jobs WHERE id = $1");
            first(&tx, &sql, &[&id], job_row).await
        })
    }

    async fn job(&self, id: &str) -> Result<Option<CodeJob>, StoreError> {
        read!(self, |client| {
            let sql = format!("SELECT {JOB_COLUMNS} FROM code_jobs WHERE id = $1");
            first(client, &sql, &[&id], job_row).await
        })
    }

    async fn unfinished_jobs(&self) -> Result<Vec<CodeJob>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM code_jobs WHERE status IN ('queued', 'running') ORDER BY created_at, id"
            );
            all(client, &sql, &[], job_row).await
        })
    }
}
