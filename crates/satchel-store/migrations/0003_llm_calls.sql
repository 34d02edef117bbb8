-- Satchel schema version 3: one row per request sent to a model, with
-- Satchel's token estimate (counted on the exact bytes sent) beside the
-- provider's reported usage, so the estimate's error is visible per model.

CREATE TABLE llm_calls (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    statement_id        TEXT REFERENCES statements (id) ON DELETE SET NULL,
    turn                INTEGER,
    purpose             TEXT NOT NULL,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    estimate_tokens     INTEGER NOT NULL,
    estimate_sections   TEXT NOT NULL,
    context_window      INTEGER NOT NULL,
    input_tokens        INTEGER,
    output_tokens       INTEGER,
    cache_read_tokens   INTEGER,
    cache_write_tokens  INTEGER,
    stop_reason         TEXT,
    error               TEXT,
    duration_ms         INTEGER NOT NULL,
    created_at          INTEGER NOT NULL
) STRICT;
CREATE INDEX llm_calls_by_conversation ON llm_calls (conversation_id, created_at);
CREATE INDEX llm_calls_by_model ON llm_calls (model, created_at);
