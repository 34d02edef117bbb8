-- Traces of the `code` tool: every execution, and background generation jobs.

CREATE TABLE code_executions (
    id              TEXT PRIMARY KEY,
    language        TEXT NOT NULL,
    runtime         TEXT NOT NULL,
    code            TEXT NOT NULL,
    stdout          TEXT NOT NULL,
    stderr          TEXT NOT NULL,
    exit_code       INTEGER,
    duration_ms     INTEGER NOT NULL,
    success         INTEGER NOT NULL CHECK (success IN (0, 1)),
    error_category  TEXT,
    error_message   TEXT,
    sandbox         TEXT NOT NULL,
    conversation_id TEXT,
    session_id      TEXT,
    tool_call_id    TEXT,
    trigger_message TEXT,
    reasoning       TEXT,
    created_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX code_executions_by_time ON code_executions (created_at);
CREATE INDEX code_executions_failures ON code_executions (success, created_at);

CREATE TABLE code_jobs (
    id              TEXT PRIMARY KEY,
    task            TEXT NOT NULL,
    context         TEXT,
    language        TEXT,
    generator       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
    result          TEXT,
    error           TEXT,
    conversation_id TEXT,
    runner          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    started_at      INTEGER,
    finished_at     INTEGER
) STRICT;

CREATE INDEX code_jobs_unfinished ON code_jobs (status) WHERE status IN ('queued', 'running');
