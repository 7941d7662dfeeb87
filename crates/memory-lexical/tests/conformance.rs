//! The `TextIndex` conformance suite on tantivy, in memory and in a directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use memory_lexical::TantivyTextIndex;

/// An index in a fresh directory under Cargo's test scratch directory (removed by
/// `cargo clean`).
async fn in_a_directory() -> TantivyTextIndex {
    let dir = tempfile::Builder::new()
        .prefix("tantivy-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map(tempfile::TempDir::keep)
        .unwrap();
    TantivyTextIndex::open_async(dir.join("text"))
        .await
        .unwrap()
}

memory_testkit::text_index_tests!(mod tantivy_in_memory, async {
    TantivyTextIndex::in_memory().unwrap()
});

memory_testkit::text_index_tests!(mod tantivy_in_a_directory, in_a_directory());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_checks_on_one_index() {
    memory_testkit::run_all_text_index_checks(std::sync::Arc::new(in_a_directory().await)).await;
}
