//! `Memory::get` against the algorithm it replaced: reading only what can fit must give what
//! the whole active window gives (computed here with the private pieces of `get`).

use std::sync::Arc;

use super::blocks::StaticMemoryBlock;
use super::*;
use crate::{FnTokenCounter, InMemoryHistoryStore, InMemorySessionStore, Part};

/// One token per whitespace-separated word: a message costs 3 + 1 (role) + its words.
fn words() -> Arc<dyn TokenCounter> {
    Arc::new(FnTokenCounter::new(|t| t.split_whitespace().count() as u32))
}

/// A message of exactly `tokens` stored tokens (≥ 5) under the word counter.
fn msg(role: Role, tokens: u32, tag: &str) -> ChatMessage {
    let mut text = tag.to_owned();
    for _ in 1..tokens - 4 {
        text.push_str(" w");
    }
    ChatMessage::text_message(role, text)
}

/// A thread of `turns` turns (a user message, a tool call and its result, an answer), then a
/// last user message of `last_user` tokens.
fn tool_turns(turns: usize, last_user: u32) -> Vec<ChatMessage> {
    (0..turns)
        .flat_map(|t| {
            [
                msg(Role::User, 8, &format!("u{t}")),
                ChatMessage::tool_call(format!("c{t}"), "lookup", "{}"),
                ChatMessage::tool_result(format!("c{t}"), format!("r{t} w w w w")),
                msg(Role::Assistant, 12, &format!("a{t}")),
            ]
        })
        .chain([msg(Role::User, last_user, "last")])
        .collect()
}

/// What `get` returned before it read less: the whole active window, the blocks' memory within
/// what the messages leave, then the oldest groups dropped to fit.
async fn get_from_the_whole_window(m: &Memory, history: &dyn HistoryStore) -> Vec<ChatMessage> {
    let mut window = history.read(m.scope(), Window::All).await.unwrap();
    let history_tokens: u64 = window.iter().map(|m| u64::from(m.tokens)).sum();
    let limit = m.config.token_limit;
    let contents = m
        .block_contents(m.scope(), &[], None, limit.saturating_sub(history_tokens))
        .await
        .unwrap();
    let memory_tokens = m.render_tokens(&contents);
    if memory_tokens + history_tokens > limit {
        let keep_from = drop_oldest_to_fit(&window, limit.saturating_sub(memory_tokens));
        window.drain(..keep_from);
    }
    let mut messages: Vec<ChatMessage> = window.into_iter().map(|m| m.into_message()).collect();
    if let Some(text) = m.render(&contents) {
        render::insert_memory(&mut messages, text, Vec::new(), m.config.insert_method);
    }
    messages
}

/// Checks that, for every limit of `limits`, `get` over `thread` gives what the whole
/// window gives: the same roles and parts, and the same ids for the thread's messages (a memory
/// system message is made by each call).
async fn assert_get_is_the_whole_window(
    thread: &[ChatMessage],
    limits: impl Iterator<Item = u64>,
    insert_method: InsertMethod,
) {
    let history = Arc::new(InMemoryHistoryStore::with_token_counter(words()));
    let states = Arc::new(InMemorySessionStore::new());
    let scope = Scope::session("s").unwrap();
    history.append(&scope, thread).await.unwrap();
    let core = Arc::new(StaticMemoryBlock::new("core", "c c c c c").unwrap());
    for limit in limits {
        let m = Memory::builder(scope.clone(), history.clone(), states.clone())
            .token_limit(limit)
            .token_counter(words())
            .insert_method(insert_method)
            .block(core.clone())
            .build()
            .unwrap();
        let got = m.get(&[]).await.unwrap();
        let expected = get_from_the_whole_window(&m, history.as_ref()).await;
        let shape = |ms: &[ChatMessage]| -> Vec<(Role, Vec<Part>)> {
            ms.iter().map(|m| (m.role, m.parts.clone())).collect()
        };
        assert_eq!(shape(&got), shape(&expected), "limit {limit}");
        let thread_ids = |ms: &[ChatMessage]| -> Vec<String> {
            ms.iter()
                .filter(|m| thread.iter().any(|t| t.id == m.id))
                .map(|m| m.id.as_str().to_owned())
                .collect()
        };
        assert_eq!(thread_ids(&got), thread_ids(&expected), "limit {limit}");
    }
}

#[tokio::test]
async fn get_over_the_limit_returns_what_the_whole_window_gives() {
    for last_user in [6, 40, 400] {
        let thread = tool_turns(60, last_user);
        assert_get_is_the_whole_window(&thread, (20..240).step_by(7), InsertMethod::System).await;
    }
}

#[tokio::test]
async fn get_over_the_limit_matches_the_whole_window_with_a_system_message_and_user_insertion() {
    let mut thread = vec![msg(Role::System, 9, "sys")];
    thread.extend(tool_turns(40, 12));
    assert_get_is_the_whole_window(&thread, (20..200).step_by(9), InsertMethod::User).await;
}
