-- Satchel schema version 4: the memory tool's memories (with their FTS5
-- keyword index and their embeddings) and memory sessions.
--
-- `seq` is the integer key indexes kept outside the file refer to;
-- `rev` and `memory_deletions` let such an index catch up with changes
-- made by other processes: every write takes the next revision from
-- `memory_state`, stamps the rows it inserts or updates with it, and
-- records the rows it deletes under it.

CREATE TABLE memory_sessions (
    id                 TEXT PRIMARY KEY,
    namespace          TEXT NOT NULL,
    conversation_id    TEXT,
    name               TEXT,
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER,
    end_reason         TEXT,
    summary_memory_id  TEXT
) STRICT;
CREATE INDEX memory_sessions_open ON memory_sessions (namespace, ended_at, started_at);

CREATE TABLE memories (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    namespace        TEXT NOT NULL,
    layer            TEXT NOT NULL CHECK (layer IN ('long', 'mid', 'short', 'session')),
    content          TEXT NOT NULL,
    category         TEXT,
    certainty        REAL NOT NULL CHECK (certainty >= 0 AND certainty <= 1),
    session_id       TEXT REFERENCES memory_sessions (id) ON DELETE SET NULL,
    conversation_id  TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    expires_at       INTEGER,
    archived_at      INTEGER,
    -- little-endian f32 values; NULL when stored without a model
    embedding        BLOB,
    rev              INTEGER NOT NULL
) STRICT;
CREATE INDEX memories_by_namespace ON memories (namespace, layer, created_at);
CREATE INDEX memories_by_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_by_rev ON memories (rev);
CREATE INDEX memories_by_session ON memories (session_id) WHERE session_id IS NOT NULL;

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;

CREATE TABLE memory_deletions (
    rev  INTEGER NOT NULL,
    seq  INTEGER NOT NULL
) STRICT;
CREATE INDEX memory_deletions_by_rev ON memory_deletions (rev);

CREATE TABLE memory_state (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    rev  INTEGER NOT NULL
) STRICT;
INSERT INTO memory_state (id, rev) VALUES (1, 0);
