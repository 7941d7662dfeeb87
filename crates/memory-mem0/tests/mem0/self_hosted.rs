//! The self-hosted flavour against a local fake (wiremock) that answers as the FastAPI app of
//! the mem0 repository's `server/main.py` ("Mem0 REST APIs" 1.0.0) does: `POST /memories`
//! (`MemoryCreate`), `GET /memories?…`, `GET | PUT | DELETE /memories/{memory_id}`,
//! `GET /memories/{memory_id}/history`, `POST /search` (`SearchRequest`), `DELETE /memories?…`
//! and `POST /reset`, answering as the open-source `Memory` does (`{"results": [...]}`, `null`
//! for an unknown id, `{"detail": ...}` for failures). Paths have no trailing `/`; no
//! `Authorization` header is sent unless a gateway key is configured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_core::ErrorKind;
use memory_mem0::{
    AddRequest, Filters, HttpClientConfig, KeyHeader, ListRequest, Mem0Client, Mem0Message,
    Mem0Scope, MemoryEvent, MemoryUpdate, SearchRequest,
};
use serde_json::json;
use support::{KEY, assert_no_key, request_count, self_hosted, self_hosted_config};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support;

fn alice() -> Mem0Scope {
    Mem0Scope::user("alice").unwrap()
}

fn memory(id: &str, text: &str) -> serde_json::Value {
    json!({
        "id": id, "memory": text, "hash": "abc", "metadata": null,
        "created_at": "2025-01-01T00:00:00-08:00", "updated_at": null, "user_id": "alice"
    })
}

/// Every request went without an `Authorization` header.
async fn assert_no_auth(server: &MockServer) {
    for request in server.received_requests().await.unwrap() {
        assert!(
            !request.headers.contains_key("authorization"),
            "{:?}",
            request.headers
        );
    }
}

#[tokio::test]
async fn add_posts_a_memory_create_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/memories"))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "messages": [
                {"role": "user", "content": "I live in Lisbon."},
                {"role": "assistant", "content": "Lovely city."}
            ],
            "user_id": "alice",
            "agent_id": "guide",
            "run_id": "trip-1",
            "metadata": {"source": "chat"}
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "results": [{"id": "m1", "memory": "Lives in Lisbon", "event": "ADD"}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let scope = alice()
        .with_agent_id("guide")
        .unwrap()
        .with_run_id("trip-1")
        .unwrap();
    let response = self_hosted(&server)
        .add(
            &AddRequest::new(
                scope,
                vec![
                    Mem0Message::user("I live in Lisbon."),
                    Mem0Message::assistant("Lovely city."),
                ],
            )
            .with_metadata("source", "chat"),
        )
        .await
        .unwrap();
    assert!(!response.is_queued());
    assert_eq!(response.results[0].event, Some(MemoryEvent::Add));
    assert_eq!(
        response.results[0].memory.as_deref(),
        Some("Lives in Lisbon")
    );
    assert_no_auth(&server).await;
}

#[tokio::test]
async fn search_posts_ids_at_the_top_level_and_cuts_to_top_k() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(body_json(json!({
            "query": "Where do I live?",
            "user_id": "alice",
            "run_id": "trip-1",
            "filters": {"AND": [{"metadata": {"source": "chat"}}]}
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "results": [
                {"id": "m1", "memory": "Lives in Lisbon", "score": 0.2},
                {"id": "m2", "memory": "Likes trams", "score": 0.4},
                {"id": "m3", "memory": "Has a cat", "score": 0.9}
            ]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let found = self_hosted(&server)
        .search(
            &SearchRequest::new("Where do I live?", alice().with_run_id("trip-1").unwrap())
                .with_filters(Filters::and([Filters::metadata("source", "chat")]))
                .with_top_k(2),
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].memory, "Lives in Lisbon");
    assert_no_auth(&server).await;
}

#[tokio::test]
async fn list_gets_memories_by_ids_and_pages_them_here() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/memories"))
        .and(query_param("user_id", "alice"))
        .and(query_param("agent_id", "guide"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "results": [memory("m1", "a"), memory("m2", "b"), memory("m3", "c")]
        })))
        .expect(2)
        .mount(&server)
        .await;
    let client = self_hosted(&server);
    let scope = alice().with_agent_id("guide").unwrap();
    let first = client
        .list(&ListRequest::new(scope.clone()).with_page(1, 2))
        .await
        .unwrap();
    assert_eq!(
        first
            .results
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["m1", "m2"]
    );
    assert!(first.has_more);
    assert_eq!(first.count, Some(3));
    let second = client
        .list(&ListRequest::new(scope).with_page(2, 2))
        .await
        .unwrap();
    assert_eq!(second.results.len(), 1);
    assert!(!second.has_more);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].url.query(),
        Some("user_id=alice&agent_id=guide")
    );
}

#[tokio::test]
async fn one_memory_endpoints_have_no_trailing_slash() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/memories/m1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(memory("m1", "Lives in Lisbon")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/memories/m1"))
        .and(body_json(json!({"text": "Lives in Porto"})))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"message": "Memory updated successfully!"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/memories/m1/history"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {
                "id": "h1", "memory_id": "m1", "old_memory": null,
                "new_memory": "Lives in Lisbon", "event": "ADD",
                "created_at": "2025-01-01T00:00:00", "updated_at": null,
                "is_deleted": 0, "actor_id": null, "role": "user"
            },
            {
                "id": "h2", "memory_id": "m1", "old_memory": "Lives in Lisbon",
                "new_memory": "Lives in Porto", "event": "UPDATE",
                "created_at": "2025-01-01T00:00:00", "updated_at": "2025-01-02T00:00:00",
                "is_deleted": 0
            }
        ])))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/memories/m1"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"message": "Memory deleted successfully"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let client = self_hosted(&server);
    assert_eq!(client.get("m1").await.unwrap().memory, "Lives in Lisbon");
    assert_eq!(
        client
            .update("m1", &MemoryUpdate::text("Lives in Porto"))
            .await
            .unwrap(),
        None
    );
    let history = client.history("m1").await.unwrap();
    assert_eq!(history[1].new_memory.as_deref(), Some("Lives in Porto"));
    client.delete("m1").await.unwrap();
    assert_no_auth(&server).await;
}

#[tokio::test]
async fn an_unknown_id_answered_with_null_is_not_found() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/memories/nope"))
        .respond_with(ResponseTemplate::new(200).set_body_string("null"))
        .expect(1)
        .mount(&server)
        .await;
    let err = self_hosted(&server).get("nope").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[tokio::test]
async fn the_servers_500_for_an_unknown_id_is_not_found_and_not_retried() {
    // What mem0ai's Memory raises for DELETE / PUT of an unknown id, answered by the server
    // as 500 with the exception's text (checked against mem0ai 2.2.1 in real_mem0.rs).
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/memories/nope"))
        .respond_with(
            ResponseTemplate::new(500)
                .set_body_json(json!({"detail": "Memory with id nope not found"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/memories/nope"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "detail": "Memory with id nope not found. Please provide a valid 'memory_id'"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let client = self_hosted(&server);
    let err = client.delete("nope").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let err = client
        .update("nope", &MemoryUpdate::text("x"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(request_count(&server).await, 2);
}

#[tokio::test]
async fn delete_all_and_reset() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/memories"))
        .and(query_param("run_id", "trip-1"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"message": "All relevant memories deleted"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/reset"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"message": "All memories reset"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let client = self_hosted(&server);
    client
        .delete_all(&Mem0Scope::run("trip-1").unwrap())
        .await
        .unwrap();
    client.reset().await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].url.query(), Some("run_id=trip-1"));
    assert!(requests[1].body.is_empty());
}

#[tokio::test]
async fn what_the_server_cannot_take_is_refused_before_sending() {
    let server = MockServer::start().await;
    let client = self_hosted(&server);
    let app = Mem0Scope::app("shop").unwrap();
    let refused = [
        client
            .add(&AddRequest::new(app.clone(), vec![Mem0Message::user("x")]))
            .await
            .unwrap_err(),
        client
            .add(&AddRequest::new(alice(), vec![Mem0Message::user("x")]).with_infer(false))
            .await
            .unwrap_err(),
        client
            .search(&SearchRequest::new(
                "q",
                alice().with_app_id("shop").unwrap(),
            ))
            .await
            .unwrap_err(),
        client
            .search(&SearchRequest::new("q", alice()).with_threshold(0.5))
            .await
            .unwrap_err(),
        client
            .list(&ListRequest::new(alice()).with_filters(Filters::user_id("bob")))
            .await
            .unwrap_err(),
        client.delete_all(&app).await.unwrap_err(),
        client.ping().await.unwrap_err(),
    ];
    for err in refused {
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    }
    assert_eq!(request_count(&server).await, 0);
}

#[tokio::test]
async fn fastapi_validation_errors_are_invalid_input() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/memories"))
        .respond_with(ResponseTemplate::new(422).set_body_json(json!({
            "detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let err = self_hosted(&server)
        .add(&AddRequest::new(alice(), vec![Mem0Message::user("x")]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("Field required"), "{err}");
}

#[tokio::test]
async fn server_errors_are_retried_then_unavailable() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .respond_with(
            ResponseTemplate::new(500)
                .set_body_json(json!({"detail": "Connection to pgvector refused"})),
        )
        .expect(3)
        .mount(&server)
        .await;
    let err = self_hosted(&server)
        .search(&SearchRequest::new("q", alice()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("pgvector refused"), "{err}");
    assert!(err.to_string().contains("after 3 attempts"), "{err}");
}

#[tokio::test]
async fn one_server_error_then_success_is_retried_transparently() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(1)
        .mount(&server)
        .await;
    let found = self_hosted(&server)
        .search(&SearchRequest::new("q", alice()))
        .await
        .unwrap();
    assert!(found.is_empty());
}

#[tokio::test]
async fn a_gateway_key_goes_in_the_configured_header_and_is_never_shown() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/memories/m1"))
        .and(header("x-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(memory("m1", "x")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/memories/m2"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"detail": format!("key {KEY} is not allowed")})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let config = self_hosted_config(&server)
        .with_api_key(KEY)
        .with_key_header(KeyHeader::Named("X-API-Key".into()));
    assert!(!format!("{config:?}").contains(KEY));
    let client = Mem0Client::new(config).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
    client.get("m1").await.unwrap();
    let err = client.get("m2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("API key is invalid"), "{err}");
    assert_no_key(&err);
    assert_no_auth(&server).await;
}

#[tokio::test]
async fn a_bearer_gateway_key_is_the_default() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/reset"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"message": "ok"})))
        .expect(1)
        .mount(&server)
        .await;
    Mem0Client::new(self_hosted_config(&server).with_api_key(KEY))
        .unwrap()
        .reset()
        .await
        .unwrap();
}

/// An add whose answer is late may have been stored already: it is not sent again (a memory
/// would be stored twice); a search, a read, is retried.
#[tokio::test]
async fn an_add_that_timed_out_is_not_sent_twice_but_a_search_is_retried() {
    let server = MockServer::start().await;
    for route in ["/memories", "/search"] {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"results": []}))
                    .set_delay(std::time::Duration::from_secs(3)),
            )
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
            .mount(&server)
            .await;
    }
    let client = Mem0Client::new(
        self_hosted_config(&server).with_timeout(std::time::Duration::from_millis(300)),
    )
    .unwrap();
    let err = client
        .add(&AddRequest::new(alice(), vec![Mem0Message::user("x")]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("not retried"), "{err}");
    assert_eq!(request_count(&server).await, 1, "the add was sent twice");
    client
        .search(&SearchRequest::new("q", alice()))
        .await
        .unwrap();
    assert_eq!(request_count(&server).await, 3);
}
