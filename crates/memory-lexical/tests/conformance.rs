//! The `TextIndex` conformance suite on tantivy, in memory and in a directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use memory_lexical::{CommitPolicy, TantivyTextIndex};

/// An index in a fresh directory under Cargo's test scratch directory.
async fn in_a_directory() -> TantivyTextIndex {
    support::index_in_a_directory("tantivy-").await
}

memory_testkit::text_index_tests!(mod tantivy_in_memory, async {
    TantivyTextIndex::in_memory().unwrap()
});

memory_testkit::text_index_tests!(mod tantivy_in_a_directory, in_a_directory());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_checks_on_one_index() {
    memory_testkit::run_all_text_index_checks(std::sync::Arc::new(in_a_directory().await)).await;
}

// The same suite with the other policy of each kind: every write committed in memory, writes
// committed before the next read in a directory (the defaults are the reverse).
memory_testkit::text_index_tests!(mod tantivy_every_write, async {
    TantivyTextIndex::in_memory()
        .unwrap()
        .with_commit_policy(CommitPolicy::EveryWrite)
});

memory_testkit::text_index_tests!(mod tantivy_before_read_in_a_directory, async {
    in_a_directory()
        .await
        .with_commit_policy(CommitPolicy::BeforeRead)
});

// The suite through `Traced`, with a subscriber that wants every span and event, so the
// instrumented path is what runs.
memory_testkit::text_index_tests!(mod traced_tantivy, async {
    listening();
    memory_core::telemetry::Traced::new(TantivyTextIndex::in_memory().unwrap(), "tantivy")
});

/// Wants every span and event, and keeps nothing.
struct WantsEverything(std::sync::atomic::AtomicU64);

impl tracing::Subscriber for WantsEverything {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::span::Id::from_u64(id.saturating_add(1))
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Installs [`WantsEverything`] as the global subscriber, once.
fn listening() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::subscriber::set_global_default(WantsEverything(
            std::sync::atomic::AtomicU64::new(0),
        ))
        .unwrap();
    });
}
