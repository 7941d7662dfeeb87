//! The backend registry: one entry per store backend the benchmark can run on.
//!
//! Adding a backend (`sqlite-file`, `sqlite-memory`, `postgres`, `mariadb`, `redis`,
//! `redis-cluster`, ...) is one [`Backend`] entry in [`BACKENDS`]: a name, an availability check
//! (for example "is its server URL set?") and a `connect` function that opens fresh stores.
//! Every case runs in its own process and calls `connect` once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use memory_core::{HistoryStore, InMemoryHistoryStore, InMemorySessionStore, SessionStore};

use crate::BenchResult;

/// The backend name reported by workloads that use no store (`count_tokens`).
pub(crate) const NO_BACKEND: &str = "none";

/// The stores a backend provides for one case.
#[derive(Debug, Clone)]
pub(crate) struct Stores {
    /// The chat history store.
    pub(crate) history: Arc<dyn HistoryStore>,
    /// The session state store.
    pub(crate) sessions: Arc<dyn SessionStore>,
}

/// What [`Backend::connect`] returns: opening stores is async and may fail (a server is down).
pub(crate) type ConnectFuture = Pin<Box<dyn Future<Output = BenchResult<Stores>> + Send>>;

/// One registered backend.
#[derive(Debug)]
pub(crate) struct Backend {
    /// The name used on the command line and in the JSON lines.
    pub(crate) name: &'static str,
    /// One line for `--list`.
    pub(crate) description: &'static str,
    /// Whether the backend can run here. Unavailable backends are left out of the default
    /// selection; naming one with `--backend` still tries it (and reports why it fails).
    pub(crate) available: fn() -> bool,
    /// Opens the backend's stores. Each case uses a fresh random scope, so stores may be shared
    /// with earlier runs.
    pub(crate) connect: fn() -> ConnectFuture,
}

/// Every backend, in the order the benchmark runs them.
pub(crate) static BACKENDS: &[Backend] = &[Backend {
    name: "in-memory",
    description: "InMemoryHistoryStore and InMemorySessionStore (memory-core)",
    available: always,
    connect: in_memory,
}];

/// The backend called `name`.
pub(crate) fn find(name: &str) -> BenchResult<&'static Backend> {
    BACKENDS.iter().find(|b| b.name == name).ok_or_else(|| {
        let known: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
        format!(
            "unknown backend {name:?}; known backends: {}",
            known.join(", ")
        )
        .into()
    })
}

/// An availability check for backends that need nothing outside the process.
fn always() -> bool {
    true
}

/// The in-memory stores of memory-core.
fn in_memory() -> ConnectFuture {
    Box::pin(async {
        Ok(Stores {
            history: Arc::new(InMemoryHistoryStore::new()),
            sessions: Arc::new(InMemorySessionStore::new()),
        })
    })
}
