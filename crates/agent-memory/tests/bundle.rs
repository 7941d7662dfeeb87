//! The facade's bundle re-export and the `Stores` helpers: an endpoint to migrate between,
//! and a forgetter over both stores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_memory::ScopeFilter;
use agent_memory::bundle::{NoProgress, Selection, Tenants, export, import, migrate};
use agent_memory::forget::ForgetMode;
use agent_memory::{ChatMessage, OpenOptions, Scope, TenantId, Window};

#[tokio::test]
async fn stores_give_an_endpoint_and_a_forgetter() {
    // Without the window cache: the cache forwards read_page once the layers branch lands.
    let options = OpenOptions::new().without_window_cache();
    let open = || options.open("memory:");
    let (from, to) = (open().await.unwrap(), open().await.unwrap());
    let scope = Scope::session("chat-1")
        .unwrap()
        .with_tenant("acme")
        .unwrap();
    from.history
        .append(
            &scope,
            &[ChatMessage::user("hi"), ChatMessage::assistant("hello")],
        )
        .await
        .unwrap();
    from.sessions
        .save(&scope, &serde_json::json!({"turns": 1}), None)
        .await
        .unwrap();
    let acme = Selection::new(Tenants::one(TenantId::new("acme").unwrap()));

    let report = migrate(&from.endpoint(), &to.endpoint(), &acme, &NoProgress)
        .await
        .unwrap();
    assert_eq!((report.copied.messages, report.verified_sessions), (2, 1));
    let mut bundle = Vec::new();
    export(&to.endpoint(), &acme, &mut bundle, &NoProgress)
        .await
        .unwrap();
    let third = open().await.unwrap();
    let summary = import(&third.endpoint(), bundle.as_slice(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(
        (summary.threads, summary.messages, summary.sessions),
        (1, 2, 1)
    );

    let receipt = to
        .forgetter()
        .forget(
            &ScopeFilter::tenant(TenantId::new("acme").unwrap()),
            ForgetMode::Delete,
        )
        .await
        .unwrap();
    assert_eq!(receipt.total_items(), 3, "{receipt}");
    assert!(
        to.history
            .read(&scope, Window::Everything)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(to.sessions.load(&scope).await.unwrap().is_none());
    // The source is untouched.
    assert_eq!(
        from.history
            .read(&scope, Window::Everything)
            .await
            .unwrap()
            .len(),
        2
    );
}
