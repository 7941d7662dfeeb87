//! An agent that runs tools, offline and without a key.
//!
//! The agent has two tools, a calculator and a clock. Its model is [`OfflineToolCaller`], a
//! clearly named stand-in that needs no network: asked a question, it calls the tools the
//! question needs (both at once when it needs both); given their results, it answers with
//! them. The agent runs the calls (concurrently), sends the results back, and stores each
//! turn, with every call and result, as one batch. A failing tool (a division by zero) is told
//! to the model as the call's result, and the run goes on. At the end the stored thread is
//! printed group by group: each call stays with its results.
//!
//! The thread is stored in an in-memory SQLite database, or in the store `AGENT_MEMORY_URL`
//! names. Run it with `cargo run -p agent-tools`.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_memory::{
    Agent, AgentSession, ChatMessage, ChatModel, ChatRequest, ChatResponse, Error, FnTool, Part,
    Result, Role, Scope, Segmentation, StopReason, Tool, Window, async_trait,
};
use serde_json::{Value, json};

/// What the user asks, turn by turn.
const QUESTIONS: &[&str] = &[
    "What is 6 times 7, and what time is it?",
    "And 12 plus 30?",
    "What is 1 divided by 0?",
];

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

async fn run() -> std::result::Result<(), Box<dyn StdError>> {
    let url = match std::env::var(agent_memory::URL_ENV) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
        _ => "sqlite::memory:".to_owned(),
    };
    let stores = agent_memory::open(&url).await?;
    println!("store: {}", agent_memory::redact_url(&url));
    println!("model: OfflineToolCaller (a stand-in that calls the tools a question needs)\n");

    let agent = Agent::builder(
        "helper",
        Arc::new(OfflineToolCaller),
        stores.history.clone(),
    )
    .instructions("Answer with the tools: the calculator for arithmetic, the clock for the time.")
    .tool(calculator())
    .tool(clock())
    .max_iterations(4)
    .build()?;
    let scope = Scope::session(format!(
        "agent-tools-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    ))?;
    let mut session = AgentSession::new(scope.clone());

    for question in QUESTIONS {
        println!("user: {question}");
        let run = agent.run(*question, &mut session).await?;
        for call in &run.tool_calls {
            println!(
                "  tool {}({}) -> {} [{:?}, model call {}]",
                call.name, call.arguments, call.result, call.status, call.iteration
            );
        }
        let stop = match run.stop_reason {
            StopReason::Answered => "answered",
            StopReason::MaxIterations => "stopped at the iteration limit",
            _ => "stopped",
        };
        println!(
            "helper: {}\n  ({} model calls, {stop})\n",
            run.text(),
            run.iterations
        );
    }

    // The stored thread, group by group (the grouping every reducer cuts along).
    let stored = stores.history.read(&scope, Window::All).await?;
    let messages: Vec<ChatMessage> = stored.iter().map(|m| (*m.message).clone()).collect();
    println!("stored thread ({} messages):", stored.len());
    for (g, group) in Segmentation::of(&messages).groups.iter().enumerate() {
        println!("  group {}", g.saturating_add(1));
        for m in stored.get(group.clone()).unwrap_or_default() {
            println!("    {:>2} {}", m.seq, describe(&m.message));
        }
    }
    Ok(())
}

/// One line for a stored message: its role and parts.
fn describe(message: &ChatMessage) -> String {
    let parts: Vec<String> = message
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => format!("{text:?}"),
            Part::ToolCall {
                id,
                name,
                arguments,
            } => format!("call {id}: {name}({arguments})"),
            Part::ToolResult { call_id, content } => format!("result of {call_id}: {content}"),
            other => format!("{other:?}"),
        })
        .collect();
    format!("{:<9} {}", message.role.as_str(), parts.join(", "))
}

/// The calculator tool: `{"a": 6, "op": "times", "b": 7}` gives `42`.
fn calculator() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "calculator",
        "Computes a op b for integers a and b; op is plus, minus, times or divided_by.",
        json!({
            "type": "object",
            "properties": {
                "a": { "type": "integer" },
                "op": { "type": "string", "enum": ["plus", "minus", "times", "divided_by"] },
                "b": { "type": "integer" }
            },
            "required": ["a", "op", "b"]
        }),
        |args: Value| async move { calculate(&args) },
    ))
}

fn calculate(args: &Value) -> Result<Value> {
    let (Some(a), Some(op), Some(b)) =
        (args["a"].as_i64(), args["op"].as_str(), args["b"].as_i64())
    else {
        return Err(Error::invalid_input(
            "the calculator needs integers a and b and an op",
        ));
    };
    let value = match op {
        "plus" => a.checked_add(b),
        "minus" => a.checked_sub(b),
        "times" => a.checked_mul(b),
        "divided_by" if b == 0 => {
            return Err(Error::invalid_input("cannot divide by zero"));
        }
        "divided_by" => a.checked_div(b),
        other => {
            return Err(Error::invalid_input(format!(
                "the calculator knows plus, minus, times and divided_by, not {other}"
            )));
        }
    };
    value
        .map(|v| json!(v))
        .ok_or_else(|| Error::invalid_input("the result does not fit in 64 bits"))
}

/// The clock tool: the current UTC time of day.
fn clock() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "clock",
        "The current time of day, UTC.",
        json!({ "type": "object", "properties": {} }),
        |_args: Value| async {
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let day = secs % 86_400;
            Ok(json!(format!(
                "{:02}:{:02}:{:02} UTC",
                day / 3600,
                day % 3600 / 60,
                day % 60
            )))
        },
    ))
}

/// A stand-in model, offline: on a question it calls the tools the question needs (the
/// calculator when it names two numbers and an operation, the clock when it asks the time);
/// on tool results it answers with them.
#[derive(Debug)]
struct OfflineToolCaller;

#[async_trait]
impl ChatModel for OfflineToolCaller {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let Some(last) = request.messages.last() else {
            return Err(Error::invalid_input("the request has no message"));
        };
        let message = if last.role == Role::Tool {
            // Answer with the results that follow the last call.
            let results: Vec<String> = request
                .messages
                .iter()
                .rev()
                .take_while(|m| m.role == Role::Tool)
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| match p {
                    Part::ToolResult { content, .. } => Some(content.clone()),
                    _ => None,
                })
                .collect();
            let results: Vec<String> = results.into_iter().rev().collect();
            ChatMessage::assistant(format!("The tools say: {}.", results.join("; ")))
        } else {
            let question = last.text();
            let mut calls = Vec::new();
            if let Some(args) = arithmetic(&question) {
                calls.push(Part::ToolCall {
                    id: format!("call-{}", request.messages.len()),
                    name: "calculator".into(),
                    arguments: args.to_string(),
                });
            }
            if question.contains("time") {
                calls.push(Part::ToolCall {
                    id: format!("call-{}-clock", request.messages.len()),
                    name: "clock".into(),
                    arguments: "{}".into(),
                });
            }
            if calls.is_empty() {
                ChatMessage::assistant("I can only compute and tell the time.")
            } else {
                ChatMessage::new(Role::Assistant, calls)
            }
        };
        Ok(ChatResponse {
            messages: vec![message],
            ..Default::default()
        })
    }
}

/// `{"a", "op", "b"}` for a question naming two integers and an operation.
fn arithmetic(question: &str) -> Option<Value> {
    let numbers: Vec<i64> = question
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let op = [
        ("times", "times"),
        ("plus", "plus"),
        ("minus", "minus"),
        ("divided by", "divided_by"),
    ]
    .iter()
    .find(|(word, _)| question.contains(word))
    .map(|(_, op)| *op)?;
    match numbers.as_slice() {
        [a, b, ..] => Some(json!({ "a": a, "op": op, "b": b })),
        _ => None,
    }
}
