//! The checks of scopes and ids: threads of scopes that differ in one part are independent, the
//! longest ids round-trip, invalid ids are refused.

use memory_core::{
    AgentId, AppendOutcome, ChatMessage, ErrorKind, HistoryStore, MAX_ID_LEN, MessageId, Scope,
    SessionId, SourceId, TenantId, UserId, Window,
};

use super::support::{append_new, archive_if_capable, count, list_all, read};
use crate::fixtures::{
    ExpectOk, ID_PUNCTUATION, chat_messages, expect_error_kind, numbered_messages, random_scope,
    random_tenant, scope_variants, tenant_filter, texts,
};

/// Contract: data of one scope is never visible through another: threads with the same session
/// id under a different tenant, user, agent or source are separate threads, the same message
/// ids are inserted in each, and archive and clear of one leave the others alone.
pub async fn scopes_are_isolated(store: &dyn HistoryStore) {
    let base = random_scope();
    let mut variants = scope_variants(&base);
    variants.extend([
        ("user y", base.clone().with_user("y").expect("valid")),
        (
            "user x agent x",
            base.clone()
                .with_user("x")
                .expect("valid")
                .with_agent("x")
                .expect("valid"),
        ),
    ]);
    let shared = numbered_messages("shared", 2);
    for (name, scope) in &variants {
        let mut batch = shared.clone();
        batch.push(ChatMessage::user(format!("only in {name}")));
        let out = store
            .append(scope, &batch)
            .await
            .expect_ok(&format!("append to {name}"));
        assert_eq!(
            out,
            AppendOutcome {
                seqs: vec![1, 2, 3],
                inserted: 3
            },
            "scope {name}: the same message ids are new in every scope"
        );
    }
    for (name, scope) in &variants {
        let got = texts(&read(store, scope, Window::Everything).await);
        assert_eq!(
            got,
            vec![
                "shared-1".to_owned(),
                "shared-2".to_owned(),
                format!("only in {name}")
            ],
            "scope {name} sees only its own messages"
        );
    }
    let archived = archive_if_capable(store, &variants[0].1, 1..=3, "archive base")
        .await
        .is_some();
    store.clear(&variants[2].1).await.expect_ok("clear user x");
    for (i, (name, scope)) in variants.iter().enumerate() {
        let c = count(store, scope).await;
        let expected = match i {
            0 if archived => (0, 3),
            0 => (3, 0),
            2 => (0, 0),
            _ => (3, 0),
        };
        assert_eq!(
            (c.active, c.archived),
            expected,
            "scope {name} after archiving base and clearing user x"
        );
    }
}

/// Contract: every valid id works as a key: ids of the maximum length, made of every allowed
/// character, in every part of the scope and as a message id, round-trip through the store.
/// Without `lists_every_thread`, the scope may be missing from the listing (and nothing else
/// may be there).
pub async fn longest_ids_round_trip(store: &dyn HistoryStore) {
    let long = |prefix: &str| -> String {
        let mut s = format!("{prefix}{ID_PUNCTUATION}AZaz09");
        while s.len() < MAX_ID_LEN {
            s.push(ID_PUNCTUATION.as_bytes()[s.len() % ID_PUNCTUATION.len()] as char);
        }
        s
    };
    // Still a fresh tenant per run, padded to the maximum length.
    let tenant =
        TenantId::new(long(random_tenant().as_str())).expect("a max-length tenant id is valid");
    assert_eq!(
        tenant.as_str().len(),
        MAX_ID_LEN,
        "fixture: a max-length tenant"
    );
    let scope = Scope::new(
        tenant.clone(),
        SessionId::new(long("s")).expect("a max-length session id is valid"),
    )
    .with_user(long("u"))
    .expect("a max-length user id is valid")
    .with_agent(long("a"))
    .expect("a max-length agent id is valid")
    .with_source(long("src"))
    .expect("a max-length source id is valid");
    let message = ChatMessage::user("long ids")
        .with_id(MessageId::new(long("m")).expect("a max-length message id is valid"));
    append_new(store, &scope, std::slice::from_ref(&message)).await;
    assert_eq!(
        chat_messages(&read(store, &scope, Window::All).await),
        vec![message.clone()],
        "a thread with max-length ids reads back"
    );
    assert_eq!(
        store
            .append(&scope, std::slice::from_ref(&message))
            .await
            .expect_ok("retry")
            .inserted,
        0,
        "a max-length message id dedupes"
    );
    let listed = list_all(store, &tenant_filter(&tenant), 10).await;
    if store.capabilities().lists_every_thread {
        assert_eq!(
            listed,
            vec![scope],
            "a scope with max-length ids is listed exactly"
        );
    } else {
        assert!(
            listed.iter().all(|s| *s == scope),
            "a store without lists_every_thread may leave out a scope with max-length ids, but \
             lists no other scope in its place; got {listed:?}"
        );
        assert_eq!(
            count(store, &scope).await.active,
            1,
            "a thread with max-length ids counts its message"
        );
    }
}

/// Contract (ids): invalid ids are refused when they are built, with
/// `InvalidInput`: empty, longer than `MAX_ID_LEN`, or holding a character outside the id set.
/// No store call can receive one.
pub async fn invalid_ids_are_refused(_store: &dyn HistoryStore) {
    let too_long = "a".repeat(MAX_ID_LEN + 1);
    let bad: Vec<&str> = vec![
        "", " ", "a b", "a|b", "{tag}", "a*", "a?", "[x]", "~", "é", "日本", "a\nb", "a\u{0}b",
        "a'b", "a\"b", "a\\b", &too_long,
    ];
    for value in bad {
        let what = |kind: &str| format!("{kind} {value:?}");
        expect_error_kind(
            TenantId::new(value),
            ErrorKind::InvalidInput,
            &what("tenant id"),
        );
        expect_error_kind(
            UserId::new(value),
            ErrorKind::InvalidInput,
            &what("user id"),
        );
        expect_error_kind(
            AgentId::new(value),
            ErrorKind::InvalidInput,
            &what("agent id"),
        );
        expect_error_kind(
            SessionId::new(value),
            ErrorKind::InvalidInput,
            &what("session id"),
        );
        expect_error_kind(
            SourceId::new(value),
            ErrorKind::InvalidInput,
            &what("source id"),
        );
        expect_error_kind(
            MessageId::new(value),
            ErrorKind::InvalidInput,
            &what("message id"),
        );
        expect_error_kind(
            Scope::session(value),
            ErrorKind::InvalidInput,
            &what("Scope::session"),
        );
        let base = random_scope();
        expect_error_kind(
            base.clone().with_tenant(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_tenant"),
        );
        expect_error_kind(
            base.clone().with_user(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_user"),
        );
        expect_error_kind(
            base.clone().with_agent(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_agent"),
        );
        expect_error_kind(
            base.with_source(value),
            ErrorKind::InvalidInput,
            &what("Scope::with_source"),
        );
    }
    let json = ChatMessage::user("x")
        .to_json()
        .expect_ok("encode a message")
        .replacen("\"id\":\"", "\"id\":\"bad id ", 1);
    assert!(
        ChatMessage::from_json(&json).is_err(),
        "a message decoded with an invalid id is refused"
    );
}
