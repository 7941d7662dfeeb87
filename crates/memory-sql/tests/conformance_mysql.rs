//! The whole memory-testkit suite on the MySQL/MariaDB server (`AGENT_MEMORY_MYSQL_URL`).
#![cfg(feature = "mysql")]

mod common;

memory_testkit::history_store_tests!(
    mod sql_store_on_mysql_history,
    async { common::mysql_store().await }
);
memory_testkit::session_store_tests!(
    mod sql_store_on_mysql_session,
    async { common::mysql_store().await }
);
