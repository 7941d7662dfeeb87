//! The agent loop: what it sends the model, what it stores, how providers, reducers, service-held
//! history and failures behave.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};

use memory_core::{
    Agent, AgentSession, AiContext, ChatMessage, ContextProvider, ErrorKind, FnTool, HistoryStore,
    InMemoryHistoryStore, InvokedContext, InvokingContext, MessageCountReducer, ReducerTrigger,
    Result, Role, Scope, SourceId, ToolDefinition, Window, async_trait,
};
use memory_testkit::ScriptedChatModel;
use memory_testkit::fixtures::random_scope;
use serde_json::json;

/// A provider that adds one instruction and one message, counts its runs in its session state,
/// and records what it was told after each run.
#[derive(Debug)]
struct RecordingProvider {
    source: SourceId,
    seen: Mutex<Vec<String>>,
}

impl RecordingProvider {
    fn new(source: &str) -> Arc<Self> {
        Arc::new(Self {
            source: SourceId::new(source).unwrap(),
            seen: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl ContextProvider for RecordingProvider {
    fn source_id(&self) -> &SourceId {
        &self.source
    }

    async fn invoking(&self, ctx: InvokingContext<'_>) -> Result<AiContext> {
        let runs = ctx.state.get("runs").and_then(|v| v.as_u64()).unwrap_or(0);
        *ctx.state = json!({ "runs": runs + 1 });
        Ok(AiContext {
            instructions: vec![format!("{} says hello", self.source)],
            messages: vec![ChatMessage::user(format!("context from {}", self.source))],
            tools: vec![ToolDefinition {
                name: format!("{}_tool", self.source).replace('-', "_"),
                description: "a tool".into(),
                parameters: json!({"type": "object"}),
            }],
        })
    }

    async fn invoked(&self, ctx: InvokedContext<'_>) -> Result<()> {
        let what = match (ctx.response, ctx.error) {
            (Some(r), None) => format!("ok:{}:{}", ctx.request.len(), r.len()),
            (None, Some(e)) => format!("error:{}", e.kind()),
            _ => "inconsistent".to_owned(),
        };
        self.seen.lock().unwrap().push(what);
        Ok(())
    }
}

fn setup(model: ScriptedChatModel) -> (Arc<ScriptedChatModel>, Arc<InMemoryHistoryStore>) {
    (Arc::new(model), Arc::new(InMemoryHistoryStore::new()))
}

#[tokio::test]
async fn a_run_sends_window_and_stores_input_and_response_as_one_batch() {
    let (model, store) = setup(ScriptedChatModel::new().reply_text("one").reply_text("two"));
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .instructions("Be brief.")
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    agent.run("first", &mut session).await.unwrap();
    let run = agent.run("second", &mut session).await.unwrap();
    assert_eq!(run.text(), "two");
    assert_eq!(run.window_len, 2);

    let sent = &model.requests()[1].messages;
    let roles: Vec<Role> = sent.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    assert_eq!(sent[0].text(), "Be brief.");
    assert_eq!(sent[3].text(), "second");

    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let texts: Vec<String> = stored.iter().map(|m| m.message.text()).collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);
    assert_eq!(stored[1].message.author_name.as_deref(), Some("helper"));
    assert_eq!(session.turns(), 2);
}

#[tokio::test]
async fn providers_run_in_order_with_their_own_state() {
    let (model, store) = setup(ScriptedChatModel::new().reply_text("a").reply_text("b"));
    let first = RecordingProvider::new("first");
    let second = RecordingProvider::new("second");
    let agent = Agent::builder("helper", model.clone(), store)
        .instructions("Base.")
        .context_provider(first.clone())
        .context_provider(second.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    let orphan = SourceId::new("retired").unwrap();
    session.set_provider_state(orphan.clone(), json!({"keep": true}));

    agent.run("hi", &mut session).await.unwrap();
    agent.run("again", &mut session).await.unwrap();

    let request = model.last_request().unwrap();
    assert_eq!(
        request.messages[0].text(),
        "Base.\n\nfirst says hello\n\nsecond says hello"
    );
    assert_eq!(request.messages[1].text(), "context from first");
    assert_eq!(request.messages[2].text(), "context from second");
    assert_eq!(request.tools.len(), 2);
    for source in ["first", "second"] {
        let state = session
            .provider_state(&SourceId::new(source).unwrap())
            .unwrap();
        assert_eq!(state["runs"], 2, "{source}");
    }
    assert_eq!(
        session.provider_state(&orphan),
        Some(&json!({"keep": true}))
    );
    assert_eq!(*first.seen.lock().unwrap(), ["ok:1:1", "ok:1:1"]);

    // The unknown provider's state survives serialization too.
    let restored = AgentSession::deserialize(&session.serialize().unwrap()).unwrap();
    assert_eq!(
        restored.provider_state(&orphan),
        Some(&json!({"keep": true}))
    );
}

#[tokio::test]
async fn two_providers_with_one_source_id_are_refused() {
    let (model, store) = setup(ScriptedChatModel::new());
    let err = Agent::builder("helper", model, store)
        .context_provider(RecordingProvider::new("same"))
        .context_provider(RecordingProvider::new("same"))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_failed_model_call_stores_nothing_and_tells_providers() {
    let (model, store) =
        setup(ScriptedChatModel::new().reply_error(ErrorKind::Unavailable, "down"));
    let provider = RecordingProvider::new("p");
    let agent = Agent::builder("helper", model, store.clone())
        .context_provider(provider.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    let err = agent.run("hello?", &mut session).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(store.count(session.scope()).await.unwrap().active, 0);
    assert_eq!(session.turns(), 0);
    assert_eq!(*provider.seen.lock().unwrap(), ["error:unavailable"]);
}

#[tokio::test]
async fn a_service_held_conversation_keeps_only_its_id() {
    let (model, store) = setup(
        ScriptedChatModel::new()
            .reply_with_conversation_id("hi", "conv-1")
            .reply_text("still here"),
    );
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    agent.run("hello", &mut session).await.unwrap();
    assert_eq!(session.service_conversation_id(), Some("conv-1"));
    assert_eq!(store.count(session.scope()).await.unwrap().active, 0);

    agent.run("and now?", &mut session).await.unwrap();
    let request = model.last_request().unwrap();
    assert_eq!(request.conversation_id.as_deref(), Some("conv-1"));
    assert_eq!(request.messages.len(), 1, "only the new input is sent");
    assert_eq!(store.count(session.scope()).await.unwrap().active, 0);
}

/// An agent whose model replies six times, with a reducer keeping 4 messages run at `trigger`.
fn six_replies_keeping_four(
    trigger: ReducerTrigger,
) -> (Arc<ScriptedChatModel>, Arc<InMemoryHistoryStore>, Agent) {
    let mut model = ScriptedChatModel::new();
    for i in 0..6 {
        model = model.reply_text(format!("reply {i}"));
    }
    let (model, store) = setup(model);
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .reducer(Arc::new(MessageCountReducer::new(4)), trigger)
        .build()
        .unwrap();
    (model, store, agent)
}

#[tokio::test]
async fn before_retrieval_reducer_shrinks_only_the_view() {
    let (model, store, agent) = six_replies_keeping_four(ReducerTrigger::BeforeMessagesRetrieval);
    let mut session = AgentSession::new(random_scope());
    for i in 0..6 {
        agent
            .run(format!("question {i}"), &mut session)
            .await
            .unwrap();
    }
    let last = model.last_request().unwrap();
    assert_eq!(
        last.messages.len(),
        4 + 1,
        "4 history messages and the input"
    );
    assert_eq!(last.messages[0].text(), "question 3");
    let count = store.count(session.scope()).await.unwrap();
    assert_eq!((count.active, count.archived), (12, 0));
}

#[tokio::test]
async fn after_added_reducer_archives_the_stored_thread() {
    let (_, store, agent) = six_replies_keeping_four(ReducerTrigger::AfterMessageAdded);
    let mut session = AgentSession::new(random_scope());
    let mut archived = 0;
    for i in 0..6 {
        archived += agent
            .run(format!("question {i}"), &mut session)
            .await
            .unwrap()
            .archived;
    }
    let count = store.count(session.scope()).await.unwrap();
    assert_eq!((count.active, count.archived), (4, 8));
    assert_eq!(archived, 8);
    let active = store.read(session.scope(), Window::All).await.unwrap();
    assert_eq!(active[0].message.text(), "question 4");
    // Archived, not lost.
    assert_eq!(
        store
            .read(session.scope(), Window::Everything)
            .await
            .unwrap()
            .len(),
        12
    );
}

#[tokio::test]
async fn a_reducer_never_separates_a_tool_call_from_its_result() {
    let (model, store) = setup(
        ScriptedChatModel::new()
            .reply_tool_call("call-1", "weather", "{}")
            .reply_text("Sunny.")
            .reply_text("You're welcome.")
            .reply_text("Bye."),
    );
    // A naive "last 4 messages" would start the view with the orphaned tool result.
    let weather = FnTool::new("weather", "Today's weather.", json!({}), |_| async {
        Ok(json!("sunny"))
    });
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .reducer(
            Arc::new(MessageCountReducer::new(4)),
            ReducerTrigger::BeforeMessagesRetrieval,
        )
        .tool(Arc::new(weather))
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    // The agent runs the tool: the call and its result are stored with the turn.
    agent.run("weather?", &mut session).await.unwrap();
    agent.run("thanks", &mut session).await.unwrap();
    let run = agent.run("bye", &mut session).await.unwrap();
    // Stored: weather?, call, result, Sunny., thanks, You're welcome.
    assert_eq!(run.window_len, 6);
    let sent: Vec<String> = run.request.messages.iter().map(ChatMessage::text).collect();
    assert_eq!(sent, ["Sunny.", "thanks", "You're welcome.", "bye"]);
    assert_eq!(
        run.reduced, 3,
        "user, call and result leave the view together"
    );
}

#[tokio::test]
async fn a_session_restored_elsewhere_continues_the_thread() {
    let (model, store) = setup(ScriptedChatModel::new().reply_text("a").reply_text("b"));
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .build()
        .unwrap();
    let scope: Scope = random_scope();
    let mut session = AgentSession::new(scope);
    agent.run("remember 42", &mut session).await.unwrap();
    let json = session.to_json().unwrap();

    let mut restored = AgentSession::from_json(&json).unwrap();
    agent.run("what number?", &mut restored).await.unwrap();
    let sent = model.last_request().unwrap().messages;
    assert_eq!(sent[0].text(), "remember 42");
    assert_eq!(restored.turns(), 2);
}

#[tokio::test]
async fn empty_input_is_refused() {
    let (model, store) = setup(ScriptedChatModel::new());
    let agent = Agent::builder("helper", model, store).build().unwrap();
    let mut session = AgentSession::new(random_scope());
    let err = agent
        .run(Vec::<ChatMessage>::new(), &mut session)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn summarizing_reducer_replaces_old_messages_by_a_stored_summary() {
    let script = ScriptedChatModel::new()
        .reply_text("r1")
        .reply_text("r2")
        .reply_text("r3")
        .reply_text("S1: q1 r1 q2 r2")
        .reply_text("r4")
        .reply_text("r5")
        .reply_text("S2: S1 q3 r3 q4 r4")
        .reply_text("r6");
    let (model, store) = setup(script);
    let reducer = memory_core::SummarizingReducer::new(model.clone(), 2, 2);
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .reducer(Arc::new(reducer), ReducerTrigger::AfterMessageAdded)
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    for i in 1..=5 {
        agent.run(format!("q{i}"), &mut session).await.unwrap();
    }
    let requests = model.requests();
    // The second summary request carries the first summary and the messages it replaces.
    let second_summary = requests[6].messages[1].text();
    assert!(
        second_summary.contains("S1: q1 r1 q2 r2"),
        "{second_summary}"
    );
    assert!(second_summary.contains("<message role='user'>q3</message>"));

    let active = store.read(session.scope(), Window::All).await.unwrap();
    let texts: Vec<String> = active.iter().map(|m| m.message.text()).collect();
    assert_eq!(texts.len(), 3);
    assert_eq!(&texts[..2], ["q5", "r5"]);
    assert!(memory_core::is_summary(&active[2].message));
    // Nothing is lost: the originals and the first summary are archived.
    let everything = store
        .read(session.scope(), Window::Everything)
        .await
        .unwrap();
    assert_eq!(everything.len(), 10 + 2);

    let run = agent.run("q6", &mut session).await.unwrap();
    let sent: Vec<String> = run.request.messages.iter().map(ChatMessage::text).collect();
    assert!(sent[0].starts_with("Summary of the earlier conversation: S2"));
    assert_eq!(&sent[1..], ["q5", "r5", "q6"]);
}

/// A history store whose first append is stored but answers `Timeout`, as when the commit
/// happened and its reply was lost.
#[derive(Debug)]
struct LostFirstReply {
    inner: InMemoryHistoryStore,
    appends: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl memory_core::LayeredHistory for LostFirstReply {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    async fn append(
        &self,
        scope: &Scope,
        messages: &[ChatMessage],
    ) -> Result<memory_core::AppendOutcome> {
        let outcome = self.inner.append(scope, messages).await?;
        if self
            .appends
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            return Err(memory_core::Error::new(
                ErrorKind::Timeout,
                "the append committed but its reply was lost",
            ));
        }
        Ok(outcome)
    }
}

/// D7: a text run whose append committed but timed out, retried with the same text, stores
/// the input once (its id is derived from the session, its turn and the text), and the retry's
/// model call does not see the earlier attempt twice.
#[tokio::test]
async fn a_retried_text_run_stores_its_input_once() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_text("first answer")
            .reply_text("retried answer")
            .reply_text("next"),
    );
    let store = Arc::new(LostFirstReply {
        inner: InMemoryHistoryStore::new(),
        appends: std::sync::atomic::AtomicUsize::new(0),
    });
    assert!(store.capabilities().dedupes_ids);
    let agent = Agent::builder("helper", model.clone(), store.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let err = agent.run("hello", &mut session).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(session.turns(), 0, "a failed run records no turn");
    agent.run("hello", &mut session).await.unwrap();

    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let users: Vec<String> = stored
        .iter()
        .filter(|m| m.message.role == Role::User)
        .map(|m| m.message.text())
        .collect();
    assert_eq!(users, ["hello"], "the retried input is stored once");
    // The retry's model call saw the input once (the earlier attempt left the view).
    let sent: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .map(ChatMessage::text)
        .collect();
    assert_eq!(sent, ["hello"]);

    // The same text at the next turn is a new message.
    agent.run("hello", &mut session).await.unwrap();
    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let hellos = stored
        .iter()
        .filter(|m| m.message.text() == "hello")
        .count();
    assert_eq!(hellos, 2, "the same text at the next turn is stored again");
}
