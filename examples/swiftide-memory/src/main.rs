//! A swiftide agent whose message history is agent-memory, offline and without a key.
//!
//! The agent's model is [`OfflineModel`], a clearly named stand-in that needs no network: asked
//! to add two numbers, it calls the `add` tool; given the tool's output, it answers with it;
//! asked for the user's name, it looks for it in the history it was sent. The history is a
//! [`SwiftideHistory`] over a SQLite file (or the store `AGENT_MEMORY_URL` names), in a scope
//! naming its tenant and user.
//!
//! A first agent takes turn 1 (with a tool call). A second agent, built from nothing but the
//! same store and scope, as after a restart, takes turn 2 and is sent turn 1. The stored thread
//! is printed at the end. Run it with `cargo run -p swiftide-memory`.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

use std::borrow::Cow;
use std::error::Error as StdError;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_memory::swiftide::SwiftideHistory;
use agent_memory::swiftide::swiftide_core::chat_completion::errors::{
    LanguageModelError, ToolError,
};
use agent_memory::swiftide::swiftide_core::chat_completion::{
    ChatCompletionRequest, ChatCompletionResponse, ChatMessage, ToolCall, ToolOutput, ToolSpec,
};
use agent_memory::swiftide::swiftide_core::{AgentContext, ChatCompletion, Tool};
use agent_memory::{HistoryStore, Part, SessionId, TenantId, UserId, Window};
use async_trait::async_trait;
use serde_json::Value;
use swiftide_agents::{Agent, DefaultContext};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn StdError>> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let temp_file = std::env::temp_dir().join(format!("swiftide-memory-{nanos}.db"));
    let url = match std::env::var(agent_memory::URL_ENV) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
        _ => format!("sqlite://{}", temp_file.display()),
    };
    let store = agent_memory::open(&url).await?.history;
    println!("store: {}", agent_memory::redact_url(&url));
    println!("model: OfflineModel (a stand-in that calls `add` and reads the history)\n");

    let tenant = TenantId::new("acme")?;
    let user = UserId::new("ada")?;
    let session = SessionId::new(format!("swiftide-demo-{nanos}"))?;
    let history = || {
        SwiftideHistory::new(store.clone(), tenant.clone(), user.clone(), session.clone())
            .with_token_budget(4_000)
    };

    // Turn 1, with a tool call.
    let mut first = agent(history())?;
    first.query("My name is Ada. What is 19 plus 23?").await?;
    println!("turn 1: {}", last_answer(&first).await?);

    // Turn 2, by a new agent on the same store and scope (as after a restart).
    let mut second = agent(history())?;
    second.query("What is my name?").await?;
    println!("turn 2: {}\n", last_answer(&second).await?);

    println!("stored thread:");
    print_thread(store.as_ref(), history().scope()).await?;
    if std::env::var(agent_memory::URL_ENV).is_err() {
        drop(store);
        let _ = std::fs::remove_file(&temp_file);
    }
    Ok(())
}

/// A swiftide agent with the `add` tool, the stand-in model and `history`.
fn agent(history: SwiftideHistory) -> Result<Agent, Box<dyn StdError>> {
    let mut context = DefaultContext::default();
    context.with_message_history(history);
    Ok(Agent::builder()
        .context(context)
        .llm(&OfflineModel)
        .add_tool(Add)
        .build()?)
}

async fn last_answer(agent: &Agent) -> Result<String, Box<dyn StdError>> {
    let history = agent.history().await?;
    Ok(history
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Assistant(Some(text), _) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default())
}

async fn print_thread(
    store: &dyn HistoryStore,
    scope: &agent_memory::Scope,
) -> Result<(), Box<dyn StdError>> {
    for stored in store.read(scope, Window::Everything).await? {
        let message = &stored.message;
        let mut shown = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text { text } => shown.push(truncate(text)),
                Part::ToolCall {
                    name, arguments, ..
                } => shown.push(format!("calls {name}({arguments})")),
                Part::ToolResult { content, .. } => shown.push(format!("result {content}")),
                _ => shown.push("(other)".to_owned()),
            }
        }
        println!(
            "  {:>2} {:<9} {}",
            stored.seq,
            message.role.as_str(),
            shown.join(" ")
        );
    }
    Ok(())
}

fn truncate(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(60).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// A stand-in model that needs no network (see the module's documentation).
#[derive(Clone, Debug)]
struct OfflineModel;

#[async_trait]
impl ChatCompletion for OfflineModel {
    async fn complete(
        &self,
        request: &ChatCompletionRequest,
    ) -> Result<ChatCompletionResponse, LanguageModelError> {
        let messages = request.messages();
        let answer = match messages.last() {
            Some(ChatMessage::ToolOutput(_, ToolOutput::Text(sum))) => {
                text(format!("19 + 23 = {sum}."))
            }
            Some(ChatMessage::User(question)) if question.contains("plus") => {
                let call = ToolCall::builder()
                    .id("call_add_1")
                    .name("add")
                    .args(r#"{"a":19,"b":23}"#)
                    .build()
                    .map_err(LanguageModelError::permanent)?;
                ChatCompletionResponse {
                    tool_calls: Some(vec![call]),
                    ..Default::default()
                }
            }
            Some(ChatMessage::User(question)) if question.contains("my name") => {
                let name = messages.iter().find_map(|m| match m {
                    ChatMessage::User(said) => said
                        .strip_prefix("My name is ")
                        .and_then(|rest| rest.split('.').next()),
                    _ => None,
                });
                text(name.map_or("I do not know your name.".to_owned(), |n| {
                    format!("Your name is {n}.")
                }))
            }
            _ => text("I can add two numbers.".to_owned()),
        };
        Ok(answer)
    }
}

fn text(message: String) -> ChatCompletionResponse {
    ChatCompletionResponse {
        message: Some(message),
        ..Default::default()
    }
}

/// Adds `a` and `b`.
#[derive(Clone, Debug)]
struct Add;

#[async_trait]
impl Tool for Add {
    async fn invoke(
        &self,
        _context: &dyn AgentContext,
        call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(call.args().unwrap_or("{}"))?;
        let a = args.get("a").and_then(Value::as_i64).unwrap_or(0);
        let b = args.get("b").and_then(Value::as_i64).unwrap_or(0);
        Ok(ToolOutput::text(a.saturating_add(b).to_string()))
    }

    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("add")
    }

    fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: "add".to_owned(),
            description: "Adds two integers a and b.".to_owned(),
            parameters_schema: None,
        }
    }
}
