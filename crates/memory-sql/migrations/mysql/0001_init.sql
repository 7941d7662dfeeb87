-- Schema v1: threads, their messages, and session states. Keys and ids are ASCII (the core
-- validates them), stored as ascii_bin: byte order, and small enough index entries for
-- InnoDB's 3,072-byte limit. Bodies and states are utf8mb4 LONGTEXT.
CREATE TABLE IF NOT EXISTS {prefix}threads (
    thread_key    VARCHAR(700) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tenant        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    agent_id      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    source        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    last_seq      BIGINT NOT NULL DEFAULT 0,
    active_count  BIGINT NOT NULL DEFAULT 0,
    active_tokens BIGINT NOT NULL DEFAULT 0,
    ttl_ms        BIGINT NULL,
    expires_at    BIGINT NULL,
    PRIMARY KEY (thread_key),
    KEY {prefix}threads_tenant (tenant, thread_key),
    KEY {prefix}threads_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {prefix}messages (
    thread_key VARCHAR(700) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq        BIGINT NOT NULL,
    message_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    role       VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tokens     BIGINT NOT NULL,
    archived   SMALLINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    body       LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (thread_key, seq),
    UNIQUE KEY {prefix}messages_id (thread_key, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {prefix}sessions (
    scope_key  VARCHAR(700) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tenant     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    agent_id   VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    source     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version    BIGINT NOT NULL,
    state      LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    ttl_ms     BIGINT NULL,
    expires_at BIGINT NULL,
    PRIMARY KEY (scope_key),
    KEY {prefix}sessions_tenant (tenant, scope_key),
    KEY {prefix}sessions_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
