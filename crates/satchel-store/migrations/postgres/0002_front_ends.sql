-- Front ends that serve people over a network (Telegram, the web view):
-- their own audit sources with who made the call (`caller`), an inbox
-- that keeps what they received until it is handled, and small named
-- values kept across restarts. See the SQLite migration 0008.
ALTER TABLE audit DROP CONSTRAINT audit_source_check;
ALTER TABLE audit ADD CONSTRAINT audit_source_check
    CHECK (source IN ('cli', 'repl', 'run', 'mcp', 'telegram', 'web'));
ALTER TABLE audit ADD COLUMN caller TEXT;
ALTER TABLE call_starts DROP CONSTRAINT call_starts_source_check;
ALTER TABLE call_starts ADD CONSTRAINT call_starts_source_check
    CHECK (source IN ('cli', 'repl', 'run', 'mcp', 'telegram', 'web'));
ALTER TABLE call_starts ADD COLUMN caller TEXT;

CREATE TABLE inbox (
    channel          TEXT NOT NULL,
    id               BIGINT NOT NULL,
    payload          TEXT NOT NULL,
    received_at      BIGINT NOT NULL,
    handled_at       BIGINT,
    PRIMARY KEY (channel, id)
);
CREATE INDEX inbox_pending ON inbox (channel, id) WHERE handled_at IS NULL;
CREATE TABLE front_state (
    key              TEXT PRIMARY KEY,
    value            TEXT NOT NULL,
    updated_at       BIGINT NOT NULL
);
