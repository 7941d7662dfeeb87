//! The whole memory-testkit suite on SQLite files (a new file per store).
#![cfg(feature = "sqlite")]

mod common;

memory_testkit::history_store_tests!(async { common::sqlite_file_store().await });
memory_testkit::session_store_tests!(async { common::sqlite_file_store().await });
