//! Conversions between swiftide's [`ChatMessage`](SwiftMessage) and ours
//! ([`memory_core::ChatMessage`]).
//!
//! Every swiftide message converts to ours and back unchanged: what our message has no field
//! for (a summary, an assistant message whose tool calls are `Some(vec![])`, a call without
//! arguments, a tool output's kind and value, the called tool's name and arguments) is kept
//! under the [`SWIFTIDE_METADATA_KEY`] metadata entry. Our messages that swiftide cannot
//! express (media, refusals, data parts, several text parts, the developer role, a tool
//! message without exactly one result) are refused with
//! [`Unsupported`](memory_core::ErrorKind::Unsupported), never approximated. swiftide has no
//! place for a message's id, author name, creation time or other metadata: reading a message
//! into swiftide's form leaves them out.

use std::collections::HashMap;

use memory_core::{ChatMessage, Error, Part, Result, Role};
use serde_json::{Map, Value};
use swiftide_core::chat_completion::{
    ChatMessage as SwiftMessage, ToolCall as SwiftToolCall, ToolOutput,
};

/// The metadata entry of our message that keeps what only swiftide's form has (an object).
pub const SWIFTIDE_METADATA_KEY: &str = "swiftide";

const SUMMARY: &str = "summary";
const EMPTY_TOOL_CALLS: &str = "empty_tool_calls";
const CALLS_WITHOUT_ARGS: &str = "calls_without_args";
const TOOL_NAME: &str = "tool_name";
const TOOL_ARGS: &str = "tool_args";
const OUTPUT: &str = "output";
const VALUE: &str = "value";

/// Converts a swiftide message to ours, with a new id and the current time (the id is replaced
/// when the message is stored: see [`SwiftideHistory`](crate::SwiftideHistory)).
///
/// Lossless: [`to_swiftide`] gives the same message back.
pub fn from_swiftide(message: &SwiftMessage) -> ChatMessage {
    let mut extra = Map::new();
    let out = match message {
        SwiftMessage::System(text) => ChatMessage::system(text.clone()),
        SwiftMessage::User(text) => ChatMessage::user(text.clone()),
        SwiftMessage::Summary(text) => {
            extra.insert(SUMMARY.to_owned(), Value::Bool(true));
            ChatMessage::system(text.clone())
        }
        SwiftMessage::Assistant(text, calls) => {
            let mut parts: Vec<Part> = text.iter().map(Part::text).collect();
            match calls {
                Some(calls) if calls.is_empty() => {
                    extra.insert(EMPTY_TOOL_CALLS.to_owned(), Value::Bool(true));
                }
                Some(calls) => {
                    let without_args: Vec<Value> = calls
                        .iter()
                        .enumerate()
                        .filter(|(_, call)| call.args().is_none())
                        .map(|(i, _)| Value::from(i))
                        .collect();
                    if !without_args.is_empty() {
                        extra.insert(CALLS_WITHOUT_ARGS.to_owned(), Value::Array(without_args));
                    }
                    parts.extend(calls.iter().map(|call| Part::ToolCall {
                        id: call.id().to_owned(),
                        name: call.name().to_owned(),
                        arguments: call.args().unwrap_or_default().to_owned(),
                    }));
                }
                None => {}
            }
            ChatMessage::new(Role::Assistant, parts)
        }
        SwiftMessage::ToolOutput(call, output) => {
            extra.insert(TOOL_NAME.to_owned(), Value::from(call.name()));
            if let Some(args) = call.args() {
                extra.insert(TOOL_ARGS.to_owned(), Value::from(args));
            }
            let (kind, content, value) = output_parts(output);
            extra.insert(OUTPUT.to_owned(), Value::from(kind));
            if let Some(value) = value {
                extra.insert(VALUE.to_owned(), value);
            }
            ChatMessage::tool_result(call.id(), content)
        }
    };
    if extra.is_empty() {
        out
    } else {
        out.with_metadata(SWIFTIDE_METADATA_KEY, Value::Object(extra))
    }
}

/// The kind, the result text a model is shown, and the value of a tool output.
fn output_parts(output: &ToolOutput) -> (&'static str, String, Option<Value>) {
    match output {
        ToolOutput::Text(text) => ("text", text.clone(), None),
        ToolOutput::Fail(text) => ("fail", text.clone(), None),
        ToolOutput::FeedbackRequired(value) => (
            "feedback_required",
            value_text(value.as_ref()),
            value.clone(),
        ),
        ToolOutput::Stop(value) => ("stop", value_text(value.as_ref()), value.clone()),
        ToolOutput::AgentFailed(value) => {
            ("agent_failed", value_text(value.as_ref()), value.clone())
        }
        // `ToolOutput` is not exhaustive in later swiftide versions; keep its text.
        #[allow(unreachable_patterns)]
        other => ("text", other.to_string(), None),
    }
}

fn value_text(value: Option<&Value>) -> String {
    value.map(Value::to_string).unwrap_or_default()
}

/// Converts our message to swiftide's form.
///
/// A tool result takes its tool's name and arguments from the message's
/// [`SWIFTIDE_METADATA_KEY`] entry (every message [`from_swiftide`] made has it); use
/// [`to_swiftide_all`] for a thread written by other code, where they come from the call.
///
/// # Errors
/// [`Unsupported`](memory_core::ErrorKind::Unsupported) for what swiftide cannot express (see
/// the module's documentation), [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a
/// malformed [`SWIFTIDE_METADATA_KEY`] entry.
pub fn to_swiftide(message: &ChatMessage) -> Result<SwiftMessage> {
    to_swiftide_with(message, &HashMap::new())
}

/// Converts a list of our messages (a thread, oldest first) to swiftide's form; a tool result
/// without the [`SWIFTIDE_METADATA_KEY`] entry takes its tool's name and arguments from the
/// earlier message of the list that made the call.
///
/// # Errors
/// As [`to_swiftide`], for the first message that cannot be converted; also
/// [`Unsupported`](memory_core::ErrorKind::Unsupported) for a tool result whose call is in
/// neither its metadata nor an earlier message.
pub fn to_swiftide_all(messages: &[impl AsRef<ChatMessage>]) -> Result<Vec<SwiftMessage>> {
    let mut calls: HashMap<String, (String, Option<String>)> = HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let converted = to_swiftide_with(message.as_ref(), &calls)?;
        if let SwiftMessage::Assistant(_, Some(made)) = &converted {
            for call in made {
                calls.insert(
                    call.id().to_owned(),
                    (call.name().to_owned(), call.args().map(str::to_owned)),
                );
            }
        }
        out.push(converted);
    }
    Ok(out)
}

fn to_swiftide_with(
    message: &ChatMessage,
    calls: &HashMap<String, (String, Option<String>)>,
) -> Result<SwiftMessage> {
    let extra = match message.metadata.get(SWIFTIDE_METADATA_KEY) {
        None => Map::new(),
        Some(Value::Object(extra)) => extra.clone(),
        Some(_) => {
            return Err(Error::invalid_input(format!(
                "The message's \"{SWIFTIDE_METADATA_KEY}\" metadata is not an object."
            )));
        }
    };
    match message.role {
        Role::System => {
            let text = single_text(message)?;
            if flag(&extra, SUMMARY)? {
                Ok(SwiftMessage::Summary(text))
            } else {
                Ok(SwiftMessage::System(text))
            }
        }
        Role::User => Ok(SwiftMessage::User(single_text(message)?)),
        Role::Assistant => assistant(message, &extra),
        Role::Tool => tool_output(message, &extra, calls),
        Role::Developer => Err(Error::unsupported(
            "swiftide has no developer role; a developer message cannot be given to it.",
        )),
        #[allow(unreachable_patterns)]
        other => Err(Error::unsupported(format!(
            "swiftide has no {} role.",
            other.as_str()
        ))),
    }
}

fn flag(extra: &Map<String, Value>, key: &str) -> Result<bool> {
    match extra.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::invalid_input(format!(
            "The message's \"{SWIFTIDE_METADATA_KEY}.{key}\" metadata is not a boolean."
        ))),
    }
}

fn describe(part: &Part) -> &'static str {
    match part {
        Part::Text { .. } => "a text part",
        Part::ToolCall { .. } => "a tool call",
        Part::ToolResult { .. } => "a tool result",
        Part::Refusal { .. } => "a refusal",
        Part::Image(_) => "an image",
        Part::Audio(_) => "an audio clip",
        Part::Video(_) => "a video clip",
        Part::Document(_) => "a document",
        Part::Data { .. } => "a data part",
        #[allow(unreachable_patterns)]
        _ => "a part",
    }
}

/// The one text part of a system, user or summary message.
fn single_text(message: &ChatMessage) -> Result<String> {
    match message.parts.as_slice() {
        [Part::Text { text }] => Ok(text.clone()),
        [] => Err(Error::unsupported(format!(
            "A {} message without text cannot be given to swiftide.",
            message.role.as_str()
        ))),
        [_] | [_, ..] => {
            let other = message
                .parts
                .iter()
                .find(|p| !matches!(p, Part::Text { .. }))
                .map_or("several text parts", describe);
            Err(Error::unsupported(format!(
                "A {} message with {other} cannot be given to swiftide: it takes one text.",
                message.role.as_str()
            )))
        }
    }
}

fn assistant(message: &ChatMessage, extra: &Map<String, Value>) -> Result<SwiftMessage> {
    let without_args: Vec<u64> = match extra.get(CALLS_WITHOUT_ARGS) {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_u64().ok_or_else(|| {
                    Error::invalid_input(format!(
                        "The message's \"{SWIFTIDE_METADATA_KEY}.{CALLS_WITHOUT_ARGS}\" metadata \
                         is not a list of indexes."
                    ))
                })
            })
            .collect::<Result<_>>()?,
        Some(_) => {
            return Err(Error::invalid_input(format!(
                "The message's \"{SWIFTIDE_METADATA_KEY}.{CALLS_WITHOUT_ARGS}\" metadata is not \
                 a list."
            )));
        }
    };
    let mut text: Option<String> = None;
    let mut calls = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text { text: t } if text.is_none() => text = Some(t.clone()),
            Part::Text { .. } => {
                return Err(Error::unsupported(
                    "An assistant message with several text parts cannot be given to swiftide: \
                     it takes one text.",
                ));
            }
            Part::ToolCall {
                id,
                name,
                arguments,
            } => {
                let index = u64::try_from(calls.len()).unwrap_or(u64::MAX);
                let args = (!without_args.contains(&index)).then(|| arguments.clone());
                calls.push(tool_call(id, name, args)?);
            }
            other => {
                return Err(Error::unsupported(format!(
                    "An assistant message with {} cannot be given to swiftide.",
                    describe(other)
                )));
            }
        }
    }
    let calls = if !calls.is_empty() {
        Some(calls)
    } else if flag(extra, EMPTY_TOOL_CALLS)? {
        Some(Vec::new())
    } else {
        None
    };
    Ok(SwiftMessage::Assistant(text, calls))
}

fn tool_call(id: &str, name: &str, args: Option<String>) -> Result<SwiftToolCall> {
    SwiftToolCall::builder()
        .id(id)
        .name(name)
        .maybe_args(args)
        .build()
        .map_err(|e| Error::invalid_input(format!("The tool call cannot be built: {e}.")))
}

fn tool_output(
    message: &ChatMessage,
    extra: &Map<String, Value>,
    calls: &HashMap<String, (String, Option<String>)>,
) -> Result<SwiftMessage> {
    let (call_id, content) = match message.parts.as_slice() {
        [Part::ToolResult { call_id, content }] => (call_id, content),
        _ => {
            return Err(Error::unsupported(
                "A tool message cannot be given to swiftide unless it holds exactly one tool \
                 result.",
            ));
        }
    };
    let (name, args) = match extra.get(TOOL_NAME) {
        Some(Value::String(name)) => {
            let args = match extra.get(TOOL_ARGS) {
                None => None,
                Some(Value::String(args)) => Some(args.clone()),
                Some(_) => {
                    return Err(Error::invalid_input(format!(
                        "The message's \"{SWIFTIDE_METADATA_KEY}.{TOOL_ARGS}\" metadata is not \
                         a string."
                    )));
                }
            };
            (name.clone(), args)
        }
        Some(_) => {
            return Err(Error::invalid_input(format!(
                "The message's \"{SWIFTIDE_METADATA_KEY}.{TOOL_NAME}\" metadata is not a string."
            )));
        }
        None => calls.get(call_id).cloned().ok_or_else(|| {
            Error::unsupported(
                "A tool result whose call is not in the same list cannot be given to swiftide: \
                 it needs the tool's name.",
            )
        })?,
    };
    let value = extra.get(VALUE).cloned();
    let output = match extra.get(OUTPUT).and_then(Value::as_str).unwrap_or("text") {
        "text" => ToolOutput::Text(content.clone()),
        "fail" => ToolOutput::Fail(content.clone()),
        "feedback_required" => ToolOutput::FeedbackRequired(value),
        "stop" => ToolOutput::Stop(value),
        "agent_failed" => ToolOutput::AgentFailed(value),
        _ => {
            return Err(Error::invalid_input(format!(
                "The message's \"{SWIFTIDE_METADATA_KEY}.{OUTPUT}\" metadata names no swiftide \
                 tool output."
            )));
        }
    };
    Ok(SwiftMessage::ToolOutput(
        tool_call(call_id, &name, args)?,
        output,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[test]
    fn what_swiftide_cannot_express_is_an_unsupported_error() {
        let refusal = ChatMessage::new(Role::Assistant, vec![Part::Refusal { text: "no".into() }]);
        let two_texts = ChatMessage::new(Role::User, vec![Part::text("a"), Part::text("b")]);
        let developer = ChatMessage::text_message(Role::Developer, "be brief");
        let orphan = ChatMessage::tool_result("call-1", "42");
        for message in [refusal, two_texts, developer, orphan] {
            let err = to_swiftide(&message).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        }
    }

    #[test]
    fn a_foreign_tool_result_takes_its_call_from_the_list() {
        let call = ChatMessage::tool_call("call-1", "add", r#"{"a":1}"#);
        let result = ChatMessage::tool_result("call-1", "2");
        let out = to_swiftide_all(&[call, result]).unwrap();
        let SwiftMessage::ToolOutput(call, ToolOutput::Text(text)) = &out[1] else {
            panic!("expected a tool output, got {:?}", out[1]);
        };
        assert_eq!(
            (call.name(), call.args(), text.as_str()),
            ("add", Some(r#"{"a":1}"#), "2")
        );
    }

    #[test]
    fn malformed_metadata_is_invalid_input() {
        let message = ChatMessage::system("x").with_metadata(SWIFTIDE_METADATA_KEY, Value::from(3));
        assert_eq!(
            to_swiftide(&message).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
}
