-- Schema v6: the text index (`SqlTextIndex`). One row per document of a scope, keyed like the
-- sessions (the scope's key and columns) and the document's id. `body` is the exact text;
-- `words` is its words as the query sees them (lower-cased runs of letters and digits, joined
-- by spaces), in a case-insensitive collation under an InnoDB FULLTEXT index, so that the
-- index splits the text exactly where a query does (InnoDB would keep `_` and `'` in words).
CREATE TABLE IF NOT EXISTS {prefix}texts (
    scope_key  VARCHAR(700) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    tenant     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    agent_id   VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    source     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    doc_id     CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    body       LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    words      LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL,
    payload    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (scope_key, doc_id),
    KEY {prefix}texts_tenant (tenant, scope_key),
    FULLTEXT KEY {prefix}texts_words (words)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
