-- Schema v1: threads, their messages, and session states. Keys use the "C" collation: byte
-- order, the same as the other databases, and cheaper comparisons.
CREATE TABLE IF NOT EXISTS {prefix}threads (
    thread_key    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tenant        TEXT COLLATE "C" NOT NULL,
    user_id       TEXT COLLATE "C",
    agent_id      TEXT COLLATE "C",
    source        TEXT COLLATE "C" NOT NULL,
    session_id    TEXT COLLATE "C" NOT NULL,
    last_seq      BIGINT NOT NULL DEFAULT 0,
    active_count  BIGINT NOT NULL DEFAULT 0,
    active_tokens BIGINT NOT NULL DEFAULT 0,
    ttl_ms        BIGINT,
    expires_at    BIGINT
);
CREATE INDEX IF NOT EXISTS {prefix}threads_tenant ON {prefix}threads (tenant, thread_key);
CREATE INDEX IF NOT EXISTS {prefix}threads_expiry ON {prefix}threads (expires_at);
-- Bodies are TEXT, not JSONB: JSONB rejects \u0000, which a message may hold.
CREATE TABLE IF NOT EXISTS {prefix}messages (
    thread_key TEXT COLLATE "C" NOT NULL,
    seq        BIGINT   NOT NULL,
    message_id TEXT COLLATE "C" NOT NULL,
    role       TEXT     NOT NULL,
    tokens     BIGINT   NOT NULL,
    archived   SMALLINT NOT NULL DEFAULT 0,
    created_at BIGINT   NOT NULL,
    body       TEXT     NOT NULL,
    PRIMARY KEY (thread_key, seq),
    UNIQUE (thread_key, message_id)
);
CREATE TABLE IF NOT EXISTS {prefix}sessions (
    scope_key  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tenant     TEXT COLLATE "C" NOT NULL,
    user_id    TEXT COLLATE "C",
    agent_id   TEXT COLLATE "C",
    source     TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    version    BIGINT NOT NULL,
    state      TEXT   NOT NULL,
    ttl_ms     BIGINT,
    expires_at BIGINT
);
CREATE INDEX IF NOT EXISTS {prefix}sessions_tenant ON {prefix}sessions (tenant, scope_key);
CREATE INDEX IF NOT EXISTS {prefix}sessions_expiry ON {prefix}sessions (expires_at);
