//! Fixtures shared by the suites and useful to any backend's own tests: random scopes (so runs
//! against a shared server never collide), message and point builders, and assertion helpers.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use memory_core::{
    ChatMessage, Error, ErrorKind, MessageId, Page, PageRequest, Result, Role, Scope, ScopeFilter,
    SessionId, SourceId, StoredMessage, TenantId, VectorPoint,
};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The dimension of every vector the vector suite writes.
///
/// Stores fix one dimension per store (the first upsert), so every vector check uses this one
/// and a single store instance can run the whole suite.
pub const VECTOR_DIM: usize = 4;

/// Characters allowed in ids besides ASCII letters and digits (see [`memory_core::id`]).
pub const ID_PUNCTUATION: &str = "-_.:@/+=";

/// A fresh random tenant, `tk-<uuid>`: every check writes under its own tenant, so listings are
/// deterministic and runs never see each other's data, even on a shared server.
pub fn random_tenant() -> TenantId {
    TenantId::new(format!("tk-{}", Uuid::new_v4().simple()))
        .expect("a tk-<uuid> tenant id is valid")
}

/// A fresh random session id, `s-<uuid>`.
pub fn random_session_id() -> SessionId {
    SessionId::new(format!("s-{}", Uuid::new_v4().simple())).expect("an s-<uuid> id is valid")
}

/// A scope with a fresh random tenant and session, no user or agent and the default source.
pub fn random_scope() -> Scope {
    Scope::new(random_tenant(), random_session_id())
}

/// The scope of session `session` in `tenant` (no user or agent, default source).
///
/// # Panics
/// When `session` is not a valid id.
pub fn scope_in(tenant: &TenantId, session: &str) -> Scope {
    Scope::new(
        tenant.clone(),
        SessionId::new(session).expect("fixture session ids are valid"),
    )
}

/// A scope of `tenant` and `session`, with the user and the agent when given.
///
/// # Panics
/// When a user or agent id is invalid (fixtures use valid ones).
pub fn scope_owned_by(
    tenant: &TenantId,
    user: Option<&str>,
    agent: Option<&str>,
    session: &str,
) -> Scope {
    let mut scope = scope_in(tenant, session);
    if let Some(user) = user {
        scope = scope.with_user(user).expect("fixture user ids are valid");
    }
    if let Some(agent) = agent {
        scope = scope
            .with_agent(agent)
            .expect("fixture agent ids are valid");
    }
    scope
}

/// The scope of `session` in `tenant` with the parts named: `user`, `agent`, `source`.
///
/// # Panics
/// When an id is not valid.
pub fn scope_of(
    tenant: &TenantId,
    session: &str,
    user: Option<&str>,
    agent: Option<&str>,
    source: Option<&SourceId>,
) -> Scope {
    let mut scope = scope_in(tenant, session);
    if let Some(u) = user {
        scope = scope.with_user(u).expect("valid user");
    }
    if let Some(a) = agent {
        scope = scope.with_agent(a).expect("valid agent");
    }
    if let Some(s) = source {
        scope = scope.with_source_id(s.clone());
    }
    scope
}

/// Checks one page of a listing asked for 100 items (`list_threads`, `list`): it holds every
/// item of `reference`, in order, and no next cursor; `item` names what is listed.
pub fn assert_one_page_lists_all(page: &Page<Scope>, reference: &[Scope], item: &str) {
    assert_eq!(page.items, reference, "one big page lists everything");
    assert_eq!(
        page.next_cursor, None,
        "a page holding the last {item} has no next cursor"
    );
}

/// Scopes that share `base`'s session id and differ from it in one part, named: `base` itself
/// (first), the same session in another tenant, under user `x` (third), under agent `x`, and
/// of source `other`.
pub fn scope_variants(base: &Scope) -> Vec<(&'static str, Scope)> {
    let session = base.session_id().as_str().to_owned();
    vec![
        ("base", base.clone()),
        ("other tenant", scope_in(&random_tenant(), &session)),
        ("user x", base.clone().with_user("x").expect("valid")),
        ("agent x", base.clone().with_agent("x").expect("valid")),
        (
            "source other",
            base.clone().with_source("other").expect("valid"),
        ),
    ]
}

/// Checks the answers of a store without the `ttl` capability: `set_ttl` with a TTL
/// (`set`), `set_ttl(None)` (`unset`) and `purge_expired` (`purge`) are each `Unsupported`.
#[track_caller]
pub fn assert_ttl_unsupported(set: Result<()>, unset: Result<()>, purge: Result<u64>) {
    expect_error_kind(
        set,
        ErrorKind::Unsupported,
        "set_ttl on a store without the ttl capability",
    );
    expect_error_kind(
        unset,
        ErrorKind::Unsupported,
        "set_ttl(None) on a store without the ttl capability",
    );
    expect_error_kind(
        purge,
        ErrorKind::Unsupported,
        "purge_expired on a store without the ttl capability",
    );
}

/// Checks that `set_ttl` (called with each TTL under 1 ms or over
/// [`MAX_TTL`](memory_core::MAX_TTL)) refuses it with `InvalidInput`.
pub async fn assert_out_of_range_ttls_refused(set_ttl: impl AsyncFn(Duration) -> Result<()>) {
    for ttl in [
        Duration::ZERO,
        memory_core::MAX_TTL + Duration::from_secs(1),
        Duration::MAX,
    ] {
        expect_error_kind(
            set_ttl(ttl).await,
            ErrorKind::InvalidInput,
            "set_ttl out of range",
        );
    }
}

/// The TTL refresh scenario of a record (a thread, a session) already written: `set_ttl` gives
/// it a TTL of 1.2 s, `write` writes it again 0.7 s later, and `assert_alive` checks it 0.7 s
/// after that (past the TTL, within the TTL of the last write), told when that is.
pub async fn ttl_refresh_scenario(
    set_ttl: impl AsyncFn(Duration),
    write: impl AsyncFn(),
    assert_alive: impl AsyncFn(&str),
) {
    let ttl = Duration::from_millis(1200);
    let step = Duration::from_millis(700);
    set_ttl(ttl).await;
    tokio::time::sleep(step).await;
    write().await;
    tokio::time::sleep(step).await;
    assert_alive(&format!(
        "{:?} after set_ttl({ttl:?}) but {step:?} after a write",
        step * 2
    ))
    .await;
}

/// Checks the answer of `set_ttl` (a 60 s TTL) on a scope never written: `NotFound`; `record`
/// names what the scope would hold.
#[track_caller]
pub fn assert_ttl_of_unknown_not_found(answer: Result<()>, record: &str) {
    expect_error_kind(
        answer,
        ErrorKind::NotFound,
        &format!("set_ttl on a {record} never written"),
    );
}

/// A filter listing every scope of `tenant`.
pub fn tenant_filter(tenant: &TenantId) -> ScopeFilter {
    ScopeFilter::tenant(tenant.clone())
}

/// Every item of a paged listing (`list_threads`, `list`, `list_tenants`), in listing order:
/// `list` is called with pages of `limit` from the first to the one without a cursor. Panics
/// when a page holds more than `limit` items (at least 1: a limit of 0 is read as 1), or when
/// the listing does not end within a million pages.
pub async fn every_page<T>(
    what: &str,
    limit: usize,
    mut list: impl AsyncFnMut(PageRequest) -> Page<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut request = PageRequest::first(limit);
    for _ in 0..1_000_000 {
        let page = list(request).await;
        assert!(
            page.items.len() <= limit.max(1),
            "a page of {what}(limit {limit}) returned {} items",
            page.items.len()
        );
        out.extend(page.items);
        match page.next_cursor {
            Some(cursor) => request = PageRequest::after(limit, cursor),
            None => return out,
        }
    }
    panic!("{what}(limit {limit}) never reached its last page");
}

/// The keys of `scopes`, as a set.
pub fn scope_keys(scopes: &[Scope]) -> BTreeSet<String> {
    scopes.iter().map(Scope::key).collect()
}

/// A text message of `role` with a fresh id.
pub fn text_message(role: Role, text: impl Into<String>) -> ChatMessage {
    ChatMessage::text_message(role, text)
}

/// A user message with the given id (to build retried or duplicated appends).
///
/// # Panics
/// When `id` is not a valid message id.
pub fn message_with_id(id: &str, text: impl Into<String>) -> ChatMessage {
    ChatMessage::user(text).with_id(MessageId::new(id).expect("fixture message ids are valid"))
}

/// `n` text messages with fresh ids, alternating user and assistant, whose texts are
/// `"{prefix}-1"` to `"{prefix}-{n}"`.
pub fn numbered_messages(prefix: &str, n: usize) -> Vec<ChatMessage> {
    (1..=n)
        .map(|i| {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            text_message(role, format!("{prefix}-{i}"))
        })
        .collect()
}

/// A text of exactly `bytes` bytes of ASCII words separated by spaces (varied, so tokenizers
/// meet ordinary text rather than a pathological run of one character).
pub fn text_of_bytes(bytes: usize) -> String {
    const WORDS: [&str; 16] = [
        "memory", "agent", "thread", "lorem", "ipsum", "dolor", "sit", "amet", "Lisbon", "42",
        "seq", "window", "budget", "archive", "tenant", "scope",
    ];
    let mut out = String::with_capacity(bytes + 16);
    let mut i = 0usize;
    while out.len() < bytes {
        out.push_str(WORDS[(i * 7 + i / 16) % WORDS.len()]);
        out.push(' ');
        i += 1;
    }
    out.truncate(bytes);
    out
}

/// Texts that storage layers commonly mangle, each with a short name: CJK, emoji (skin tones,
/// ZWJ sequences, flags, keycaps), right-to-left scripts with direction marks, combining marks
/// (decomposed and precomposed forms, which must not be normalized into each other), a NUL
/// character inside text, control characters, a byte-order mark and the largest code point.
pub fn tricky_texts() -> Vec<(&'static str, String)> {
    vec![
        (
            "cjk",
            "你好，世界。日本語のテキスト、カタカナ。한국어 텍스트. 𠜎𠜱𠝹 (astral CJK)".to_owned(),
        ),
        (
            "emoji",
            "👋🏽 family 👨‍👩‍👧‍👦 flags 🇵🇹🇯🇵 keycap 1️⃣ 🏳️‍🌈 🎉".to_owned(),
        ),
        (
            "rtl",
            "مرحبا بالعالم \u{200F}— שָׁלוֹם עוֹלָם \u{200E}(mixed) \u{202e}reversed\u{202c}".to_owned(),
        ),
        (
            "combining",
            "e\u{301} is not \u{e9}; Z\u{324}\u{354}\u{367}a\u{308}\u{356}l\u{36e}g\u{30c}o\u{319}"
                .to_owned(),
        ),
        ("nul", "before\u{0}after \u{0}\u{0} end\u{0}".to_owned()),
        (
            "controls",
            "tab\tcr\rlf\nesc\u{1b}del\u{7f}bell\u{7} quote\" backslash\\ slash/".to_owned(),
        ),
        (
            "edges",
            "\u{feff}bom \u{fffd} replacement \u{10ffff} max \u{2028}\u{2029} separators"
                .to_owned(),
        ),
    ]
}

/// Messages built from [`tricky_texts`], with non-ASCII author names, metadata (including a
/// NUL), a tool call whose arguments are not valid JSON and a tool result.
pub fn tricky_messages() -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = tricky_texts()
        .into_iter()
        .map(|(name, text)| {
            ChatMessage::user(text).with_metadata("case", Value::String(name.to_owned()))
        })
        .collect();
    out.push(
        ChatMessage::assistant("réponse — 答复 — ответ")
            .with_author("Zoë 👩‍💻 عربي")
            .with_metadata(
                "ключ",
                serde_json::json!({
                    "nul": "a\u{0}b",
                    "emoji": "🎉",
                    "nested": ["日本", {"k": "v"}],
                    // Not every f64 survives a JSON text round trip without care.
                    "float": 1.0715660391465826e-75,
                    "big": u64::MAX,
                }),
            ),
    );
    out.push(ChatMessage::tool_call(
        "call-ü-1",
        "météo",
        "{\"city\": \"Zürich 🇨🇭\", \"note\": \"a\u{0}b\", broken",
    ));
    out.push(ChatMessage::tool_result(
        "call-ü-1",
        "12 °C, ☁️, \u{0}, שלום",
    ));
    out
}

/// The texts of `messages`, in order.
pub fn texts(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.message.text()).collect()
}

/// The sequence numbers of `messages`, in order.
pub fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// The message ids of `messages`, in order.
pub fn message_ids(messages: &[StoredMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.message.id.as_str().to_owned())
        .collect()
}

/// The messages of `stored`, without their storage data.
pub fn chat_messages(stored: &[StoredMessage]) -> Vec<ChatMessage> {
    stored.iter().map(|m| (*m.message).clone()).collect()
}

/// A JSON object from a `serde_json::json!({...})` value.
///
/// # Panics
/// When `value` is not an object.
pub fn payload(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("a payload must be a JSON object, got {other}"),
    }
}

/// A vector point with the given id, vector and payload (a JSON object).
pub fn point(id: Uuid, vector: [f32; VECTOR_DIM], payload_value: Value) -> VectorPoint {
    VectorPoint {
        id,
        vector: vector.to_vec(),
        payload: payload(payload_value),
    }
}

/// `n` fresh random point ids, sorted ascending.
pub fn sorted_ids(n: usize) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = (0..n).map(|_| Uuid::new_v4()).collect();
    ids.sort();
    ids
}

/// Unwraps a result, failing the check with what was being done and the error.
///
/// # Behavior
/// - [`expect_ok`](ExpectOk::expect_ok) returns the success value unchanged.
/// - On an error it panics, reported at the caller's line (`#[track_caller]`), with the
///   message `"{what}: expected success, got error {error} (kind {kind})"`: a failed check
///   says what it was doing, the error and its [`ErrorKind`], so `#[should_panic(expected =
///   …)]` tests can match any of them.
/// - It has no other effect; it is implemented for [`memory_core::Result`].
pub trait ExpectOk<T> {
    /// The value, or a panic naming `what` and the error.
    fn expect_ok(self, what: &str) -> T;
}

impl<T> ExpectOk<T> for Result<T> {
    #[track_caller]
    fn expect_ok(self, what: &str) -> T {
        match self {
            Ok(value) => value,
            Err(err) => panic!(
                "{what}: expected success, got error {err} (kind {})",
                err.kind()
            ),
        }
    }
}

/// Asserts that `result` is an error of `kind` and returns it.
///
/// # Panics
/// When `result` is a success or an error of another kind.
#[track_caller]
pub fn expect_error_kind<T: fmt::Debug>(result: Result<T>, kind: ErrorKind, what: &str) -> Error {
    match result {
        Ok(value) => panic!("{what}: expected an error of kind {kind}, got success {value:?}"),
        Err(err) => {
            assert_eq!(
                err.kind(),
                kind,
                "{what}: expected an error of kind {kind}, got {err}"
            );
            err
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_scopes_are_distinct_and_valid() {
        let a = random_scope();
        let b = random_scope();
        assert_ne!(a.tenant(), b.tenant());
        assert!(a.tenant().as_str().starts_with("tk-"));
    }

    #[test]
    fn text_of_bytes_is_exact() {
        for n in [0, 1, 7, 1000, 1 << 16] {
            assert_eq!(text_of_bytes(n).len(), n);
        }
    }

    #[test]
    fn tricky_texts_hold_a_nul() {
        assert!(tricky_texts().iter().any(|(_, t)| t.contains('\u{0}')));
    }
}
