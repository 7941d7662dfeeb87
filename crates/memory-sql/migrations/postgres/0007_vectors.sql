-- Schema v7: the vector store (`SqlVectorStore`). One row per point of a scope, keyed like the
-- text index (the scope's key and columns) and the point's id; the vector is its f32 values,
-- little-endian, as BYTEA; searches are exact and scan the rows of the scopes they may see,
-- found through the (tenant, user_id, scope_key) index. Payloads are TEXT (JSONB rejects
-- \u0000). The one dimension every vector has is recorded in `vector_dimensions` by the first
-- upsert.
CREATE TABLE IF NOT EXISTS {prefix}vectors (
    point_id   TEXT COLLATE "C" NOT NULL,
    scope_key  TEXT COLLATE "C" NOT NULL,
    tenant     TEXT COLLATE "C" NOT NULL,
    user_id    TEXT COLLATE "C",
    agent_id   TEXT COLLATE "C",
    source     TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    vector     BYTEA NOT NULL,
    payload    TEXT NOT NULL,
    PRIMARY KEY (scope_key, point_id)
);
CREATE INDEX IF NOT EXISTS {prefix}vectors_owner ON {prefix}vectors (tenant, user_id, scope_key);
CREATE TABLE IF NOT EXISTS {prefix}vector_dimensions (
    only_row   SMALLINT NOT NULL PRIMARY KEY CHECK (only_row = 1),
    dimensions BIGINT NOT NULL
);
