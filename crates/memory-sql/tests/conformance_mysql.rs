//! The whole memory-testkit suite on the MySQL/MariaDB server (`AGENT_MEMORY_MYSQL_URL`).
#![cfg(feature = "mysql")]

mod common;

memory_testkit::history_store_tests!(async { common::mysql_store().await });
memory_testkit::session_store_tests!(async { common::mysql_store().await });
