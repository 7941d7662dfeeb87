-- Schema v7: the vector store (`SqlVectorStore`). One row per point of a scope, keyed like the
-- text index (the scope's key and columns) and the point's id; the vector is its f32 values,
-- little-endian, as a LONGBLOB; searches are exact and scan the rows of the scopes they may
-- see, found through the (tenant, user_id, scope_key) index. The one dimension every vector
-- has is recorded in `vector_dimensions` by the first upsert.
CREATE TABLE IF NOT EXISTS {prefix}vectors (
    point_id   CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    scope_key  VARCHAR(700) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tenant     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    agent_id   VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    source     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    vector     LONGBLOB NOT NULL,
    payload    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (scope_key, point_id),
    KEY {prefix}vectors_owner (tenant, user_id, scope_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {prefix}vector_dimensions (
    only_row   SMALLINT NOT NULL PRIMARY KEY,
    dimensions BIGINT NOT NULL
) ENGINE = InnoDB;
