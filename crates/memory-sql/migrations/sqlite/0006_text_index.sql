-- Schema v6: the text index (`SqlTextIndex`). One row per document of a scope, keyed like the
-- sessions (the scope's key and columns) and the document's id; an FTS5 index over the text,
-- with the rows as its external content (the text is stored once), kept in step by triggers.
-- Tokens: Unicode letters and digits, case and diacritics folded, Porter stemming.
CREATE TABLE IF NOT EXISTS {prefix}texts (
    rid        INTEGER PRIMARY KEY,
    scope_key  TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    user_id    TEXT,
    agent_id   TEXT,
    source     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    doc_id     TEXT NOT NULL,
    body       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    UNIQUE (scope_key, doc_id)
);
CREATE INDEX IF NOT EXISTS {prefix}texts_tenant ON {prefix}texts (tenant, scope_key);
CREATE VIRTUAL TABLE IF NOT EXISTS {prefix}texts_fts USING fts5(
    body,
    content = '{prefix}texts',
    content_rowid = 'rid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS {prefix}texts_insert AFTER INSERT ON {prefix}texts BEGIN
    INSERT INTO {prefix}texts_fts (rowid, body) VALUES (new.rid, new.body);
END;
CREATE TRIGGER IF NOT EXISTS {prefix}texts_delete AFTER DELETE ON {prefix}texts BEGIN
    INSERT INTO {prefix}texts_fts ({prefix}texts_fts, rowid, body)
        VALUES ('delete', old.rid, old.body);
END;
CREATE TRIGGER IF NOT EXISTS {prefix}texts_update AFTER UPDATE OF body ON {prefix}texts
WHEN old.body IS NOT new.body BEGIN
    INSERT INTO {prefix}texts_fts ({prefix}texts_fts, rowid, body)
        VALUES ('delete', old.rid, old.body);
    INSERT INTO {prefix}texts_fts (rowid, body) VALUES (new.rid, new.body);
END;
