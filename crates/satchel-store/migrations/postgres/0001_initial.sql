-- Satchel's PostgreSQL schema version 1: the same records as SQLite's
-- schema version 7 (see ../0001_initial.sql to ../0007_call_starts.sql),
-- in PostgreSQL's types. Times are unix milliseconds (BIGINT); JSON values
-- are TEXT (kept byte for byte, key order included, unlike jsonb); ids are
-- UUIDv7 text. Foreign keys are deferrable so that `satchel db copy` can
-- load rows in any order within its one transaction.
--
-- Full-text search of a conversation (the `conversation` tool) reads the
-- `search` columns: a tsvector of the text Satchel folds (lower case, no
-- diacritics, punctuation as spaces) when it writes the row, with the
-- `simple` configuration (no stemming, no stop words), as SQLite's
-- unicode61 tokenizer does. NULL for rows that are not indexed.
--
-- Memories: `seq` is the integer key recall indexes refer to; every write
-- takes the next revision from `memory_state`, whose trigger announces it
-- on the channel `satchel_memory`, so other processes' indexes catch up.

CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    title       TEXT,
    goal        TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX conversations_by_update ON conversations (updated_at, id);

CREATE TABLE statements (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE DEFERRABLE,
    seq              BIGINT NOT NULL,
    objective        TEXT,
    created_at       BIGINT NOT NULL,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE log_entries (
    id                 TEXT PRIMARY KEY,
    conversation_id    TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE DEFERRABLE,
    seq                BIGINT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_use', 'tool_result', 'auxiliary', 'error')),
    text               TEXT NOT NULL,
    parent_id          TEXT REFERENCES log_entries (id) ON DELETE SET NULL DEFERRABLE,
    side_conversation  TEXT,
    statement_id       TEXT REFERENCES statements (id) ON DELETE SET NULL DEFERRABLE,
    call_id            TEXT,
    created_at         BIGINT NOT NULL,
    search             TSVECTOR,
    UNIQUE (conversation_id, seq)
);
CREATE INDEX log_entries_search ON log_entries USING gin (search);

CREATE TABLE llm_messages (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE DEFERRABLE,
    statement_id     TEXT REFERENCES statements (id) ON DELETE SET NULL DEFERRABLE,
    turn             BIGINT NOT NULL,
    seq              BIGINT NOT NULL,
    role             TEXT NOT NULL,
    content          TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE tool_calls (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT REFERENCES conversations (id) ON DELETE CASCADE DEFERRABLE,
    statement_id     TEXT REFERENCES statements (id) ON DELETE SET NULL DEFERRABLE,
    turn             BIGINT,
    call_id          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    input            TEXT NOT NULL,
    results          TEXT NOT NULL,
    response         TEXT,
    user_message     TEXT NOT NULL,
    is_error         BOOLEAN NOT NULL,
    error_code       TEXT,
    started_at       BIGINT NOT NULL,
    finished_at      BIGINT NOT NULL,
    duration_us      BIGINT NOT NULL,
    search           TSVECTOR
);
CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation_id, call_id);
CREATE INDEX tool_calls_search ON tool_calls USING gin (search);

-- The audit trail outlives what it audits: no cascade from conversations,
-- and a deleted tool-call record only unlinks its row.
CREATE TABLE audit (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp')),
    tool             TEXT NOT NULL,
    input            TEXT NOT NULL,
    is_error         BOOLEAN NOT NULL,
    error_code       TEXT,
    decision         TEXT,
    conversation_id  TEXT,
    tool_call_id     TEXT REFERENCES tool_calls (id) ON DELETE SET NULL DEFERRABLE,
    started_at       BIGINT NOT NULL,
    finished_at      BIGINT NOT NULL,
    duration_us      BIGINT NOT NULL
);
CREATE INDEX audit_by_time ON audit (started_at);
CREATE INDEX audit_by_tool ON audit (tool, started_at);

CREATE TABLE code_executions (
    id              TEXT PRIMARY KEY,
    language        TEXT NOT NULL,
    runtime         TEXT NOT NULL,
    code            TEXT NOT NULL,
    stdout          TEXT NOT NULL,
    stderr          TEXT NOT NULL,
    exit_code       INTEGER,
    duration_ms     BIGINT NOT NULL,
    success         BOOLEAN NOT NULL,
    error_category  TEXT,
    error_message   TEXT,
    sandbox         TEXT NOT NULL,
    conversation_id TEXT,
    session_id      TEXT,
    tool_call_id    TEXT,
    trigger_message TEXT,
    reasoning       TEXT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX code_executions_by_time ON code_executions (created_at);

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
    created_at      BIGINT NOT NULL,
    started_at      BIGINT,
    finished_at     BIGINT
);
CREATE INDEX code_jobs_unfinished ON code_jobs (status) WHERE status IN ('queued', 'running');

CREATE TABLE llm_calls (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT REFERENCES conversations (id) ON DELETE CASCADE DEFERRABLE,
    statement_id        TEXT REFERENCES statements (id) ON DELETE SET NULL DEFERRABLE,
    turn                BIGINT,
    purpose             TEXT NOT NULL,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    estimate_tokens     BIGINT NOT NULL,
    estimate_sections   TEXT NOT NULL,
    context_window      BIGINT NOT NULL,
    input_tokens        BIGINT,
    output_tokens       BIGINT,
    cache_read_tokens   BIGINT,
    cache_write_tokens  BIGINT,
    stop_reason         TEXT,
    error               TEXT,
    duration_ms         BIGINT NOT NULL,
    created_at          BIGINT NOT NULL
);
CREATE INDEX llm_calls_by_conversation ON llm_calls (conversation_id, created_at);
CREATE INDEX llm_calls_by_model ON llm_calls (model, created_at);

CREATE TABLE memory_sessions (
    id                 TEXT PRIMARY KEY,
    namespace          TEXT NOT NULL,
    conversation_id    TEXT,
    name               TEXT,
    started_at         BIGINT NOT NULL,
    ended_at           BIGINT,
    end_reason         TEXT,
    summary_memory_id  TEXT
);
CREATE INDEX memory_sessions_open ON memory_sessions (namespace, ended_at, started_at);

CREATE TABLE memories (
    seq              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    namespace        TEXT NOT NULL,
    layer            TEXT NOT NULL CHECK (layer IN ('long', 'mid', 'short', 'session')),
    content          TEXT NOT NULL,
    category         TEXT,
    certainty        REAL NOT NULL CHECK (certainty >= 0 AND certainty <= 1),
    session_id       TEXT REFERENCES memory_sessions (id) ON DELETE SET NULL DEFERRABLE,
    conversation_id  TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    expires_at       BIGINT,
    archived_at      BIGINT,
    -- little-endian f32 values, as in SQLite; NULL when stored without a model
    embedding        BYTEA,
    rev              BIGINT NOT NULL
);
CREATE INDEX memories_by_namespace ON memories (namespace, layer, created_at);
CREATE INDEX memories_by_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_by_rev ON memories (rev);
CREATE INDEX memories_by_session ON memories (session_id) WHERE session_id IS NOT NULL;

CREATE TABLE memory_deletions (
    rev  BIGINT NOT NULL,
    seq  BIGINT NOT NULL
);
CREATE INDEX memory_deletions_by_rev ON memory_deletions (rev);

CREATE TABLE memory_state (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    rev  BIGINT NOT NULL
);
INSERT INTO memory_state (id, rev) VALUES (1, 0);

CREATE FUNCTION satchel_memory_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('satchel_memory', NEW.rev::text);
    RETURN NEW;
END;
$$;
CREATE TRIGGER memory_state_notify AFTER UPDATE ON memory_state
    FOR EACH ROW EXECUTE FUNCTION satchel_memory_notify();

CREATE TABLE call_starts (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp')),
    tool             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    input            TEXT NOT NULL,
    conversation_id  TEXT,
    started_at       BIGINT NOT NULL
);
CREATE INDEX call_starts_by_time ON call_starts (started_at);
