-- Schema v3: the sequence number of each thread's first active message (or a lower bound of
-- it), so reads of the active window scan the primary key from there and skip the archived
-- prefix (and, on PostgreSQL, the index entries archiving leaves behind). Existing threads
-- start at their first active message, or just past their last one when none is active.
ALTER TABLE {prefix}threads ADD COLUMN first_active INTEGER NOT NULL DEFAULT 1;
UPDATE {prefix}threads SET first_active = COALESCE((SELECT MIN(m.seq) FROM {prefix}messages m
    WHERE m.thread_key = {prefix}threads.thread_key AND m.archived = 0), last_seq + 1);
