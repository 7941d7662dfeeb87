//! The checks of reducers on a store: `AfterMessageAdded` archives what it drops,
//! `BeforeMessagesRetrieval` leaves the store untouched.

use std::sync::Arc;

use memory_core::{
    Agent, AgentSession, ChatMessage, ChatReducer, HistoryStore, MessageCountReducer,
    ReducerTrigger, Role, Scope, SessionStore, SummarizingReducer, TokenBudgetReducer, is_summary,
};

use super::support::everything;
use crate::ScriptedChatModel;
use crate::fixtures::{ExpectOk, random_scope};

fn chat_model(replies: usize, prefix: &str) -> Arc<ScriptedChatModel> {
    let mut model = ScriptedChatModel::new();
    for i in 0..replies {
        model = model.reply_text(format!("{prefix} answer {i} about the rollout plan"));
    }
    Arc::new(model)
}

fn summarizer(replies: usize) -> Arc<ScriptedChatModel> {
    let mut model = ScriptedChatModel::new();
    for i in 1..=replies {
        model = model.reply_text(format!("summary {i} of the earlier turns"));
    }
    Arc::new(model)
}

/// Runs `turns` turns of an agent with `reducer` on `trigger`; returns the agent model.
async fn run_agent(
    history: &Arc<dyn HistoryStore>,
    scope: &Scope,
    reducer: Arc<dyn ChatReducer>,
    trigger: ReducerTrigger,
    turns: usize,
) -> Arc<ScriptedChatModel> {
    let model = chat_model(turns, "agent");
    let agent = Agent::builder("assistant", model.clone(), history.clone())
        .instructions("You help with the rollout.")
        .reducer(reducer, trigger)
        .build()
        .expect_ok("build the agent");
    let mut session = AgentSession::new(scope.clone());
    for turn in 0..turns {
        agent
            .run(
                format!("question {turn} about the staged rollout of the billing service"),
                &mut session,
            )
            .await
            .expect_ok("run a turn");
    }
    model
}

/// With `AfterMessageAdded`, each reducer (message count, token budget, summarizing) archives
/// what it drops on the store — whole groups, oldest first, never the last user turn — and the
/// summarizer stores its marked summary; nothing is deleted.
pub async fn reducers_after_message_added_archive_on_the_store(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    let trigger = ReducerTrigger::AfterMessageAdded;

    // Message count: 4 turns, keep 4 messages.
    let scope = random_scope();
    run_agent(
        &history,
        &scope,
        Arc::new(MessageCountReducer::new(4)),
        trigger,
        4,
    )
    .await;
    let all = everything(history.as_ref(), &scope).await;
    assert_eq!(all.len(), 8, "nothing deleted");
    let flags: Vec<bool> = all.iter().map(|m| m.archived).collect();
    assert_eq!(
        flags,
        [true, true, true, true, false, false, false, false],
        "the 4 oldest messages archived"
    );
    let count = history.count(&scope).await.expect_ok("count");
    assert_eq!((count.active, count.archived), (4, 4));

    // Token budget: the active tokens end within the budget, archived a prefix.
    let scope = random_scope();
    let budget = 60;
    run_agent(
        &history,
        &scope,
        Arc::new(TokenBudgetReducer::new(budget)),
        trigger,
        6,
    )
    .await;
    let all = everything(history.as_ref(), &scope).await;
    assert_eq!(all.len(), 12, "nothing deleted");
    let count = history.count(&scope).await.expect_ok("count");
    assert!(count.archived > 0, "12 messages are over {budget} tokens");
    assert!(
        count.active_tokens <= budget || count.active == 2,
        "the active window fits the budget (or is the last turn): {count:?}"
    );
    let first_active = all
        .iter()
        .position(|m| !m.archived)
        .expect("an active message");
    assert!(
        all[first_active..].iter().all(|m| !m.archived),
        "the archived messages are the oldest"
    );
    assert_eq!(all[first_active].message.role, Role::User, "whole turns go");
    assert_eq!(count.archived, first_active as u64);

    // Summarizing: keep 2, summarize past 2 + 2: after 3 turns, 4 archived and one summary.
    let scope = random_scope();
    let model = summarizer(1);
    let reducer = Arc::new(SummarizingReducer::new(model.clone(), 2, 2));
    run_agent(&history, &scope, reducer, trigger, 3).await;
    assert_eq!(model.remaining(), 0, "one summary written");
    let all = everything(history.as_ref(), &scope).await;
    let flags: Vec<bool> = all.iter().map(|m| m.archived).collect();
    assert_eq!(flags, [true, true, true, true, false, false, false]);
    let summary = &all[6].message;
    assert!(is_summary(summary), "the stored summary is marked");
    assert!(
        summary.text().contains("summary 1 of the earlier turns"),
        "the summary holds the model's text: {}",
        summary.text()
    );
    assert!(!is_summary(&all[4].message) && all[4].message.role == Role::User);
    let count = history.count(&scope).await.expect_ok("count");
    assert_eq!((count.active, count.archived), (3, 4));
}

/// With `BeforeMessagesRetrieval`, each reducer shrinks only what the model is sent: the store
/// keeps every message active and gains no summary.
pub async fn reducers_before_retrieval_leave_the_store_untouched(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    let trigger = ReducerTrigger::BeforeMessagesRetrieval;
    let turns = 5;
    // The summarizer writes a summary on every run over 2 + 2 messages: runs 3 and 4.
    let summaries = summarizer(2);
    let reducers: [(&str, Arc<dyn ChatReducer>); 3] = [
        ("message count", Arc::new(MessageCountReducer::new(4))),
        ("token budget", Arc::new(TokenBudgetReducer::new(60))),
        (
            "summarizing",
            Arc::new(SummarizingReducer::new(summaries.clone(), 2, 2)),
        ),
    ];
    for (name, reducer) in reducers {
        let scope = random_scope();
        let model = run_agent(&history, &scope, reducer, trigger, turns).await;
        let all = everything(history.as_ref(), &scope).await;
        assert_eq!(
            all.len(),
            2 * turns,
            "{name}: every message stored, no summary"
        );
        assert!(
            all.iter().all(|m| !m.archived && !is_summary(&m.message)),
            "{name}: nothing archived"
        );
        let count = history.count(&scope).await.expect_ok("count");
        assert_eq!(
            (count.active, count.archived),
            (2 * turns as u64, 0),
            "{name}"
        );
        let sent = model.last_request().expect("a request").messages;
        // Instructions + the stored history + the input, had nothing been reduced.
        assert!(
            sent.len() < 1 + 2 * (turns - 1) + 1,
            "{name}: the model saw a reduced view ({} messages)",
            sent.len()
        );
        assert_eq!(
            sent.last().map(ChatMessage::text),
            Some(format!(
                "question {} about the staged rollout of the billing service",
                turns - 1
            )),
            "{name}: the input is sent"
        );
    }
    assert_eq!(
        summaries.remaining(),
        0,
        "the summarizer ran on runs 3 and 4"
    );
}
