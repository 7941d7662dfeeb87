-- Schema v6: the text index (`SqlTextIndex`). One row per document of a scope, keyed like the
-- sessions (the scope's key and columns) and the document's id; `words` is the text's
-- `tsvector` ('english': stemming and stop words), computed by the database and kept in a GIN
-- index. Texts and payloads are TEXT (JSONB rejects \u0000, which a payload may hold).
CREATE TABLE IF NOT EXISTS {prefix}texts (
    scope_key  TEXT COLLATE "C" NOT NULL,
    tenant     TEXT COLLATE "C" NOT NULL,
    user_id    TEXT COLLATE "C",
    agent_id   TEXT COLLATE "C",
    source     TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    doc_id     TEXT COLLATE "C" NOT NULL,
    body       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    words      tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, body)) STORED,
    PRIMARY KEY (scope_key, doc_id)
);
CREATE INDEX IF NOT EXISTS {prefix}texts_tenant ON {prefix}texts (tenant, scope_key);
CREATE INDEX IF NOT EXISTS {prefix}texts_words ON {prefix}texts USING GIN (words);
