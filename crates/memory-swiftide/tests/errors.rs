//! Typed errors, never panics: a stored message swiftide cannot express, and an overwrite on a
//! store that cannot archive.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::Arc;

use memory_core::{
    ChatMessage, ErrorKind, HistoryCapabilities, HistoryStore, InMemoryHistoryStore, Media, Part,
    Role, Scope,
};
use memory_swiftide::SwiftideHistory;
use memory_swiftide::swiftide_core::MessageHistory;
use memory_swiftide::swiftide_core::chat_completion::ChatMessage as SwiftMessage;
use memory_testkit::doubles::DeclaredHistory;

fn scope() -> Scope {
    let id = uuid::Uuid::new_v4().simple().to_string();
    Scope::session(format!("s-{id}"))
        .unwrap()
        .with_tenant(format!("tk-{id}"))
        .unwrap()
        .with_user("u-1")
        .unwrap()
}

fn kind(error: &anyhow::Error) -> ErrorKind {
    error
        .downcast_ref::<memory_core::Error>()
        .unwrap_or_else(|| panic!("not a memory_core::Error: {error:#}"))
        .kind()
}

#[tokio::test]
async fn a_stored_image_is_an_unsupported_error_for_swiftide() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope = scope();
    let image = ChatMessage::new(
        Role::User,
        vec![Part::Image(Media::url("https://example.com/cat.png"))],
    );
    store.append(&scope, &[image]).await.unwrap();
    let history = SwiftideHistory::for_scope(store, scope).unwrap();
    let err = history.history().await.unwrap_err();
    assert_eq!(kind(&err), ErrorKind::Unsupported);
    assert!(err.to_string().contains("an image"), "{err}");
}

#[tokio::test]
async fn an_overwrite_that_would_replace_needs_a_store_that_archives() {
    // An in-memory store that declares no archive (as Agent Framework's Redis layout does).
    let store = Arc::new(DeclaredHistory::new(
        HistoryCapabilities::none().with_dedupes_ids(true),
    ));
    let scope = scope();
    let history = SwiftideHistory::for_scope(store.clone(), scope.clone()).unwrap();
    let first = vec![
        SwiftMessage::new_system("Be brief."),
        SwiftMessage::new_user("Hi"),
    ];
    history.extend(&first).await.unwrap();

    // Keeping what is there and adding to it archives nothing: allowed.
    let longer = vec![
        first[0].clone(),
        first[1].clone(),
        SwiftMessage::new_assistant(Some("Hello!"), None),
    ];
    history.overwrite(longer.clone()).await.unwrap();
    assert_eq!(history.history().await.unwrap(), longer);

    // Replacing would need the archive: refused, and nothing changes.
    let err = history
        .overwrite(vec![SwiftMessage::new_system("Be brief.")])
        .await
        .unwrap_err();
    assert_eq!(kind(&err), ErrorKind::Unsupported);
    assert_eq!(history.history().await.unwrap(), longer);
    assert_eq!(store.count(&scope).await.unwrap().active, 3);
    // Archive is not declared, and must not have been called.
    assert_eq!(store.refused(), Vec::<&str>::new());
}
