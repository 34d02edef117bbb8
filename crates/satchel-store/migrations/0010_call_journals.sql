-- call_starts keyed by its id alone (WITHOUT ROWID): a rowid table with a
-- text primary key keeps two b-trees, the rows and the key's index, and a
-- call's start wrote a page of each (and its end again). Keyed by the id,
-- a start writes one page. Its rows are small and few (the calls running
-- now), what WITHOUT ROWID suits.
CREATE TABLE call_starts_new (
    id               TEXT PRIMARY KEY,
    source           TEXT NOT NULL CHECK (source IN ('cli', 'repl', 'run', 'mcp', 'telegram', 'web')),
    caller           TEXT,
    tool             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    input            TEXT NOT NULL,
    conversation_id  TEXT,
    started_at       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO call_starts_new (id, source, caller, tool, call_id, input, conversation_id, started_at)
    SELECT id, source, caller, tool, call_id, input, conversation_id, started_at FROM call_starts;
DROP TABLE call_starts;
ALTER TABLE call_starts_new RENAME TO call_starts;

-- Calls' starts are first appended to a journal beside the database (one
-- per store handle, `<db>-calls/<owner>.<generation>`) and folded into
-- call_starts with the writer's next commit. This says which generations
-- of each journal are folded, written in the transaction that folds them,
-- so a journal file a crash left behind after its fold is not folded again.
CREATE TABLE call_journals (
    owner   TEXT PRIMARY KEY,
    folded  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
