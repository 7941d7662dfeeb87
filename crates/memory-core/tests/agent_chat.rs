//! Multi-agent memory: AgentChat turns, the five restore cases, hostile states, team sessions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::io::Read as _;
use std::sync::Arc;

use memory_core::chat::{AgentChat, ChatParticipant, ChatSerializer, RestoreOutcome, TeamSession};
use memory_core::{
    Agent, AgentSession, ChatMessage, ErrorKind, HistoryStore, InMemoryHistoryStore,
    InMemorySessionStore, Scope, SessionStore, Window,
};
use memory_testkit::ScriptedChatModel;
use memory_testkit::fixtures::random_scope;

struct Team {
    store: Arc<InMemoryHistoryStore>,
    models: Vec<Arc<ScriptedChatModel>>,
}

impl Team {
    fn new() -> Self {
        Self {
            store: Arc::new(InMemoryHistoryStore::new()),
            models: Vec::new(),
        }
    }

    /// An agent named `name` whose model answers `replies` in order.
    fn agent(&mut self, name: &str, replies: &[&str]) -> ChatParticipant {
        let mut model = ScriptedChatModel::new();
        for r in replies {
            model = model.reply_text(*r);
        }
        let model = Arc::new(model);
        self.models.push(model.clone());
        let agent = Agent::builder(name, model, self.store.clone())
            .instructions(format!("You are {name}. SECRET-INSTRUCTIONS"))
            .build()
            .unwrap();
        ChatParticipant::new(Arc::new(agent), "chat_completion")
    }
}

fn texts(messages: &[ChatMessage]) -> Vec<String> {
    messages.iter().map(ChatMessage::text).collect()
}

fn state_of(chat: &AgentChat) -> Vec<u8> {
    let mut bytes = Vec::new();
    ChatSerializer::serialize(chat, &mut bytes).unwrap();
    bytes
}

#[tokio::test]
async fn agents_take_turns_with_their_own_sub_histories() {
    let mut team = Team::new();
    let scope = random_scope();
    let mut chat = AgentChat::new(scope.clone());
    chat.add_agent(team.agent("writer", &["draft 1"])).unwrap();
    chat.add_agent(team.agent("critic", &["too long"])).unwrap();
    chat.add_message(ChatMessage::user("Write a haiku"));
    chat.invoke().await.unwrap();
    chat.invoke().await.unwrap();
    assert_eq!(
        texts(chat.history()),
        ["Write a haiku", "draft 1", "too long"]
    );
    assert_eq!(chat.history()[1].author_name.as_deref(), Some("writer"));
    // The critic received the user's request and the writer's draft.
    let critic_saw = team.models[1].last_request().unwrap().messages;
    assert_eq!(texts(&critic_saw[1..]), ["Write a haiku", "draft 1"]);
    // Each agent's sub-history is its own thread.
    let writer_thread = scope.clone().with_agent("writer").unwrap();
    let stored = team.store.read(&writer_thread, Window::All).await.unwrap();
    assert_eq!(stored.len(), 2);
}

async fn two_agent_chat(team: &mut Team) -> (AgentChat, Vec<u8>) {
    let mut chat = AgentChat::new(random_scope());
    chat.add_agent(team.agent("writer", &["draft 1", "draft 2"]))
        .unwrap();
    chat.add_agent(team.agent("critic", &["too long", "good"]))
        .unwrap();
    chat.add_message(ChatMessage::user("Write a haiku"));
    chat.invoke().await.unwrap();
    chat.invoke().await.unwrap();
    let state = state_of(&chat);
    (chat, state)
}

#[tokio::test]
async fn equivalent_restore_has_full_fidelity_and_continues() {
    let mut team = Team::new();
    let (original, state) = two_agent_chat(&mut team).await;
    let text = String::from_utf8(state.clone()).unwrap();
    assert!(
        !text.contains("SECRET-INSTRUCTIONS"),
        "an agent definition leaked into the state"
    );

    let serializer = ChatSerializer::deserialize(state.as_slice()).unwrap();
    let names: Vec<&str> = serializer
        .participants()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["writer", "critic"]);
    // The application re-creates the agents (same stores: a new process would reopen them).
    let writer = team.agent("writer", &["draft 2"]);
    let critic = team.agent("critic", &[]);
    let mut restored = AgentChat::new(original.scope().clone());
    restored.add_agent(writer).unwrap();
    restored.add_agent(critic).unwrap();
    assert_eq!(
        serializer.restore(&mut restored).unwrap(),
        RestoreOutcome::Equivalent
    );
    assert_eq!(restored.history(), original.history());
    assert_eq!(state_of(&restored), state);

    // The writer continues where it stopped: it is sent only what it has not seen.
    restored.invoke_agent("writer").await.unwrap();
    let writer_saw = team
        .models
        .last()
        .map(|_| ())
        .and(team.models[2].last_request())
        .unwrap();
    let new_input = &writer_saw.messages[writer_saw.messages.len() - 1..];
    assert_eq!(texts(new_input), ["too long"]);
}

#[tokio::test]
async fn enhanced_restore_syncs_new_agents_to_the_history() {
    let mut team = Team::new();
    let (original, state) = two_agent_chat(&mut team).await;
    let serializer = ChatSerializer::deserialize(state.as_slice()).unwrap();
    let mut restored = AgentChat::new(original.scope().clone());
    restored.add_agent(team.agent("writer", &[])).unwrap();
    restored.add_agent(team.agent("critic", &[])).unwrap();
    restored
        .add_agent(team.agent("editor", &["polished"]))
        .unwrap();
    assert_eq!(
        serializer.restore(&mut restored).unwrap(),
        RestoreOutcome::Enhanced {
            added: vec!["chat_completion:editor".into()]
        }
    );
    restored.invoke_agent("editor").await.unwrap();
    let editor_saw = team.models.last().unwrap().last_request().unwrap().messages;
    assert_eq!(
        texts(&editor_saw[1..]),
        ["Write a haiku", "draft 1", "too long"]
    );
}

#[tokio::test]
async fn reduced_restore_keeps_missing_channels_for_later() {
    let mut team = Team::new();
    let (original, state) = two_agent_chat(&mut team).await;
    let serializer = ChatSerializer::deserialize(state.as_slice()).unwrap();
    let mut restored = AgentChat::new(original.scope().clone());
    restored
        .add_agent(team.agent("writer", &["draft 2"]))
        .unwrap();
    assert_eq!(
        serializer.restore(&mut restored).unwrap(),
        RestoreOutcome::Reduced {
            missing: vec!["chat_completion:critic".into()]
        }
    );
    restored.add_message(ChatMessage::user("shorter please"));
    restored.invoke_agent("writer").await.unwrap();
    // The critic's channel survived a save while it was absent...
    let resaved = ChatSerializer::deserialize(state_of(&restored).as_slice()).unwrap();
    assert_eq!(resaved.participants().len(), 2);
    // ...and when it joins, it syncs from where it stopped.
    restored.add_agent(team.agent("critic", &["good"])).unwrap();
    restored.invoke_agent("critic").await.unwrap();
    let critic_saw = team.models.last().unwrap().last_request().unwrap().messages;
    let tail = texts(&critic_saw[critic_saw.len() - 2..]);
    assert_eq!(tail, ["shorter please", "draft 2"]);
}

#[tokio::test]
async fn empty_and_invalid_targets_fail_fast_and_stay_usable() {
    let mut team = Team::new();
    let (original, state) = two_agent_chat(&mut team).await;
    let serializer = ChatSerializer::deserialize(state.as_slice()).unwrap();

    let mut empty = AgentChat::new(original.scope().clone());
    let err = serializer.restore(&mut empty).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    // Still usable: add the agents and restore.
    empty.add_agent(team.agent("writer", &[])).unwrap();
    empty.add_agent(team.agent("critic", &[])).unwrap();
    assert!(serializer.restore(&mut empty).is_ok());

    let mut busy = AgentChat::new(random_scope());
    busy.add_agent(team.agent("writer", &["hi"])).unwrap();
    busy.add_message(ChatMessage::user("already talking"));
    let err = serializer.restore(&mut busy).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(texts(busy.history()), ["already talking"]);
    busy.invoke().await.unwrap();
    assert_eq!(busy.history().len(), 2);
}

#[tokio::test]
async fn hostile_states_are_typed_errors() {
    let mut team = Team::new();
    let (_, state) = two_agent_chat(&mut team).await;
    let good: serde_json::Value = serde_json::from_slice(&state).unwrap();
    let mut unknown_version = good.clone();
    unknown_version["version"] = 9.into();
    let mut wrong_types = good.clone();
    wrong_types["history"] = "not a list".into();
    let mut bad_message = good.clone();
    bad_message["history"][0]["role"] = "wizard".into();
    let mut bad_channel = good.clone();
    bad_channel["channels"][0]["channelstate"] = serde_json::json!({"synced": -1});
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"garbage".to_vec(),
        b"[]".to_vec(),
        state[..state.len() / 2].to_vec(),
        serde_json::to_vec(&unknown_version).unwrap(),
        serde_json::to_vec(&wrong_types).unwrap(),
        serde_json::to_vec(&bad_message).unwrap(),
        serde_json::to_vec(&bad_channel).unwrap(),
        "[".repeat(1_000_000).into_bytes(),
    ];
    for case in cases {
        let err = ChatSerializer::deserialize(case.as_slice()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
    }
    // 100 MB of nesting is refused without reading it all.
    let huge = std::io::repeat(b'[').take(100 * 1024 * 1024);
    let err = ChatSerializer::deserialize(huge).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
}

#[tokio::test]
async fn chat_state_round_trips_through_a_session_store() {
    let mut team = Team::new();
    let (chat, state) = two_agent_chat(&mut team).await;
    let sessions = InMemorySessionStore::new();
    let value: serde_json::Value = serde_json::from_slice(&state).unwrap();
    sessions.save(chat.scope(), &value, None).await.unwrap();
    let loaded = sessions.load(chat.scope()).await.unwrap().unwrap();
    let bytes = serde_json::to_vec(&loaded.state).unwrap();
    let serializer = ChatSerializer::deserialize(bytes.as_slice()).unwrap();
    assert_eq!(serializer.history(), chat.history());
}

#[tokio::test]
async fn the_chat_state_vector_reads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/format/agent-chat-v1.json");
    let bytes = std::fs::read(path).unwrap();
    let serializer = ChatSerializer::deserialize(bytes.as_slice()).unwrap();
    assert_eq!(serializer.participants().len(), 2);
    assert_eq!(serializer.history().len(), 3);
}

#[tokio::test]
async fn a_version_1_session_in_the_chat_vector_continues_and_is_written_back_as_version_2() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/format/agent-chat-v1.json");
    let bytes = std::fs::read(path).unwrap();
    let serializer = ChatSerializer::deserialize(bytes.as_slice()).unwrap();
    let mut team = Team::new();
    let mut chat = AgentChat::new(Scope::session("team-1").unwrap());
    chat.add_agent(team.agent("writer", &["Revised."])).unwrap();
    chat.add_agent(team.agent("critic", &[])).unwrap();
    serializer.restore(&mut chat).unwrap();
    // Kept as it was until the writer's next turn...
    let before: serde_json::Value = serde_json::from_slice(&state_of(&chat)).unwrap();
    assert_eq!(
        before["channels"][0]["channelstate"]["session"]["version"],
        1
    );
    // ...which migrates the writer's session (one turn, at its scope) and writes it as version 2.
    chat.invoke_agent("writer").await.unwrap();
    let after: serde_json::Value = serde_json::from_slice(&state_of(&chat)).unwrap();
    let session = &after["channels"][0]["channelstate"]["session"];
    assert_eq!(
        after["version"], 1,
        "the chat state's own version does not change"
    );
    assert_eq!(session["version"], 2);
    assert_eq!(session["scope"], "default|~|writer|history|team-1");
    assert_eq!(session["turns"], 2);
    let restored = AgentSession::deserialize(session).unwrap();
    assert_eq!(restored.scope().agent().map(|a| a.as_str()), Some("writer"));
}

#[tokio::test]
async fn team_session_keeps_sub_histories_windows_and_snapshot() {
    let store: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let scope: Scope = random_scope();
    let mut team = TeamSession::new(AgentSession::new(scope.clone()), store.clone());
    for i in 0..5 {
        team.add_history_message("flights", ChatMessage::assistant(format!("f{i}")))
            .await
            .unwrap();
    }
    team.add_history_message("hotels", ChatMessage::assistant("h0"))
        .await
        .unwrap();
    team.set_history_window("flights", Some(2)).unwrap();
    team.update_snapshot("step", serde_json::json!("hotels"));

    assert_eq!(
        texts(&team.history_messages("flights", 10).await.unwrap()),
        ["f3", "f4"]
    );
    assert_eq!(
        texts(&team.history_messages("hotels", 10).await.unwrap()),
        ["h0"]
    );
    assert_eq!(team.team_history(100).await.unwrap().len(), 6);

    // Restored in a new session object: windows and snapshot come back, histories are in the store.
    let state = team.session().serialize().unwrap();
    let restored = TeamSession::new(AgentSession::deserialize(&state).unwrap(), store);
    assert_eq!(
        texts(&restored.history_messages("flights", 10).await.unwrap()),
        ["f3", "f4"]
    );
    assert_eq!(restored.snapshot()["step"], "hotels");
    assert!(restored.history_messages("bad id", 1).await.is_err());
}

#[tokio::test]
async fn a_supervisor_chooses_who_speaks() {
    let mut team = Team::new();
    let pick_critic: memory_core::chat::SupervisorFn = Arc::new(|_history, participants| {
        participants
            .iter()
            .position(|p| p.name == "critic")
            .unwrap_or(0)
    });
    let mut chat = AgentChat::new(random_scope()).with_selection(
        memory_core::chat::SelectionStrategy::Supervisor(pick_critic),
    );
    chat.add_agent(team.agent("writer", &[])).unwrap();
    chat.add_agent(team.agent("critic", &["first!"])).unwrap();
    chat.add_message(ChatMessage::user("review this"));
    let answer = chat.invoke().await.unwrap();
    assert_eq!(answer[0].author_name.as_deref(), Some("critic"));
    assert!(
        chat.invoke().await.is_err(),
        "nothing new for the critic to answer"
    );
}

#[tokio::test]
async fn a_chat_restored_under_another_scope_refuses_the_channels_of_the_old_one() {
    let mut team = Team::new();
    let a = random_scope();
    let mut chat = AgentChat::new(a.clone());
    chat.add_agent(team.agent("writer", &["draft 1", "draft 2"]))
        .unwrap();
    chat.add_message(ChatMessage::user("Write a haiku"));
    chat.invoke_agent("writer").await.unwrap();
    let writer_at_a = a.clone().with_agent("writer").unwrap();
    let before = team.store.read(&writer_at_a, Window::All).await.unwrap();
    assert!(!before.is_empty());

    let serializer = ChatSerializer::deserialize(state_of(&chat).as_slice()).unwrap();
    let b = random_scope();
    let mut moved = AgentChat::new(b.clone());
    moved.add_agent(team.agent("writer", &["draft 2"])).unwrap();
    serializer.restore(&mut moved).unwrap();
    moved.add_message(ChatMessage::user("Shorter, please"));
    let err = moved.invoke_agent("writer").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains(&writer_at_a.key()), "{err}");
    assert_eq!(
        team.store.read(&writer_at_a, Window::All).await.unwrap(),
        before,
        "the old scope's thread is untouched"
    );
}
