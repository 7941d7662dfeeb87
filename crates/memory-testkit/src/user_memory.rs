//! Long-term memory at the user's level, end to end over an engine's stores: a [`Memory`] per
//! session whose [`VectorMemoryBlock`] writes each session's batches under its own scope and
//! recalls at [`Recall::User`]. A new session of the user recalls what an earlier one flushed,
//! with the session it came from; another user, another tenant and a session-level block
//! recall none of it; forgetting the user removes it everywhere and keeps the other user's.
//!
//! Run it on every engine with a vector store that searches across scopes, with the engine's
//! own history, session, vector and (where it has one) text stores:
//! [`user_memory_recalls_across_sessions_never_across_users`].

use std::sync::Arc;

use memory_core::forget::{ForgetMode, Forgetter};
use memory_core::memory::blocks::{SESSION_KEY, VectorMemoryBlock};
use memory_core::memory::{MemoryBlock, Recall};
use memory_core::{
    ChatMessage, HistoryStore, Memory, Scope, ScopeFilter, SessionStore, TenantId, TextIndex,
    UserId, VectorStore,
};
use serde_json::Value;

use crate::fixtures::{ExpectOk, random_tenant, scope_in};
use crate::memory::support::{RARE, memory_over, shown_for, tagged_message, word_hash_block};

/// What Dana says on Monday (one rare word a message) and what Ravi says: no word in common.
const DANA: &[&str] = RARE.split_at(6).0;
const RAVI: &[&str] = RARE.split_at(6).1;

fn memory(
    scope: &Scope,
    history: &Arc<dyn HistoryStore>,
    sessions: &Arc<dyn SessionStore>,
    block: &Arc<VectorMemoryBlock>,
) -> Memory {
    let blocks = [block.clone() as Arc<dyn MemoryBlock>];
    memory_over(scope, history.clone(), sessions.clone(), &blocks, 400)
}

/// What `memory` shows a model asked about `word`: its `<memory>` system text.
async fn shown(memory: &Memory, word: &str) -> String {
    shown_for(memory, &format!("what did we say about the {word}?")).await
}

/// Dana's Monday session and Ravi's session of one tenant, and Dana's session of another
/// tenant, each put eight messages through a memory whose vector block recalls at the user's
/// level (dense over `vectors` with a word-hashing embedder, fused with `text` where given).
/// Then:
/// - a new session of Dana's (Friday, nothing flushed there) recalls Monday's words, and the
///   block's search says they came from session `monday`;
/// - Ravi's session, Dana's session of the other tenant and a session-level block on Friday
///   recall none of Dana's words;
/// - a user-level block needs a user: on a scope without one, `get` is `InvalidInput`;
/// - forgetting Dana (the tenant and user filter, over the history, the sessions, `vectors`
///   and `text`) removes her batches: Friday recalls nothing, Ravi keeps his.
///
/// `vectors` must hold no vectors of another dimension than the embedder's 64 (a fresh store,
/// or SQL tables of a fresh prefix).
pub async fn user_memory_recalls_across_sessions_never_across_users(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
    vectors: Arc<dyn VectorStore>,
    text: Option<Arc<dyn TextIndex>>,
) {
    let block = |recall| Arc::new(word_hash_block(&vectors, text.as_ref(), recall));
    let (user_level, session_level) = (block(Recall::User), block(Recall::Session));
    let (tenant, other_tenant) = (random_tenant(), random_tenant());
    let of = |tenant: &TenantId, user: &str, session: &str| {
        scope_in(tenant, session)
            .with_user(user)
            .expect_ok("a user scope")
    };
    let dana_monday = of(&tenant, "dana", "monday");
    let writers = [
        (dana_monday.clone(), DANA),
        (of(&tenant, "ravi", "monday"), RAVI),
        (of(&other_tenant, "dana", "monday"), RAVI),
    ];
    for (scope, words) in &writers {
        let memory = memory(scope, &history, &sessions, &user_level);
        let mut deliveries = 0;
        for (i, word) in words.iter().enumerate() {
            deliveries += memory
                .put(tagged_message(i, word))
                .await
                .expect_ok("put a message")
                .deliveries;
        }
        assert!(deliveries > 0, "{scope}: the small window flushed batches");
    }

    let friday = of(&tenant, "dana", "friday");
    let dana_friday = memory(&friday, &history, &sessions, &user_level);
    let recalled = shown(&dana_friday, DANA[0]).await;
    assert!(
        recalled.contains(DANA[0]),
        "a new session of the user recalls what an earlier one flushed: {recalled:?}"
    );
    let found = user_level
        .search(&friday, &format!("the {}", DANA[0]), 3)
        .await
        .expect_ok("search the user's memory");
    let first = found.first().expect("the user's memory finds the batch");
    assert_eq!(
        first.payload.get(SESSION_KEY),
        Some(&Value::String("monday".to_owned())),
        "a recalled batch names the session it came from: {:?}",
        first.payload
    );
    assert!(
        first.text().is_some_and(|t| t.contains(DANA[0])),
        "{first:?}"
    );

    let outsiders = [
        ("another user", of(&tenant, "ravi", "monday"), &user_level),
        (
            "the same user id in another tenant",
            of(&other_tenant, "dana", "monday"),
            &user_level,
        ),
        ("a session-level block", friday.clone(), &session_level),
    ];
    for (who, scope, block) in outsiders {
        let memory = memory(&scope, &history, &sessions, block);
        for word in DANA {
            let text = shown(&memory, word).await;
            assert!(
                !text.contains(word),
                "{who} ({scope}) must not recall Dana's {word:?}: {text:?}"
            );
        }
    }

    let anonymous = scope_in(&tenant, "nobody");
    let err = memory(&anonymous, &history, &sessions, &user_level)
        .get(&[ChatMessage::user("anything?")])
        .await
        .expect_err("user-level recall without a user");
    assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput, "{err}");

    let mut forgetter = Forgetter::new()
        .history(history.clone())
        .sessions(sessions.clone())
        .vectors(vectors.clone());
    if let Some(text) = &text {
        forgetter = forgetter.texts(text.clone());
    }
    let dana = ScopeFilter::tenant(tenant.clone()).with_user(UserId::new("dana").unwrap());
    forgetter
        .forget(&dana, ForgetMode::Delete)
        .await
        .expect_ok("forget Dana");
    let after = shown(&dana_friday, DANA[0]).await;
    assert!(
        !after.contains(DANA[0]),
        "a forgotten user's memory is recalled nowhere: {after:?}"
    );
    let ravi = memory(
        &of(&tenant, "ravi", "tuesday"),
        &history,
        &sessions,
        &user_level,
    );
    let kept = shown(&ravi, RAVI[0]).await;
    assert!(
        kept.contains(RAVI[0]),
        "forgetting one user keeps another's memory: {kept:?}"
    );
}
