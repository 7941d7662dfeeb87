//! Conversion to and from the OpenAI chat-completions message form.
//!
//! Follows the "Chat Completions → Create" request body of OpenAI's API reference
//! (`messages[]`: system, developer, user, assistant and tool messages, with their content parts
//! `text`, `image_url`, `input_audio`, `file` and `refusal`, and `tool_calls[]` of type
//! `function`). Every field of that form maps to a field of [`ChatMessage`] and back; the id,
//! creation time and metadata of a `ChatMessage` have no place in the OpenAI form and are not
//! sent.

use serde::{Deserialize, Serialize};

use super::{ChatMessage, Media, Part, Role};
use crate::error::{Error, Result};

/// A message in OpenAI's chat-completions form.
///
/// ```
/// use memory_core::{ChatMessage, OpenAiMessage};
///
/// let wire: OpenAiMessage = serde_json::from_str(
///     r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
///         "function":{"name":"get_calendar","arguments":"{\"day\":\"2024-05-17\"}"}}]}"#,
/// )?;
/// let msg = ChatMessage::from_openai(wire.clone())?;
/// assert_eq!(msg.tool_call_ids().collect::<Vec<_>>(), ["call_1"]);
/// assert_eq!(msg.to_openai()?, vec![wire]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, an array of content parts, or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<OpenAiContent>,
    /// The participant's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An assistant's refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// An assistant's tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<OpenAiToolCall>>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A message's content: a plain string or an array of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OpenAiContent {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<OpenAiContentPart>),
}

/// One content part of the OpenAI form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OpenAiContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image by URL or data URL.
    ImageUrl {
        /// The image.
        image_url: OpenAiImageUrl,
    },
    /// Base64 audio.
    InputAudio {
        /// The audio.
        input_audio: OpenAiInputAudio,
    },
    /// A file.
    File {
        /// The file.
        file: OpenAiFile,
    },
    /// An assistant's refusal.
    Refusal {
        /// The refusal text.
        refusal: String,
    },
}

/// The `image_url` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiImageUrl {
    /// The URL.
    pub url: String,
    /// `low`, `high` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The `input_audio` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiInputAudio {
    /// Base64 audio.
    pub data: String,
    /// `wav` or `mp3`.
    pub format: String,
}

/// The `file` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiFile {
    /// Base64 file data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// An uploaded file's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// The file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiToolCall {
    /// The call id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: OpenAiFunctionCall,
}

/// The function of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAiFunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

impl ChatMessage {
    /// Builds a message from the OpenAI form, with a new id and the current time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an unknown role, a tool
    /// message without `tool_call_id`, or a part that the role cannot carry.
    pub fn from_openai(wire: OpenAiMessage) -> Result<Self> {
        let role = match wire.role.as_str() {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => {
                return Err(Error::invalid_input(format!(
                    "unknown OpenAI message role {other:?}"
                )));
            }
        };
        let mut parts = Vec::new();
        if role == Role::Tool {
            let call_id = wire.tool_call_id.ok_or_else(|| {
                Error::invalid_input("an OpenAI tool message needs a tool_call_id")
            })?;
            let content = match wire.content {
                None => String::new(),
                Some(OpenAiContent::Text(text)) => text,
                Some(OpenAiContent::Parts(items)) => {
                    let mut texts = Vec::with_capacity(items.len());
                    for item in items {
                        match item {
                            OpenAiContentPart::Text { text } => texts.push(text),
                            _ => {
                                return Err(Error::invalid_input(
                                    "an OpenAI tool message carries only text parts",
                                ));
                            }
                        }
                    }
                    texts.concat()
                }
            };
            parts.push(Part::ToolResult { call_id, content });
        } else {
            match wire.content {
                None => {}
                Some(OpenAiContent::Text(text)) => parts.push(Part::Text { text }),
                Some(OpenAiContent::Parts(items)) => {
                    for item in items {
                        parts.push(part_from_openai(item));
                    }
                }
            }
            if let Some(text) = wire.refusal {
                parts.push(Part::Refusal { text });
            }
            for call in wire.tool_calls.unwrap_or_default() {
                parts.push(Part::ToolCall {
                    id: call.id,
                    name: call.function.name,
                    arguments: call.function.arguments,
                });
            }
        }
        let mut msg = ChatMessage::new(role, parts);
        msg.author_name = wire.name;
        Ok(msg)
    }

    /// Converts to the OpenAI form.
    ///
    /// Usually one message; a tool message holding several results becomes one OpenAI tool
    /// message per result, as that form requires.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a part that the OpenAI
    /// form cannot carry in this role (opaque data, video, a tool call in a user message).
    pub fn to_openai(&self) -> Result<Vec<OpenAiMessage>> {
        let mut base = OpenAiMessage {
            role: self.role.as_str().to_owned(),
            content: None,
            name: self.author_name.clone(),
            refusal: None,
            tool_calls: None,
            tool_call_id: None,
        };
        if self.role == Role::Tool {
            let mut out = Vec::new();
            for part in &self.parts {
                match part {
                    Part::ToolResult { call_id, content } => out.push(OpenAiMessage {
                        content: Some(OpenAiContent::Text(content.clone())),
                        tool_call_id: Some(call_id.clone()),
                        ..base.clone()
                    }),
                    other => return Err(unsupported(self.role, other)),
                }
            }
            return Ok(out);
        }
        let mut content: Vec<OpenAiContentPart> = Vec::new();
        let mut calls = Vec::new();
        for part in &self.parts {
            match part {
                Part::Text { text } => content.push(OpenAiContentPart::Text { text: text.clone() }),
                Part::Refusal { text } if self.role == Role::Assistant => {
                    if base.refusal.is_none() {
                        base.refusal = Some(text.clone());
                    } else {
                        content.push(OpenAiContentPart::Refusal {
                            refusal: text.clone(),
                        });
                    }
                }
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } if self.role == Role::Assistant => calls.push(OpenAiToolCall {
                    id: id.clone(),
                    kind: "function".to_owned(),
                    function: OpenAiFunctionCall {
                        name: name.clone(),
                        arguments: arguments.clone(),
                    },
                }),
                Part::Image(media) if self.role == Role::User => {
                    let url = media
                        .url
                        .clone()
                        .ok_or_else(|| unsupported(self.role, part))?;
                    content.push(OpenAiContentPart::ImageUrl {
                        image_url: OpenAiImageUrl {
                            url,
                            detail: media.detail.clone(),
                        },
                    });
                }
                Part::Audio(media) if self.role == Role::User => {
                    let (Some(data), Some(format)) = (&media.data, &media.media_type) else {
                        return Err(unsupported(self.role, part));
                    };
                    content.push(OpenAiContentPart::InputAudio {
                        input_audio: OpenAiInputAudio {
                            data: data.clone(),
                            format: format.clone(),
                        },
                    });
                }
                Part::Document(media) if self.role == Role::User => {
                    content.push(OpenAiContentPart::File {
                        file: OpenAiFile {
                            file_data: media.data.clone(),
                            file_id: media.file_id.clone(),
                            filename: media.filename.clone(),
                        },
                    });
                }
                other => return Err(unsupported(self.role, other)),
            }
        }
        base.content = match content.as_slice() {
            [] => None,
            [OpenAiContentPart::Text { text }] => Some(OpenAiContent::Text(text.clone())),
            _ => Some(OpenAiContent::Parts(content)),
        };
        if !calls.is_empty() {
            base.tool_calls = Some(calls);
        }
        Ok(vec![base])
    }
}

fn part_from_openai(item: OpenAiContentPart) -> Part {
    match item {
        OpenAiContentPart::Text { text } => Part::Text { text },
        OpenAiContentPart::Refusal { refusal } => Part::Refusal { text: refusal },
        OpenAiContentPart::ImageUrl { image_url } => Part::Image(Media {
            url: Some(image_url.url),
            detail: image_url.detail,
            ..Media::default()
        }),
        OpenAiContentPart::InputAudio { input_audio } => Part::Audio(Media {
            data: Some(input_audio.data),
            media_type: Some(input_audio.format),
            ..Media::default()
        }),
        OpenAiContentPart::File { file } => Part::Document(Media {
            data: file.file_data,
            file_id: file.file_id,
            filename: file.filename,
            ..Media::default()
        }),
    }
}

fn unsupported(role: Role, part: &Part) -> Error {
    let kind = match part {
        Part::Text { .. } => "text",
        Part::ToolCall { .. } => "tool_call",
        Part::ToolResult { .. } => "tool_result",
        Part::Refusal { .. } => "refusal",
        Part::Image(_) => "image",
        Part::Audio(_) => "audio",
        Part::Video(_) => "video",
        Part::Document(_) => "document",
        Part::Data { .. } => "data",
    };
    Error::invalid_input(format!(
        "a {kind} part in a {} message has no OpenAI chat-completions form",
        role.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(json: &str) {
        let wire: OpenAiMessage = serde_json::from_str(json).unwrap();
        let msg = ChatMessage::from_openai(wire).unwrap();
        // Through our own JSON form as well, to prove nothing is lost on the way.
        let msg = ChatMessage::from_json(&msg.to_json().unwrap()).unwrap();
        let back = msg.to_openai().unwrap();
        assert_eq!(back.len(), 1);
        let original: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_value(&back[0]).unwrap(), original, "{json}");
    }

    #[test]
    fn canonical_forms_round_trip() {
        round_trip(r#"{"role":"system","content":"Be brief."}"#);
        round_trip(r#"{"role":"developer","content":"Use tools."}"#);
        round_trip(r#"{"role":"user","content":"hi","name":"dana"}"#);
        round_trip(
            r#"{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"high"}}]}"#,
        );
        round_trip(
            r#"{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"file","file":{"file_id":"file-1","filename":"a.pdf"}}]}"#,
        );
        round_trip(
            r#"{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"not json"}}]}"#,
        );
        round_trip(r#"{"role":"assistant","content":"Sure.","name":"planner"}"#);
        round_trip(r#"{"role":"assistant","refusal":"I can't help with that."}"#);
        round_trip(r#"{"role":"tool","content":"42","tool_call_id":"call_1"}"#);
    }

    #[test]
    fn tool_message_with_two_results_splits() {
        let mut msg = ChatMessage::tool_result("a", "1");
        msg.parts.push(Part::ToolResult {
            call_id: "b".into(),
            content: "2".into(),
        });
        let out = msg.to_openai().unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].tool_call_id.as_deref(), Some("b"));
    }

    #[test]
    fn unknown_role_and_missing_call_id_are_errors() {
        let wire: OpenAiMessage =
            serde_json::from_str(r#"{"role":"wizard","content":"x"}"#).unwrap();
        assert!(ChatMessage::from_openai(wire).is_err());
        let wire: OpenAiMessage = serde_json::from_str(r#"{"role":"tool","content":"x"}"#).unwrap();
        assert!(ChatMessage::from_openai(wire).is_err());
    }

    #[test]
    fn data_parts_have_no_openai_form() {
        let msg = ChatMessage::new(
            Role::User,
            vec![Part::Data {
                media_type: "x".into(),
                data: serde_json::Value::Null,
            }],
        );
        assert!(msg.to_openai().is_err());
    }
}
