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
#![allow(clippy::panic)]

mod common;

use memory_interop::llamaindex::LiOptions;
use memory_sql::{KeyMapping, LlamaIndexConfig, LlamaIndexHistoryStore};

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
    open(&common::temp_sqlite_url().0, config()).await
});

#[cfg(feature = "sqlite")]
memory_testkit::history_store_tests!(mod llamaindex_store_on_sqlite_memory_history, async {
    open("sqlite::memory:", config()).await
});

#[cfg(feature = "postgres")]
memory_testkit::history_store_tests!(mod llamaindex_store_on_postgres_history, async {
    open(&common::postgres_url(), config().with_table_name(SHARED_TABLE)).await
});
