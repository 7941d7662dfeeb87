//! Microsoft Agent Framework's message JSON (`Message.to_dict()`, agent-framework-core 1.23) and
//! the deduplication of its Redis history provider.
//!
//! An element of `RedisHistoryProvider`'s list is `json.dumps(Message.to_dict())` with the keys
//! `type, role, contents, [author_name], [message_id], additional_properties`; inside
//! `AgentSession.to_dict()` the same dict has `"type": "message"` moved to the end
//! ([`AfLayout`]). [`to_agent_framework`] writes that shape and [`from_agent_framework`] reads it:
//!
//! | ours | Agent Framework |
//! | --- | --- |
//! | `role` | `role` (our five names; other names map to the closest, see below) |
//! | `author_name` | `author_name` |
//! | `id` | `message_id`, left out for an id that was derived from the content |
//! | text part | `text` content |
//! | refusal part | `text` content (and the exact part recorded under `agent_memory`) |
//! | tool call | `function_call` content: `arguments` is the parsed object when our text is a JSON object, else the text; `hosted: false` |
//! | tool result | `function_result` content: `result` and one `text` item |
//! | image, audio, video, document | `uri` (a URL), `data` (a data URL or inline base64 + MIME type) or `hosted_file` (a file id) content |
//! | opaque data part | no content; recorded under `agent_memory` |
//! | `created_at`, `metadata` | `additional_properties.agent_memory` |
//!
//! Reading is lenient where Agent Framework is: roles are free strings, and a name that is not
//! one of ours becomes the closest role (`function` → tool; `model`, `chatbot`, `ai`, `bot` →
//! assistant; anything else → user) with the name kept in our metadata, so it is written back.
//! A missing `message_id` gives a deterministic id, UUIDv5 of `json.dumps([role, contents])`, so
//! reading the same element twice gives the same id; a thread read in order through
//! [`from_agent_framework_in`] gives the repeats of one message distinct ids
//! ([`RepeatedIds`]). Content types we have no part for
//! (reasoning, usage, errors, approvals, hosted tools) are not turned into parts; the message
//! keeps them in its original, which is written back verbatim while the message is unchanged.
//!
//! What Agent Framework wrote and we have no field for is kept in our metadata under
//! [`METADATA_KEY`] (`"agent_framework"`):
//!
//! | key | holds |
//! | --- | --- |
//! | `role` | a role name that is not one of ours |
//! | `message_id` | a `message_id` that is not a valid [`MessageId`] (our id is then derived from it) |
//! | `additional_properties` | Agent Framework's `additional_properties`, without our `agent_memory` |
//! | `original` | the whole message as read, when it cannot be rebuilt byte for byte from our fields |
//!
//! ```
//! use memory_interop::agent_framework::{AfOptions, from_agent_framework, to_agent_framework};
//! use memory_interop::python_json::dumps;
//!
//! let element = r#"{"type": "message", "role": "assistant", "contents": [{"type": "text", "text": "Hi", "additional_properties": {}}], "author_name": "planner", "message_id": "msg_0002", "additional_properties": {}}"#;
//! let msg = from_agent_framework(&serde_json::from_str(element)?)?;
//! assert_eq!(msg.author_name.as_deref(), Some("planner"));
//! assert_eq!(msg.id.as_str(), "msg_0002");
//! assert_eq!(dumps(&to_agent_framework(&msg, &AfOptions::default())), element);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod session;

use std::fmt;

use serde_json::{Map, Value, json};

use super::python_json::{DumpOptions, dumps, dumps_with};
use super::record::{
    Recorded, keep_original, keep_unknown_fields, read_role, record_setters, recorded_message,
    take_record, write_record,
};
use super::repeated::RepeatedIds;
use super::{
    AGENT_MEMORY_KEY, arguments_text, arguments_value, closest_role, derived_id, id_for_foreign_id,
    media_part, object_at, parts_from_json, remove_nested, without_key,
};
use memory_core::error::{Error, Result};
use memory_core::id::MessageId;
use memory_core::message::{ChatMessage, Media, Part};

/// The metadata key under which a message read from Agent Framework keeps what our fields cannot
/// hold (see the [module documentation](self)).
pub const METADATA_KEY: &str = "agent_framework";

/// The name of the namespace of derived ids.
const PEER: &str = "agent-framework";

/// Where `"type": "message"` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AfLayout {
    /// First, as `Message.to_dict()` writes it (the Redis history provider's list elements).
    #[default]
    Message,
    /// Last, as a message inside `AgentSession.to_dict()`'s state is written (the
    /// registered-type codec appends `type`).
    SessionState,
}

/// How [`to_agent_framework`] writes a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AfOptions {
    /// Where `"type"` goes. Default: [`AfLayout::Message`].
    pub layout: AfLayout,
    /// Record our `created_at` under `additional_properties.agent_memory`. Default: `true`
    /// (needed for a lossless round trip; the epoch, meaning unknown, is never recorded).
    pub record_created_at: bool,
    /// Record our metadata under `additional_properties.agent_memory`. Default: `true`.
    pub record_metadata: bool,
}

impl Default for AfOptions {
    fn default() -> Self {
        Self {
            layout: AfLayout::Message,
            record_created_at: true,
            record_metadata: true,
        }
    }
}

impl AfOptions {
    /// The defaults with `"type"` last, for messages inside a session state.
    pub fn session_state() -> Self {
        Self::default().with_layout(AfLayout::SessionState)
    }

    /// Sets the layout.
    pub fn with_layout(mut self, layout: AfLayout) -> Self {
        self.layout = layout;
        self
    }

    record_setters!();
}

/// Converts our message to Agent Framework's `Message.to_dict()` form.
///
/// A message read with [`from_agent_framework`] and not changed since is written back exactly as
/// it was read.
///
/// A message whose id alone changed since (a repeated message given its own id by
/// [`RepeatedIds`]) is written back as it was read with its `message_id` set to the new id (or
/// left out, for the id derived from its content).
pub fn to_agent_framework(message: &ChatMessage, options: &AfOptions) -> Value {
    if let Some(original) =
        object_at(&message.metadata, METADATA_KEY).and_then(|m| m.get("original"))
        && let Ok(mut back) = read(original)
    {
        let mine = without_original(message);
        if back == mine {
            return place_type(original, options.layout);
        }
        back.id = mine.id.clone();
        if back == mine {
            let id = message_id_for(message, original);
            return place_type(&with_message_id(original, id.as_deref()), options.layout);
        }
    }
    project(message, options)
}

/// Reads one message of a thread that is read in order, with `ids` shared by the thread's
/// messages: as [`from_agent_framework`], except that a message without `message_id` gets its
/// id from [`RepeatedIds::next`], so equal messages of the thread have distinct ids (the first
/// keeps the id derived from its content).
///
/// ```
/// use memory_interop::agent_framework::{AfOptions, from_agent_framework_in, to_agent_framework};
/// use memory_interop::repeated::RepeatedIds;
/// use serde_json::json;
///
/// let ok = json!({"type": "message", "role": "user", "contents": [{"type": "text", "text": "ok", "additional_properties": {}}], "additional_properties": {}});
/// let mut ids = RepeatedIds::new();
/// let first = from_agent_framework_in(&ok, &mut ids)?;
/// let second = from_agent_framework_in(&ok, &mut ids)?;
/// assert_ne!(first.id, second.id);
/// // The first is written back without an id, the second with its own.
/// assert!(to_agent_framework(&first, &AfOptions::default()).get("message_id").is_none());
/// assert_eq!(
///     to_agent_framework(&second, &AfOptions::default())["message_id"],
///     json!(second.id.as_str())
/// );
/// # Ok::<(), memory_core::Error>(())
/// ```
///
/// # Errors
/// As [`from_agent_framework`].
pub fn from_agent_framework_in(value: &Value, ids: &mut RepeatedIds) -> Result<ChatMessage> {
    let mut message = from_agent_framework(value)?;
    if derives_id(value) {
        message.id = ids.next(message.id);
    }
    Ok(message)
}

/// Writes one message of a thread that is written in order, with `ids` shared by the thread's
/// messages: as [`to_agent_framework`], except that a message whose id is the one
/// [`from_agent_framework_in`] would give it without `message_id` (its content's derived id,
/// numbered among the equal messages before it) is written without one, and any other message
/// with its id. Reading the written thread in order with [`from_agent_framework_in`] gives
/// every message its id back, and a thread read that way is written back byte for byte.
pub fn to_agent_framework_in(
    message: &ChatMessage,
    options: &AfOptions,
    ids: &mut RepeatedIds,
) -> Value {
    let value = to_agent_framework(message, options);
    let role = value
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let contents = value
        .get("contents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let derived = content_id(role, contents);
    if ids.peek(&derived) == message.id {
        ids.next(derived);
        if value.get("message_id").is_none() {
            return value;
        }
        return with_message_id(&value, None);
    }
    if value.get("message_id").is_none() {
        return with_message_id(&value, Some(message.id.as_str()));
    }
    value
}

/// Whether a message in `Message.to_dict()` form has no `message_id` (absent or null), so the
/// id it reads with is derived from its content.
pub fn derives_id(value: &Value) -> bool {
    matches!(value.get("message_id"), None | Some(Value::Null))
}

/// The `message_id` to write for `message` over `original` (a message as Agent Framework
/// wrote it, whose content `message` has): none for the id derived from the content, the
/// foreign id `original` held for our id of it, else our id.
fn message_id_for(message: &ChatMessage, original: &Value) -> Option<String> {
    let role = original
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let contents = original
        .get("contents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if message.id == content_id(role, contents) {
        return None;
    }
    match original.get("message_id").and_then(Value::as_str) {
        Some(foreign) if id_for_foreign_id(PEER, foreign) == message.id => Some(foreign.to_owned()),
        _ => Some(message.id.as_str().to_owned()),
    }
}

/// `original` with its `message_id` replaced by `id` (left out for `None`): in its place when
/// it had one, else before `additional_properties` (where `Message.to_dict()` puts it).
fn with_message_id(original: &Value, id: Option<&str>) -> Value {
    let Some(map) = original.as_object() else {
        return original.clone();
    };
    let mut out = Map::new();
    let mut placed = id.is_none();
    for (k, v) in map {
        if k == "message_id" {
            if let Some(id) = id {
                out.insert(k.clone(), Value::String(id.to_owned()));
                placed = true;
            }
            continue;
        }
        if k == "additional_properties"
            && !placed
            && let Some(id) = id
        {
            out.insert("message_id".to_owned(), Value::String(id.to_owned()));
            placed = true;
        }
        out.insert(k.clone(), v.clone());
    }
    if !placed && let Some(id) = id {
        out.insert("message_id".to_owned(), Value::String(id.to_owned()));
    }
    Value::Object(out)
}

/// Reads Agent Framework's `Message.to_dict()` form (either layout) into our message.
///
/// # Errors
/// [`ErrorKind::Serialization`](memory_core::ErrorKind::Serialization) when `value` is not an object,
/// has no string `role` or no array `contents`, or has a non-string `message_id`,
/// `author_name` or `type`.
pub fn from_agent_framework(value: &Value) -> Result<ChatMessage> {
    let mut message = read(value)?;
    let reproduced = detect_layout(value).is_some_and(|layout| {
        dumps(&project(
            &message,
            &AfOptions::default().with_layout(layout),
        )) == dumps(value)
    });
    if !reproduced {
        keep_original(&mut message, METADATA_KEY, value);
    }
    Ok(message)
}

/// The message with no `original` in its Agent Framework metadata.
fn without_original(message: &ChatMessage) -> ChatMessage {
    let mut copy = message.clone();
    remove_nested(&mut copy.metadata, METADATA_KEY, "original");
    copy
}

fn detect_layout(value: &Value) -> Option<AfLayout> {
    let map = value.as_object()?;
    if map.keys().next().map(String::as_str) == Some("type") {
        Some(AfLayout::Message)
    } else if map.keys().next_back().map(String::as_str) == Some("type") {
        Some(AfLayout::SessionState)
    } else {
        None
    }
}

/// `value` with its `"type"` key moved where `layout` puts it.
fn place_type(value: &Value, layout: AfLayout) -> Value {
    let Some(map) = value.as_object() else {
        return value.clone();
    };
    let Some(kind) = map.get("type") else {
        return value.clone();
    };
    let mut out = Map::new();
    if layout == AfLayout::Message {
        out.insert("type".to_owned(), kind.clone());
    }
    for (k, v) in map {
        if k != "type" {
            out.insert(k.clone(), v.clone());
        }
    }
    if layout == AfLayout::SessionState {
        out.insert("type".to_owned(), kind.clone());
    }
    Value::Object(out)
}

fn serialization(what: &str) -> Error {
    Error::serialization(format!("not an Agent Framework message: {what}"))
}

fn optional_string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(serialization(&format!("\"{key}\" is not a string"))),
    }
}

const KNOWN_FIELDS: [&str; 6] = [
    "type",
    "role",
    "contents",
    "author_name",
    "message_id",
    "additional_properties",
];

/// Reads a message from our fields only (no `original`).
fn read(value: &Value) -> Result<ChatMessage> {
    let map = value
        .as_object()
        .ok_or_else(|| serialization("a message is a JSON object"))?;
    let mut af = Map::new();
    if let Some(kind) = optional_string(map, "type")?
        && kind != "message"
    {
        af.insert("type".to_owned(), Value::String(kind.to_owned()));
    }
    let (role_name, role) =
        read_role(map, &mut af).ok_or_else(|| serialization("no string \"role\""))?;
    let contents = map
        .get("contents")
        .and_then(Value::as_array)
        .ok_or_else(|| serialization("no array \"contents\""))?;
    let author_name = optional_string(map, "author_name")?.map(str::to_owned);
    let message_id = optional_string(map, "message_id")?;
    let mut properties = match map.get("additional_properties") {
        Some(Value::Object(p)) => p.clone(),
        _ => Map::new(),
    };
    let record = take_record(&mut properties);
    if !properties.is_empty() {
        af.insert(
            "additional_properties".to_owned(),
            Value::Object(properties),
        );
    }
    keep_unknown_fields(&mut af, map, &KNOWN_FIELDS);

    let parts = match record.get("parts").and_then(parts_from_json) {
        Some(recorded) if project_contents(&recorded).0 == *contents => recorded,
        _ => parts_from_contents(contents),
    };
    let id = match message_id {
        Some(foreign) => match MessageId::new(foreign) {
            Ok(id) => id,
            Err(_) => {
                af.insert("message_id".to_owned(), Value::String(foreign.to_owned()));
                id_for_foreign_id(PEER, foreign)
            }
        },
        None => content_id(role_name, contents),
    };
    Ok(recorded_message(
        (id, role, author_name),
        parts,
        &record,
        af,
        METADATA_KEY,
    ))
}

/// The id of a message that has no `message_id`: UUIDv5 of `json.dumps([role, contents])`.
fn content_id(role: &str, contents: &[Value]) -> MessageId {
    derived_id(
        PEER,
        &dumps(&json!([role, Value::Array(contents.to_vec())])),
    )
}

/// Writes the message from our fields and the Agent Framework metadata (no `original`).
fn project(message: &ChatMessage, options: &AfOptions) -> Value {
    let empty = Map::new();
    let af = object_at(&message.metadata, METADATA_KEY).unwrap_or(&empty);
    let role = match af.get("role").and_then(Value::as_str) {
        Some(name) if closest_role(name) == message.role => name,
        _ => message.role.as_str(),
    };
    let (contents, faithful) = project_contents(&message.parts);
    let message_id = if message.id == content_id(role, &contents) {
        None
    } else {
        match af.get("message_id").and_then(Value::as_str) {
            Some(foreign) if id_for_foreign_id(PEER, foreign) == message.id => Some(foreign),
            _ => Some(message.id.as_str()),
        }
    };
    let mut properties = object_at(af, "additional_properties")
        .map(|p| without_key(p, AGENT_MEMORY_KEY))
        .unwrap_or_default();
    let record = Map::new();
    let recorded = Recorded {
        created_at: options.record_created_at,
        metadata: options.record_metadata,
        parts: !faithful,
    };
    write_record(record, message, recorded, METADATA_KEY, &mut properties);
    let kind = af
        .get("type")
        .cloned()
        .unwrap_or_else(|| Value::String("message".to_owned()));

    let mut out = Map::new();
    if options.layout == AfLayout::Message {
        out.insert("type".to_owned(), kind.clone());
    }
    out.insert("role".to_owned(), Value::String(role.to_owned()));
    out.insert("contents".to_owned(), Value::Array(contents));
    if let Some(name) = &message.author_name {
        out.insert("author_name".to_owned(), Value::String(name.clone()));
    }
    if let Some(id) = message_id {
        out.insert("message_id".to_owned(), Value::String(id.to_owned()));
    }
    if let Some(fields) = object_at(af, "fields") {
        for (k, v) in fields {
            if !KNOWN_FIELDS.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert(
        "additional_properties".to_owned(),
        Value::Object(properties),
    );
    if options.layout == AfLayout::SessionState {
        out.insert("type".to_owned(), kind);
    }
    Value::Object(out)
}

/// The contents for our parts, and whether reading them back gives the same parts.
fn project_contents(parts: &[Part]) -> (Vec<Value>, bool) {
    let contents: Vec<Value> = parts.iter().filter_map(part_to_content).collect();
    let faithful = parts_from_contents(&contents) == parts;
    (contents, faithful)
}

fn text_content(text: &str) -> Value {
    json!({"type": "text", "text": text, "additional_properties": {}})
}

fn part_to_content(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text { text } | Part::Refusal { text } => text_content(text),
        Part::ToolCall {
            id,
            name,
            arguments,
        } => json!({
            "type": "function_call",
            "call_id": id,
            "name": name,
            "arguments": arguments_value(arguments),
            "hosted": false,
            "additional_properties": {},
        }),
        Part::ToolResult { call_id, content } => json!({
            "type": "function_result",
            "call_id": call_id,
            "result": content,
            "items": [text_content(content)],
            "additional_properties": {},
        }),
        Part::Image(media) | Part::Audio(media) | Part::Video(media) | Part::Document(media) => {
            return media_content(media);
        }
        Part::Data { .. } => return None,
        // `Part` is non-exhaustive: a kind added to memory-core later has no content either, and
        // the parts are then recorded under `agent_memory`, like opaque data.
        _ => return None,
    })
}

fn media_content(media: &Media) -> Option<Value> {
    let mut out = Map::new();
    match (&media.url, &media.data, &media.file_id) {
        (Some(url), None, None) => {
            let kind = if url.starts_with("data:") {
                "data"
            } else {
                "uri"
            };
            out.insert("type".to_owned(), json!(kind));
            out.insert("uri".to_owned(), json!(url));
            if let Some(media_type) = &media.media_type {
                out.insert("media_type".to_owned(), json!(media_type));
            }
        }
        (None, Some(data), None) => {
            let media_type = media.media_type.as_ref()?;
            out.insert("type".to_owned(), json!("data"));
            out.insert(
                "uri".to_owned(),
                json!(format!("data:{media_type};base64,{data}")),
            );
            out.insert("media_type".to_owned(), json!(media_type));
        }
        (None, None, Some(file_id)) => {
            // `Content.to_dict()` writes its fields in a fixed order: media_type, name, file_id.
            out.insert("type".to_owned(), json!("hosted_file"));
            if let Some(media_type) = &media.media_type {
                out.insert("media_type".to_owned(), json!(media_type));
            }
            if let Some(filename) = &media.filename {
                out.insert("name".to_owned(), json!(filename));
            }
            out.insert("file_id".to_owned(), json!(file_id));
        }
        _ => return None,
    }
    out.insert("additional_properties".to_owned(), json!({}));
    Some(Value::Object(out))
}

/// Our parts for Agent Framework contents; content types we have no part for are skipped.
fn parts_from_contents(contents: &[Value]) -> Vec<Part> {
    contents.iter().filter_map(content_to_part).collect()
}

fn content_to_part(content: &Value) -> Option<Part> {
    let map = match content {
        Value::String(text) => return Some(Part::text(text.clone())),
        Value::Object(map) => map,
        _ => return None,
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    match map.get("type").and_then(Value::as_str)? {
        "text" => Some(Part::Text {
            text: text("text")?,
        }),
        "function_call" => Some(Part::ToolCall {
            id: text("call_id")?,
            name: text("name")?,
            arguments: arguments_text(map.get("arguments")),
        }),
        "function_result" => {
            let call_id = text("call_id")?;
            let content = match map.get("result") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => map
                    .get("items")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                            .filter_map(|i| i.get("text").and_then(Value::as_str))
                            .collect::<String>()
                    })
                    .unwrap_or_default(),
                Some(other) => other.to_string(),
            };
            Some(Part::ToolResult { call_id, content })
        }
        kind @ ("uri" | "data") => {
            let uri = text("uri")?;
            let media_type = text("media_type");
            let inline = if kind == "data" {
                uri.strip_prefix("data:")
                    .and_then(|rest| rest.split_once(";base64,"))
                    .filter(|(mt, _)| Some(*mt) == media_type.as_deref())
                    .map(|(_, payload)| payload.to_owned())
            } else {
                None
            };
            let media = match inline {
                Some(payload) => Media {
                    data: Some(payload),
                    media_type: media_type.clone(),
                    ..Media::default()
                },
                None => Media {
                    url: Some(uri),
                    media_type: media_type.clone(),
                    ..Media::default()
                },
            };
            Some(media_part(media_type.as_deref(), media))
        }
        "hosted_file" => {
            let media_type = text("media_type");
            let media = Media {
                file_id: Some(text("file_id")?),
                media_type: media_type.clone(),
                filename: text("name"),
                ..Media::default()
            };
            Some(media_part(media_type.as_deref(), media))
        }
        _ => None,
    }
}

/// Agent Framework's identity of a stored message, used to deduplicate saves (README §1 step 3):
/// its `message_id`, or else its role and its contents as
/// `json.dumps(contents, sort_keys=True, ensure_ascii=False)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AfIdentity {
    /// `("id", message_id)`.
    Id(String),
    /// `("content", role, json.dumps(contents, sort_keys=True, ensure_ascii=False))`.
    Content {
        /// The role name.
        role: String,
        /// The sorted, unescaped JSON text of the contents.
        contents: String,
    },
}

impl AfIdentity {
    /// The identity of one message in `Message.to_dict()` form.
    ///
    /// An empty or missing `message_id` counts as none (Python tests its truth value).
    pub fn of(message: &Value) -> Self {
        // As Python's `message_id is not None`: an empty id is an id too.
        match message.get("message_id") {
            Some(Value::String(id)) => return Self::Id(id.clone()),
            Some(Value::Null) | None => {}
            Some(other) => return Self::Id(other.to_string()),
        }
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let contents = message
            .get("contents")
            .cloned()
            .unwrap_or_else(|| Value::Array(Vec::new()));
        Self::Content {
            role,
            contents: dumps_with(&contents, DumpOptions::sorted_unicode()),
        }
    }

    /// Whether this is a `user` message without a `message_id`: an overlap of just one such
    /// message is not treated as a duplicate (a user may say the same thing twice).
    pub fn is_id_less_user(&self) -> bool {
        matches!(self, Self::Content { role, .. } if role == "user")
    }
}

impl fmt::Display for AfIdentity {
    /// `id:<message_id>` or `content:<role>:<contents>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => write!(f, "id:{id}"),
            Self::Content { role, contents } => write!(f, "content:{role}:{contents}"),
        }
    }
}

/// Agent Framework's identity of a message as text: `id:<message_id>` or
/// `content:<role>:<json.dumps(contents, sort_keys=True, ensure_ascii=False)>`.
///
/// ```
/// use memory_interop::agent_framework::af_identity;
/// use serde_json::json;
///
/// assert_eq!(af_identity(&json!({"role": "assistant", "message_id": "m1", "contents": []})), "id:m1");
/// assert_eq!(
///     af_identity(&json!({"role": "user", "contents": [{"type": "text", "text": "é", "additional_properties": {}}]})),
///     r#"content:user:[{"additional_properties": {}, "text": "é", "type": "text"}]"#
/// );
/// ```
pub fn af_identity(message: &Value) -> String {
    AfIdentity::of(message).to_string()
}

/// How many leading messages of `incoming` are already stored, by the rules of
/// `filter_new_messages` (README §1 step 3):
///
/// 1. if the whole `existing` sequence appears inside `incoming` (a full-transcript replay), the
///    messages up to the end of its first occurrence;
/// 2. otherwise the length of the longest suffix of `existing` that equals a prefix of
///    `incoming`;
///
/// where an overlap of just one id-less `user` message does not count.
pub fn duplicate_prefix_len(existing: &[AfIdentity], incoming: &[AfIdentity]) -> usize {
    let n = existing.len();
    if n == 0 || incoming.is_empty() {
        return 0;
    }
    let single_user = |overlap: &[AfIdentity]| matches!(overlap, [only] if only.is_id_less_user());
    // Agent Framework 1.23 `filter_new_messages`: a replay of the whole stored transcript keeps
    // what follows it, except that one id-less user message matching at the very start is a
    // new message (a user may say the same thing twice).
    if n <= incoming.len()
        && let Some(start) = incoming.windows(n).position(|w| w == existing)
        && !(start == 0 && single_user(existing))
    {
        return start.saturating_add(n);
    }
    for k in (1..=n.min(incoming.len())).rev() {
        let (Some(tail), Some(head)) = (existing.get(n.saturating_sub(k)..), incoming.get(..k))
        else {
            continue;
        };
        if tail == head {
            return if single_user(head) { 0 } else { k };
        }
    }
    0
}

/// The messages of `incoming` that are new with respect to `existing` (both in
/// `Message.to_dict()` form), as Agent Framework's history provider decides before it appends:
/// always a suffix of `incoming` (see [`duplicate_prefix_len`]).
///
/// ```
/// use memory_interop::agent_framework::filter_new_messages;
/// use serde_json::json;
///
/// let hi = json!({"role": "user", "contents": [{"type": "text", "text": "hi", "additional_properties": {}}]});
/// let hello = json!({"role": "assistant", "message_id": "m1", "contents": []});
/// let more = json!({"role": "user", "message_id": "m2", "contents": []});
/// let existing = [hi.clone(), hello.clone()];
/// // A replay of the whole transcript keeps only what follows it.
/// let incoming = [hi.clone(), hello.clone(), more.clone()];
/// assert_eq!(filter_new_messages(&existing, &incoming), &[more.clone()]);
/// // One id-less user message repeated is a new message, not a duplicate.
/// assert_eq!(filter_new_messages(&[hi.clone()], &[hi.clone()]).len(), 1);
/// ```
pub fn filter_new_messages<'a>(existing: &[Value], incoming: &'a [Value]) -> &'a [Value] {
    let existing: Vec<AfIdentity> = existing.iter().map(AfIdentity::of).collect();
    let identities: Vec<AfIdentity> = incoming.iter().map(AfIdentity::of).collect();
    let skip = duplicate_prefix_len(&existing, &identities);
    incoming.get(skip..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UNKNOWN_TIME;
    use crate::record::tool_messages;
    use memory_core::message::Role;
    use serde_json::json;

    #[test]
    fn dedupe_follows_agent_framework_1_23() {
        let text = |t: &str| json!([{"type": "text", "text": t, "additional_properties": {}}]);
        let u = json!({"role": "user", "contents": text("same")});
        let a = json!({"role": "assistant", "message_id": "a1", "contents": text("x")});
        let b = json!({"role": "assistant", "message_id": "b1", "contents": text("y")});
        // A lone id-less user message found later in a replay still marks the replay.
        let incoming = [a.clone(), u.clone(), b.clone()];
        let just = std::slice::from_ref;
        assert_eq!(filter_new_messages(just(&u), &incoming), just(&b));
        // At the very start it is a new message.
        assert_eq!(filter_new_messages(just(&u), just(&u)).len(), 1);
        // An empty message_id is an id, as `is not None` says in Python.
        let empty = json!({"role": "user", "message_id": "", "contents": text("z")});
        assert_eq!(AfIdentity::of(&empty), AfIdentity::Id(String::new()));
        assert!(filter_new_messages(just(&empty), just(&empty)).is_empty());
    }

    fn round_trip(msg: &ChatMessage) {
        for options in [AfOptions::default(), AfOptions::session_state()] {
            let value = to_agent_framework(msg, &options);
            let text = dumps(&value);
            let back = from_agent_framework(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(&back, msg, "{text}");
            // And the bytes are stable: writing the read message gives the same text.
            assert_eq!(dumps(&to_agent_framework(&back, &options)), text);
        }
    }

    #[test]
    fn ours_round_trip_through_agent_framework() {
        round_trip(&ChatMessage::user(
            "What is on my calendar tomorrow? 日本語 🎉 \u{2028}",
        ));
        round_trip(&ChatMessage::assistant("Sure.").with_author("planner"));
        round_trip(
            &ChatMessage::system("Be brief.").with_metadata("k", json!({"z": 1, "a": [1.5]})),
        );
        round_trip(&ChatMessage::new(
            Role::Developer,
            vec![Part::text("Use tools.")],
        ));
        tool_messages().iter().for_each(round_trip);
        round_trip(&ChatMessage::tool_call(
            "call_3",
            "f",
            r#"{"day": "spaced"}"#,
        ));
        round_trip(&ChatMessage::tool_call("call_4", "f", "[1, 2]"));
        round_trip(&ChatMessage::tool_call("call_5", "f", ""));
        round_trip(&ChatMessage::new(
            Role::Assistant,
            vec![
                Part::text("Let me check."),
                Part::Refusal { text: "no".into() },
                Part::ToolCall {
                    id: "a".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                },
            ],
        ));
        round_trip(&ChatMessage::new(
            Role::User,
            vec![
                Part::text("what is this?"),
                Part::Image(Media::url("https://x/y.png")),
                Part::Image(Media {
                    media_type: Some("image/png".into()),
                    ..Media::url("https://x/y.png")
                }),
                Part::Image(Media::inline("image/png", "iVBORw0KGgo=")),
                Part::Audio(Media::inline("audio/wav", "UklGRg==")),
                Part::Image(Media::url("https://x/y.png").with_detail("high")),
                Part::Document(Media {
                    file_id: Some("file-1".into()),
                    filename: Some("a.pdf".into()),
                    ..Media::default()
                }),
                Part::Video(Media::default()),
                Part::Data {
                    media_type: "application/json".into(),
                    data: json!({"b": 1, "a": 2}),
                },
            ],
        ));
    }

    #[test]
    fn media_uses_agent_framework_contents() {
        let msg = ChatMessage::new(
            Role::User,
            vec![
                Part::Image(Media {
                    media_type: Some("image/png".into()),
                    ..Media::url("https://x/y.png")
                }),
                Part::Image(Media::inline("image/png", "iVBORw0KGgo=")),
                Part::Document(Media {
                    file_id: Some("file-1".into()),
                    media_type: Some("application/pdf".into()),
                    ..Media::default()
                }),
            ],
        );
        let value = to_agent_framework(&msg, &AfOptions::default().with_created_at(false));
        assert_eq!(
            dumps(&value["contents"]),
            r#"[{"type": "uri", "uri": "https://x/y.png", "media_type": "image/png", "additional_properties": {}}, {"type": "data", "uri": "data:image/png;base64,iVBORw0KGgo=", "media_type": "image/png", "additional_properties": {}}, {"type": "hosted_file", "media_type": "application/pdf", "file_id": "file-1", "additional_properties": {}}]"#
        );
        // Faithful: nothing recorded beside them.
        assert_eq!(value["additional_properties"], json!({}));
    }

    #[test]
    fn opaque_parts_are_recorded_not_dropped() {
        let msg = ChatMessage::new(
            Role::User,
            vec![
                Part::text("x"),
                Part::Data {
                    media_type: "app/x".into(),
                    data: json!(1),
                },
            ],
        );
        let value = to_agent_framework(&msg, &AfOptions::default());
        assert_eq!(value["contents"].as_array().unwrap().len(), 1);
        assert_eq!(
            value["additional_properties"]["agent_memory"]["parts"][1]["type"],
            "data"
        );
    }

    #[test]
    fn unknown_roles_and_contents_are_kept() {
        let text = r#"{"type": "message", "role": "critic", "contents": [{"type": "text_reasoning", "text": "hmm", "additional_properties": {}}, {"type": "text", "text": "Looks fine.", "additional_properties": {}, "annotations": [{"type": "citation", "url": "https://x"}]}], "message_id": "not a valid id!", "additional_properties": {"trace": "t-1"}, "extra": 1}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let msg = from_agent_framework(&value).unwrap();
        assert_eq!(msg.role, Role::User);
        assert_eq!(msg.parts, vec![Part::text("Looks fine.")]);
        let af = msg.metadata[METADATA_KEY].as_object().unwrap();
        assert_eq!(af["role"], "critic");
        assert_eq!(af["message_id"], "not a valid id!");
        assert_eq!(af["additional_properties"], json!({"trace": "t-1"}));
        assert_eq!(msg.id, from_agent_framework(&value).unwrap().id);
        assert_eq!(
            dumps(&to_agent_framework(&msg, &AfOptions::default())),
            text
        );
        // In the other layout, "type" moves to the end and nothing else changes.
        let state = dumps(&to_agent_framework(&msg, &AfOptions::session_state()));
        assert!(
            state.starts_with(r#"{"role": "critic""#) && state.ends_with(r#", "type": "message"}"#)
        );
        // Once changed, the message is written from our fields, keeping what still applies.
        let mut edited = msg.clone();
        edited.parts = vec![Part::text("Changed.")];
        let written = to_agent_framework(&edited, &AfOptions::default());
        assert_eq!(written["role"], "critic");
        assert_eq!(written["message_id"], "not a valid id!");
        assert_eq!(written["additional_properties"]["trace"], "t-1");
        assert_eq!(written["extra"], 1);
    }

    #[test]
    fn messages_edited_by_python_come_back_byte_identically() {
        let ours = ChatMessage::user("hi").with_metadata("k", json!(1));
        let mut value = to_agent_framework(&ours, &AfOptions::default());
        // Python adds a property after ours and a reasoning content we have no part for.
        value["additional_properties"]["seen"] = json!(true);
        value["contents"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "text_reasoning", "text": "…", "additional_properties": {}}));
        let text = dumps(&value);
        let msg = from_agent_framework(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(msg.created_at, ours.created_at);
        assert_eq!(msg.metadata["k"], 1);
        assert_eq!(
            msg.metadata[METADATA_KEY]["additional_properties"],
            json!({"seen": true})
        );
        assert_eq!(
            dumps(&to_agent_framework(&msg, &AfOptions::default())),
            text
        );
    }

    /// A thread that repeats a message without `message_id` reads with one id per message; the
    /// first keeps the id earlier versions gave it, and every one reads back with its id from
    /// what is written, also a message kept whole as its original (a content type we have no
    /// part for).
    #[test]
    fn repeated_messages_of_a_thread_get_ids_of_their_own() {
        let ok: Value = serde_json::from_str(r#"{"type": "message", "role": "user", "contents": [{"type": "text", "text": "ok", "additional_properties": {}}], "additional_properties": {}}"#).unwrap();
        let sure = json!({"type": "message", "role": "assistant", "contents": [{"type": "text", "text": "Sure.", "additional_properties": {}}], "message_id": "msg_1", "additional_properties": {}});
        let thinking: Value = serde_json::from_str(r#"{"type": "message", "role": "assistant", "contents": [{"type": "text_reasoning", "text": "hmm", "additional_properties": {}}], "additional_properties": {}}"#).unwrap();
        let thread = [&ok, &sure, &ok, &thinking, &ok, &thinking];
        let mut ids = RepeatedIds::new();
        let read: Vec<ChatMessage> = thread
            .iter()
            .map(|v| from_agent_framework_in(v, &mut ids).unwrap())
            .collect();
        let distinct: std::collections::HashSet<&MessageId> = read.iter().map(|m| &m.id).collect();
        assert_eq!(distinct.len(), read.len());
        assert_eq!(read[0].id, from_agent_framework(&ok).unwrap().id);
        assert_eq!(read[3].id, from_agent_framework(&thinking).unwrap().id);
        assert_eq!(read[1].id.as_str(), "msg_1");
        for (message, value) in read.iter().zip(thread) {
            let written = to_agent_framework(message, &AfOptions::default());
            let back = from_agent_framework(&written).unwrap();
            assert_eq!(back.id, message.id);
            assert_eq!(back.parts, message.parts);
            // The first of each stays byte for byte what Python wrote.
            if derives_id(value) && message.id == from_agent_framework(value).unwrap().id {
                assert_eq!(dumps(&written), dumps(value));
            }
        }
        // A repeat kept whole keeps its content and gains its id, before the properties.
        let written = to_agent_framework(&read[5], &AfOptions::default());
        assert_eq!(written["contents"], thinking["contents"]);
        assert_eq!(written["message_id"], json!(read[5].id.as_str()));
        let keys: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "role",
                "contents",
                "message_id",
                "additional_properties"
            ]
        );
        // Read again in order, the thread has the same ids.
        let mut again = RepeatedIds::new();
        for (message, value) in read.iter().zip(thread) {
            assert_eq!(
                from_agent_framework_in(value, &mut again).unwrap().id,
                message.id
            );
        }
    }

    #[test]
    fn missing_message_id_gives_a_content_id() {
        let value = json!({"type": "message", "role": "user", "contents": [{"type": "text", "text": "hi", "additional_properties": {}}], "additional_properties": {}});
        let a = from_agent_framework(&value).unwrap();
        assert_eq!(a.id, from_agent_framework(&value).unwrap().id);
        assert_eq!(a.created_at, UNKNOWN_TIME);
        assert!(a.metadata.is_empty());
        let mut other = value.clone();
        other["contents"][0]["text"] = json!("hello");
        assert_ne!(a.id, from_agent_framework(&other).unwrap().id);
        assert!(
            to_agent_framework(&a, &AfOptions::default())
                .get("message_id")
                .is_none()
        );
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            json!(null),
            json!([]),
            json!({"contents": []}),
            json!({"role": 1, "contents": []}),
            json!({"role": "user"}),
            json!({"role": "user", "contents": {}}),
            json!({"role": "user", "contents": [], "message_id": 5}),
            json!({"role": "user", "contents": [], "author_name": []}),
        ] {
            let err = from_agent_framework(&bad).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Serialization, "{bad}");
        }
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "contents": [{"type": "text", "text": text}]})
    }

    fn with_id(role: &str, id: &str) -> Value {
        json!({"role": role, "message_id": id, "contents": []})
    }

    fn skipped(existing: &[Value], incoming: &[Value]) -> usize {
        incoming.len() - filter_new_messages(existing, incoming).len()
    }

    #[test]
    fn dedupe_rules() {
        let (u1, a1, u2, a2) = (
            user("q1"),
            with_id("assistant", "a1"),
            user("q2"),
            with_id("assistant", "a2"),
        );
        // Nothing stored, or nothing incoming.
        assert_eq!(skipped(&[], std::slice::from_ref(&u1)), 0);
        assert!(filter_new_messages(std::slice::from_ref(&u1), &[]).is_empty());
        // Full-transcript replay: everything up to the end of the stored sequence goes.
        assert_eq!(
            skipped(
                &[u1.clone(), a1.clone()],
                &[u1.clone(), a1.clone(), u2.clone(), a2.clone()]
            ),
            2
        );
        // The stored sequence inside the incoming one, not at its start.
        let sys = with_id("system", "s");
        assert_eq!(
            skipped(
                &[u1.clone(), a1.clone()],
                &[sys.clone(), u1.clone(), a1.clone(), u2.clone()]
            ),
            3
        );
        // The first occurrence counts: a repeated turn after it is new.
        assert_eq!(
            skipped(
                &[u1.clone(), a1.clone()],
                &[u1.clone(), a1.clone(), u1.clone(), a1.clone()]
            ),
            2
        );
        // Longest suffix of existing = prefix of incoming.
        assert_eq!(
            skipped(
                &[u1.clone(), a1.clone(), u2.clone()],
                &[a1.clone(), u2.clone(), a2.clone()]
            ),
            2
        );
        assert_eq!(
            skipped(&[u1.clone(), a1.clone()], &[a1.clone(), u2.clone()]),
            1
        );
        // No overlap.
        assert_eq!(
            skipped(&[u1.clone(), a1.clone()], &[u2.clone(), a2.clone()]),
            0
        );
        // One id-less user message is not a duplicate, neither as the whole store nor as overlap.
        let once = std::slice::from_ref(&u1);
        assert_eq!(skipped(once, once), 0);
        assert_eq!(skipped(once, &[u1.clone(), a1.clone()]), 0);
        assert_eq!(
            skipped(&[a1.clone(), u1.clone()], &[u1.clone(), a2.clone()]),
            0
        );
        // But a user message with an id is.
        let u_id = with_id("user", "u");
        assert_eq!(
            skipped(&[a1.clone(), u_id.clone()], &[u_id.clone(), a2.clone()]),
            1
        );
        // And two messages of overlap are, even if one is an id-less user message.
        assert_eq!(
            skipped(
                &[a1.clone(), u1.clone(), a2.clone()],
                &[u1.clone(), a2.clone(), u2.clone()]
            ),
            2
        );
        // Content identity ignores key order; an id counts whenever it is not null.
        let reordered = json!({"contents": [{"text": "q1", "type": "text"}], "role": "user"});
        assert_eq!(AfIdentity::of(&reordered), AfIdentity::of(&u1));
        assert_ne!(
            AfIdentity::of(&user("q1")),
            AfIdentity::of(
                &json!({"role": "assistant", "contents": [{"type": "text", "text": "q1"}]})
            )
        );
        // Python tests `message_id is not None`: an empty string is an id.
        assert_eq!(
            AfIdentity::of(&json!({"role": "user", "message_id": "", "contents": []})).to_string(),
            "id:"
        );
    }
}
