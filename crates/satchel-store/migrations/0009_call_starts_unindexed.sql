-- call_starts holds only the calls running now (and those a stopped
-- process left): a handful of rows, read whole and sorted when listed. An
-- index on it cost one more page written on every call's start and again
-- at its end (about 8% of a call's commit, measured).
DROP INDEX IF EXISTS call_starts_by_time;
