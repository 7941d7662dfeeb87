//! Opening stores from a URL, one match arm per enabled backend.

use std::fmt;
use std::sync::Arc;

use memory_core::telemetry::Traced;
use memory_core::{
    Error, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, InMemoryVectorStore, Result,
    SessionStore, TextIndex, VectorStore,
};
use memory_layers::{WindowCache, WindowCacheConfig};
use tracing::Instrument;

/// The URL [`open_default`] opens when [`URL_ENV`] is not set: with the `sqlite` feature (on by
/// default) a SQLite file in the current directory, so memory survives a restart; without it,
/// process memory.
#[cfg(feature = "sqlite")]
pub const DEFAULT_URL: &str = "sqlite://agent-memory.db";
/// The URL [`open_default`] opens when [`URL_ENV`] is not set.
#[cfg(not(feature = "sqlite"))]
pub const DEFAULT_URL: &str = "memory:";

/// The environment variable [`open_default`] reads a URL from.
pub const URL_ENV: &str = "AGENT_MEMORY_URL";

/// A history store and a session store on one backend, and its text index and vector store
/// when it has them.
#[derive(Clone)]
pub struct Stores {
    /// Where conversation threads live.
    pub history: Arc<dyn HistoryStore>,
    /// Where session states live.
    pub sessions: Arc<dyn SessionStore>,
    /// The backend's text index (SQL URLs), see [`Stores::text_index`].
    text: Option<Arc<dyn TextIndex>>,
    /// The backend's vector store, see [`Stores::vector_store`].
    vectors: Option<Arc<dyn VectorStore>>,
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("history", &self.history)
            .field("sessions", &self.sessions)
            .field("text", &self.text)
            .field("vectors", &self.vectors)
            .finish()
    }
}

impl Stores {
    /// Stores built by hand: a history store and a session store, without a text index or a
    /// vector store (add them with [`with_text_index`](Self::with_text_index) and
    /// [`with_vector_store`](Self::with_vector_store)).
    pub fn new(history: Arc<dyn HistoryStore>, sessions: Arc<dyn SessionStore>) -> Self {
        Self {
            history,
            sessions,
            text: None,
            vectors: None,
        }
    }

    /// The same stores with `vectors` as their vector store (returned by
    /// [`vector_store`](Self::vector_store) and forgotten in by [`forgetter`](Self::forgetter)).
    #[must_use]
    pub fn with_vector_store(mut self, vectors: Arc<dyn VectorStore>) -> Self {
        self.vectors = Some(vectors);
        self
    }

    /// The same stores with `text` as their text index (returned by
    /// [`text_index`](Self::text_index) and forgotten in by [`forgetter`](Self::forgetter)).
    #[must_use]
    pub fn with_text_index(mut self, text: Arc<dyn TextIndex>) -> Self {
        self.text = Some(text);
        self
    }

    /// The two stores as an endpoint of [`bundle`](crate::bundle)'s export, import and
    /// migrate.
    pub fn endpoint(&self) -> memory_bundle::Endpoint {
        memory_bundle::Endpoint::new(Arc::clone(&self.history), Arc::clone(&self.sessions))
    }

    /// A [`Forgetter`](memory_core::forget::Forgetter) over the stores: history first, then
    /// sessions (block states of a `Memory` included), then the vector store and the text index
    /// when there are (named "vectors" and "texts"). Add other stores (Qdrant, Mem0) with its
    /// builder methods.
    pub fn forgetter(&self) -> memory_core::forget::Forgetter {
        let mut forgetter = memory_core::forget::Forgetter::new()
            .history(Arc::clone(&self.history))
            .sessions(Arc::clone(&self.sessions));
        if let Some(vectors) = &self.vectors {
            forgetter = forgetter.vectors(Arc::clone(vectors));
        }
        if let Some(text) = &self.text {
            forgetter = forgetter.texts(Arc::clone(text));
        }
        forgetter
    }

    /// The backend's own [`TextIndex`] (lexical search over scoped documents), in the same
    /// database and under the same table prefix: `memory_sql::SqlTextIndex` for SQL URLs
    /// (SQLite FTS5, PostgreSQL full-text search, MySQL/MariaDB `FULLTEXT`). `None` for the
    /// backends without one (`memory:`, Redis).
    pub fn text_index(&self) -> Option<Arc<dyn TextIndex>> {
        self.text.clone()
    }

    /// The backend's own [`VectorStore`] (exact cosine search over scoped points), in the same
    /// database (or Redis) and under the same prefix, so long-term memory lasts as long as the
    /// history: `memory_sql::SqlVectorStore` for SQL URLs, `memory_redis::RedisVectorStore` for
    /// Redis, `memory_core::InMemoryVectorStore` for `memory:` (it lives as long as the
    /// process, as that history does).
    pub fn vector_store(&self) -> Option<Arc<dyn VectorStore>> {
        self.vectors.clone()
    }

    /// The stores wrapped in [`Traced`], so every call is a span and a duration data point
    /// (docs/telemetry.md).
    fn traced(self, system: &'static str) -> Self {
        Self {
            history: Arc::new(Traced::new(self.history, system)),
            sessions: Arc::new(Traced::new(self.sessions, system)),
            text: self
                .text
                .map(|text| -> Arc<dyn TextIndex> { Arc::new(Traced::new(text, system)) }),
            vectors: self
                .vectors
                .map(|vectors| -> Arc<dyn VectorStore> { Arc::new(Traced::new(vectors, system)) }),
        }
    }

    #[cfg(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis"
    ))]
    fn from_one<S: HistoryStore + SessionStore + Clone>(store: S) -> Self {
        Self::new(Arc::new(store.clone()), Arc::new(store))
    }

    /// A SQL store's history, sessions, text index and vector store.
    #[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
    fn from_sql(store: memory_sql::SqlStore) -> Result<Self> {
        let text: Arc<dyn TextIndex> = Arc::new(store.text_index()?);
        let vectors: Arc<dyn VectorStore> = Arc::new(store.vector_store()?);
        Ok(Self::from_one(store)
            .with_text_index(text)
            .with_vector_store(vectors))
    }
}

/// How [`open`] and [`open_default`] open stores: by default, the history store is wrapped in
/// a [`WindowCache`] (with [`WindowCacheConfig::new`]: 64 MiB), so reading a thread's window
/// again moves only what it gained since (one cursor read; a pass-through on a backend without
/// cursor reads).
///
/// ```no_run
/// # async fn run() -> agent_memory::Result<()> {
/// use agent_memory::OpenOptions;
/// use agent_memory::layers::WindowCacheConfig;
///
/// // The history store as the backend gives it, without the cache:
/// let plain = OpenOptions::new().without_window_cache().open("memory:").await?;
/// // A smaller cache:
/// let small = OpenOptions::new()
///     .window_cache(WindowCacheConfig::new().with_max_bytes(8 * 1024 * 1024))
///     .open_default()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    window_cache: WindowCacheConfig,
    existing_only: bool,
}

impl OpenOptions {
    /// The defaults: the window cache on, with [`WindowCacheConfig::new`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the window cache's settings ([`WindowCacheConfig::disabled`] turns it off).
    #[must_use]
    pub fn window_cache(mut self, config: WindowCacheConfig) -> Self {
        self.window_cache = config;
        self
    }

    /// Turns the window cache off: [`Stores::history`] is the backend's store itself.
    #[must_use]
    pub fn without_window_cache(self) -> Self {
        self.window_cache(WindowCacheConfig::disabled())
    }

    /// Opens only stores that already exist, creating and migrating nothing: for tools that
    /// inspect or change an application's data (the `agent-memory` command), where a mistyped
    /// URL or prefix must be an error rather than a new empty store, and a production schema
    /// must not be upgraded behind the applications' back.
    ///
    /// SQL URLs open with [`memory_sql::SchemaMode::RequireCurrent`]: a missing SQLite file or
    /// no tables with the prefix is [`NotFound`](memory_core::ErrorKind::NotFound), tables at an
    /// older or newer schema version [`Unsupported`](memory_core::ErrorKind::Unsupported).
    /// Redis URLs open with `memory_redis::RedisStoreBuilder::existing_only`: no key under the
    /// prefix is [`NotFound`](memory_core::ErrorKind::NotFound) (the message names Agent
    /// Framework's layout when the server holds its lists), and reads write nothing (listings
    /// scan instead of building the tenant's thread index). `memory:` is always a new empty
    /// store and opens as usual. Without this option (the default) an open creates what is
    /// missing and applies pending migrations.
    #[must_use]
    pub fn existing_only(mut self) -> Self {
        self.existing_only = true;
        self
    }

    /// Opens the stores of the backend `url` names; see [`open`].
    ///
    /// # Errors
    /// As [`open`]; with [`existing_only`](Self::existing_only), also as it says.
    pub async fn open(&self, url: &str) -> Result<Stores> {
        let span = tracing::info_span!(
            "agent_memory.open",
            otel.status_code = tracing::field::Empty,
            db.system.name = system_name(url),
            agent_memory.url = %memory_core::redact_url(url),
            agent_memory.window_cache = self.window_cache.enabled(),
            error.type = tracing::field::Empty,
        );
        let stores = match open_backend(url, self.existing_only)
            .instrument(span.clone())
            .await
        {
            Ok(stores) => stores.traced(system_name(url)),
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", e.kind().as_str());
                return Err(e);
            }
        };
        if !self.window_cache.enabled() {
            return Ok(stores);
        }
        Ok(Stores {
            history: Arc::new(WindowCache::with_config(stores.history, self.window_cache)),
            ..stores
        })
    }

    /// Opens the URL in the [`URL_ENV`] environment variable, or [`DEFAULT_URL`]; see
    /// [`open_default`].
    ///
    /// # Errors
    /// As [`open`].
    pub async fn open_default(&self) -> Result<Stores> {
        match std::env::var(URL_ENV) {
            Ok(url) if !url.trim().is_empty() => self.open(url.trim()).await,
            _ => self.open(DEFAULT_URL).await,
        }
    }
}

/// Opens the stores of the backend `url` names:
///
/// | URL | backend | feature |
/// | --- | --- | --- |
/// | `memory:` | process memory | always |
/// | `sqlite://path.db`, `sqlite::memory:` | SQLite file (WAL) or in-memory | `sqlite` (default) |
/// | `postgres://…` | PostgreSQL | `postgres` |
/// | `mysql://…`, `mariadb://…` | MySQL / MariaDB | `mysql` |
/// | `redis://…`, `rediss://…`, `redis+cluster://h1:p1,h2:p2` | Redis, Redis Cluster | `redis` |
///
/// A URL whose backend is not in this build is an error naming the feature to enable. Errors
/// never repeat the URL, which may hold a password.
///
/// A `prefix` query parameter (`postgres://db/app?prefix=chat_`, `redis://cache?prefix=chat`)
/// sets the SQL stores' table prefix or the Redis store's key prefix, so tools such as the
/// `agent-memory` command can open an application's stores wherever its prefix put them; the
/// parameter is taken out of the URL before the driver sees it.
///
/// The history store comes wrapped in a [`WindowCache`] with its default settings; open with
/// [`OpenOptions`] to size it or turn it off ([`OpenOptions::without_window_cache`]).
///
/// # Errors
/// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an unknown scheme or a
/// backend whose feature is off; the backend's own errors when it cannot connect.
pub async fn open(url: &str) -> Result<Stores> {
    OpenOptions::new().open(url).await
}

/// The backend's own stores, without layers.
async fn open_backend(url: &str, existing_only: bool) -> Result<Stores> {
    let (url, prefix) = take_prefix(url);
    #[cfg(not(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis"
    )))]
    let _ = (&prefix, existing_only);
    let url = url.as_str();
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or(url);
    match scheme {
        "memory" => Ok(Stores::new(
            Arc::new(InMemoryHistoryStore::new()),
            Arc::new(InMemorySessionStore::new()),
        )
        .with_vector_store(Arc::new(InMemoryVectorStore::new()))),
        #[cfg(feature = "sqlite")]
        "sqlite" => Stores::from_sql(sql_store(url, prefix, existing_only).await?),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Stores::from_sql(sql_store(url, prefix, existing_only).await?),
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => {
            let url = url.replacen("mariadb:", "mysql:", 1);
            Stores::from_sql(sql_store(&url, prefix, existing_only).await?)
        }
        #[cfg(feature = "redis")]
        "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => {
            let mut builder = memory_redis::RedisStore::builder(url);
            if let Some(prefix) = prefix {
                builder = builder.key_prefix(prefix);
            }
            if existing_only {
                builder = builder.existing_only();
            }
            let store = builder.connect().await?;
            let vectors: Arc<dyn VectorStore> = Arc::new(store.vector_store());
            Ok(Stores::from_one(store).with_vector_store(vectors))
        }
        other => Err(not_in_this_build(other)),
    }
}

/// A SQL store at `url`, with the table prefix when one is given; with `existing_only`, one
/// that must exist at the current schema version.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
async fn sql_store(
    url: &str,
    prefix: Option<String>,
    existing_only: bool,
) -> Result<memory_sql::SqlStore> {
    let mut builder = memory_sql::SqlStore::builder(url);
    if let Some(prefix) = prefix {
        builder = builder.table_prefix(prefix);
    }
    if existing_only {
        builder = builder.existing_only();
    }
    builder.connect().await
}

/// The OpenTelemetry `db.system.name` of the backend `url` names (`other` for a scheme no
/// backend handles).
fn system_name(url: &str) -> &'static str {
    match url.split_once(':').map_or(url, |(scheme, _)| scheme) {
        "memory" => "memory",
        "sqlite" => "sqlite",
        "postgres" | "postgresql" => "postgresql",
        "mysql" => "mysql",
        "mariadb" => "mariadb",
        "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => "redis",
        _ => "other",
    }
}

/// `url` without its `prefix` query parameter, and that parameter's value (the last one when
/// it is given twice; percent-decoding is not needed: a valid prefix is plain ASCII).
pub(crate) fn take_prefix(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut prefix = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("prefix=") {
            Some(value) => {
                prefix = Some(value.to_owned());
                false
            }
            None => true,
        })
        .collect();
    if kept.iter().all(|pair| pair.is_empty()) {
        (base.to_owned(), prefix)
    } else {
        (format!("{base}?{}", kept.join("&")), prefix)
    }
}

/// The error for a scheme this build cannot open: the feature to enable, or an unknown scheme.
pub(crate) fn not_in_this_build(scheme: &str) -> Error {
    let feature = match scheme {
        "sqlite" => "sqlite",
        "postgres" | "postgresql" => "postgres",
        "mysql" | "mariadb" => "mysql",
        "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => "redis",
        _ => {
            return Error::invalid_input(format!(
                "no agent-memory backend handles URLs with the scheme {scheme:?}"
            ));
        }
    };
    Error::invalid_input(format!(
        "the {scheme:?} backend is not in this build of agent-memory; enable the cargo feature {feature:?}"
    ))
}

/// Opens the URL in the [`URL_ENV`] environment variable, or [`DEFAULT_URL`], with the
/// default [`OpenOptions`] (the window cache on).
///
/// # Errors
/// As [`open`].
pub async fn open_default() -> Result<Stores> {
    OpenOptions::new().open_default().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[tokio::test]
    async fn unknown_schemes_are_clear_errors() {
        let err = open("ftp://x").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            not_in_this_build("redis")
                .to_string()
                .contains("feature \"redis\"")
        );
    }

    #[tokio::test]
    async fn errors_never_show_the_password() {
        for url in [
            "postgres://user:hunter2@127.0.0.1:1/app",
            "mysql://user:hunter2@127.0.0.1:1/app",
            "redis://:hunter2@127.0.0.1:1",
        ] {
            if let Err(err) = open(url).await {
                let text = format!("{err} {err:?}");
                assert!(!text.contains("hunter2"), "the password leaked: {text}");
            }
        }
    }

    #[test]
    fn the_prefix_parameter_is_taken_out_of_the_url() {
        assert_eq!(
            take_prefix("postgres://u:p@db/app?prefix=chat_"),
            ("postgres://u:p@db/app".to_owned(), Some("chat_".to_owned()))
        );
        assert_eq!(
            take_prefix("postgres://db/app?sslmode=require&prefix=x_&connect_timeout=2"),
            (
                "postgres://db/app?sslmode=require&connect_timeout=2".to_owned(),
                Some("x_".to_owned())
            )
        );
        assert_eq!(
            take_prefix("sqlite://memory.db"),
            ("sqlite://memory.db".to_owned(), None)
        );
        assert_eq!(
            take_prefix("redis://h?db_prefix=1"),
            ("redis://h?db_prefix=1".to_owned(), None)
        );
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_prefix_in_the_url_separates_stores() {
        use memory_core::{ChatMessage, Scope, Window};
        let dir = std::env::temp_dir().join(format!("am-prefix-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let url = format!("sqlite://{}", dir.display());
        let scope = Scope::session("prefixed").unwrap();
        let a = open(&format!("{url}?prefix=a_")).await.unwrap();
        a.history
            .append(&scope, &[ChatMessage::user("in a")])
            .await
            .unwrap();
        let b = open(&format!("{url}?prefix=b_")).await.unwrap();
        assert!(
            b.history
                .read(&scope, Window::All)
                .await
                .unwrap()
                .is_empty()
        );
        let a_again = open(&format!("{url}?prefix=a_")).await.unwrap();
        assert_eq!(
            a_again
                .history
                .read(&scope, Window::All)
                .await
                .unwrap()
                .len(),
            1
        );
        drop((a, b, a_again));
        let _ = std::fs::remove_file(&dir);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn existing_only_creates_nothing_and_opens_what_exists() {
        use memory_core::{ChatMessage, Scope, Window};
        let path = std::env::temp_dir().join(format!("am-existing-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let url = format!("sqlite://{}", path.display());
        let strict = OpenOptions::new().existing_only();
        let err = strict.open(&url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(!path.exists(), "the file was created");
        let scope = Scope::session("existing").unwrap();
        let made = open(&format!("{url}?prefix=a_")).await.unwrap();
        made.history
            .append(&scope, &[ChatMessage::user("kept")])
            .await
            .unwrap();
        let err = strict.open(&format!("{url}?prefix=b_")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert!(err.to_string().contains("\"b_\""), "{err}");
        let found = strict.open(&format!("{url}?prefix=a_")).await.unwrap();
        assert_eq!(
            found.history.read(&scope, Window::All).await.unwrap().len(),
            1
        );
        // Process memory has no schema: it opens as usual.
        assert!(strict.open("memory:").await.is_ok());
        drop((made, found));
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn memory_opens() {
        let stores = open("memory:").await.unwrap();
        assert!(stores.history.capabilities().ttl);
    }

    #[tokio::test]
    async fn the_history_store_is_cached_unless_turned_off() {
        use memory_core::{ChatMessage, Scope, Window};
        let cached = open("memory:").await.unwrap();
        assert!(format!("{:?}", cached.history).starts_with("WindowCache"));
        let plain = OpenOptions::new()
            .without_window_cache()
            .open("memory:")
            .await
            .unwrap();
        assert!(format!("{:?}", plain.history).starts_with("InMemoryHistoryStore"));
        let scope = Scope::session("cached").unwrap();
        for stores in [&cached, &plain] {
            for text in ["one", "two", "three"] {
                stores
                    .history
                    .append(&scope, &[ChatMessage::user(text)])
                    .await
                    .unwrap();
                let window = stores.history.read(&scope, Window::Last(2)).await.unwrap();
                assert_eq!(window.last().unwrap().message.text(), text);
            }
        }
    }

    /// A SQL URL has a text index and a vector store in its database: what they hold is there
    /// when the database is opened again (a restarted process), and one forget reaches both.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sql_urls_keep_texts_and_vectors_that_forget_reaches() {
        use memory_core::forget::ForgetMode;
        use memory_core::lexical::{TextDocument, TextQuery};
        use memory_core::{Scope, ScopeFilter, TenantId, VectorPoint, VectorQuery};
        let in_memory = open("memory:").await.unwrap();
        assert!(in_memory.text_index().is_none() && in_memory.vector_store().is_some());
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("memory.db").display());
        let scope = Scope::session("facade")
            .unwrap()
            .with_tenant("acme")
            .unwrap();
        {
            let stores = open(&url).await.unwrap();
            let text = stores.text_index().expect("a SQL URL has a text index");
            let document = TextDocument {
                id: uuid::Uuid::from_u128(7),
                text: "Caroline took a pottery class".to_owned(),
                payload: serde_json::Map::new(),
            };
            text.upsert(&scope, &[document]).await.unwrap();
            let vectors = stores.vector_store().expect("a SQL URL has a vector store");
            let point = VectorPoint {
                id: uuid::Uuid::from_u128(7),
                vector: vec![0.6, 0.8],
                payload: serde_json::Map::new(),
            };
            vectors.upsert(&scope, &[point]).await.unwrap();
        }
        let stores = open(&url).await.unwrap();
        let (text, vectors) = (stores.text_index().unwrap(), stores.vector_store().unwrap());
        let words = TextQuery::new("pottery", 3);
        assert_eq!(text.search(&scope, &words).await.unwrap().len(), 1);
        let near = VectorQuery::new(vec![0.6, 0.8], 3);
        assert_eq!(vectors.search(&scope, &near).await.unwrap().len(), 1);
        let forgetter = stores.forgetter();
        assert_eq!(
            forgetter.store_names(),
            ["history", "sessions", "vectors", "texts"]
        );
        let acme = ScopeFilter::tenant(TenantId::new("acme").unwrap());
        let receipt = forgetter.forget(&acme, ForgetMode::Delete).await.unwrap();
        assert_eq!(receipt.total_items(), 2, "{receipt}");
        assert_eq!(text.count(&scope).await.unwrap(), 0);
        assert_eq!(vectors.count(&scope).await.unwrap(), 0);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sqlite_in_memory_opens_and_works() {
        use memory_core::{ChatMessage, Scope, Window};
        let stores = open("sqlite::memory:").await.unwrap();
        let scope = Scope::session("facade").unwrap();
        stores
            .history
            .append(&scope, &[ChatMessage::user("hi")])
            .await
            .unwrap();
        assert_eq!(
            stores
                .history
                .read(&scope, Window::All)
                .await
                .unwrap()
                .len(),
            1
        );
    }
}
