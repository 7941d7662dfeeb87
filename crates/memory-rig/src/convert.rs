//! Lossless conversion between rig's [`Message`] and agent-memory's [`ChatMessage`].
//!
//! Each rig block becomes the [`Part`] that means the same thing (text, tool call, tool result,
//! image, audio, video, document), so every other reader of the thread (an agent-memory
//! [`Agent`](memory_core::Agent), a reducer's grouping of tool calls with their results, the
//! token counts, the CLI) sees an ordinary conversation. What a part cannot hold is kept in the
//! message's metadata under [`RIG_METADATA_KEY`], and only when it is needed:
//!
//! - a block that its part does not rebuild exactly (a rig-issued call id, tool arguments
//!   that are not an object, a tool result with JSON, image or several items, an error
//!   result, a provider's native item, citations, media held as raw bytes or text) is kept
//!   whole, as rig's own JSON of the block;
//! - the executed tool name of each tool result (rig requires it; our result part names only
//!   the call), by call id;
//! - an assistant turn's `origin` and `stop`.
//!
//! Reasoning and provider-only (opaque) blocks have no part of their own: they are
//! [`Part::Data`] of media type [`RIG_BLOCK_MEDIA_TYPE`] holding rig's JSON of the block.
//!
//! So rig → [`ChatMessage`] → rig is the identity for every message rig can express. The other
//! way, a thread written by another program may hold what rig has no place for; converting it
//! is an [`ErrorKind::Unsupported`](memory_core::ErrorKind::Unsupported) error naming the part,
//! never a panic and never a silent drop:
//!
//! - a system or developer message with anything but text;
//! - audio, video or documents in an assistant message, tool calls in a user message;
//! - [`Part::Data`] other than rig's own blocks;
//! - a tool result whose call is in no message converted with it and whose tool name was not
//!   recorded (rig needs the name).
//!
//! A [`Part::Refusal`] becomes assistant text (rig has no refusal block), and a developer
//! message a system message.

use std::collections::HashMap;

use memory_core::{ChatMessage, Error, Media, Part, Result, Role};
use rig_core::completion::message::{
    AssistantContent, AssistantMessage, Audio, AudioMediaType, CallId, Document, DocumentMediaType,
    DocumentSourceKind, Image, ImageDetail, ImageMediaType, Message, MimeType, Text, ToolCall,
    ToolFunction, ToolName, ToolResult, ToolResultContent, UserContent, Video, VideoMediaType,
};
use serde_json::{Map, Value};

/// The metadata key under which a converted message keeps what its parts cannot hold.
pub const RIG_METADATA_KEY: &str = "rig";

/// The media type of a [`Part::Data`] holding one rig assistant block with no part of its own
/// (reasoning, a provider-only item), as rig's JSON of the block.
pub const RIG_BLOCK_MEDIA_TYPE: &str = "application/vnd.rig.assistant-content+json";

const BLOCKS: &str = "blocks";
const TOOL_NAMES: &str = "tool_names";
const ORIGIN: &str = "origin";
const STOP: &str = "stop";

/// Converts one rig message into a [`ChatMessage`] with a new id and the current time.
///
/// A user message that holds only tool results becomes a [`Role::Tool`] message; any other
/// user message a [`Role::User`] message. Fails only when rig's JSON of a block cannot be
/// written (a `Serialization` error).
pub fn to_chat_message(message: &Message) -> Result<ChatMessage> {
    let mut extras = Extras::default();
    let (role, parts) = match message {
        Message::System { content } => (Role::System, vec![Part::text(content.clone())]),
        Message::User { content } => {
            let only_results = !content.is_empty()
                && content
                    .iter()
                    .all(|c| matches!(c, UserContent::ToolResult(_)));
            let mut parts = Vec::with_capacity(content.len());
            for block in content {
                let part = user_part(block)?;
                if let UserContent::ToolResult(result) = block {
                    extras.tool_names.insert(
                        result.call.wire().into_owned(),
                        Value::String(result.name.as_str().to_owned()),
                    );
                }
                let names = &extras.tool_names;
                let rebuilt = user_block(&part, &|id| name_in(names, id));
                extras.push_block(block, rebuilt.ok().as_ref())?;
                parts.push(part);
            }
            let role = if only_results { Role::Tool } else { Role::User };
            (role, parts)
        }
        Message::Assistant(turn) => {
            let mut parts = Vec::with_capacity(turn.content.len());
            for block in &turn.content {
                let part = assistant_part(block)?;
                let rebuilt = assistant_block(&part);
                extras.push_block(block, rebuilt.ok().as_ref())?;
                parts.push(part);
            }
            if let Some(origin) = &turn.origin {
                extras.origin = Some(serde_json::to_value(origin)?);
            }
            if let Some(stop) = &turn.stop {
                extras.stop = Some(serde_json::to_value(stop)?);
            }
            (Role::Assistant, parts)
        }
    };
    let mut chat = ChatMessage::new(role, parts);
    if let Some(value) = extras.into_value() {
        chat.metadata.insert(RIG_METADATA_KEY.to_owned(), value);
    }
    Ok(chat)
}

/// Converts rig messages into [`ChatMessage`]s (see [`to_chat_message`]).
pub fn to_chat_messages(messages: &[Message]) -> Result<Vec<ChatMessage>> {
    messages.iter().map(to_chat_message).collect()
}

/// Converts a thread's messages, oldest first, into rig messages.
///
/// A tool result's tool name is the one recorded with it, else the name of the call with its
/// id in `messages`. Errors are `Unsupported` for content rig has no place for (see the module
/// documentation) and `Serialization` for a damaged [`RIG_METADATA_KEY`] entry.
pub fn to_rig_messages(messages: &[ChatMessage]) -> Result<Vec<Message>> {
    let mut calls: HashMap<&str, &str> = HashMap::new();
    for message in messages {
        for part in &message.parts {
            if let Part::ToolCall { id, name, .. } = part {
                calls.insert(id.as_str(), name.as_str());
            }
        }
    }
    messages
        .iter()
        .map(|m| to_rig_message_with(m, &|id| calls.get(id).map(|n| (*n).to_owned())))
        .collect()
}

/// Converts one [`ChatMessage`] into a rig message; a tool result's name must have been
/// recorded with it (as [`to_chat_message`] does). See [`to_rig_messages`].
pub fn to_rig_message(message: &ChatMessage) -> Result<Message> {
    to_rig_message_with(message, &|_| None)
}

fn to_rig_message_with(
    message: &ChatMessage,
    call_name: &dyn Fn(&str) -> Option<String>,
) -> Result<Message> {
    let extras = Extras::read(message)?;
    match message.role {
        Role::System | Role::Developer => {
            let mut texts = Vec::with_capacity(message.parts.len());
            for part in &message.parts {
                match part {
                    Part::Text { text } => texts.push(text.as_str()),
                    other => return Err(unsupported(other, "a system message")),
                }
            }
            Ok(Message::System {
                content: texts.join("\n"),
            })
        }
        Role::User | Role::Tool => {
            let names = |id: &str| name_in(&extras.tool_names, id).or_else(|| call_name(id));
            let mut content = Vec::with_capacity(message.parts.len());
            for (i, part) in message.parts.iter().enumerate() {
                content.push(match extras.block(i) {
                    Some(kept) => serde_json::from_value(kept.clone())?,
                    None => user_block(part, &names)?,
                });
            }
            Ok(Message::User { content })
        }
        Role::Assistant => {
            let mut content = Vec::with_capacity(message.parts.len());
            for (i, part) in message.parts.iter().enumerate() {
                content.push(match extras.block(i) {
                    Some(kept) => serde_json::from_value(kept.clone())?,
                    None => assistant_block(part)?,
                });
            }
            let origin = extras.origin.map(serde_json::from_value).transpose()?;
            let stop = extras.stop.map(serde_json::from_value).transpose()?;
            Ok(Message::Assistant(
                AssistantMessage::new(content)
                    .with_origin(origin)
                    .with_stop(stop),
            ))
        }
    }
}

/// What a message's parts cannot hold.
#[derive(Default)]
struct Extras {
    /// Per part: rig's JSON of the block when the part does not rebuild it, else null.
    blocks: Vec<Value>,
    tool_names: Map<String, Value>,
    origin: Option<Value>,
    stop: Option<Value>,
}

impl Extras {
    /// Records `block` whole unless `rebuilt` (what its part converts back to) equals it.
    fn push_block<B: serde::Serialize + PartialEq>(
        &mut self,
        block: &B,
        rebuilt: Option<&B>,
    ) -> Result<()> {
        let kept = if rebuilt == Some(block) {
            Value::Null
        } else {
            serde_json::to_value(block)?
        };
        self.blocks.push(kept);
        Ok(())
    }

    fn block(&self, index: usize) -> Option<&Value> {
        self.blocks.get(index).filter(|v| !v.is_null())
    }

    fn into_value(self) -> Option<Value> {
        let mut out = Map::new();
        if self.blocks.iter().any(|b| !b.is_null()) {
            out.insert(BLOCKS.to_owned(), Value::Array(self.blocks));
        }
        if !self.tool_names.is_empty() {
            out.insert(TOOL_NAMES.to_owned(), Value::Object(self.tool_names));
        }
        if let Some(origin) = self.origin {
            out.insert(ORIGIN.to_owned(), origin);
        }
        if let Some(stop) = self.stop {
            out.insert(STOP.to_owned(), stop);
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }

    fn read(message: &ChatMessage) -> Result<Self> {
        let Some(value) = message.metadata.get(RIG_METADATA_KEY) else {
            return Ok(Self::default());
        };
        let damaged = || {
            Error::serialization(format!(
                "the `{RIG_METADATA_KEY}` metadata of message {} is not what this adapter writes",
                message.id
            ))
        };
        let Value::Object(map) = value else {
            return Err(damaged());
        };
        let blocks = match map.get(BLOCKS) {
            None => Vec::new(),
            Some(Value::Array(blocks)) if blocks.len() == message.parts.len() => blocks.clone(),
            Some(_) => return Err(damaged()),
        };
        let tool_names = match map.get(TOOL_NAMES) {
            None => Map::new(),
            Some(Value::Object(names)) => names.clone(),
            Some(_) => return Err(damaged()),
        };
        Ok(Self {
            blocks,
            tool_names,
            origin: map.get(ORIGIN).cloned(),
            stop: map.get(STOP).cloned(),
        })
    }
}

fn name_in(names: &Map<String, Value>, call_id: &str) -> Option<String> {
    names
        .get(call_id)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn unsupported(part: &Part, place: &str) -> Error {
    let kind = match part {
        Part::Text { .. } => "text",
        Part::ToolCall { .. } => "a tool call",
        Part::ToolResult { .. } => "a tool result",
        Part::Refusal { .. } => "a refusal",
        Part::Image(_) => "an image",
        Part::Audio(_) => "audio",
        Part::Video(_) => "a video",
        Part::Document(_) => "a document",
        Part::Data { .. } => "application data",
        _ => "a part this adapter does not know",
    };
    Error::unsupported(format!("rig cannot hold {kind} in {place}"))
}

fn user_part(block: &UserContent) -> Result<Part> {
    Ok(match block {
        UserContent::Text(text) => Part::text(text.text.clone()),
        UserContent::ToolResult(result) => Part::ToolResult {
            call_id: result.call.wire().into_owned(),
            content: result_text(&result.content),
        },
        UserContent::Image(image) => Part::Image(image_media(image)),
        UserContent::Audio(audio) => Part::Audio(media(
            &audio.data,
            audio.media_type.as_ref().map(MimeType::to_mime_type),
            None,
        )),
        UserContent::Video(video) => Part::Video(media(
            &video.data,
            video.media_type.as_ref().map(MimeType::to_mime_type),
            None,
        )),
        UserContent::Document(document) => Part::Document(media(
            &document.data,
            document.media_type.as_ref().map(MimeType::to_mime_type),
            None,
        )),
    })
}

fn user_block(part: &Part, names: &dyn Fn(&str) -> Option<String>) -> Result<UserContent> {
    Ok(match part {
        Part::Text { text } | Part::Refusal { text } => UserContent::Text(Text::new(text.clone())),
        Part::ToolResult { call_id, content } => {
            let name = names(call_id).ok_or_else(|| {
                Error::unsupported(format!(
                    "the tool result for call `{call_id}` names no tool, and no call with that \
                     id is in the conversation; rig needs the tool's name"
                ))
            })?;
            UserContent::ToolResult(ToolResult {
                call: CallId::from_wire(call_id.clone()),
                name: tool_name(&name)?,
                content: vec![ToolResultContent::Text(Text::new(content.clone()))],
                is_error: false,
            })
        }
        Part::Image(m) => UserContent::Image(media_image(m)),
        Part::Audio(m) => UserContent::Audio(Audio {
            data: source(m),
            media_type: m
                .media_type
                .as_deref()
                .and_then(AudioMediaType::from_mime_type),
        }),
        Part::Video(m) => UserContent::Video(Video {
            data: source(m),
            media_type: m
                .media_type
                .as_deref()
                .and_then(VideoMediaType::from_mime_type),
            additional_params: None,
        }),
        Part::Document(m) => UserContent::Document(Document {
            data: source(m),
            media_type: m
                .media_type
                .as_deref()
                .and_then(DocumentMediaType::from_mime_type),
            additional_params: None,
        }),
        other => return Err(unsupported(other, "a user message")),
    })
}

fn assistant_part(block: &AssistantContent) -> Result<Part> {
    Ok(match block {
        AssistantContent::Text(text) => Part::text(text.text.clone()),
        AssistantContent::ToolCall(call) => Part::ToolCall {
            id: call.id.wire().into_owned(),
            name: call.function.name.as_str().to_owned(),
            arguments: match &call.function.invalid_arguments {
                Some(raw) => raw.clone(),
                None => serde_json::to_string(&call.function.arguments)?,
            },
        },
        AssistantContent::Image(image) => Part::Image(image_media(image)),
        // Reasoning, provider-only items and any block a later rig adds.
        other => Part::Data {
            media_type: RIG_BLOCK_MEDIA_TYPE.to_owned(),
            data: serde_json::to_value(other)?,
        },
    })
}

fn assistant_block(part: &Part) -> Result<AssistantContent> {
    Ok(match part {
        Part::Text { text } | Part::Refusal { text } => {
            AssistantContent::Text(Text::new(text.clone()))
        }
        Part::ToolCall {
            id,
            name,
            arguments,
        } => AssistantContent::ToolCall(ToolCall::new(
            CallId::from_wire(id.clone()),
            ToolFunction::parse(tool_name(name)?, arguments),
        )),
        Part::Image(m) => AssistantContent::Image(media_image(m)),
        Part::Data { media_type, data } if media_type == RIG_BLOCK_MEDIA_TYPE => {
            serde_json::from_value(data.clone())?
        }
        other => return Err(unsupported(other, "an assistant message")),
    })
}

fn tool_name(name: &str) -> Result<ToolName> {
    ToolName::new(name)
        .map_err(|_| Error::unsupported("rig cannot hold a tool call whose tool name is empty"))
}

/// The text an agent-memory reader sees of a tool result: its text items, and the JSON text
/// of its JSON items, one per line (images have no text).
fn result_text(content: &[ToolResultContent]) -> String {
    let texts: Vec<String> = content
        .iter()
        .filter_map(|item| match item {
            ToolResultContent::Text(text) => Some(text.text.clone()),
            ToolResultContent::Json { value } => Some(value.to_string()),
            ToolResultContent::Image(_) => None,
        })
        .collect();
    texts.join("\n")
}

fn image_media(image: &Image) -> Media {
    let detail = image.detail.as_ref().map(|d| match d {
        ImageDetail::Low => "low",
        ImageDetail::High => "high",
        ImageDetail::Auto => "auto",
    });
    media(
        &image.data,
        image.media_type.as_ref().map(MimeType::to_mime_type),
        detail,
    )
}

fn media_image(m: &Media) -> Image {
    Image {
        data: source(m),
        media_type: m
            .media_type
            .as_deref()
            .and_then(ImageMediaType::from_mime_type),
        detail: m.detail.as_deref().and_then(|d| d.parse().ok()),
        native: None,
    }
}

/// Our media for a rig source: a URL, base64 data or a file id; raw bytes, text and an unknown
/// source have no field here (the block is then kept whole).
fn media(data: &DocumentSourceKind, media_type: Option<&str>, detail: Option<&str>) -> Media {
    let mut m = Media::default();
    match data {
        DocumentSourceKind::Url(url) => m.url = Some(url.clone()),
        DocumentSourceKind::Base64(b64) => m.data = Some(b64.clone()),
        DocumentSourceKind::FileId(id) => m.file_id = Some(id.clone()),
        _ => {}
    }
    m.media_type = media_type.map(str::to_owned);
    m.detail = detail.map(str::to_owned);
    m
}

fn source(m: &Media) -> DocumentSourceKind {
    if let Some(url) = &m.url {
        DocumentSourceKind::Url(url.clone())
    } else if let Some(data) = &m.data {
        DocumentSourceKind::Base64(data.clone())
    } else if let Some(id) = &m.file_id {
        DocumentSourceKind::FileId(id.clone())
    } else {
        DocumentSourceKind::Unknown
    }
}
