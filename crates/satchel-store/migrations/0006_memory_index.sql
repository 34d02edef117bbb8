-- Satchel schema version 6: memories lose their FTS5 table.
--
-- Keyword ranking moved into the process, beside the vectors
-- (satchel-memory's recall index, kept in step by `rev` like them):
-- FTS5's bm25() scores every match and reads each one's length from its
-- own table, which measured 136 ms per query at 100,000 memories and 3.5 s
-- at 1,000,000. Keeping the table would only slow every write.

DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;
DROP TABLE memories_fts;
