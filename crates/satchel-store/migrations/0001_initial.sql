-- Satchel schema version 1: conversations, statements (objectives), the
-- conversation log, the LLM history, tool calls and the audit trail.
-- Times are unix milliseconds (INTEGER); JSON values are TEXT.

CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    title       TEXT,
    goal        TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX conversations_by_update ON conversations (updated_at, id);

CREATE TABLE statements (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    objective        TEXT,
    created_at       INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
) STRICT;

CREATE TABLE log_entries (
    id                 TEXT PRIMARY KEY,
    conversation_id    TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq                INTEGER NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_use', 'tool_result', 'auxiliary', 'error')),
    text               TEXT NOT NULL,
    parent_id          TEXT REFERENCES log_entries (id) ON DELETE SET NULL,
    side_conversation  TEXT,
    statement_id       TEXT REFERENCES statements (id) ON DELETE SET NULL,
    call_id            TEXT,
    created_at         INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
) STRICT;

CREATE TABLE llm_messages (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    statement_id     TEXT REFERENCES statements (id) ON DELETE SET NULL,
    turn             INTEGER NOT NULL,
    seq              INTEGER NOT NULL,
    role             TEXT NOT NULL,
    content          TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
) STRICT;

CREATE TABLE tool_calls (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    statement_id     TEXT REFERENCES statements (id) ON DELETE SET NULL,
    turn             INTEGER,
    call_id          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    input            TEXT NOT NULL,
    results          TEXT NOT NULL,
    response         TEXT,
    user_message     TEXT NOT NULL,
    is_error         INTEGER NOT NULL CHECK (is_error IN (0, 1)),
    error_code       TEXT,
    started_at       INTEGER NOT NULL,
    finished_at      INTEGER NOT NULL,
    duration_us      INTEGER NOT NULL
) STRICT;
CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation_id, call_id);

-- The audit trail outlives what it audits: no cascade from conversations,
-- and a deleted tool-call record only unlinks its row.
CREATE TABLE audit (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp')),
    tool             TEXT NOT NULL,
    input            TEXT NOT NULL,
    is_error         INTEGER NOT NULL CHECK (is_error IN (0, 1)),
    error_code       TEXT,
    decision         TEXT,
    conversation_id  TEXT,
    tool_call_id     TEXT REFERENCES tool_calls (id) ON DELETE SET NULL,
    started_at       INTEGER NOT NULL,
    finished_at      INTEGER NOT NULL,
    duration_us      INTEGER NOT NULL
) STRICT;
CREATE INDEX audit_by_time ON audit (started_at);
CREATE INDEX audit_by_tool ON audit (tool, started_at);
