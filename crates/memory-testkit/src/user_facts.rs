//! Facts that belong to the user, end to end over an engine's stores: a
//! [`FactExtractionMemoryBlock`] kept per user
//! ([`with_user_facts`](FactExtractionMemoryBlock::with_user_facts)) under a
//! [`Memory`](memory_core::Memory) per session. What one session of the user flushes is a fact
//! in every other, never in another user's or tenant's; each message is extracted once, a
//! batch handed again included; two sessions flushing at once keep both their facts; a
//! session's reset removes what it taught.
//!
//! Run it on every engine: [`user_facts_are_shared_by_a_users_sessions_only`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use memory_core::memory::blocks::FactExtractionMemoryBlock;
use memory_core::memory::{BlockPutContext, MemoryBlock};
use memory_core::model::{ChatModel, ChatRequest, ChatResponse};
use memory_core::{
    ChatMessage, HistoryStore, Result, Scope, SessionStore, TenantId, Window, async_trait,
};
use serde_json::Value;

use crate::fixtures::{ExpectOk, random_tenant, scope_in};
use crate::memory::support::{RARE, memory_over, shown_for, tagged_message};

/// An extraction model that learns one fact a new message: "The user mentioned <its first
/// word>.", counting how often it was shown each word.
#[derive(Debug, Default)]
struct FirstWordFacts {
    shown: Mutex<HashMap<String, usize>>,
}

impl FirstWordFacts {
    fn times_shown(&self, word: &str) -> usize {
        let shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        shown.get(word).copied().unwrap_or(0)
    }
}

#[async_trait]
impl ChatModel for FirstWordFacts {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let prompt: String = request.messages.iter().map(ChatMessage::text).collect();
        let Some((_, new)) = prompt.split_once("New messages:") else {
            // Condensing: keep the list as it is.
            let facts = prompt
                .split_once("<facts>")
                .map_or("", |(_, rest)| rest.split("</facts>").next().unwrap_or(""));
            return Ok(reply(format!("<facts>{facts}</facts>")));
        };
        let mut facts = String::from("<facts>");
        for line in new.lines() {
            let Some((_, body)) = line.split_once('>') else {
                continue;
            };
            if let Some(word) = body.split_whitespace().next() {
                *self
                    .shown
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(word.to_owned())
                    .or_default() += 1;
                facts.push_str(&format!("<fact>{}</fact>", fact(word)));
            }
        }
        facts.push_str("</facts>");
        Ok(reply(facts))
    }
}

fn reply(text: String) -> ChatResponse {
    ChatResponse {
        messages: vec![ChatMessage::assistant(text)],
        ..ChatResponse::default()
    }
}

/// The fact the model learns from a message that starts with `word`.
fn fact(word: &str) -> String {
    format!("The user mentioned {word}.")
}

/// A user's facts shared by their sessions, and by nobody else's:
/// - Dana's Monday session flushes; her Friday session (nothing flushed there) shows Monday's
///   facts in `<memory>`; Ravi's session and Dana's namesake in another tenant show none;
/// - each message was shown to the model once, and the same batch handed to the block again
///   (as after a crash before the memory saved its mark) asks the model nothing;
/// - Dana's Tuesday and Wednesday sessions flushing at once both keep their facts;
/// - resetting Monday's memory removes Monday's facts and keeps the others';
/// - a scope without a user is `InvalidInput`.
pub async fn user_facts_are_shared_by_a_users_sessions_only(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let model = Arc::new(FirstWordFacts::default());
    let block =
        Arc::new(FactExtractionMemoryBlock::new(model.clone()).with_user_facts(sessions.clone()));
    let memory = |scope: &Scope| {
        let blocks = [block.clone() as Arc<dyn MemoryBlock>];
        memory_over(scope, history.clone(), sessions.clone(), &blocks, 400)
    };
    let (tenant, other_tenant) = (random_tenant(), random_tenant());
    let of = |tenant: &TenantId, user: &str, session: &str| {
        scope_in(tenant, session)
            .with_user(user)
            .expect_ok("a user scope")
    };
    // The words, then padding that pushes them out of the small window.
    let put_all = |scope: Scope, words: &'static [&'static str]| {
        let memory = memory(&scope);
        async move {
            let mut flushed = 0;
            let padding = std::iter::repeat_n(&"padding", 4);
            for (i, word) in words.iter().chain(padding).enumerate() {
                flushed += memory
                    .put(tagged_message(i, word))
                    .await
                    .expect_ok("put a message")
                    .messages;
            }
            assert!(flushed > 0, "{scope}: the small window flushed");
        }
    };
    let (monday_words, rest) = RARE.split_at(4);
    let (tuesday_words, wednesday_words) = rest.split_at(4);
    let monday = of(&tenant, "dana", "monday");
    put_all(monday.clone(), monday_words).await;
    let facts_of =
        |scope: Scope| async move { shown_for(&memory(&scope), "what do you know?").await };
    let friday = facts_of(of(&tenant, "dana", "friday")).await;
    let learned: Vec<&str> = monday_words
        .iter()
        .copied()
        .filter(|word| friday.contains(&fact(word)))
        .collect();
    assert!(
        !learned.is_empty(),
        "another session of the user shows what Monday taught: {friday:?}"
    );
    for outsider in [
        of(&tenant, "ravi", "monday"),
        of(&other_tenant, "dana", "monday"),
    ] {
        let shown = facts_of(outsider.clone()).await;
        assert!(
            !shown.contains("The user mentioned"),
            "{outsider} must not see Dana's facts: {shown:?}"
        );
    }

    for word in &learned {
        assert_eq!(model.times_shown(word), 1, "{word:?} was extracted once");
    }
    let archived = history
        .read(&monday, Window::Everything)
        .await
        .expect_ok("read Monday");
    let mut state = Value::Null;
    block
        .put(BlockPutContext {
            scope: &monday,
            messages: &archived[..learned.len()],
            state: &mut state,
        })
        .await
        .expect_ok("hand the block a batch again");
    for word in &learned {
        assert_eq!(
            model.times_shown(word),
            1,
            "{word:?}: a batch handed again is not extracted again"
        );
    }

    tokio::join!(
        put_all(of(&tenant, "dana", "tuesday"), tuesday_words),
        put_all(of(&tenant, "dana", "wednesday"), wednesday_words),
    );
    let all = facts_of(of(&tenant, "dana", "friday")).await;
    for (day, words) in [("Tuesday", tuesday_words), ("Wednesday", wednesday_words)] {
        assert!(
            words.iter().any(|word| all.contains(&fact(word))),
            "{day}'s facts are kept beside the other session's: {all:?}"
        );
    }
    for word in RARE {
        assert!(
            all.matches(&fact(word)).count() <= 1,
            "{word:?}: no fact twice: {all:?}"
        );
    }

    memory(&monday).reset().await.expect_ok("reset Monday");
    let after = facts_of(of(&tenant, "dana", "friday")).await;
    for word in &learned {
        assert!(
            !after.contains(&fact(word)),
            "a reset session's facts are gone: {after:?}"
        );
    }
    assert!(
        tuesday_words.iter().any(|word| after.contains(&fact(word))),
        "the other sessions' facts stay: {after:?}"
    );

    let err = memory(&scope_in(&tenant, "nobody"))
        .get(&[ChatMessage::user("anything?")])
        .await
        .expect_err("user-level facts without a user");
    assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput, "{err}");
}
