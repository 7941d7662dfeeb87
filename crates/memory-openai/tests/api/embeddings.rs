//! `OpenAiEmbedder` against "Create embeddings".

use memory_core::{Embedder, ErrorKind};
use memory_openai::OpenAiEmbedder;
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::{KEY, config, request_count};

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|t| (*t).to_owned()).collect()
}

#[tokio::test]
async fn sends_the_documented_request_and_orders_vectors_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "model": "text-embedding-3-small",
            "input": ["alpha", "beta", "gamma"],
            "encoding_format": "float",
            "dimensions": 3
        })))
        // Listed out of order: the index field decides.
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 2, "embedding": [0.2, 0.2, 0.2]},
                {"object": "embedding", "index": 0, "embedding": [0.0, 0.0, 0.0]},
                {"object": "embedding", "index": 1, "embedding": [0.1, 0.1, 0.1]}
            ],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 3, "total_tokens": 3}
        })))
        .expect(1)
        .mount(&server)
        .await;

    let embedder = OpenAiEmbedder::builder(config(&server, "text-embedding-3-small"))
        .dimensions(3)
        .build()
        .unwrap();
    assert_eq!(embedder.dimensions(), 3);
    let vectors = embedder
        .embed(&texts(&["alpha", "beta", "gamma"]))
        .await
        .unwrap();
    assert_eq!(
        vectors,
        vec![vec![0.0; 3], vec![0.1, 0.1, 0.1], vec![0.2, 0.2, 0.2]]
    );
}

/// Answers with `[n, position]` for the input `"t{n}"`, in reverse order.
struct EchoEmbeddings;

impl Respond for EchoEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let inputs = body["input"].as_array().unwrap();
        let mut data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let n: f32 = text.as_str().unwrap()[1..].parse().unwrap();
                json!({"object": "embedding", "index": i, "embedding": [n, i as f32]})
            })
            .collect();
        data.reverse();
        ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data}))
    }
}

#[tokio::test]
async fn large_inputs_are_sent_in_batches_and_stay_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(EchoEmbeddings)
        .expect(3)
        .mount(&server)
        .await;
    let embedder = OpenAiEmbedder::builder(config(&server, "nomic-embed-text"))
        .model_dimensions(2)
        .batch_size(2)
        .build()
        .unwrap();
    let inputs: Vec<String> = (0..5).map(|n| format!("t{n}")).collect();
    let vectors = embedder.embed(&inputs).await.unwrap();
    assert_eq!(
        vectors,
        vec![
            vec![0.0, 0.0],
            vec![1.0, 1.0],
            vec![2.0, 0.0],
            vec![3.0, 1.0],
            vec![4.0, 0.0]
        ]
    );
    let requests = server.received_requests().await.unwrap();
    let sizes: Vec<usize> = requests
        .iter()
        .map(|r| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            // A declared model dimension is not sent.
            assert!(body.get("dimensions").is_none());
            body["input"].as_array().unwrap().len()
        })
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[tokio::test]
async fn no_texts_means_no_request() {
    let server = MockServer::start().await;
    let embedder = OpenAiEmbedder::new(config(&server, "text-embedding-3-large")).unwrap();
    assert_eq!(embedder.dimensions(), 3072);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert_eq!(request_count(&server).await, 0);
}

/// An embedder of a two-dimensional "custom" model at a fake that answers every embeddings
/// request with `data`.
async fn two_dimensional_embedder_answering(data: serde_json::Value) -> OpenAiEmbedder {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data})),
        )
        .mount(&server)
        .await;
    OpenAiEmbedder::builder(config(&server, "custom"))
        .model_dimensions(2)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_wrong_number_of_vectors_is_a_serialization_error() {
    let embedder = two_dimensional_embedder_answering(json!([
        {"object": "embedding", "index": 0, "embedding": [1.0, 2.0]}
    ]))
    .await;
    let err = embedder.embed(&texts(&["a", "b"])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
}

#[tokio::test]
async fn vectors_of_the_wrong_length_are_refused() {
    let embedder = two_dimensional_embedder_answering(json!([
        {"object": "embedding", "index": 0, "embedding": [1.0, 2.0, 3.0]}
    ]))
    .await;
    let err = embedder.embed(&texts(&["a"])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend);
    assert!(err.to_string().contains("3 values"), "{err}");
}
