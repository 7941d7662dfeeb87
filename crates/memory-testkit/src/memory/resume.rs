//! The checks of resuming a [`TeamSession`](memory_core::chat::TeamSession) and an
//! [`AgentChat`](memory_core::chat::AgentChat) from their stores like an uninterrupted run.

use std::sync::Arc;

use memory_core::chat::{AgentChat, ChatParticipant, ChatSerializer, RestoreOutcome, TeamSession};
use memory_core::{
    Agent, AgentId, AgentSession, ChatMessage, ChatRequest, HistoryStore, Role, SessionStore,
};
use serde_json::{Value, json};

use super::support::active;
use crate::ScriptedChatModel;
use crate::fixtures::{ExpectOk, random_scope};

/// (role, author, text) of each message: what two runs on different scopes must agree on.
fn shape(messages: &[ChatMessage]) -> Vec<(Role, Option<String>, String)> {
    messages
        .iter()
        .map(|m| (m.role, m.author_name.clone(), m.text()))
        .collect()
}

/// A [`TeamSession`] saved to the session store half-way and restored into a fresh object
/// continues exactly as one that ran without interruption.
pub async fn team_session_resumes_like_an_uninterrupted_run(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let first: Vec<(&str, ChatMessage)> = vec![
        ("flights", ChatMessage::assistant("LIS 09:40 booked")),
        ("hotels", ChatMessage::assistant("Alfama, 3 nights")),
        ("flights", ChatMessage::assistant("return OPO 18:05 held")),
    ];
    let second: Vec<(&str, ChatMessage)> = vec![
        ("hotels", ChatMessage::assistant("late checkout confirmed")),
        ("flights", ChatMessage::assistant("return ticketed")),
        ("flights", ChatMessage::assistant("seats 12A and 12B")),
    ];
    async fn part(team: &mut TeamSession, messages: &[(&str, ChatMessage)], step: &str) {
        for (agent, message) in messages {
            team.add_history_message(agent, message.clone())
                .await
                .expect_ok("add a team message");
        }
        team.update_snapshot("step", json!(step));
    }
    async fn observe(team: &TeamSession) -> Value {
        let flights = team
            .history_messages("flights", 100)
            .await
            .expect_ok("flights");
        let hotels = team
            .history_messages("hotels", 100)
            .await
            .expect_ok("hotels");
        let whole = team.team_history(100).await.expect_ok("team history");
        json!({
            "flights": format!("{:?}", shape(&flights)),
            "hotels": format!("{:?}", shape(&hotels)),
            "team": format!("{:?}", shape(&whole)),
            "snapshot": team.snapshot(),
        })
    }

    // Uninterrupted.
    let scope = random_scope();
    let mut team = TeamSession::new(AgentSession::new(scope), history.clone());
    team.set_history_window("flights", Some(2))
        .expect_ok("window");
    part(&mut team, &first, "booked").await;
    part(&mut team, &second, "done").await;
    let uninterrupted = observe(&team).await;

    // Saved after the first part, restored into a new object, continued.
    let scope = random_scope();
    let mut team = TeamSession::new(AgentSession::new(scope.clone()), history.clone());
    team.set_history_window("flights", Some(2))
        .expect_ok("window");
    part(&mut team, &first, "booked").await;
    let state = team
        .session()
        .serialize()
        .expect_ok("serialize the team session");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the team session");
    drop(team);
    let stored = sessions
        .load(&scope)
        .await
        .expect_ok("load the team session")
        .expect("the saved team session");
    let session = AgentSession::deserialize_at(&stored.state, &scope).expect_ok("deserialize");
    let mut team = TeamSession::new(session, history.clone());
    part(&mut team, &second, "done").await;
    let resumed = observe(&team).await;
    assert_eq!(
        resumed, uninterrupted,
        "the resumed team equals the uninterrupted one"
    );
    assert_eq!(
        team.history_messages("flights", 100)
            .await
            .expect_ok("flights")
            .len(),
        2,
        "the flights window travelled with the saved session"
    );
}

fn participant(
    history: &Arc<dyn HistoryStore>,
    name: &str,
    replies: &[&str],
) -> (ChatParticipant, Arc<ScriptedChatModel>) {
    let mut model = ScriptedChatModel::new();
    for reply in replies {
        model = model.reply_text(*reply);
    }
    let model = Arc::new(model);
    let agent = Agent::builder(name, model.clone(), history.clone())
        .build()
        .expect_ok("build a chat agent");
    (
        ChatParticipant::new(Arc::new(agent), "chat_completion"),
        model,
    )
}

/// An [`AgentChat`] saved to the session store half-way (the agents' sub-histories in the
/// history store) and restored into a new chat with new agents continues exactly as one that
/// ran without interruption: same primary history, same requests to the models, same stored
/// sub-histories.
pub async fn agent_chat_resumes_like_an_uninterrupted_run(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    const WRITER: [&str; 2] = ["draft 1: an old pond", "draft 2: a frog jumps"];
    const CRITIC: [&str; 2] = ["too long", "better; ship it"];
    async fn observe(
        history: &Arc<dyn HistoryStore>,
        chat: &AgentChat,
        writer: &[ChatRequest],
        critic: &[ChatRequest],
    ) -> Value {
        let mut subs = Vec::new();
        for agent in ["writer", "critic"] {
            let scope = chat
                .scope()
                .clone()
                .with_agent_id(AgentId::new(agent).expect("a valid agent id"));
            let stored = active(history.as_ref(), &scope).await;
            let messages: Vec<ChatMessage> = stored.into_iter().map(|m| m.into_message()).collect();
            subs.push(format!("{:?}", shape(&messages)));
        }
        let requests = |requests: &[ChatRequest]| {
            requests
                .iter()
                .map(|r| format!("{:?}", shape(&r.messages)))
                .collect::<Vec<_>>()
        };
        json!({
            "history": format!("{:?}", shape(chat.history())),
            "sub_histories": subs,
            "writer_requests": requests(writer),
            "critic_requests": requests(critic),
        })
    }

    // Uninterrupted: writer, critic, writer, critic.
    let scope = random_scope();
    let mut chat = AgentChat::new(scope);
    let (writer, writer_model) = participant(&history, "writer", &WRITER);
    let (critic, critic_model) = participant(&history, "critic", &CRITIC);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    chat.add_message(ChatMessage::user("Write a haiku about a pond"));
    for _ in 0..4 {
        chat.invoke().await.expect_ok("a turn");
    }
    let uninterrupted = observe(
        &history,
        &chat,
        &writer_model.requests(),
        &critic_model.requests(),
    )
    .await;

    // Two turns, saved, restored with new agents (a new process), two more turns.
    let scope = random_scope();
    let mut chat = AgentChat::new(scope.clone());
    let (writer, first_writer) = participant(&history, "writer", &WRITER[..1]);
    let (critic, first_critic) = participant(&history, "critic", &CRITIC[..1]);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    chat.add_message(ChatMessage::user("Write a haiku about a pond"));
    chat.invoke_agent("writer").await.expect_ok("writer turn");
    chat.invoke_agent("critic").await.expect_ok("critic turn");
    let mut bytes = Vec::new();
    ChatSerializer::serialize(&chat, &mut bytes).expect_ok("serialize the chat");
    let state: Value = serde_json::from_slice(&bytes).expect("the chat state is JSON");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the chat");
    drop(chat);

    let stored = sessions
        .load(&scope)
        .await
        .expect_ok("load the chat")
        .expect("the saved chat");
    let bytes = serde_json::to_vec(&stored.state).expect("JSON");
    let serializer = ChatSerializer::deserialize(bytes.as_slice()).expect_ok("read the chat state");
    let mut chat = AgentChat::new(scope);
    let (writer, second_writer) = participant(&history, "writer", &WRITER[1..]);
    let (critic, second_critic) = participant(&history, "critic", &CRITIC[1..]);
    chat.add_agent(writer).expect_ok("add the writer");
    chat.add_agent(critic).expect_ok("add the critic");
    assert_eq!(
        serializer.restore(&mut chat).expect_ok("restore"),
        RestoreOutcome::Equivalent
    );
    chat.invoke_agent("writer").await.expect_ok("writer turn");
    chat.invoke_agent("critic").await.expect_ok("critic turn");

    // The two processes' models together saw what the uninterrupted ones saw.
    let joined = |a: &ScriptedChatModel, b: &ScriptedChatModel| {
        let mut all = a.requests();
        all.extend(b.requests());
        all
    };
    let writer_all = joined(&first_writer, &second_writer);
    let critic_all = joined(&first_critic, &second_critic);
    let resumed = observe(&history, &chat, &writer_all, &critic_all).await;
    assert_eq!(
        resumed, uninterrupted,
        "the resumed chat equals the uninterrupted one"
    );
}
