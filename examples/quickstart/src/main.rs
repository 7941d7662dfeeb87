//! The quickstart: an agent with memory, offline and without a key.
//!
//! It plays a short bundled conversation through an [`Agent`] on the default store. The model is
//! [`OfflineStandInModel`], a clearly named stand-in that needs no network: it answers from what
//! it is sent, so you can watch what the memory gives it. Every turn prints what the model is
//! sent (the history window and what the reducer left out). Half-way, the session is serialized
//! to JSON, restored into a new session object, and the conversation goes on.
//!
//! Run it with `cargo run -p quickstart`; add `RUST_LOG=info` to see the tracing spans.

mod stand_in;

use std::sync::Arc;

use agent_memory::openai::OpenAiChatModel;
use agent_memory::{
    Agent, AgentSession, ChatMessage, ChatModel, HistoryStore, MessageCountReducer, ReducerTrigger,
    Role, Scope, TiktokenCounter, TokenCounter, Window,
};
use stand_in::OfflineStandInModel;

/// The bundled conversation: what the user says, turn by turn.
const CONVERSATION: &[&str] = &[
    "Hi! My name is Dana and I am on call this week.",
    "The billing service paged me at 02:13 UTC for a slow query.",
    "What is my name?",
    "I added an index on invoices(customer_id) and latency recovered.",
    "Please remember that the postmortem is due on Friday.",
    "What is my name?",
    "Which service paged me?",
];

/// How many history messages the model may see each turn (the reducer's target).
const HISTORY_MESSAGES: usize = 6;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();

    let stores = agent_memory::open_default().await?;
    let url = std::env::var(agent_memory::URL_ENV).unwrap_or(agent_memory::DEFAULT_URL.into());
    println!(
        "store: {url} (set {} to use another)",
        agent_memory::URL_ENV
    );
    let model: Arc<dyn ChatModel> = if std::env::var_os("OPENAI_API_KEY").is_some() {
        let model = OpenAiChatModel::from_env()?;
        println!("model: {} (OPENAI_API_KEY is set)", model.model());
        Arc::new(model)
    } else {
        println!("model: OfflineStandInModel (set OPENAI_API_KEY to talk to a real model)");
        Arc::new(OfflineStandInModel)
    };
    let agent = Agent::builder("helper", model, stores.history.clone())
        .instructions("You are a concise on-call assistant.")
        .window(Window::TokenBudget(30_000))
        .reducer(
            Arc::new(MessageCountReducer::new(HISTORY_MESSAGES)),
            ReducerTrigger::BeforeMessagesRetrieval,
        )
        .build()?;
    let counter = TiktokenCounter::o200k();

    // The session lives in the session store: a second run picks it up and continues the
    // conversation of the first (the thread itself is in the history store).
    let scope = Scope::session("quickstart")?.with_user("dana")?;
    let (mut session, mut version) = match stores.sessions.load(&scope).await? {
        Some(saved) => {
            let session = AgentSession::deserialize(&saved.state)?;
            let stored = stores.history.count(&scope).await?;
            println!(
                "continuing the conversation of an earlier run: {} turns, {} stored messages",
                session.turns(),
                stored.active + stored.archived
            );
            (session, Some(saved.version))
        }
        None => {
            println!("starting a new conversation (run me again to continue it)");
            (AgentSession::new(scope.clone()), None)
        }
    };
    let (first_half, second_half) = CONVERSATION.split_at(4);

    for text in first_half {
        turn(&agent, &mut session, text, &counter).await?;
    }

    // Save the session as JSON, restore it into a fresh session object, and carry on: what an
    // application does between two requests, or two processes.
    let state = session.to_json()?;
    version = Some(
        stores
            .sessions
            .save(&scope, &serde_json::from_str(&state)?, version)
            .await?,
    );
    println!(
        "\n== session serialized: {} bytes of JSON, {} turns; restoring it ==",
        state.len(),
        session.turns()
    );
    let mut session = AgentSession::from_json(&state)?;

    for text in second_half {
        turn(&agent, &mut session, text, &counter).await?;
    }
    stores
        .sessions
        .save(&scope, &session.serialize()?, version)
        .await?;

    let count = stores.history.count(session.scope()).await?;
    println!(
        "\nstored thread: {} messages, {} tokens (the reducer only shrank the view; nothing was deleted)",
        count.active, count.active_tokens
    );
    Ok(())
}

/// Runs one turn and prints what the model was sent.
async fn turn(
    agent: &Agent,
    session: &mut AgentSession,
    text: &str,
    counter: &TiktokenCounter,
) -> Result<(), agent_memory::Error> {
    println!("\n-- turn {} --", session.turns() + 1);
    println!("user: {text}");
    let run = agent.run(text, session).await?;
    let tokens: u32 = run
        .request
        .messages
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    println!(
        "model is sent {} messages (~{tokens} tokens): history window {} message(s), {} left out by the reducer",
        run.request.messages.len(),
        run.window_len,
        run.reduced,
    );
    for m in &run.request.messages {
        println!("  [{:<9}] {}", m.role.as_str(), preview(m));
    }
    println!("assistant: {}", run.text());
    Ok(())
}

fn preview(message: &ChatMessage) -> String {
    let text = message.text();
    let short: String = text.chars().take(70).collect();
    if message.role == Role::System || short.len() == text.len() {
        short
    } else {
        format!("{short}…")
    }
}
