//! The whole memory-testkit suite on the PostgreSQL server (`AGENT_MEMORY_POSTGRES_URL`).
#![cfg(feature = "postgres")]

mod common;

memory_testkit::history_store_tests!(async { common::postgres_store().await });
memory_testkit::session_store_tests!(async { common::postgres_store().await });
