//! [`CodeStore`] on [`SqliteStore`]: the `code_executions` and `code_jobs` tables.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};

use super::rows::{all, timestamp};
use super::{Redact, SqliteStore};
use crate::redact::Redactor;
use crate::sqlite::failure::column_error;
use crate::{
    CodeExecution, CodeJob, CodeQuery, CodeStore, JobStatus, NewCodeExecution, NewCodeJob,
    StoreError, Timestamp,
};

const EXECUTION_COLUMNS: &str = "id, language, runtime, code, stdout, stderr, exit_code, duration_ms, success, error_category, error_message, sandbox, conversation_id, session_id, tool_call_id, trigger_message, reasoning, created_at";
const JOB_COLUMNS: &str = "id, task, context, language, generator, status, result, error, conversation_id, runner, created_at, started_at, finished_at";

impl Redact for NewCodeExecution {
    fn redact(self, redactor: &Redactor) -> NewCodeExecution {
        NewCodeExecution {
            code: self.code.redact(redactor),
            stdout: self.stdout.redact(redactor),
            stderr: self.stderr.redact(redactor),
            error_message: self.error_message.redact(redactor),
            trigger_message: self.trigger_message.redact(redactor),
            reasoning: self.reasoning.redact(redactor),
            ..self
        }
    }
}

impl Redact for NewCodeJob {
    fn redact(self, redactor: &Redactor) -> NewCodeJob {
        NewCodeJob {
            task: self.task.redact(redactor),
            context: self.context.redact(redactor),
            ..self
        }
    }
}

/// A job update: result and error pass through redaction too.
struct JobUpdate {
    id: String,
    status: JobStatus,
    result: Option<String>,
    error: Option<String>,
}

impl Redact for JobUpdate {
    fn redact(self, redactor: &Redactor) -> JobUpdate {
        JobUpdate {
            result: self.result.redact(redactor),
            error: self.error.redact(redactor),
            ..self
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown job status `{0}`")]
struct UnknownStatus(String);

fn execution_row(row: &Row<'_>) -> rusqlite::Result<CodeExecution> {
    Ok(CodeExecution {
        id: row.get(0)?,
        language: row.get(1)?,
        runtime: row.get(2)?,
        code: row.get(3)?,
        stdout: row.get(4)?,
        stderr: row.get(5)?,
        exit_code: row.get(6)?,
        duration_ms: row.get(7)?,
        success: row.get(8)?,
        error_category: row.get(9)?,
        error_message: row.get(10)?,
        sandbox: row.get(11)?,
        conversation_id: row.get(12)?,
        session_id: row.get(13)?,
        tool_call_id: row.get(14)?,
        trigger_message: row.get(15)?,
        reasoning: row.get(16)?,
        created_at: timestamp(row, 17)?,
    })
}

fn job_row(row: &Row<'_>) -> rusqlite::Result<CodeJob> {
    let status: String = row.get(5)?;
    let optional_time = |index: usize| -> rusqlite::Result<Option<Timestamp>> {
        Ok(row
            .get::<_, Option<i64>>(index)?
            .map(Timestamp::from_millis))
    };
    Ok(CodeJob {
        id: row.get(0)?,
        task: row.get(1)?,
        context: row.get(2)?,
        language: row.get(3)?,
        generator: row.get(4)?,
        status: JobStatus::parse(&status)
            .ok_or_else(|| column_error(5, UnknownStatus(status.clone())))?,
        result: row.get(6)?,
        error: row.get(7)?,
        conversation_id: row.get(8)?,
        runner: row.get(9)?,
        created_at: timestamp(row, 10)?,
        started_at: optional_time(11)?,
        finished_at: optional_time(12)?,
    })
}

#[async_trait]
impl CodeStore for SqliteStore {
    async fn record_execution(&self, new: NewCodeExecution) -> Result<String, StoreError> {
        self.write(new, |tx, ctx, new| {
            let id = ctx.new_id();
            tx.prepare_cached(&format!(
                "INSERT INTO code_executions ({EXECUTION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
            ))?
            .execute(params![
                id,
                new.language,
                new.runtime,
                new.code,
                new.stdout,
                new.stderr,
                new.exit_code,
                new.duration_ms,
                new.success,
                new.error_category,
                new.error_message,
                new.sandbox,
                new.conversation_id,
                new.session_id,
                new.tool_call_id,
                new.trigger_message,
                new.reasoning,
                ctx.now().as_millis(),
            ])?;
            Ok(id)
        })
        .await
    }

    async fn code_executions(&self, query: CodeQuery) -> Result<Vec<CodeExecution>, StoreError> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {EXECUTION_COLUMNS} FROM code_executions
                 WHERE (?1 IS NULL OR created_at >= ?1) AND (?2 = 0 OR success = 0)
                 ORDER BY created_at DESC, id DESC LIMIT ?3"
            );
            let limit = query
                .limit
                .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
            let mut rows = all(
                conn,
                &sql,
                params![
                    query.since.map(Timestamp::as_millis),
                    query.failed_only,
                    limit
                ],
                execution_row,
            )?;
            rows.reverse();
            Ok(rows)
        })
        .await
    }

    async fn create_job(&self, new: NewCodeJob) -> Result<CodeJob, StoreError> {
        self.write(new, |tx, ctx, new| {
            let id = ctx.new_id();
            let now = ctx.now();
            tx.prepare_cached(
                "INSERT INTO code_jobs (id, task, context, language, generator, status, conversation_id, runner, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8)",
            )?
            .execute(params![
                id,
                new.task,
                new.context,
                new.language,
                new.generator,
                new.conversation_id,
                new.runner,
                now.as_millis()
            ])?;
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
        .await
    }

    async fn update_job(
        &self,
        id: &str,
        status: JobStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<Option<CodeJob>, StoreError> {
        let update = JobUpdate {
            id: id.to_owned(),
            status,
            result,
            error,
        };
        self.write(update, |tx, ctx, update| {
            let now = ctx.now().as_millis();
            let (started, finished) = match update.status {
                JobStatus::Queued => (None, None),
                JobStatus::Running => (Some(now), None),
                JobStatus::Done | JobStatus::Failed => (None, Some(now)),
            };
            tx.prepare_cached(
                "UPDATE code_jobs SET status = ?2, result = COALESCE(?3, result), error = COALESCE(?4, error),
                    started_at = COALESCE(?5, started_at), finished_at = COALESCE(?6, finished_at)
                 WHERE id = ?1",
            )?
            .execute(params![update.id, update.status.as_str(), update.result, update.error, started, finished])?;
            let job = tx
                .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM code_jobs WHERE id = ?1"))?
                .query_row(params![update.id], job_row)
                .optional()?;
            Ok(job)
        })
        .await
    }

    async fn job(&self, id: &str) -> Result<Option<CodeJob>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            let job = conn
                .prepare_cached(&format!(
                    "SELECT {JOB_COLUMNS} FROM code_jobs WHERE id = ?1"
                ))?
                .query_row(params![id], job_row)
                .optional()?;
            Ok(job)
        })
        .await
    }

    async fn unfinished_jobs(&self) -> Result<Vec<CodeJob>, StoreError> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM code_jobs WHERE status IN ('queued', 'running') ORDER BY created_at, id"
            );
            all(conn, &sql, [], job_row)
        })
        .await
    }
}
