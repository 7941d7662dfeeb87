//! Tools an [`Agent`](crate::Agent) runs for its model: the [`Tool`] trait, [`FnTool`] (a tool
//! from a closure), the [`Tools`] registry and the [`ToolCallRecord`] of each call.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::message::{ChatMessage, Part};
use crate::model::ToolDefinition;

/// The longest tool name, in characters (OpenAI's limit).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// A function the model may call: its [`ToolDefinition`] (name, description, JSON Schema of
/// the parameters) and its handler.
///
/// # Behavior
/// - [`definition`](Tool::definition) is constant for a tool object. Its name is 1–64 ASCII
///   letters, digits, `_` or `-` (what every OpenAI-compatible service accepts); [`Tools::new`]
///   refuses other names and two tools sharing a name with
///   [`InvalidInput`](crate::ErrorKind::InvalidInput).
/// - [`call`](Tool::call) is given the call's arguments as the JSON value the model produced
///   (an empty argument text is `{}`). The agent does not check them against the schema: the
///   handler validates what it needs and fails with an error the model can act on.
/// - It returns the result: a JSON string is sent to the model as its text, any other value as
///   its JSON text.
/// - An error does not fail the agent's run: its sentence is sent to the model as the call's
///   result, so the model can retry or explain. An error message therefore never holds a
///   secret.
/// - Calls of one model response run concurrently, and one tool object serves every session
///   and every agent it is given to: per-call data lives in the arguments, never on the object.
#[async_trait]
pub trait Tool: Send + Sync + fmt::Debug + 'static {
    /// The tool's name, description and parameters, as offered to the model.
    fn definition(&self) -> &ToolDefinition;

    /// Runs the tool with the model's `arguments`.
    async fn call(&self, arguments: Value) -> Result<Value>;
}

/// Forwards [`Tool`] through smart pointers, so `Arc<dyn Tool>` and `Box<dyn Tool>` are tools
/// too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here, or a default body would silently
/// replace the pointee's own implementation.
macro_rules! forward_tool {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: Tool + ?Sized> Tool for $pointer<T> {
            fn definition(&self) -> &ToolDefinition {
                (**self).definition()
            }
            async fn call(&self, arguments: Value) -> Result<Value> {
                (**self).call(arguments).await
            }
        }
    )*};
}

forward_tool!(Arc, Box);

/// A [`Tool`] whose handler is an async closure.
///
/// ```
/// use memory_core::{FnTool, Tool};
/// use serde_json::json;
///
/// let add = FnTool::new(
///     "add",
///     "Adds two numbers.",
///     json!({
///         "type": "object",
///         "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
///         "required": ["a", "b"]
///     }),
///     |args| async move {
///         let a = args["a"].as_f64().unwrap_or_default();
///         let b = args["b"].as_f64().unwrap_or_default();
///         Ok(json!(a + b))
///     },
/// );
/// assert_eq!(add.definition().name, "add");
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// assert_eq!(add.call(json!({"a": 2, "b": 3})).await?, json!(5.0));
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
pub struct FnTool<F> {
    definition: ToolDefinition,
    handler: F,
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value>> + Send + 'static,
{
    /// A tool named `name` that the model sees with `description` and the JSON Schema
    /// `parameters`, answered by `handler`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self {
        Self {
            definition: ToolDefinition {
                name: name.into(),
                description: description.into(),
                parameters,
            },
            handler,
        }
    }
}

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.definition.name)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value>> + Send + 'static,
{
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value) -> Result<Value> {
        (self.handler)(arguments).await
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// The tool ran and returned a result.
    Succeeded,
    /// The tool ran and returned an error; its sentence is the result.
    Failed,
    /// The agent has no tool of that name.
    UnknownTool,
    /// The arguments are not JSON; the tool was not run.
    InvalidArguments,
    /// The run reached its iteration limit before the call could run.
    NotRun,
}

impl ToolCallStatus {
    /// Whether the model was sent an error instead of a result.
    pub fn is_error(self) -> bool {
        self != ToolCallStatus::Succeeded
    }
}

/// One tool call of a run: what the model asked and what it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The call id the model gave.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model produced.
    pub arguments: String,
    /// The text sent back to the model as the call's result (an error sentence unless the
    /// status is [`Succeeded`](ToolCallStatus::Succeeded)).
    pub result: String,
    /// How the call ended.
    pub status: ToolCallStatus,
    /// The model call (1-based) whose response made the call.
    pub iteration: usize,
}

impl ToolCallRecord {
    /// The tool message that answers the call.
    pub fn to_message(&self) -> ChatMessage {
        ChatMessage::tool_result(self.id.clone(), self.result.clone())
    }
}

/// The tool calls a message makes, in order: `(id, name, arguments)`.
pub fn tool_calls(message: &ChatMessage) -> impl Iterator<Item = (&str, &str, &str)> {
    message.parts.iter().filter_map(|p| match p {
        Part::ToolCall {
            id,
            name,
            arguments,
        } => Some((id.as_str(), name.as_str(), arguments.as_str())),
        _ => None,
    })
}

/// The tools of an agent, by name.
#[derive(Debug, Clone, Default)]
pub struct Tools {
    tools: Vec<Arc<dyn Tool>>,
}

impl Tools {
    /// The tools, offered to the model in this order.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a name that is not 1–64
    /// ASCII letters, digits, `_` or `-`, or two tools sharing a name.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self> {
        let mut seen = HashSet::new();
        for tool in &tools {
            let name = tool.definition().name.as_str();
            check_name(name)?;
            if !seen.insert(name) {
                return Err(Error::invalid_input(format!(
                    "two tools share the name {name}"
                )));
            }
        }
        Ok(Self { tools })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.definition().name == name)
    }

    /// Every tool's definition, in order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition().clone()).collect()
    }

    /// Runs one call and records how it ended; never fails: an unknown name, arguments that
    /// are not JSON and a handler's error become an error sentence for the model.
    pub async fn call(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        iteration: usize,
    ) -> ToolCallRecord {
        let (result, status) = self.answer(name, arguments).await;
        ToolCallRecord {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            result,
            status,
            iteration,
        }
    }

    /// Runs every tool call of `message` concurrently; the records are in the order of the
    /// calls.
    pub async fn call_all(&self, message: &ChatMessage, iteration: usize) -> Vec<ToolCallRecord> {
        futures::future::join_all(
            tool_calls(message).map(|(id, name, args)| self.call(id, name, args, iteration)),
        )
        .await
    }

    async fn answer(&self, name: &str, arguments: &str) -> (String, ToolCallStatus) {
        let Some(tool) = self.get(name) else {
            let known: Vec<&str> = self
                .tools
                .iter()
                .map(|t| t.definition().name.as_str())
                .collect();
            let known = if known.is_empty() {
                "this agent runs no tools".to_owned()
            } else {
                format!("the tools are {}", known.join(", "))
            };
            return (
                format!("Error: there is no tool named {name:?}; {known}."),
                ToolCallStatus::UnknownTool,
            );
        };
        let arguments = if arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            match serde_json::from_str(arguments) {
                Ok(value) => value,
                Err(error) => {
                    return (
                        format!(
                            "Error: the arguments of the call to {name} are not JSON ({error})."
                        ),
                        ToolCallStatus::InvalidArguments,
                    );
                }
            }
        };
        let span = tracing::debug_span!("tool.call", tool = name);
        match tracing::Instrument::instrument(tool.call(arguments), span).await {
            Ok(Value::String(text)) => (text, ToolCallStatus::Succeeded),
            Ok(value) => (value.to_string(), ToolCallStatus::Succeeded),
            Err(error) => {
                tracing::info!(tool = name, %error, "a tool failed; the model is told");
                (
                    format!("Error: the tool {name} failed: {}", error.message()),
                    ToolCallStatus::Failed,
                )
            }
        }
    }
}

fn check_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "the tool name {name:?} is not 1 to {MAX_TOOL_NAME_LEN} ASCII letters, digits, '_' or '-'"
        )))
    }
}
