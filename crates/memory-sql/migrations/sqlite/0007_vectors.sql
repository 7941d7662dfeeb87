-- Schema v7: the vector store (`SqlVectorStore`). One row per point of a scope, keyed like the
-- text index (the scope's key and columns) and the point's id; the vector is its f32 values,
-- little-endian, as a BLOB; searches are exact and scan the rows of the scopes they may see,
-- found through the (tenant, user_id, scope_key) index. The one dimension every vector has is
-- recorded in `vector_dimensions` by the first upsert.
CREATE TABLE IF NOT EXISTS {prefix}vectors (
    point_id   TEXT NOT NULL,
    scope_key  TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    user_id    TEXT,
    agent_id   TEXT,
    source     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    vector     BLOB NOT NULL,
    payload    TEXT NOT NULL,
    PRIMARY KEY (scope_key, point_id)
);
CREATE INDEX IF NOT EXISTS {prefix}vectors_owner ON {prefix}vectors (tenant, user_id, scope_key);
CREATE TABLE IF NOT EXISTS {prefix}vector_dimensions (
    only_row   INTEGER NOT NULL PRIMARY KEY CHECK (only_row = 1),
    dimensions INTEGER NOT NULL
);
