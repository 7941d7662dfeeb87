-- Schema v5: each thread row holds its epoch, the number a cursor read (`read_since`) compares
-- to tell "only appended since" from "changed otherwise". A new row draws a fresh random value
-- (62 random bits, never 0) from the column's default; an archive that moves a message and an
-- append that restarts an expired thread set a new one. SQLite cannot add a column whose
-- default is an expression, so the table is rebuilt (its rows keep their data and get a value
-- each; the indexes are made again).
CREATE TABLE {prefix}threads_v5 (
    thread_key    TEXT    NOT NULL PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    user_id       TEXT,
    agent_id      TEXT,
    source        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    last_seq      INTEGER NOT NULL DEFAULT 0,
    active_count  INTEGER NOT NULL DEFAULT 0,
    active_tokens INTEGER NOT NULL DEFAULT 0,
    ttl_ms        INTEGER,
    expires_at    INTEGER,
    first_active  INTEGER NOT NULL DEFAULT 1,
    epoch         INTEGER NOT NULL DEFAULT ((random() & 4611686018427387903) + 1)
);
INSERT INTO {prefix}threads_v5 (thread_key, tenant, user_id, agent_id, source, session_id,
    last_seq, active_count, active_tokens, ttl_ms, expires_at, first_active)
SELECT thread_key, tenant, user_id, agent_id, source, session_id,
    last_seq, active_count, active_tokens, ttl_ms, expires_at, first_active
FROM {prefix}threads;
DROP TABLE {prefix}threads;
ALTER TABLE {prefix}threads_v5 RENAME TO {prefix}threads;
CREATE INDEX IF NOT EXISTS {prefix}threads_tenant ON {prefix}threads (tenant, thread_key);
CREATE INDEX IF NOT EXISTS {prefix}threads_expiry ON {prefix}threads (expires_at);
