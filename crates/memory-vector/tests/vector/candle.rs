//! Real semantics with the local model: all-MiniLM-L6-v2 from `AGENT_MEMORY_MODEL_DIR`
//! (`cargo xtask fetch-model` prints it). Without the variable the tests say so and pass,
//! except in CI (`CI=true`), where a missing model is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::{Embedder, InMemoryVectorStore, Scope, VectorPoint, VectorQuery, VectorStore};
use memory_vector::{BertEmbedder, MODEL_DIR_ENV};
use serde_json::json;
use uuid::Uuid;

async fn model() -> Option<BertEmbedder> {
    if std::env::var_os(MODEL_DIR_ENV).is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{MODEL_DIR_ENV} must be set in CI: run `cargo xtask fetch-model` first"
        );
        eprintln!("{MODEL_DIR_ENV} is not set: skipping the local model test outside CI");
        return None;
    }
    Some(BertEmbedder::from_env().await.unwrap())
}

/// Three flushed batches of a conversation, as VectorMemoryBlock stores them.
const BATCHES: [&str; 3] = [
    "<message role='user'>My sister Lena is getting married in Lisbon on June 14th.</message>\n\
     <message role='assistant'>Congratulations to Lena! A June wedding in Lisbon sounds lovely.</message>",
    "<message role='user'>The build fails with a linker error about a missing libssl symbol.</message>\n\
     <message role='assistant'>Install the OpenSSL development headers and rebuild.</message>",
    "<message role='user'>I want a vegetarian lasagna recipe for six people.</message>\n\
     <message role='assistant'>Layer spinach, ricotta and tomato sauce between the sheets.</message>",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_are_normalised_and_deterministic() {
    let Some(model) = model().await else { return };
    assert_eq!(model.dimensions(), 384);
    let texts = vec![
        "hello world".to_owned(),
        "a somewhat longer sentence".to_owned(),
    ];
    let a = model.embed(&texts).await.unwrap();
    assert_eq!(a.len(), 2);
    for v in &a {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
    // Batching (and its padding) does not change a text's vector.
    let alone = model.embed(&texts[..1]).await.unwrap();
    let d = memory_core::vector::cosine_similarity(&alone[0], &a[0]);
    assert!(d > 0.9999, "padding changed the vector: {d}");
    assert!(model.embed(&[]).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_about_a_flushed_batch_retrieves_it_first() {
    let Some(model) = model().await else { return };
    let texts: Vec<String> = BATCHES.iter().map(|b| (*b).to_owned()).collect();
    let vectors = model.embed(&texts).await.unwrap();
    let store = Arc::new(InMemoryVectorStore::new());
    let scope = Scope::session("semantics").unwrap();
    let ids: Vec<Uuid> = (0..BATCHES.len()).map(|_| Uuid::new_v4()).collect();
    let points: Vec<VectorPoint> = ids
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, (id, vector))| VectorPoint {
            id: *id,
            vector,
            payload: json!({"batch": i}).as_object().cloned().unwrap(),
        })
        .collect();
    store.upsert(&scope, &points).await.unwrap();
    for (question, expected) in [
        ("When is my sister's wedding?", 0),
        ("How do I fix the OpenSSL link error?", 1),
        ("What should I cook for dinner with friends?", 2),
    ] {
        let q = model.embed(&[question.to_owned()]).await.unwrap().remove(0);
        let hits = store.search(&scope, &VectorQuery::new(q, 3)).await.unwrap();
        assert_eq!(hits[0].id, ids[expected], "{question}: {hits:?}");
        assert!(
            hits[0].score > hits[1].score + 0.1,
            "{question}: the right batch wins clearly: {hits:?}"
        );
    }
}
