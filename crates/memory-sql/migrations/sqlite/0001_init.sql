-- Schema v1: threads, their messages, and session states.
CREATE TABLE IF NOT EXISTS {prefix}threads (
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
    expires_at    INTEGER
);
CREATE INDEX IF NOT EXISTS {prefix}threads_tenant ON {prefix}threads (tenant, thread_key);
CREATE INDEX IF NOT EXISTS {prefix}threads_expiry ON {prefix}threads (expires_at);
CREATE TABLE IF NOT EXISTS {prefix}messages (
    thread_key TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    tokens     INTEGER NOT NULL,
    archived   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    body       TEXT    NOT NULL,
    PRIMARY KEY (thread_key, seq),
    UNIQUE (thread_key, message_id)
);
CREATE TABLE IF NOT EXISTS {prefix}sessions (
    scope_key  TEXT    NOT NULL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    user_id    TEXT,
    agent_id   TEXT,
    source     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    ttl_ms     INTEGER,
    expires_at INTEGER
);
CREATE INDEX IF NOT EXISTS {prefix}sessions_tenant ON {prefix}sessions (tenant, scope_key);
CREATE INDEX IF NOT EXISTS {prefix}sessions_expiry ON {prefix}sessions (expires_at);
