-- Front ends that serve people over a network (Telegram, the web view):
-- their calls are on the audit trail under their own source, with who
-- made them (`caller`, e.g. the Telegram user id); and what they receive
-- is kept in an inbox until it is handled, so a restart neither drops nor
-- repeats a message.
--
-- SQLite cannot change a CHECK constraint in place: `audit` and
-- `call_starts` are rebuilt with their rows.
CREATE TABLE audit_new (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp', 'telegram', 'web')),
    caller           TEXT,
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
INSERT INTO audit_new (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us)
    SELECT id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us FROM audit;
DROP TABLE audit;
ALTER TABLE audit_new RENAME TO audit;
CREATE INDEX audit_by_time ON audit (started_at);
CREATE INDEX audit_by_tool ON audit (tool, started_at);

CREATE TABLE call_starts_new (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp', 'telegram', 'web')),
    caller           TEXT,
    tool             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    input            TEXT NOT NULL,
    conversation_id  TEXT,
    started_at       INTEGER NOT NULL
) STRICT;
INSERT INTO call_starts_new (id, source, tool, call_id, input, conversation_id, started_at)
    SELECT id, source, tool, call_id, input, conversation_id, started_at FROM call_starts;
DROP TABLE call_starts;
ALTER TABLE call_starts_new RENAME TO call_starts;
CREATE INDEX call_starts_by_time ON call_starts (started_at);

-- What a front end received, by channel (e.g. `telegram:<bot id>`) and
-- the channel's own id: kept until handled (`handled_at` NULL), then for
-- a week more, so an item delivered again, in any order, is known and
-- not handled twice.
CREATE TABLE inbox (
    channel          TEXT NOT NULL,
    id               INTEGER NOT NULL,
    payload          TEXT NOT NULL,
    received_at      INTEGER NOT NULL,
    handled_at       INTEGER,
    PRIMARY KEY (channel, id)
) STRICT;
CREATE INDEX inbox_pending ON inbox (channel, id) WHERE handled_at IS NULL;

-- Small named values a front end keeps across restarts (which
-- conversation a Telegram chat continues).
CREATE TABLE front_state (
    key              TEXT PRIMARY KEY,
    value            TEXT NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
