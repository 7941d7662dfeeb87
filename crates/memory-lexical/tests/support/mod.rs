//! Helpers shared by the test binaries (`tests/lexical/main.rs` and `tests/conformance.rs`).

use memory_lexical::TantivyTextIndex;

/// An index in a fresh directory (named `<prefix>…`) under Cargo's test scratch directory
/// (removed by `cargo clean`).
pub(crate) async fn index_in_a_directory(prefix: &str) -> TantivyTextIndex {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map(tempfile::TempDir::keep)
        .unwrap();
    TantivyTextIndex::open_async(dir.join("text"))
        .await
        .unwrap()
}
