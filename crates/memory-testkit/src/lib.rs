#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// This crate is test support: its checks fail by panicking (like `assert!`), and its fixtures
// unwrap values that are valid by construction. A panic with a clear message is the intended
// way to report a broken contract, so the workspace's unwrap/expect/panic lints do not apply.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// For the same reason its arithmetic and indexing are on data the checks built themselves (counts
// of messages they appended, positions in windows they just read): an overflow or an index out
// of range is a failed check, reported by the panic.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod delete_matching;
pub mod doubles;
#[cfg(feature = "engines")]
pub mod engines;
mod error_text;
pub mod fault_net;
pub mod faults;
pub mod fixtures;
pub mod forget;
pub mod history;
pub mod hostile;
#[cfg(feature = "http-load")]
pub mod http_load;
pub mod hybrid_memory;
pub mod indexed_on_append;
pub mod lexical;
mod macros;
pub mod memory;
pub mod retrieval;
pub mod scripted_model;
mod search_matching;
pub mod session;
pub mod text_reference;
mod ttl;
pub mod user_facts;
pub mod user_memory;
pub mod vector;

pub use error_text::error_text;
pub use forget::run_all_forget_checks;
pub use history::run_all_history_checks;
pub use lexical::run_all_text_index_checks;
pub use memory::run_all_memory_checks;
pub use retrieval::run_all_retriever_checks;
pub use scripted_model::{ScriptedChatModel, ScriptedReply};
pub use session::run_all_session_checks;
pub use vector::run_all_vector_checks;

/// A check of a suite that takes the store under test by reference (`&dyn HistoryStore`, say),
/// its future boxed: what `every_shared_check` of the history and session suites lists.
pub type SharedCheck<S> =
    for<'a> fn(&'a S) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

/// What the macros expand to. Not a public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;
    use std::sync::Arc;

    use memory_core::{HistoryStore, SessionStore, TextIndex, VectorStore};

    pub use tokio;

    /// Runs `future` to completion on a new multi-thread runtime with 4 workers, as
    /// `#[tokio::test(flavor = "multi_thread", worker_threads = 4)]` does.
    pub fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("build the test runtime")
            .block_on(future)
    }

    /// The store under test, shared.
    pub fn history_store<S: HistoryStore>(store: S) -> Arc<dyn HistoryStore> {
        Arc::new(store)
    }

    /// The store under test, shared.
    pub fn session_store<S: SessionStore>(store: S) -> Arc<dyn SessionStore> {
        Arc::new(store)
    }

    /// The pair of stores under test of the memory suite, shared.
    pub fn memory_stores<H: HistoryStore, S: SessionStore>(
        (history, sessions): (H, S),
    ) -> (Arc<dyn HistoryStore>, Arc<dyn SessionStore>) {
        (Arc::new(history), Arc::new(sessions))
    }

    /// The stores under test of the forget suite, shared.
    pub fn forget_stores<T: crate::forget::IntoForgetStores>(
        stores: T,
    ) -> crate::forget::ForgetStores {
        stores.into_forget_stores()
    }

    /// The store under test, shared.
    pub fn vector_store<S: VectorStore>(store: S) -> Arc<dyn VectorStore> {
        Arc::new(store)
    }

    /// The retriever under test, shared.
    pub fn retriever<R: memory_core::retrieval::Retriever>(
        retriever: R,
    ) -> Arc<dyn memory_core::retrieval::Retriever> {
        Arc::new(retriever)
    }

    /// The index under test, shared.
    pub fn text_index<T: TextIndex>(index: T) -> Arc<dyn TextIndex> {
        Arc::new(index)
    }
}
