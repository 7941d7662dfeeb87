-- Schema v2: an index on the active window, so "the last messages of a thread" and "every
-- active message" skip archived messages instead of scanning past them.
CREATE INDEX IF NOT EXISTS {prefix}messages_active ON {prefix}messages (thread_key, archived, seq);
