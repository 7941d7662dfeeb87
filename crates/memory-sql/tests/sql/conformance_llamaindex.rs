//! The whole memory-testkit history suite on `LlamaIndexHistoryStore`, on every engine the
//! LlamaIndex mode supports: SQLite files, in-memory SQLite and the PostgreSQL server
//! (`AGENT_MEMORY_POSTGRES_URL`). MySQL/MariaDB are not supported by the mode (SQLAlchemy
//! cannot create LlamaIndex's table there).
//!
//! The checks write under random tenants, users, agents and sources, and expect them kept
//! apart and listed: the store keys threads by the whole scope (`KeyMapping::ScopeKey`; the
//! mappings by session id alone, which Python's default session ids need, cannot keep scopes
//! apart by design and are tested in llamaindex.rs). `LiOptions::default()` records creation
//! times and metadata, so messages read back exactly as appended.
#![cfg(any(feature = "sqlite", feature = "postgres"))]
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::{Result, Scope};
use memory_interop::llamaindex::LiOptions;
use memory_sql::{KeyMapping, LlamaIndexConfig, LlamaIndexHistoryStore};

use crate::support;

/// The table the server suite shares (checks use random session ids, so runs never collide).
#[cfg(feature = "postgres")]
const SHARED_TABLE: &str = "amtest_llamaindex_conformance";

fn config() -> LlamaIndexConfig {
    LlamaIndexConfig::new()
        .with_key_mapping(KeyMapping::ScopeKey)
        .with_message_options(LiOptions::default())
}

async fn open(url: &str, config: LlamaIndexConfig) -> LlamaIndexHistoryStore {
    LlamaIndexHistoryStore::connect_with(url, config)
        .await
        .unwrap_or_else(|e| panic!("open the LlamaIndex store: {e}"))
}

#[cfg(feature = "sqlite")]
memory_testkit::history_store_tests!(mod llamaindex_store_on_sqlite_file_history, async {
    open(&support::temp_sqlite_url().0, config()).await
});

#[cfg(feature = "sqlite")]
memory_testkit::history_store_tests!(mod llamaindex_store_on_sqlite_memory_history, async {
    open("sqlite::memory:", config()).await
});

#[cfg(feature = "postgres")]
memory_testkit::history_store_tests!(mod llamaindex_store_on_postgres_history, async {
    open(&support::postgres_url(), config().with_table_name(SHARED_TABLE)).await
});

/// Overwrites the `data` of LlamaIndex rows (position `seq` in LlamaIndex's order of a key).
#[derive(Debug)]
struct LiRaw {
    table: String,
    #[cfg(feature = "sqlite")]
    sqlite: Option<memory_sql::sqlx::SqlitePool>,
    #[cfg(feature = "postgres")]
    postgres: Option<memory_sql::sqlx::PgPool>,
}

#[async_trait::async_trait]
impl memory_testkit::hostile::RawWriter for LiRaw {
    async fn overwrite(&self, scope: &Scope, seq: u64, body: &[u8]) -> Result<bool> {
        use memory_sql::sqlx::{self, AssertSqlSafe};
        let t = &self.table;
        let seq = i64::try_from(seq).unwrap();
        let target = format!(
            "id = (SELECT w.id FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY \"timestamp\", id) \
             AS seq FROM \"{t}\" WHERE \"key\" = KEY) w WHERE w.seq = SEQ)"
        );
        #[cfg(feature = "sqlite")]
        if let Some(pool) = &self.sqlite {
            let where_ = target.replace("KEY", "?").replace("SEQ", "?");
            let sql = format!("UPDATE \"{t}\" SET data = CAST(? AS TEXT) WHERE {where_}");
            let done = sqlx::query(AssertSqlSafe(sql))
                .bind(body)
                .bind(scope.key())
                .bind(seq)
                .execute(pool)
                .await
                .unwrap_or_else(|e| panic!("overwrite row {seq} of {scope}: {e}"));
            assert_eq!(done.rows_affected(), 1);
            return Ok(true);
        }
        #[cfg(feature = "postgres")]
        if let Some(pool) = &self.postgres {
            // The column is PostgreSQL's JSON: it holds valid JSON text only.
            let Ok(text) = std::str::from_utf8(body) else {
                return Ok(false);
            };
            let where_ = target.replace("KEY", "$2").replace("SEQ", "$3");
            let sql = format!("UPDATE \"{t}\" SET data = CAST($1 AS JSON) WHERE {where_}");
            return match sqlx::query(AssertSqlSafe(sql))
                .bind(text)
                .bind(scope.key())
                .bind(seq)
                .execute(pool)
                .await
            {
                Ok(done) => {
                    assert_eq!(done.rows_affected(), 1);
                    Ok(true)
                }
                Err(_) => Ok(false),
            };
        }
        let _ = (body, scope, target);
        Ok(false)
    }
}

#[cfg(feature = "sqlite")]
memory_testkit::hostile_input_tests!(
    mod llamaindex_store_on_sqlite_file_hostile,
    history: async { open(&support::temp_sqlite_url().0, config()).await },
    raw: async {
        let url = support::temp_sqlite_url().0;
        let store = open(&url, config()).await;
        let raw = LiRaw {
            table: LlamaIndexHistoryStore::DEFAULT_TABLE.to_owned(),
            sqlite: Some(memory_sql::sqlx::SqlitePool::connect(&url).await.unwrap()),
            #[cfg(feature = "postgres")]
            postgres: None,
        };
        (store, raw)
    },
);

#[cfg(feature = "sqlite")]
memory_testkit::hostile_input_tests!(
    mod llamaindex_store_on_sqlite_memory_hostile,
    history: async { open("sqlite::memory:", config()).await },
);

#[cfg(feature = "postgres")]
memory_testkit::hostile_input_tests!(
    mod llamaindex_store_on_postgres_hostile,
    history: async { open(&support::postgres_url(), config().with_table_name(SHARED_TABLE)).await },
    raw: async {
        let store = open(&support::postgres_url(), config().with_table_name(SHARED_TABLE)).await;
        let raw = LiRaw {
            table: SHARED_TABLE.to_owned(),
            #[cfg(feature = "sqlite")]
            sqlite: None,
            postgres: Some(
                memory_sql::sqlx::PgPool::connect(&support::postgres_url())
                    .await
                    .unwrap(),
            ),
        };
        (store, raw)
    },
);
