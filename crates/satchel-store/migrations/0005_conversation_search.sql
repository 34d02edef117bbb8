-- Satchel schema version 5: full-text search over one conversation's
-- record, for the `conversation` tool's `search`.
--
-- Indexed: the text of log entries, except `tool_use`/`tool_result` (those
-- are the tool-call rows formatted for people), and for each tool call of
-- a conversation its tool name, the strings of its input, the strings of
-- its results (not the content-part tags, not image data) and its note.
--
-- `search_text` is contentless (the text stays in its own table, once);
-- `search_rows` maps each of its rowids to the row it indexes. Triggers
-- keep both in step with the rows inside the writing transaction; rows
-- removed (directly or by a cascade) take their index entries with them.
-- Existing rows are indexed at the end of this migration.

CREATE TABLE search_rows (
    id               INTEGER PRIMARY KEY,
    conversation_id  TEXT NOT NULL,
    log_entry_id     TEXT UNIQUE REFERENCES log_entries (id) ON DELETE CASCADE,
    tool_call_id     TEXT UNIQUE REFERENCES tool_calls (id) ON DELETE CASCADE,
    CHECK ((log_entry_id IS NULL) <> (tool_call_id IS NULL))
) STRICT;

CREATE VIRTUAL TABLE search_text USING fts5 (
    text,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER search_rows_delete AFTER DELETE ON search_rows
BEGIN
    DELETE FROM search_text WHERE rowid = old.id;
END;

CREATE TRIGGER search_log_insert AFTER INSERT ON log_entries
WHEN new.kind NOT IN ('tool_use', 'tool_result')
BEGIN
    INSERT INTO search_rows (conversation_id, log_entry_id) VALUES (new.conversation_id, new.id);
    INSERT INTO search_text (rowid, text) VALUES (last_insert_rowid(), new.text);
END;

-- What is indexed of a tool call.
CREATE VIEW search_tool_call_text (id, text) AS
    SELECT t.id, concat_ws(
        char(10),
        t.tool,
        (SELECT group_concat(value, char(10)) FROM json_tree(t.input) WHERE type = 'text'),
        (SELECT group_concat(value, char(10)) FROM json_tree(t.results)
            WHERE type = 'text'
              -- not the tags of content parts ($[i].type...) nor image data
              AND NOT (path GLOB '$[[]*]' AND path NOT GLOB '*.*'
                       AND key IN ('type', 'mimeType', 'data'))),
        t.response)
    FROM tool_calls t;

CREATE TRIGGER search_tool_call_insert AFTER INSERT ON tool_calls
WHEN new.conversation_id IS NOT NULL
BEGIN
    INSERT INTO search_rows (conversation_id, tool_call_id) VALUES (new.conversation_id, new.id);
    INSERT INTO search_text (rowid, text)
        SELECT last_insert_rowid(), text FROM search_tool_call_text WHERE id = new.id;
END;

-- Satchel never edits these rows today; if it does, the index follows.
CREATE TRIGGER search_log_update AFTER UPDATE OF text ON log_entries
BEGIN
    DELETE FROM search_text WHERE rowid = (SELECT id FROM search_rows WHERE log_entry_id = new.id);
    INSERT INTO search_text (rowid, text)
        SELECT id, new.text FROM search_rows WHERE log_entry_id = new.id;
END;

CREATE TRIGGER search_tool_call_update AFTER UPDATE OF tool, input, results, response ON tool_calls
BEGIN
    DELETE FROM search_text WHERE rowid = (SELECT id FROM search_rows WHERE tool_call_id = new.id);
    INSERT INTO search_text (rowid, text)
        SELECT r.id, v.text FROM search_rows r JOIN search_tool_call_text v ON v.id = r.tool_call_id
        WHERE r.tool_call_id = new.id;
END;

-- Rows written before this version.
INSERT INTO search_rows (conversation_id, log_entry_id)
    SELECT conversation_id, id FROM log_entries
    WHERE kind NOT IN ('tool_use', 'tool_result')
    ORDER BY conversation_id, seq;
INSERT INTO search_rows (conversation_id, tool_call_id)
    SELECT conversation_id, id FROM tool_calls
    WHERE conversation_id IS NOT NULL
    ORDER BY started_at, id;
INSERT INTO search_text (rowid, text)
    SELECT r.id, e.text FROM search_rows r JOIN log_entries e ON e.id = r.log_entry_id;
INSERT INTO search_text (rowid, text)
    SELECT r.id, v.text FROM search_rows r JOIN search_tool_call_text v ON v.id = r.tool_call_id;
