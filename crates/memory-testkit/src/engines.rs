//! The machine's database engines for tests that run a whole program (the server, the
//! command) on each of them: where each server is ([`postgres_url`], [`mysql_url`],
//! [`redis_url`]: an environment variable, or the local default) and [`TestStore`], a store
//! URL of a test's own (a fresh SQLite file, or tables or keys under a prefix nobody else
//! uses) that is cleaned up when dropped.
//!
//! Enabled by the cargo feature `engines`.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// The variable naming the PostgreSQL server of the tests.
pub const POSTGRES_URL_ENV: &str = "AGENT_MEMORY_POSTGRES_URL";
/// The variable naming the MySQL/MariaDB server of the tests.
pub const MYSQL_URL_ENV: &str = "AGENT_MEMORY_MYSQL_URL";
/// The variable naming the Redis server of the tests.
pub const REDIS_URL_ENV: &str = "AGENT_MEMORY_REDIS_URL";

/// The PostgreSQL server of the tests: [`POSTGRES_URL_ENV`], or the local one.
pub fn postgres_url() -> String {
    std::env::var(POSTGRES_URL_ENV)
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The MySQL/MariaDB server of the tests: [`MYSQL_URL_ENV`], or the local one.
pub fn mysql_url() -> String {
    std::env::var(MYSQL_URL_ENV).unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// The Redis server of the tests: [`REDIS_URL_ENV`], or the local one.
pub fn redis_url() -> String {
    std::env::var(REDIS_URL_ENV).unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A name no other test (or run) uses: `t`, the first 8 characters of `tag`, then hex digits
/// of the clock and the process id; at most 21 characters. With a lowercase `tag` of letters
/// and digits it is a valid table and key prefix once `_` is added.
pub fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tail = format!("{:x}{:x}", nanos & 0xffff_ffff, std::process::id() & 0xffff);
    let tag: String = tag.chars().take(8).collect();
    format!("t{tag}{tail}")
}

/// `base` with the `prefix` query parameter.
pub fn with_prefix(base: &str, prefix: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}prefix={prefix}")
}

/// A database engine of the tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// The PostgreSQL server ([`postgres_url`]).
    Postgres,
    /// The MySQL/MariaDB server ([`mysql_url`]).
    Mysql,
    /// The Redis server ([`redis_url`]).
    Redis,
}

impl Engine {
    /// Every engine, SQLite first.
    pub const ALL: [Engine; 4] = [
        Engine::Sqlite,
        Engine::Postgres,
        Engine::Mysql,
        Engine::Redis,
    ];

    /// The engine's name, for assertion messages: `sqlite`, `postgres`, `mariadb`, `redis`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
            Engine::Mysql => "mariadb",
            Engine::Redis => "redis",
        }
    }
}

/// A store on one engine for one test: a fresh SQLite file, or tables or keys under a prefix
/// of its own on a server; the server's tables or keys are deleted when it is dropped (unless
/// the thread is panicking, so a failed test leaves its data to look at).
#[derive(Debug)]
pub struct TestStore {
    /// The store's URL, as `agent_memory::open` and the command take it.
    pub url: String,
    /// Its engine.
    pub engine: Engine,
    prefix: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    /// A store on `engine`; on a server, under a prefix made from `tag` (see [`unique`]).
    ///
    /// # Panics
    /// When no temporary directory can be created.
    pub fn new(engine: Engine, tag: &str) -> Self {
        match engine {
            Engine::Sqlite => Self::sqlite(),
            Engine::Postgres => Self::postgres(tag),
            Engine::Mysql => Self::mysql(tag),
            Engine::Redis => Self::redis(tag),
        }
    }

    /// A new SQLite file in a temporary directory (removed when dropped).
    ///
    /// # Panics
    /// When no temporary directory can be created.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let path: PathBuf = dir.path().join("memory.db");
        Self {
            url: format!("sqlite://{}", path.display()),
            engine: Engine::Sqlite,
            prefix: String::new(),
            _dir: Some(dir),
        }
    }

    /// Tables of their own on the PostgreSQL server.
    pub fn postgres(tag: &str) -> Self {
        Self::on_server(Engine::Postgres, &postgres_url(), tag)
    }

    /// Tables of their own on the MySQL/MariaDB server.
    pub fn mysql(tag: &str) -> Self {
        Self::on_server(Engine::Mysql, &mysql_url(), tag)
    }

    /// Keys of their own on the Redis server.
    pub fn redis(tag: &str) -> Self {
        Self::on_server(Engine::Redis, &redis_url(), tag)
    }

    /// One store on every engine ([`Engine::ALL`]), the servers' under prefixes made from
    /// `tag`.
    pub fn every(tag: &str) -> Vec<Self> {
        Engine::ALL
            .into_iter()
            .map(|engine| Self::new(engine, tag))
            .collect()
    }

    fn on_server(engine: Engine, base: &str, tag: &str) -> Self {
        let prefix = format!("{}_", unique(tag));
        Self {
            url: with_prefix(base, &prefix),
            engine,
            prefix,
            _dir: None,
        }
    }

    /// The engine's name (see [`Engine::name`]).
    pub fn name(&self) -> &'static str {
        self.engine.name()
    }

    /// The prefix of its tables or keys (empty for SQLite).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        let (engine, prefix) = (self.engine, self.prefix.clone());
        if engine == Engine::Sqlite || std::thread::panicking() {
            return;
        }
        // Cleanup on a runtime of its own (the test's may be gone); failures only leave
        // tables or keys behind under a prefix nobody else uses.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(cleanup(engine, &prefix));
        })
        .join();
    }
}

/// Deletes the tables or keys under `prefix` on `engine`'s server.
async fn cleanup(engine: Engine, prefix: &str) {
    match engine {
        Engine::Sqlite => {}
        Engine::Postgres => drop_postgres_tables(prefix).await,
        Engine::Mysql => drop_mysql_tables(prefix).await,
        Engine::Redis => delete_redis_keys(prefix).await,
    }
}

async fn drop_postgres_tables(prefix: &str) {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(&postgres_url()).await else {
        return;
    };
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1",
    )
    .bind(format!("{prefix}%"))
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for (table,) in tables {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS \"{table}\" CASCADE"
        )))
        .execute(&mut conn)
        .await;
    }
}

async fn drop_mysql_tables(prefix: &str) {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::MySqlConnection::connect(&mysql_url()).await else {
        return;
    };
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
    )
    .bind(format!("{prefix}%"))
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    let _ = sqlx::query("SET FOREIGN_KEY_CHECKS = 0")
        .execute(&mut conn)
        .await;
    for (table,) in tables {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS `{table}`"
        )))
        .execute(&mut conn)
        .await;
    }
}

async fn delete_redis_keys(prefix: &str) {
    let Ok(client) = redis::Client::open(redis_url()) else {
        return;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    let mut cursor: u64 = 0;
    loop {
        let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
        else {
            return;
        };
        if !keys.is_empty() {
            let _: redis::RedisResult<u64> =
                redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_short_prefixes() {
        let name = unique("loadtest9");
        assert!(name.starts_with("tloadtest"), "{name}");
        assert!(name.len() <= 21, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }

    #[test]
    fn a_prefix_is_a_query_parameter() {
        assert_eq!(with_prefix("redis://h:1", "p_"), "redis://h:1?prefix=p_");
        assert_eq!(
            with_prefix("mysql://h/db?x=1", "p_"),
            "mysql://h/db?x=1&prefix=p_"
        );
        let store = TestStore::postgres("abc");
        assert!(store.url.ends_with(&format!("prefix={}", store.prefix())));
        assert_eq!(store.name(), "postgres");
    }
}
