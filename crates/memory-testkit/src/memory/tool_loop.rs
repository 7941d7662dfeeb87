//! The checks of the [`Agent`](memory_core::Agent)'s tool loop on a store: whole groups stored,
//! flushed and reduced.

use std::collections::HashSet;
use std::sync::Arc;

use memory_core::memory::MemoryBlock;
use memory_core::{
    Agent, AgentBuilder, AgentSession, ChatMessage, ChatResponse, Error, ErrorKind, FnTool,
    HistoryStore, MessageCountReducer, Part, ReducerTrigger, Role, SessionStore, StopReason,
    StoredMessage, Tool, ToolCallStatus, Window,
};
use serde_json::{Value, json};

use super::support::{FILLER, delivered, everything, memory_over};
use crate::ScriptedChatModel;
use crate::doubles::{CountingHistoryStore, RecordingBlock};
use crate::fixtures::{ExpectOk, random_scope};

/// The error sentence of the failing tool.
const DEPLOY_ERROR: &str = "the deploy window is closed until Monday";

/// The agent's two tools: `lookup_runbook` answers with a runbook of about 40 words, `deploy`
/// always fails.
fn agent_tools() -> Vec<Arc<dyn Tool>> {
    let lookup = FnTool::new(
        "lookup_runbook",
        "Finds the runbook of a topic.",
        json!({
            "type": "object",
            "properties": { "topic": { "type": "string" } },
            "required": ["topic"]
        }),
        |args: Value| async move {
            let topic = args["topic"].as_str().unwrap_or("nothing").to_owned();
            Ok(json!(format!("runbook for {topic} {FILLER}")))
        },
    );
    let deploy = FnTool::new(
        "deploy",
        "Deploys the billing service.",
        json!({ "type": "object" }),
        |_args: Value| async move { Err(Error::new(ErrorKind::Unavailable, DEPLOY_ERROR)) },
    );
    vec![Arc::new(lookup), Arc::new(deploy)]
}

/// An assistant message calling `lookup_runbook` twice (in parallel), with call ids
/// `{prefix}-a` and `{prefix}-b`.
fn parallel_lookups(prefix: &str) -> ChatResponse {
    let call = |suffix: &str, topic: &str| Part::ToolCall {
        id: format!("{prefix}-{suffix}"),
        name: "lookup_runbook".to_owned(),
        arguments: json!({ "topic": topic }).to_string(),
    };
    ChatResponse {
        messages: vec![ChatMessage::new(
            Role::Assistant,
            vec![call("a", "billing"), call("b", "queues")],
        )],
        ..Default::default()
    }
}

/// The final answer of tool turn `turn`.
fn tool_answer(turn: usize) -> String {
    format!("answer {turn}: the deploy waits {FILLER}")
}

/// Scripts one tool turn on `model`: two parallel lookups (`t{turn}-a`, `t{turn}-b`), then a
/// call to the failing `deploy` (`t{turn}-c`), then the final answer: 3 model calls, 7 stored
/// messages with the input.
fn script_tool_turn(model: &ScriptedChatModel, turn: usize) {
    model.push(crate::ScriptedReply::Response(parallel_lookups(&format!(
        "t{turn}"
    ))));
    model.push(crate::ScriptedReply::Response(ChatResponse {
        messages: vec![ChatMessage::tool_call(format!("t{turn}-c"), "deploy", "{}")],
        ..Default::default()
    }));
    model.push(crate::ScriptedReply::Response(ChatResponse {
        messages: vec![ChatMessage::assistant(tool_answer(turn))],
        ..Default::default()
    }));
}

/// The input of tool turn `turn`, of about 40 words.
fn tool_input(turn: usize) -> String {
    format!("question {turn}: can we deploy billing today {FILLER}")
}

/// An agent with the two tools on `model` and `history`.
fn tool_agent(model: Arc<ScriptedChatModel>, history: Arc<dyn HistoryStore>) -> AgentBuilder {
    let mut builder = Agent::builder("operator", model, history)
        .instructions("You operate the billing service.")
        .max_iterations(6);
    for tool in agent_tools() {
        builder = builder.tool(tool);
    }
    builder
}

/// Where `messages` split a tool group: a call message whose results do not all follow it
/// directly, or a tool result not directly after its call message (or that call's other
/// results). Empty when every group is whole.
fn split_groups(messages: &[ChatMessage]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut open: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            for id in m.tool_result_ids() {
                if !open.remove(id) {
                    problems.push(format!(
                        "message {i} answers call {id}, whose call message does not precede it"
                    ));
                }
            }
        } else {
            if !open.is_empty() {
                let mut ids: Vec<&String> = open.iter().collect();
                ids.sort();
                problems.push(format!(
                    "message {i} comes before the results of calls {ids:?}"
                ));
                open.clear();
            }
            open.extend(m.tool_call_ids().map(str::to_owned));
        }
    }
    if !open.is_empty() {
        let mut ids: Vec<&String> = open.iter().collect();
        ids.sort();
        problems.push(format!(
            "the results of calls {ids:?} are missing at the end"
        ));
    }
    problems
}

/// (id, role, parts) of each message: what a store must give back of what it was given.
fn identity(messages: &[ChatMessage]) -> Vec<(String, Role, Vec<Part>)> {
    messages
        .iter()
        .map(|m| (m.id.to_string(), m.role, m.parts.clone()))
        .collect()
}

fn stored_messages(stored: &[StoredMessage]) -> Vec<ChatMessage> {
    stored.iter().map(|m| (*m.message).clone()).collect()
}

/// The messages of `stored` that are not archived.
fn active_messages(stored: &[StoredMessage]) -> Vec<ChatMessage> {
    stored
        .iter()
        .filter(|m| !m.archived)
        .map(|m| (*m.message).clone())
        .collect()
}

/// An agent turn with two parallel tool calls, a failing call and a final answer stores, in one
/// append, the input, each assistant tool-call message, every result (the error as a result)
/// and the answer, with consecutive seqs; a fresh agent on the same stores, with the session
/// saved to and loaded from the session store, continues the thread and sends the model the
/// whole group.
pub async fn agent_tool_loop_stores_whole_groups(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    let scope = random_scope();
    let counting = Arc::new(CountingHistoryStore::new(history.clone()));
    let model = Arc::new(ScriptedChatModel::new());
    script_tool_turn(&model, 1);
    let agent = tool_agent(model.clone(), counting.clone())
        .build()
        .expect_ok("build the tool agent");
    let mut session = AgentSession::new(scope.clone());
    let input = ChatMessage::user(tool_input(1));
    let run = agent
        .run(input.clone(), &mut session)
        .await
        .expect_ok("run a turn with tool calls");
    assert_eq!(run.stop_reason, StopReason::Answered);
    assert_eq!(run.iterations, 3, "two tool iterations, then the answer");
    let statuses: Vec<ToolCallStatus> = run.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            ToolCallStatus::Succeeded,
            ToolCallStatus::Succeeded,
            ToolCallStatus::Failed
        ],
        "two lookups ran, the deploy failed"
    );
    assert_eq!(
        counting.appends(),
        1,
        "the whole turn is stored in one append"
    );

    let stored = everything(history.as_ref(), &scope).await;
    let seqs: Vec<u64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=7).collect::<Vec<u64>>(),
        "the input, 2 tool-call messages, 3 results and the answer, with consecutive seqs"
    );
    assert!(
        stored.iter().all(|m| !m.archived),
        "nothing of the turn is archived"
    );
    let messages = stored_messages(&stored);
    let mut expected = vec![input.clone()];
    expected.extend(run.messages.iter().cloned());
    assert_eq!(
        identity(&messages),
        identity(&expected),
        "the store holds the input and everything the run produced, in order"
    );
    assert_eq!(
        messages[1].tool_call_ids().collect::<Vec<_>>(),
        ["t1-a", "t1-b"],
        "the first assistant message holds both parallel calls"
    );
    let results: Vec<Vec<&str>> = [2, 3, 5]
        .iter()
        .map(|&i| messages[i].tool_result_ids().collect())
        .collect();
    assert_eq!(
        results,
        [vec!["t1-a"], vec!["t1-b"], vec!["t1-c"]],
        "every call has its result, in order"
    );
    let lookup = format!("runbook for billing {FILLER}");
    assert!(
        matches!(&messages[2].parts[..], [Part::ToolResult { content, .. }] if *content == lookup),
        "the lookup's result is stored verbatim: {:?}",
        messages[2].parts
    );
    assert!(
        matches!(&messages[5].parts[..], [Part::ToolResult { content, .. }] if content.contains(DEPLOY_ERROR)),
        "the deploy's error is stored as its result: {:?}",
        messages[5].parts
    );
    assert_eq!(messages[6].text(), tool_answer(1), "then the final answer");
    assert_eq!(split_groups(&messages), Vec::<String>::new());

    // A new process: the session through the session store, a fresh agent on the same stores.
    let state = session.serialize().expect_ok("serialize the session");
    sessions
        .save(&scope, &state, None)
        .await
        .expect_ok("save the session");
    drop(agent);
    drop(session);
    let loaded = sessions
        .load(&scope)
        .await
        .expect_ok("load the session")
        .expect("the saved session");
    let mut session =
        AgentSession::deserialize_at(&loaded.state, &scope).expect_ok("restore the session");
    assert_eq!(session.turns(), 1, "the restored session counts the turn");
    let model = Arc::new(ScriptedChatModel::new().reply_text("second answer: Monday it is"));
    let agent = tool_agent(model.clone(), counting.clone())
        .build()
        .expect_ok("build the second agent");
    let follow_up = ChatMessage::user("then schedule it for Monday");
    let second = agent
        .run(follow_up.clone(), &mut session)
        .await
        .expect_ok("continue the conversation");
    assert_eq!(second.text(), "second answer: Monday it is");
    assert_eq!(session.turns(), 2);
    let sent = model.last_request().expect("a request").messages;
    assert_eq!(
        sent.first().map(|m| m.role),
        Some(Role::System),
        "the instructions go first"
    );
    let mut expected = messages.clone();
    expected.push(follow_up);
    assert_eq!(
        identity(&sent[1..]),
        identity(&expected),
        "the second agent sends the whole first turn, every call with its result, then the input"
    );
    assert_eq!(counting.appends(), 2, "one append per turn");
    let stored = everything(history.as_ref(), &scope).await;
    assert_eq!(
        stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=9).collect::<Vec<u64>>(),
        "the second turn follows the first"
    );
}

/// The tool agent with a [`Memory`](memory_core::Memory) (a recording block, a small token limit)
/// as context provider, over several tool turns: every flush hands the block whole tool groups
/// (never a call without its results), and every archived message reaches the block exactly once.
pub async fn agent_tool_loop_with_memory_flushes_groups_whole(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    const TURNS: usize = 5;
    let scope = random_scope();
    let recorder = RecordingBlock::new("recorder");
    let blocks: Vec<Arc<dyn MemoryBlock>> = vec![recorder.clone()];
    // Flush past 300 tokens: about one and a half tool turns.
    let memory = Arc::new(memory_over(
        &scope,
        history.clone(),
        sessions.clone(),
        &blocks,
        600,
    ));
    let model = Arc::new(ScriptedChatModel::new());
    for turn in 1..=TURNS {
        script_tool_turn(&model, turn);
    }
    let agent = tool_agent(model.clone(), history.clone())
        .window(Window::All)
        .context_provider(memory.clone())
        .build()
        .expect_ok("build the agent with a memory");
    let mut session = AgentSession::new(scope.clone());
    for turn in 1..=TURNS {
        let run = agent
            .run(tool_input(turn), &mut session)
            .await
            .expect_ok("run a tool turn with the memory");
        assert_eq!(run.text(), tool_answer(turn));
    }
    assert_eq!(model.remaining(), 0, "every scripted reply was used");

    let stored = everything(history.as_ref(), &scope).await;
    assert_eq!(
        stored.len(),
        7 * TURNS,
        "every message stored once, whatever the memory appended again"
    );
    let calls = recorder.calls();
    assert!(
        calls.len() >= 2,
        "{TURNS} tool turns of about 200 tokens pass a 300-token threshold more than once, yet the \
         block got {} batches",
        calls.len()
    );
    for batch in &calls {
        let messages: Vec<ChatMessage> = batch
            .iter()
            .map(|seq| {
                stored
                    .iter()
                    .find(|m| m.seq == *seq)
                    .map(|m| (*m.message).clone())
                    .expect("the block got a stored seq")
            })
            .collect();
        assert_eq!(
            split_groups(&messages),
            Vec::<String>::new(),
            "a flushed batch ({batch:?}) splits a tool group"
        );
    }
    let archived: Vec<u64> = stored
        .iter()
        .filter(|m| m.archived)
        .map(|m| m.seq)
        .collect();
    assert_eq!(
        archived,
        (1..=archived.len() as u64).collect::<Vec<_>>(),
        "the flushes archive a prefix of the thread"
    );
    let all_calls: Vec<u64> = calls.concat();
    assert_eq!(
        all_calls, archived,
        "each archived message reached the block once, in order"
    );
    assert_eq!(
        delivered(&memory, "recorder").await,
        archived,
        "the block's durable state holds each archived message once"
    );
    assert!(
        stored
            .iter()
            .filter(|m| m.archived)
            .any(|m| m.message.has_tool_calls()),
        "the flushes moved tool groups"
    );
    let active = active_messages(&stored);
    assert_eq!(
        active.first().map(|m| m.role),
        Some(Role::User),
        "the short-term window starts with a user message"
    );
    assert_eq!(split_groups(&active), Vec::<String>::new());
}

/// A run of several tool iterations with a message-count reducer whose target the run passes:
/// no request the model sees splits a tool group (the reducer left earlier turns out between
/// iterations); with `BeforeMessagesRetrieval` the store keeps every message active, with
/// `AfterMessageAdded` it archives the earlier turn along group boundaries.
pub async fn agent_reducer_between_iterations_keeps_groups(
    history: Arc<dyn HistoryStore>,
    _sessions: Arc<dyn SessionStore>,
) {
    const TARGET: usize = 6;
    for trigger in [
        ReducerTrigger::BeforeMessagesRetrieval,
        ReducerTrigger::AfterMessageAdded,
    ] {
        let scope = random_scope();
        let model = Arc::new(ScriptedChatModel::new());
        // Run 1: one tool turn (7 messages).
        script_tool_turn(&model, 1);
        // Run 2: three iterations of two parallel lookups, then the answer (11 messages).
        for i in 1..=3 {
            model.push(crate::ScriptedReply::Response(parallel_lookups(&format!(
                "r2-{i}"
            ))));
        }
        model.push(crate::ScriptedReply::Response(ChatResponse {
            messages: vec![ChatMessage::assistant(tool_answer(2))],
            ..Default::default()
        }));
        let agent = tool_agent(model.clone(), history.clone())
            .reducer(Arc::new(MessageCountReducer::new(TARGET)), trigger)
            .build()
            .expect_ok("build the agent with a reducer");
        let mut session = AgentSession::new(scope.clone());
        agent
            .run(tool_input(1), &mut session)
            .await
            .expect_ok("run 1");
        let input = ChatMessage::user(tool_input(2));
        let run = agent
            .run(input.clone(), &mut session)
            .await
            .expect_ok("run 2, with three tool iterations");
        assert_eq!(run.iterations, 4, "{trigger:?}");
        assert_eq!(
            model.remaining(),
            0,
            "{trigger:?}: every scripted reply used"
        );
        assert!(
            run.reduced > 0,
            "{trigger:?}: run 2 holds more than {TARGET} messages, yet the reducer left nothing out"
        );
        for (n, request) in model.requests().iter().enumerate() {
            assert_eq!(
                split_groups(&request.messages),
                Vec::<String>::new(),
                "{trigger:?}: request {} splits a tool group",
                n + 1
            );
        }
        let last = run.request.messages.clone();
        let mut own = vec![input.clone()];
        own.extend(run.messages[..run.messages.len() - 1].iter().cloned());
        assert!(
            last.len() >= own.len() && identity(&last[last.len() - own.len()..]) == identity(&own),
            "{trigger:?}: the last request holds the run's input and every call and result"
        );
        assert!(
            last.len() < 1 + 7 + own.len(),
            "{trigger:?}: the last request left out part of run 1 ({} messages)",
            last.len()
        );

        let stored = everything(history.as_ref(), &scope).await;
        assert_eq!(
            stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
            (1..=18).collect::<Vec<u64>>(),
            "{trigger:?}: both runs stored whole, nothing deleted"
        );
        let archived: Vec<StoredMessage> = stored.iter().filter(|m| m.archived).cloned().collect();
        match trigger {
            ReducerTrigger::BeforeMessagesRetrieval => {
                assert!(
                    archived.is_empty(),
                    "{trigger:?}: the view reduction archived {} messages",
                    archived.len()
                );
                assert_eq!(run.archived, 0);
            }
            _ => {
                assert_eq!(
                    archived.iter().map(|m| m.seq).collect::<Vec<_>>(),
                    (1..=7).collect::<Vec<u64>>(),
                    "{trigger:?}: run 1 archived whole, run 2 (the last user turn) kept"
                );
                assert_eq!(run.archived, 7);
                assert_eq!(
                    split_groups(&stored_messages(&archived)),
                    Vec::<String>::new(),
                    "{trigger:?}: the archived messages are whole groups"
                );
            }
        }
        let active = active_messages(&stored);
        assert_eq!(
            split_groups(&active),
            Vec::<String>::new(),
            "{trigger:?}: the active window keeps whole groups"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_groups_finds_a_call_apart_from_its_results() {
        let calls = parallel_lookups("x").messages.remove(0);
        let a = ChatMessage::tool_result("x-a", "one");
        let b = ChatMessage::tool_result("x-b", "two");
        let user = ChatMessage::user("hi");
        let whole = [
            user.clone(),
            calls.clone(),
            a.clone(),
            b.clone(),
            user.clone(),
        ];
        assert!(split_groups(&whole).is_empty());
        assert_eq!(
            split_groups(&[calls.clone(), a.clone()]).len(),
            1,
            "a result missing"
        );
        assert_eq!(
            split_groups(&[a.clone(), b.clone()]).len(),
            2,
            "the call missing"
        );
        assert_eq!(
            split_groups(&[calls, a, user, b]).len(),
            2,
            "a result away from its call"
        );
    }
}
