//! The agent's tool loop: tools run between model calls, concurrently within one response;
//! unknown tools, bad arguments and tool errors go back to the model; the iteration limit; the
//! whole exchange stored as one batch with every call beside its results; reducers (stored and
//! in flight) keeping the groups whole; providers seeing the tool messages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test helpers fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::{
    Agent, AgentSession, AiContext, AppendOutcome, ChatMessage, ChatReducer, ChatResponse,
    ContextProvider, Error, ErrorKind, FnTool, HistoryStore, InMemoryHistoryStore, InvokedContext,
    InvokingContext, MessageCountReducer, Part, ReducerTrigger, Result, Role, Scope, Segmentation,
    SourceId, StopReason, Tool, ToolCallStatus, ToolDefinition, Usage, Window, async_trait,
};
use memory_testkit::ScriptedChatModel;
use memory_testkit::fixtures::random_scope;
use serde_json::{Value, json};
use tokio::sync::Barrier;

/// A history store that counts its appends (and forwards everything to an in-memory store).
#[derive(Debug, Default)]
struct CountingStore {
    inner: InMemoryHistoryStore,
    appends: AtomicUsize,
}

impl CountingStore {
    fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl memory_core::LayeredHistory for CountingStore {
    type Inner = InMemoryHistoryStore;
    fn inner(&self) -> &InMemoryHistoryStore {
        &self.inner
    }
    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(scope, messages).await
    }
}

/// A calculator tool: `{"a": 2, "b": 3}` gives `5`.
fn add_tool() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "add",
        "Adds two integers.",
        json!({
            "type": "object",
            "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } },
            "required": ["a", "b"]
        }),
        |args: Value| async move {
            match (args["a"].as_i64(), args["b"].as_i64()) {
                (Some(a), Some(b)) => Ok(json!(a + b)),
                _ => Err(Error::invalid_input("add needs two integers a and b")),
            }
        },
    ))
}

/// An assistant message calling several tools at once: `(id, name, arguments)`.
fn calls(calls: &[(&str, &str, &str)]) -> ChatResponse {
    let parts = calls
        .iter()
        .map(|(id, name, arguments)| Part::ToolCall {
            id: (*id).to_owned(),
            name: (*name).to_owned(),
            arguments: (*arguments).to_owned(),
        })
        .collect();
    ChatResponse {
        messages: vec![ChatMessage::new(Role::Assistant, parts)],
        ..Default::default()
    }
}

/// The tool results of a message: `(call id, content)`.
fn results(message: &ChatMessage) -> Vec<(String, String)> {
    message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

/// Every tool result in `messages` answers a call made earlier in `messages`, and every call
/// has its results: no group is split.
fn assert_groups_whole(messages: &[ChatMessage]) {
    let seg = Segmentation::of(messages);
    for group in &seg.groups {
        let first = &messages[group.start];
        if first.has_tool_calls() {
            let calls: Vec<&str> = first.tool_call_ids().collect();
            let answered: Vec<&str> = messages[group.clone()]
                .iter()
                .flat_map(ChatMessage::tool_result_ids)
                .collect();
            assert_eq!(calls, answered, "a call group lost results: {messages:#?}");
        } else {
            assert!(
                first.role != Role::Tool,
                "a group starts with an orphaned tool result: {messages:#?}"
            );
        }
    }
}

/// The messages of `scope` in `store` that `window` reads.
async fn messages_in(store: &impl HistoryStore, scope: &Scope, window: Window) -> Vec<ChatMessage> {
    store
        .read(scope, window)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.into_message())
        .collect()
}

#[tokio::test]
async fn one_tool_call_runs_and_the_whole_exchange_is_stored_in_one_append() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_tool_call("call-1", "add", r#"{"a": 2, "b": 3}"#)
            .reply_text("2 + 3 = 5."),
    );
    let store = Arc::new(CountingStore::default());
    let agent = Agent::builder("calc", model.clone(), store.clone())
        .instructions("Use the tools.")
        .tool(add_tool())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let run = agent.run("What is 2 + 3?", &mut session).await.unwrap();

    assert_eq!(run.text(), "2 + 3 = 5.");
    assert_eq!(run.iterations, 2);
    assert_eq!(run.stop_reason, StopReason::Answered);
    assert_eq!(run.tool_calls.len(), 1);
    let call = &run.tool_calls[0];
    assert_eq!(
        (call.id.as_str(), call.name.as_str(), call.result.as_str()),
        ("call-1", "add", "5")
    );
    assert_eq!(call.arguments, r#"{"a": 2, "b": 3}"#);
    assert_eq!(call.status, ToolCallStatus::Succeeded);
    assert_eq!(call.iteration, 1);

    // The model saw the tool both times, and its call and result the second time.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.tools[0].name, "add");
    }
    let second = &requests[1].messages;
    assert_eq!(second.len(), 4, "system, user, call, result: {second:#?}");
    assert!(second[2].has_tool_calls());
    assert_eq!(results(&second[3]), [("call-1".to_owned(), "5".to_owned())]);
    assert_eq!(run.request, requests[1]);

    // One append holds input, call, result and answer, in order.
    assert_eq!(store.appends(), 1);
    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let roles: Vec<Role> = stored.iter().map(|m| m.message.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        stored[1].message.tool_call_ids().collect::<Vec<_>>(),
        ["call-1"]
    );
    assert_eq!(stored[1].message.author_name.as_deref(), Some("calc"));
    assert_eq!(
        results(&stored[2].message),
        [("call-1".to_owned(), "5".to_owned())]
    );
    assert_eq!(stored[3].message.text(), "2 + 3 = 5.");
    let stored_messages: Vec<ChatMessage> = stored.into_iter().map(|m| m.into_message()).collect();
    assert_eq!(stored_messages[1..], run.messages[..]);
    assert_eq!(session.turns(), 1);
}

#[tokio::test]
async fn the_calls_of_one_response_run_concurrently() {
    // Each call waits until both have started: run one after the other, they would never end.
    let barrier = Arc::new(Barrier::new(2));
    let started = Arc::new(AtomicUsize::new(0));
    let (b, s) = (barrier.clone(), started.clone());
    let meet = Arc::new(FnTool::new(
        "meet",
        "Waits for the other call.",
        json!({"type": "object", "properties": {"who": {"type": "string"}}}),
        move |args: Value| {
            let (barrier, started) = (b.clone(), s.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                barrier.wait().await;
                Ok(json!(format!(
                    "met {}",
                    args["who"].as_str().unwrap_or("?")
                )))
            }
        },
    ));
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply(calls(&[
                ("c-a", "meet", r#"{"who": "ana"}"#),
                ("c-b", "meet", r#"{"who": "bo"}"#),
            ]))
            .reply_text("Both met."),
    );
    let store = Arc::new(CountingStore::default());
    let agent = Agent::builder("host", model.clone(), store.clone())
        .tool(meet)
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let run = tokio::time::timeout(Duration::from_secs(10), agent.run("Meet.", &mut session))
        .await
        .expect("the two calls did not run concurrently")
        .unwrap();

    assert_eq!(started.load(Ordering::SeqCst), 2);
    let results_in_order: Vec<(&str, &str)> = run
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.result.as_str()))
        .collect();
    assert_eq!(results_in_order, [("c-a", "met ana"), ("c-b", "met bo")]);
    // One assistant message with two calls, then one tool message per call, in call order.
    let stored = store.read(session.scope(), Window::All).await.unwrap();
    let stored: Vec<ChatMessage> = stored.into_iter().map(|m| m.into_message()).collect();
    assert_eq!(stored.len(), 5);
    assert_eq!(
        stored[1].tool_call_ids().collect::<Vec<_>>(),
        ["c-a", "c-b"]
    );
    assert_eq!(results(&stored[2])[0].0, "c-a");
    assert_eq!(results(&stored[3])[0].0, "c-b");
    assert_eq!(stored[4].text(), "Both met.");
    assert_groups_whole(&stored);
    let seg = Segmentation::of(&stored);
    assert_eq!(seg.groups, vec![0..1, 1..4, 4..5]);
    assert_eq!(store.appends(), 1);
}

#[tokio::test]
async fn an_unknown_tool_bad_arguments_and_a_tool_error_are_told_to_the_model() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply(calls(&[
                ("c-1", "weather", "{}"),
                ("c-2", "add", "{not json"),
                ("c-3", "add", r#"{"a": "two"}"#),
                ("c-4", "add", ""),
            ]))
            .reply_text("Sorry, I could not compute it."),
    );
    let store = Arc::new(InMemoryHistoryStore::new());
    let agent = Agent::builder("calc", model.clone(), store.clone())
        .tool(add_tool())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let run = agent.run("Compute.", &mut session).await.unwrap();

    assert_eq!(run.stop_reason, StopReason::Answered);
    let statuses: Vec<ToolCallStatus> = run.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            ToolCallStatus::UnknownTool,
            ToolCallStatus::InvalidArguments,
            ToolCallStatus::Failed,
            ToolCallStatus::Failed,
        ]
    );
    assert!(statuses.iter().all(|s| s.is_error()));
    let texts: Vec<&str> = run.tool_calls.iter().map(|c| c.result.as_str()).collect();
    assert!(
        texts[0].contains("no tool named \"weather\""),
        "{}",
        texts[0]
    );
    assert!(texts[0].contains("the tools are add"), "{}", texts[0]);
    assert!(texts[1].contains("not JSON"), "{}", texts[1]);
    assert!(texts[2].contains("add needs two integers"), "{}", texts[2]);
    // Empty arguments are `{}`: the handler ran and said what it lacks.
    assert!(texts[3].contains("add needs two integers"), "{}", texts[3]);
    // The model was told each of them, as the calls' results.
    let second = &model.requests()[1].messages;
    let told: Vec<String> = second
        .iter()
        .flat_map(results)
        .map(|(_, content)| content)
        .collect();
    assert_eq!(told, texts);
    assert_eq!(store.count(session.scope()).await.unwrap().active, 7);
}

#[tokio::test]
async fn the_iteration_limit_stops_the_run_with_every_call_answered() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_tool_call("c-1", "add", r#"{"a": 1, "b": 1}"#)
            .reply_tool_call("c-2", "add", r#"{"a": 2, "b": 2}"#),
    );
    let store = Arc::new(CountingStore::default());
    let agent = Agent::builder("loop", model.clone(), store.clone())
        .tool(add_tool())
        .max_iterations(2)
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let run = agent.run("Keep adding.", &mut session).await.unwrap();

    assert_eq!(run.stop_reason, StopReason::MaxIterations);
    assert_eq!(run.iterations, 2);
    assert_eq!(model.requests().len(), 2);
    assert_eq!(run.text(), "");
    assert_eq!(run.tool_calls[0].status, ToolCallStatus::Succeeded);
    assert_eq!(run.tool_calls[1].status, ToolCallStatus::NotRun);
    assert_eq!(run.tool_calls[1].iteration, 2);
    assert!(run.tool_calls[1].result.contains("limit of 2 model calls"));
    // Stored whole: the unrun call has its (refusal) result, so no group is split.
    let stored = messages_in(&store, session.scope(), Window::All).await;
    assert_eq!(stored.len(), 5);
    assert_groups_whole(&stored);
    assert_eq!(store.appends(), 1);
}

#[tokio::test]
async fn the_builder_refuses_bad_tools_and_a_zero_limit() {
    let model = Arc::new(ScriptedChatModel::new());
    let store = Arc::new(InMemoryHistoryStore::new());
    let err = Agent::builder("a", model.clone(), store.clone())
        .tool(add_tool())
        .tool(add_tool())
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.message().contains("two tools share the name add"),
        "{err}"
    );
    let bad_name: Arc<dyn Tool> = Arc::new(FnTool::new("has space", "", json!({}), |_| async {
        Ok(Value::Null)
    }));
    let err = Agent::builder("a", model.clone(), store.clone())
        .tool(bad_name)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = Agent::builder("a", model, store)
        .max_iterations(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// A provider that offers a tool and records what it was told after each run.
#[derive(Debug)]
struct ToolProvider {
    source: SourceId,
    seen: Mutex<Vec<Vec<Role>>>,
    errors: Mutex<Vec<ErrorKind>>,
}

impl ToolProvider {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            source: SourceId::new("recall").unwrap(),
            seen: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl ContextProvider for ToolProvider {
    fn source_id(&self) -> &SourceId {
        &self.source
    }

    async fn invoking(&self, _ctx: InvokingContext<'_>) -> Result<AiContext> {
        Ok(AiContext {
            tools: vec![
                ToolDefinition {
                    name: "recall".into(),
                    description: "Recalls a fact.".into(),
                    parameters: json!({"type": "object"}),
                },
                // Shadows the agent's own tool: offered once, the agent's runs.
                ToolDefinition {
                    name: "add".into(),
                    description: "another add".into(),
                    parameters: json!({"type": "object"}),
                },
            ],
            ..Default::default()
        })
    }

    async fn invoked(&self, ctx: InvokedContext<'_>) -> Result<()> {
        if let Some(response) = ctx.response {
            self.seen
                .lock()
                .unwrap()
                .push(response.iter().map(|m| m.role).collect());
        }
        if let Some(error) = ctx.error {
            self.errors.lock().unwrap().push(error.kind());
        }
        Ok(())
    }
}

#[tokio::test]
async fn providers_offer_tools_and_see_every_tool_message() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply(calls(&[
                ("c-1", "add", r#"{"a": 20, "b": 22}"#),
                ("c-2", "recall", "{}"),
            ]))
            .reply_text("42."),
    );
    let provider = ToolProvider::new();
    let store = Arc::new(InMemoryHistoryStore::new());
    let agent = Agent::builder("calc", model.clone(), store.clone())
        .tool(add_tool())
        .context_provider(provider.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let run = agent.run("Add.", &mut session).await.unwrap();

    let offered: Vec<(String, String)> = model.requests()[0]
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.description.clone()))
        .collect();
    assert_eq!(
        offered,
        [
            ("add".to_owned(), "Adds two integers.".to_owned()),
            ("recall".to_owned(), "Recalls a fact.".to_owned()),
        ]
    );
    assert_eq!(run.tool_calls[0].result, "42");
    // The provider's tool has no handler in the agent: the model is told so.
    assert_eq!(run.tool_calls[1].status, ToolCallStatus::UnknownTool);
    assert_eq!(
        provider.seen.lock().unwrap().as_slice(),
        [vec![
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant
        ]]
    );
}

#[tokio::test]
async fn a_model_failure_after_tools_ran_stores_nothing() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_tool_call("c-1", "add", r#"{"a": 1, "b": 2}"#)
            .reply_error(ErrorKind::Unavailable, "the service is down"),
    );
    let provider = ToolProvider::new();
    let store = Arc::new(CountingStore::default());
    let agent = Agent::builder("calc", model, store.clone())
        .tool(add_tool())
        .context_provider(provider.clone())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());

    let err = agent.run("Add.", &mut session).await.unwrap_err();

    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(store.appends(), 0);
    assert_eq!(store.count(session.scope()).await.unwrap().active, 0);
    assert_eq!(session.turns(), 0);
    assert_eq!(
        provider.errors.lock().unwrap().as_slice(),
        [ErrorKind::Unavailable]
    );
    assert!(provider.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn usage_is_summed_over_the_model_calls() {
    let mut first = calls(&[("c-1", "add", r#"{"a": 1, "b": 2}"#)]);
    first.usage = Some(Usage {
        input_tokens: 10,
        output_tokens: 3,
    });
    let second = ChatResponse {
        messages: vec![ChatMessage::assistant("3")],
        usage: Some(Usage {
            input_tokens: 20,
            output_tokens: 1,
        }),
        ..Default::default()
    };
    let model = Arc::new(ScriptedChatModel::new().reply(first).reply(second));
    let agent = Agent::builder("calc", model, Arc::new(InMemoryHistoryStore::new()))
        .tool(add_tool())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    let run = agent.run("Add.", &mut session).await.unwrap();
    assert_eq!(
        run.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 4
        })
    );
}

#[tokio::test]
async fn the_reducer_shrinks_the_request_between_iterations_without_splitting_a_group() {
    // Turn 1 leaves a tool group in the history: user, call, result, answer.
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply_tool_call("old", "add", r#"{"a": 1, "b": 1}"#)
            .reply_text("2.")
            .reply_tool_call("new", "add", r#"{"a": 2, "b": 2}"#)
            .reply_text("4."),
    );
    let store = Arc::new(InMemoryHistoryStore::new());
    let agent = Agent::builder("calc", model.clone(), store.clone())
        .instructions("Add.")
        .tool(add_tool())
        .reducer(
            Arc::new(MessageCountReducer::new(5)),
            ReducerTrigger::BeforeMessagesRetrieval,
        )
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    agent.run("1 + 1?", &mut session).await.unwrap();

    let run = agent.run("2 + 2?", &mut session).await.unwrap();
    assert_eq!(run.text(), "4.");

    let requests = model.requests();
    // The first call of turn 2 fits: the 4 stored messages and the input.
    assert_eq!(requests[2].messages.len(), 6, "{:#?}", requests[2].messages);
    // The second call does not: 7 messages. The last 5 would start with the old result,
    // cut from its call; the reducer drops the old group whole instead.
    let second = &requests[3].messages;
    let texts: Vec<String> = second.iter().map(ChatMessage::text).collect();
    assert_eq!(second[0].role, Role::System);
    assert_eq!(texts[1..3], ["2.".to_owned(), "2 + 2?".to_owned()]);
    assert_eq!(second[3].tool_call_ids().collect::<Vec<_>>(), ["new"]);
    assert_eq!(results(&second[4]), [("new".to_owned(), "4".to_owned())]);
    assert_eq!(second.len(), 5);
    assert_groups_whole(second);
    assert_eq!(run.reduced, 3);
    // The store is untouched by the view reduction: both turns are stored whole.
    let stored = messages_in(&store, session.scope(), Window::All).await;
    assert_eq!(stored.len(), 8);
    assert_groups_whole(&stored);
}

#[tokio::test]
async fn reducers_on_a_stored_tool_run_keep_each_group_whole() {
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply(calls(&[
                ("c-1", "add", r#"{"a": 1, "b": 1}"#),
                ("c-2", "add", r#"{"a": 2, "b": 2}"#),
            ]))
            .reply_text("2 and 4.")
            .reply_text("You are welcome."),
    );
    let store = Arc::new(InMemoryHistoryStore::new());
    let agent = Agent::builder("calc", model, store.clone())
        .tool(add_tool())
        .reducer(
            Arc::new(MessageCountReducer::new(4)),
            ReducerTrigger::AfterMessageAdded,
        )
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    let first = agent.run("1+1 and 2+2?", &mut session).await.unwrap();
    assert_eq!(
        first.archived, 0,
        "5 messages, but the last user turn stays"
    );
    // Turn 2: 7 messages; the last 4 would start inside the call group (c-2's result, answer,
    // user, answer). The reducer archives the whole group instead.
    let second = agent.run("Thanks.", &mut session).await.unwrap();
    assert_eq!(second.archived, 4);
    let active = messages_in(&store, session.scope(), Window::All).await;
    let texts: Vec<String> = active.iter().map(ChatMessage::text).collect();
    assert_eq!(texts, ["2 and 4.", "Thanks.", "You are welcome."]);
    assert_groups_whole(&active);
    let everything = messages_in(&store, session.scope(), Window::Everything).await;
    assert_eq!(everything.len(), 7);
    // A view reducer over the stored thread also cuts only between groups.
    let stored = store
        .read(session.scope(), Window::Everything)
        .await
        .unwrap();
    for target in 1..=7 {
        let reduction = MessageCountReducer::new(target)
            .reduce(&stored)
            .await
            .unwrap();
        assert_groups_whole(&reduction.view(&stored));
    }
}

/// A tool through `Arc<dyn Tool>` and `Box<dyn Tool>` reaches the pointee.
async fn through<T: Tool>(tool: T) {
    assert_eq!(tool.definition().name, "add");
    assert_eq!(tool.call(json!({"a": 1, "b": 2})).await.unwrap(), json!(3));
}

#[tokio::test]
async fn tools_forward_through_arc_and_box() {
    through(add_tool()).await;
    let boxed: Box<dyn Tool> = Box::new(FnTool::new(
        "add",
        "Adds.",
        json!({}),
        |args: Value| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        },
    ));
    through(boxed).await;
}

#[tokio::test]
async fn with_a_service_held_conversation_only_the_results_are_sent_back() {
    let mut first = calls(&[("c-1", "add", r#"{"a": 1, "b": 2}"#)]);
    first.conversation_id = Some("conv-1".into());
    let model = Arc::new(
        ScriptedChatModel::new()
            .reply(first)
            .reply_with_conversation_id("3.", "conv-2"),
    );
    let store = Arc::new(CountingStore::default());
    let agent = Agent::builder("calc", model.clone(), store.clone())
        .tool(add_tool())
        .build()
        .unwrap();
    let mut session = AgentSession::new(random_scope());
    let run = agent.run("Add.", &mut session).await.unwrap();
    assert_eq!(run.text(), "3.");
    let second = &model.requests()[1];
    assert_eq!(second.conversation_id.as_deref(), Some("conv-1"));
    assert_eq!(second.messages.len(), 1);
    assert_eq!(
        results(&second.messages[0]),
        [("c-1".to_owned(), "3".to_owned())]
    );
    assert_eq!(session.service_conversation_id(), Some("conv-2"));
    assert_eq!(store.appends(), 0);
}
