-- Calls on record before they run: a row is written before a tool call
-- runs (a call whose start cannot be written is not run) and removed once
-- the call's own record is written. A row left behind is a call that
-- began and whose process stopped, or whose record failed, before the end
-- was written: it ran, its outcome is unknown.
CREATE TABLE call_starts (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp')),
    tool             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    input            TEXT NOT NULL,
    conversation_id  TEXT,
    started_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX call_starts_by_time ON call_starts (started_at);
