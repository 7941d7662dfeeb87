//! The memory-testkit `VectorStore` suite on `SqlVectorStore`: SQLite in memory and in a file,
//! the PostgreSQL server (`AGENT_MEMORY_POSTGRES_URL`) and the MariaDB/MySQL server
//! (`AGENT_MEMORY_MYSQL_URL`). Every check writes under its own random scopes, so the server
//! suites share the tables of [`support::shared_prefix`] (whose vectors all have the suite's
//! four dimensions) and run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use crate::support;

#[cfg(feature = "sqlite")]
memory_testkit::vector_store_tests!(mod sql_vectors_on_sqlite_memory, async {
    memory_sql::SqlStore::in_memory().await.unwrap().vector_store().unwrap()
});

#[cfg(feature = "sqlite")]
memory_testkit::vector_store_tests!(mod sql_vectors_on_sqlite_file, async {
    support::sqlite_file_store().await.vector_store().unwrap()
});

#[cfg(feature = "postgres")]
memory_testkit::vector_store_tests!(mod sql_vectors_on_postgres, async {
    support::postgres_store().await.vector_store().unwrap()
});

#[cfg(feature = "mysql")]
memory_testkit::vector_store_tests!(mod sql_vectors_on_mysql, async {
    support::mysql_store().await.vector_store().unwrap()
});
