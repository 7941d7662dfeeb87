//! LlamaIndex's message JSON: `ChatMessage.model_dump(mode="json")` (llama-index-core 0.14), as
//! `SQLAlchemyChatStore` keeps it in the `data` column of `llama_index_memory`.
//!
//! ```json
//! {"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Hi"}]}
//! ```
//!
//! | ours | LlamaIndex |
//! | --- | --- |
//! | `role` | `role` (`function` reads as tool, `chatbot` and `model` as assistant, with the name kept) |
//! | text part | `{"block_type": "text", "text"}` |
//! | refusal part | a text block (the exact part recorded under `agent_memory`) |
//! | tool calls | `additional_kwargs.tool_calls`, in OpenAI's shape `{"id", "function": {"arguments", "name"}, "type": "function"}`, as LlamaIndex's OpenAI integration stores them; a `tool_call` block reads as a tool call too |
//! | tool result | a text block with the result and `additional_kwargs.tool_call_id` |
//! | image | `{"block_type": "image", "image", "path", "url", "image_mimetype", "detail"}` (`image` is inline base64) |
//! | audio | `{"block_type": "audio", "audio", "path", "url", "format"}` |
//! | video | `{"block_type": "video", "video", "path", "url", "video_mimetype", "detail", "fps"}` |
//! | document | `{"block_type": "document", "data", "path", "url", "title", "document_mimetype"}` |
//! | `id`, `author_name`, `created_at`, `metadata`, parts with no block (opaque data, a media file id) | `additional_kwargs.agent_memory` |
//!
//! A message read without a recorded id gets a deterministic one, UUIDv5 of
//! `json.dumps([role, blocks])`: two equal messages get equal ids, so a thread is read in order
//! through [`from_llamaindex_in`], which gives repeats ids of their own
//! ([`RepeatedIds`]), and a store that reads rows can take the id from the row (LlamaIndex's
//! integer `id` column, see [`is_row_id`]) instead. Block types we
//! have no part for (thinking, citations, cache points) are not turned into parts; the message
//! keeps them in its original, written back verbatim while its content (role, author, parts)
//! is unchanged: an id, a creation time or metadata given to it since (a store's row id and
//! time) only change the `agent_memory` record, and only as far as the [`LiOptions`] record
//! them.
//!
//! Media blocks get the defaults LlamaIndex's block validators fill in (llama-index-core
//! 0.14.25): an image's or video's MIME type and an audio block's `format` from the URL's
//! extension or a `data:` URL's type (`filetype`'s table), a document's MIME type from its
//! extension and its title `input_document`. So our bytes are LlamaIndex's own for the same
//! message, and ours → LlamaIndex → ours gives media with these fields filled in (what a
//! Python `Memory` holds). Two differences remain: inline data without a media type is not
//! sniffed (LlamaIndex guesses its type from its bytes), and URLs are written as given
//! (LlamaIndex normalizes image, audio and video URLs with pydantic's `AnyUrl`, so
//! `https://Example.com` becomes `https://example.com/`).
//!
//! What LlamaIndex wrote and we have no field for is kept in our metadata under
//! [`METADATA_KEY`] (`"llamaindex"`): `role` (a role name that is not one of ours),
//! `additional_kwargs` (LlamaIndex's `additional_kwargs` other than the tool fields above and our
//! `agent_memory`), `fields` (other top-level keys) and `original` (the whole message, when it
//! cannot be rebuilt byte for byte from our fields).
//!
//! LlamaIndex counts non-empty `additional_kwargs` in its token budget, and its OpenAI
//! integration sends the `additional_kwargs` of a message that has `tool_calls` to the model
//! service, which may refuse a field it does not know. When Python agents read what you write,
//! consider [`LiOptions::minimal`] and keep ids and times in the store's own columns.
//!
//! ```
//! use memory_interop::llamaindex::{LiOptions, from_llamaindex, to_llamaindex};
//! use memory_interop::python_json::dumps;
//!
//! let data = r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "Noted, Dana."}]}"#;
//! let msg = from_llamaindex(&serde_json::from_str(data)?)?;
//! assert_eq!(msg.text(), "Noted, Dana.");
//! assert_eq!(dumps(&to_llamaindex(&msg, &LiOptions::default())), data);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde_json::{Map, Value, json};

use super::python_json::dumps;
use super::record::{
    Recorded, keep_original, keep_unknown_fields, read_role, record_setters, recorded_message,
    take_record, write_record,
};
use super::repeated::RepeatedIds;
use super::{
    AGENT_MEMORY_KEY, UNKNOWN_TIME, arguments_text, closest_role, derived_id, format_time,
    object_at, parts_from_json, remove_nested, without_key,
};
use memory_core::error::{Error, Result};
use memory_core::id::MessageId;
use memory_core::message::{ChatMessage, Media, Part};

/// The metadata key under which a message read from LlamaIndex keeps what our fields cannot hold
/// (see the [module documentation](self)).
pub const METADATA_KEY: &str = "llamaindex";

const PEER: &str = "llamaindex";

const KNOWN_FIELDS: [&str; 3] = ["role", "additional_kwargs", "blocks"];

/// What [`to_llamaindex`] records under `additional_kwargs.agent_memory`. Parts that have no
/// block and the author name are always recorded (they would be lost otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiOptions {
    /// Record our id (unless it is the one derived from the content). Default: `true`.
    pub record_id: bool,
    /// Record our `created_at` (unless it is the epoch, meaning unknown). Default: `true`.
    pub record_created_at: bool,
    /// Record our metadata. Default: `true`.
    pub record_metadata: bool,
}

impl Default for LiOptions {
    /// Record everything: the round trip ours → LlamaIndex → ours is lossless.
    fn default() -> Self {
        Self {
            record_id: true,
            record_created_at: true,
            record_metadata: true,
        }
    }
}

impl LiOptions {
    /// Record only what would otherwise be lost from the message itself (parts without a block,
    /// the author name): for stores that keep ids and times in columns of their own.
    pub fn minimal() -> Self {
        Self {
            record_id: false,
            record_created_at: false,
            record_metadata: false,
        }
    }

    /// Sets whether the id is recorded.
    pub fn with_id(mut self, record: bool) -> Self {
        self.record_id = record;
        self
    }

    record_setters!();
}

/// Converts our message to LlamaIndex's `ChatMessage.model_dump(mode="json")` form.
///
/// A message read with [`from_llamaindex`] whose content (role, author, parts) is unchanged
/// since is written back as it was read: the original's bytes, with only the
/// `additional_kwargs.agent_memory` record of its id, creation time and metadata updated as
/// `options` say. So a message that a store gave an id and a time of its own (a row's), and
/// that `options` do not record, is written back exactly as read, blocks we have no part for
/// (thinking, cache points, citations, `tool_call` blocks) included.
pub fn to_llamaindex(message: &ChatMessage, options: &LiOptions) -> Value {
    if let Some(original) =
        object_at(&message.metadata, METADATA_KEY).and_then(|m| m.get("original"))
        && let Ok(back) = read(original)
    {
        let mut mine = message.clone();
        remove_nested(&mut mine.metadata, METADATA_KEY, "original");
        if back == mine {
            return original.clone();
        }
        if same_content(&back, &mine)
            && let Some(value) = with_record(original, &mine, options)
        {
            return value;
        }
    }
    project(message, options)
}

/// Whether two messages differ at most in id, creation time and our own metadata: what
/// LlamaIndex keeps only in our `agent_memory` record.
fn same_content(a: &ChatMessage, b: &ChatMessage) -> bool {
    a.role == b.role
        && a.author_name == b.author_name
        && a.parts == b.parts
        && a.metadata.get(METADATA_KEY) == b.metadata.get(METADATA_KEY)
}

/// `original` (a message as LlamaIndex wrote it) with the `agent_memory` record of `mine`'s
/// id, creation time and metadata as `options` say, the rest of the record kept. `None` when
/// a record is needed and `original` has no place for it.
fn with_record(original: &Value, mine: &ChatMessage, options: &LiOptions) -> Option<Value> {
    let mut out = original.clone();
    let map = out.as_object_mut()?;
    let role = map.get("role")?.as_str()?.to_owned();
    let blocks = map.get("blocks")?.as_array()?.clone();
    let empty = Map::new();
    let old = match map.get("additional_kwargs") {
        Some(Value::Object(kwargs)) => match kwargs.get(AGENT_MEMORY_KEY) {
            Some(Value::Object(record)) => record,
            Some(_) => return None,
            None => &empty,
        },
        _ => &empty,
    };
    let mut record = Map::new();
    if options.record_id && mine.id != content_id(&role, &blocks) {
        record.insert("id".to_owned(), Value::String(mine.id.as_str().to_owned()));
    }
    if let Some(name) = old.get("author_name") {
        record.insert("author_name".to_owned(), name.clone());
    }
    if options.record_created_at && mine.created_at != UNKNOWN_TIME {
        record.insert(
            "created_at".to_owned(),
            Value::String(format_time(&mine.created_at)),
        );
    }
    if options.record_metadata {
        let metadata = without_key(&mine.metadata, METADATA_KEY);
        if !metadata.is_empty() {
            record.insert("metadata".to_owned(), Value::Object(metadata));
        }
    }
    for (k, v) in old {
        if !["id", "author_name", "created_at", "metadata"].contains(&k.as_str()) {
            record.insert(k.clone(), v.clone());
        }
    }
    if record == *old {
        return Some(original.clone());
    }
    let Some(Value::Object(kwargs)) = map.get_mut("additional_kwargs") else {
        return None;
    };
    if record.is_empty() {
        kwargs.shift_remove(AGENT_MEMORY_KEY);
    } else {
        kwargs.insert(AGENT_MEMORY_KEY.to_owned(), Value::Object(record));
    }
    Some(out)
}

/// Reads LlamaIndex's `ChatMessage.model_dump(mode="json")` form into our message.
///
/// # Errors
/// [`ErrorKind::Serialization`](memory_core::ErrorKind::Serialization) when `value` is not an object,
/// has no string `role` or no array `blocks`, or has an `additional_kwargs` that is not an
/// object.
pub fn from_llamaindex(value: &Value) -> Result<ChatMessage> {
    let mut message = read(value)?;
    if dumps(&project(&message, &LiOptions::default())) != dumps(value) {
        keep_original(&mut message, METADATA_KEY, value);
    }
    Ok(message)
}

/// Reads one message of a thread that is read in order, with `ids` shared by the thread's
/// messages: as [`from_llamaindex`], except that a message without a recorded id gets its id
/// from [`RepeatedIds::next`], so equal messages of the thread have distinct ids (the first
/// keeps the id derived from its content; a later one records its id when written back).
///
/// # Errors
/// As [`from_llamaindex`].
pub fn from_llamaindex_in(value: &Value, ids: &mut RepeatedIds) -> Result<ChatMessage> {
    let mut message = from_llamaindex(value)?;
    if derives_id(value) {
        message.id = ids.next(message.id);
    }
    Ok(message)
}

/// Whether a message in `ChatMessage.model_dump()` form records no valid id of ours
/// (`additional_kwargs.agent_memory.id`), so the id it reads with is derived from its content.
pub fn derives_id(value: &Value) -> bool {
    value
        .get("additional_kwargs")
        .and_then(|k| k.get(AGENT_MEMORY_KEY))
        .and_then(|r| r.get("id"))
        .and_then(Value::as_str)
        .is_none_or(|id| MessageId::new(id).is_err())
}

/// Whether `id` is one that a store of LlamaIndex's table gives a row that records no id:
/// `llamaindex:<table>:<row id>`, with a table name of 1 to 63 characters of `[A-Za-z0-9_]`
/// not starting with a digit, and a row id in decimal (`memory-sql`'s
/// `LlamaIndexHistoryStore::row_message_id`). Such an id names a row of one table of one
/// database: a copy of the row in another table reads there under that table's own row id.
pub fn is_row_id(id: &str) -> bool {
    let Some((table, row)) = id
        .strip_prefix("llamaindex:")
        .and_then(|rest| rest.rsplit_once(':'))
    else {
        return false;
    };
    let name_ok = table.len() <= 63
        && table
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    name_ok && row.parse::<i64>().is_ok_and(|n| n.to_string() == row)
}

fn invalid(what: &str) -> Error {
    Error::serialization(format!("not a LlamaIndex chat message: {what}"))
}

/// The content of a message as LlamaIndex holds it: blocks plus the two tool fields of
/// `additional_kwargs`.
#[derive(Debug, PartialEq)]
struct LiContent {
    blocks: Vec<Value>,
    tool_calls: Option<Value>,
    tool_call_id: Option<String>,
}

fn read(value: &Value) -> Result<ChatMessage> {
    let map = value
        .as_object()
        .ok_or_else(|| invalid("a message is a JSON object"))?;
    let mut li = Map::new();
    let (role_name, role) = read_role(map, &mut li).ok_or_else(|| invalid("no string \"role\""))?;
    let blocks = map
        .get("blocks")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("no array \"blocks\""))?;
    let mut kwargs = match map.get("additional_kwargs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(k)) => k.clone(),
        Some(_) => return Err(invalid("\"additional_kwargs\" is not an object")),
    };
    let record = take_record(&mut kwargs);
    let tool_calls = match kwargs.get("tool_calls") {
        Some(calls) if tool_calls_to_parts(calls).is_some() => kwargs.shift_remove("tool_calls"),
        _ => None,
    };
    let tool_call_id = match kwargs.get("tool_call_id") {
        Some(Value::String(id)) => {
            let id = id.clone();
            kwargs.shift_remove("tool_call_id");
            Some(id)
        }
        _ => None,
    };
    if !kwargs.is_empty() {
        li.insert("additional_kwargs".to_owned(), Value::Object(kwargs));
    }
    keep_unknown_fields(&mut li, map, &KNOWN_FIELDS);

    let content = LiContent {
        blocks: blocks.clone(),
        tool_calls,
        tool_call_id,
    };
    let parts = match record.get("parts").and_then(parts_from_json) {
        Some(recorded) if project_parts(&recorded).0 == content => recorded,
        _ => read_parts(&content),
    };
    let id = match record
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| MessageId::new(id).ok())
    {
        Some(id) => id,
        None => content_id(role_name, blocks),
    };
    let author_name = record
        .get("author_name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(recorded_message(
        (id, role, author_name),
        parts,
        &record,
        li,
        METADATA_KEY,
    ))
}

/// The id of a message with no recorded id: UUIDv5 of `json.dumps([role, blocks])`.
fn content_id(role: &str, blocks: &[Value]) -> MessageId {
    derived_id(PEER, &dumps(&json!([role, Value::Array(blocks.to_vec())])))
}

fn project(message: &ChatMessage, options: &LiOptions) -> Value {
    let empty = Map::new();
    let li = object_at(&message.metadata, METADATA_KEY).unwrap_or(&empty);
    let role = match li.get("role").and_then(Value::as_str) {
        Some(name) if closest_role(name) == message.role => name,
        _ => message.role.as_str(),
    };
    let (content, faithful) = project_parts(&message.parts);
    let mut kwargs = object_at(li, "additional_kwargs")
        .map(|k| {
            let mut k = without_key(k, AGENT_MEMORY_KEY);
            k.shift_remove("tool_calls");
            k.shift_remove("tool_call_id");
            k
        })
        .unwrap_or_default();
    if let Some(calls) = &content.tool_calls {
        kwargs.insert("tool_calls".to_owned(), calls.clone());
    }
    if let Some(id) = &content.tool_call_id {
        kwargs.insert("tool_call_id".to_owned(), Value::String(id.clone()));
    }
    let mut record = Map::new();
    if options.record_id && message.id != content_id(role, &content.blocks) {
        record.insert(
            "id".to_owned(),
            Value::String(message.id.as_str().to_owned()),
        );
    }
    if let Some(name) = &message.author_name {
        record.insert("author_name".to_owned(), Value::String(name.clone()));
    }
    let recorded = Recorded {
        created_at: options.record_created_at,
        metadata: options.record_metadata,
        parts: !faithful,
    };
    write_record(record, message, recorded, METADATA_KEY, &mut kwargs);
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::String(role.to_owned()));
    out.insert("additional_kwargs".to_owned(), Value::Object(kwargs));
    out.insert("blocks".to_owned(), Value::Array(content.blocks));
    if let Some(fields) = object_at(li, "fields") {
        for (k, v) in fields {
            if !KNOWN_FIELDS.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn text_block(text: &str) -> Value {
    json!({"block_type": "text", "text": text})
}

/// LlamaIndex's content for our parts, and whether reading it back gives the same parts, up to
/// the defaults LlamaIndex fills in (see [`with_defaults`]).
fn project_parts(parts: &[Part]) -> (LiContent, bool) {
    let parts: Vec<Part> = parts.iter().map(with_defaults).collect();
    let mut blocks = Vec::new();
    let mut calls = Vec::new();
    let mut tool_call_id = None;
    for part in &parts {
        match part {
            Part::Text { text } | Part::Refusal { text } => blocks.push(text_block(text)),
            Part::ToolCall {
                id,
                name,
                arguments,
            } => calls.push(json!({
                "id": id,
                "function": {"arguments": arguments, "name": name},
                "type": "function",
            })),
            Part::ToolResult { call_id, content } => {
                if tool_call_id.is_none() {
                    tool_call_id = Some(call_id.clone());
                }
                blocks.push(text_block(content));
            }
            Part::Image(m) | Part::Audio(m) | Part::Video(m) | Part::Document(m) => {
                if let Some(block) = media_block(part, m) {
                    blocks.push(block);
                }
            }
            Part::Data { .. } => {}
            // `Part` is non-exhaustive: a kind added to memory-core later has no block either,
            // and the parts are then recorded under `agent_memory`, like opaque data.
            _ => {}
        }
    }
    let content = LiContent {
        blocks,
        tool_calls: (!calls.is_empty()).then_some(Value::Array(calls)),
        tool_call_id,
    };
    let faithful = read_parts(&content) == parts;
    (content, faithful)
}

/// `filetype` 1.2's file types, `(extension, MIME type)` in its lookup order: LlamaIndex's
/// blocks fill a missing media type from them (`filetype.get_type`).
const FILE_TYPES: &[(&str, &str)] = &[
    ("dwg", "image/vnd.dwg"),
    ("xcf", "image/x-xcf"),
    ("jpg", "image/jpeg"),
    ("jpx", "image/jpx"),
    ("apng", "image/apng"),
    ("png", "image/png"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("tif", "image/tiff"),
    ("cr2", "image/x-canon-cr2"),
    ("bmp", "image/bmp"),
    ("jxr", "image/vnd.ms-photo"),
    ("psd", "image/vnd.adobe.photoshop"),
    ("ico", "image/x-icon"),
    ("heic", "image/heic"),
    ("dcm", "application/dicom"),
    ("avif", "image/avif"),
    ("aac", "audio/aac"),
    ("midi", "audio/midi"),
    ("mp3", "audio/mpeg"),
    ("m4a", "audio/mp4"),
    ("ogg", "audio/ogg"),
    ("flac", "audio/x-flac"),
    ("wav", "audio/x-wav"),
    ("amr", "audio/amr"),
    ("aiff", "audio/x-aiff"),
    ("3gp", "video/3gpp"),
    ("mp4", "video/mp4"),
    ("m4v", "video/x-m4v"),
    ("mkv", "video/x-matroska"),
    ("mov", "video/quicktime"),
    ("avi", "video/x-msvideo"),
    ("wmv", "video/x-ms-wmv"),
    ("mpg", "video/mpeg"),
    ("webm", "video/webm"),
    ("flv", "video/x-flv"),
    ("woff", "application/font-woff"),
    ("woff2", "application/font-woff"),
    ("ttf", "application/font-sfnt"),
    ("otf", "application/font-sfnt"),
    ("doc", "application/msword"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("xls", "application/vnd.ms-excel"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("ppt", "application/vnd.ms-powerpoint"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("br", "application/x-brotli"),
    ("rpm", "application/x-rpm"),
    ("dcm", "application/dicom"),
    ("epub", "application/epub+zip"),
    ("zip", "application/zip"),
    ("tar", "application/x-tar"),
    ("rar", "application/x-rar-compressed"),
    ("gz", "application/gzip"),
    ("bz2", "application/x-bzip2"),
    ("7z", "application/x-7z-compressed"),
    ("pdf", "application/pdf"),
    ("exe", "application/x-msdownload"),
    ("swf", "application/x-shockwave-flash"),
    ("rtf", "application/rtf"),
    ("nes", "application/x-nintendo-nes-rom"),
    ("crx", "application/x-google-chrome-extension"),
    ("cab", "application/vnd.ms-cab-compressed"),
    ("eot", "application/octet-stream"),
    ("ps", "application/postscript"),
    ("xz", "application/x-xz"),
    ("sqlite", "application/x-sqlite3"),
    ("deb", "application/x-deb"),
    ("ar", "application/x-unix-archive"),
    ("Z", "application/x-compress"),
    ("lzo", "application/x-lzop"),
    ("lz", "application/x-lzip"),
    ("elf", "application/x-executable"),
    ("lz4", "application/x-lz4"),
    ("zst", "application/zstd"),
    ("wasm", "application/wasm"),
];

/// The title LlamaIndex gives a document block that has none.
const DEFAULT_DOCUMENT_TITLE: &str = "input_document";

/// The file type of an extension (`filetype.get_type(ext=…)`).
fn type_of_extension(ext: &str) -> Option<(&'static str, &'static str)> {
    FILE_TYPES.iter().copied().find(|(e, _)| *e == ext)
}

/// Python's `Path(location).suffix.replace(".", "")`: the extension of the last path
/// component (`/`-separated, empty and `.` components skipped), or `""`.
fn path_extension(location: &str) -> &str {
    let name = location
        .split('/')
        .rev()
        .find(|c| !c.is_empty() && *c != ".")
        .unwrap_or_default();
    match name.rfind('.') {
        Some(i) if i > 0 => name.get(i.saturating_add(1)..).unwrap_or_default(),
        _ => "",
    }
}

/// How an image, audio or video block of LlamaIndex guesses the type of media at `location`
/// (its `path` or `url`): by the extension, else by the MIME type of a `data:` URL.
fn type_of_location(location: &str) -> Option<(&'static str, &'static str)> {
    let by_extension = match path_extension(location) {
        "" => None,
        ext => type_of_extension(ext),
    };
    by_extension.or_else(|| {
        if !location.starts_with("data:") {
            return None;
        }
        let mime = location.split(";base64,").next()?.split("data:").nth(1)?;
        FILE_TYPES.iter().copied().find(|(_, m)| *m == mime)
    })
}

/// `part` as LlamaIndex holds it once its block is built: the media type (audio: format) it
/// fills from the URL of media that has no inline data, and a document's title and type
/// (`ImageBlock`, `AudioBlock`, `VideoBlock` and `DocumentBlock`'s validators in
/// llama-index-core 0.14.25). Inline data without a media type is not sniffed: LlamaIndex
/// guesses its type from its bytes (`filetype.guess`), we leave it unset.
fn with_defaults(part: &Part) -> Part {
    let (Part::Image(m) | Part::Audio(m) | Part::Video(m) | Part::Document(m)) = part else {
        return part.clone();
    };
    let has_data = m.data.as_deref().is_some_and(|d| !d.is_empty());
    if m.url.is_none() && !has_data {
        return part.clone(); // no block
    }
    let missing = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    let url = m.url.as_deref().unwrap_or_default();
    let mut m = m.clone();
    if let Part::Document(_) = part {
        // `document_mimetype or guess()`: by the extension (not by a `data:` URL), or by
        // sniffing inline data, which we do not do.
        if missing(&m.media_type) {
            m.media_type = match path_extension(url) {
                _ if has_data => None,
                "" => None,
                ext => type_of_extension(ext).map(|(_, mime)| mime.to_owned()),
            };
        }
        if missing(&m.filename) {
            m.filename = Some(DEFAULT_DOCUMENT_TITLE.to_owned());
        }
        return Part::Document(m);
    }
    if has_data || !missing(&m.media_type) {
        return part.clone();
    }
    let guess = |kind: &str| type_of_location(url).filter(|(_, mime)| mime.starts_with(kind));
    let (filled, rebuild): (_, fn(Media) -> Part) = match part {
        Part::Image(_) => (guess("image/").map(|(_, mime)| mime), Part::Image),
        // An audio block's `format` is the extension.
        Part::Audio(_) => (guess("audio/").map(|(ext, _)| ext), Part::Audio),
        _ => (guess("video/").map(|(_, mime)| mime), Part::Video),
    };
    match filled {
        Some(value) => {
            m.media_type = Some(value.to_owned());
            rebuild(m)
        }
        None => part.clone(),
    }
}

fn opt(value: &Option<String>) -> Value {
    value.clone().map_or(Value::Null, Value::String)
}

fn media_block(part: &Part, m: &Media) -> Option<Value> {
    if m.url.is_none() && m.data.is_none() {
        return None;
    }
    Some(match part {
        Part::Image(_) => json!({
            "block_type": "image", "image": opt(&m.data), "path": null, "url": opt(&m.url),
            "image_mimetype": opt(&m.media_type), "detail": opt(&m.detail),
        }),
        Part::Audio(_) => json!({
            "block_type": "audio", "audio": opt(&m.data), "path": null, "url": opt(&m.url),
            "format": opt(&m.media_type),
        }),
        Part::Video(_) => json!({
            "block_type": "video", "video": opt(&m.data), "path": null, "url": opt(&m.url),
            "video_mimetype": opt(&m.media_type), "detail": opt(&m.detail), "fps": null,
        }),
        _ => json!({
            "block_type": "document", "data": opt(&m.data), "path": null, "url": opt(&m.url),
            "title": opt(&m.filename), "document_mimetype": opt(&m.media_type),
        }),
    })
}

fn read_parts(content: &LiContent) -> Vec<Part> {
    let mut parts = Vec::new();
    match &content.tool_call_id {
        Some(call_id) => {
            let texts: Vec<&str> = content
                .blocks
                .iter()
                .filter(|b| b.get("block_type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            parts.push(Part::ToolResult {
                call_id: call_id.clone(),
                content: texts.join("\n"),
            });
            parts.extend(
                content
                    .blocks
                    .iter()
                    .filter(|b| b.get("block_type").and_then(Value::as_str) != Some("text"))
                    .filter_map(block_to_part),
            );
        }
        None => parts.extend(content.blocks.iter().filter_map(block_to_part)),
    }
    if let Some(calls) = content.tool_calls.as_ref().and_then(tool_calls_to_parts) {
        parts.extend(calls);
    }
    parts
}

/// OpenAI-shaped tool calls as our parts, or `None` if any item has another shape.
fn tool_calls_to_parts(calls: &Value) -> Option<Vec<Part>> {
    calls
        .as_array()?
        .iter()
        .map(|call| {
            let function = call.get("function")?;
            Some(Part::ToolCall {
                id: call.get("id")?.as_str()?.to_owned(),
                name: function.get("name")?.as_str()?.to_owned(),
                arguments: arguments_text(function.get("arguments")),
            })
        })
        .collect()
}

fn block_to_part(block: &Value) -> Option<Part> {
    let map = block.as_object()?;
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    let media = |data: &str, media_type: &str, detail: Option<&str>, title: Option<&str>| Media {
        url: text("url"),
        data: text(data),
        media_type: text(media_type),
        detail: detail.and_then(text),
        filename: title.and_then(text),
        file_id: None,
    };
    match map.get("block_type").and_then(Value::as_str)? {
        "text" => Some(Part::Text {
            text: text("text")?,
        }),
        "image" => Some(Part::Image(media(
            "image",
            "image_mimetype",
            Some("detail"),
            None,
        ))),
        "audio" => Some(Part::Audio(media("audio", "format", None, None))),
        "video" => Some(Part::Video(media(
            "video",
            "video_mimetype",
            Some("detail"),
            None,
        ))),
        "document" => Some(Part::Document(media(
            "data",
            "document_mimetype",
            None,
            Some("title"),
        ))),
        "tool_call" => Some(Part::ToolCall {
            id: text("tool_call_id")?,
            name: text("tool_name")?,
            arguments: arguments_text(map.get("tool_kwargs")),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tool_messages;
    use chrono::{DateTime, Utc};
    use memory_core::message::Role;

    fn round_trip(msg: &ChatMessage) {
        let value = to_llamaindex(msg, &LiOptions::default());
        let text = dumps(&value);
        let back = from_llamaindex(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(&back, msg, "{text}");
        assert_eq!(dumps(&to_llamaindex(&back, &LiOptions::default())), text);
    }

    #[test]
    fn ours_round_trip_through_llamaindex() {
        round_trip(&ChatMessage::user("Hi, I am Dana. ü 🎉"));
        round_trip(
            &ChatMessage::assistant("ok")
                .with_author("planner")
                .with_metadata("k", json!([1])),
        );
        round_trip(&ChatMessage::new(
            Role::Developer,
            vec![Part::text("rules")],
        ));
        tool_messages().iter().for_each(round_trip);
        round_trip(&ChatMessage::new(
            Role::User,
            vec![
                Part::text("look"),
                Part::Image(Media::url("https://x/y.png").with_detail("low")),
                Part::Image(Media::inline("image/png", "iVBORw0KGgo=")),
                Part::Audio(Media::inline("wav", "UklGRg==")),
                Part::Video(Media::url("https://x/v.mp4")),
                Part::Document(Media {
                    file_id: Some("file-1".into()),
                    ..Media::default()
                }),
                Part::Document(Media {
                    filename: Some("a.pdf".into()),
                    ..Media::inline("application/pdf", "JVBERi0=")
                }),
                Part::Refusal { text: "no".into() },
                Part::Data {
                    media_type: "x".into(),
                    data: json!({"b": 1, "a": 2}),
                },
            ],
        ));
    }

    #[test]
    fn tool_calls_use_openai_shape() {
        let msg = ChatMessage::tool_call("call_1", "get_calendar", r#"{"day":"2024-05-17"}"#);
        let value = to_llamaindex(&msg, &LiOptions::minimal());
        assert_eq!(
            dumps(&value),
            r#"{"role": "assistant", "additional_kwargs": {"tool_calls": [{"id": "call_1", "function": {"arguments": "{\"day\":\"2024-05-17\"}", "name": "get_calendar"}, "type": "function"}]}, "blocks": []}"#
        );
        let result = to_llamaindex(
            &ChatMessage::tool_result("call_1", "done"),
            &LiOptions::minimal(),
        );
        assert_eq!(
            dumps(&result),
            r#"{"role": "tool", "additional_kwargs": {"tool_call_id": "call_1"}, "blocks": [{"block_type": "text", "text": "done"}]}"#
        );
    }

    #[test]
    fn foreign_messages_round_trip_byte_identically() {
        for text in [
            r#"{"role": "chatbot", "additional_kwargs": {"name": "x"}, "blocks": [{"block_type": "thinking", "content": "hmm"}, {"block_type": "text", "text": "hi"}]}"#,
            r#"{"role": "tool", "additional_kwargs": {"tool_call_id": "c1", "name": "f"}, "blocks": [{"block_type": "text", "text": "42"}]}"#,
            r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "tool_call", "tool_call_id": "c1", "tool_name": "f", "tool_kwargs": {"a": 1}}]}"#,
            r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "https://x/y.png", "image_mimetype": "image/png", "detail": null}]}"#,
            r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": null, "path": "/tmp/a.pdf", "url": null, "title": "input_document", "document_mimetype": "application/pdf"}]}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let msg = from_llamaindex(&value).unwrap();
            assert_eq!(dumps(&to_llamaindex(&msg, &LiOptions::default())), text);
            assert_eq!(msg.id, from_llamaindex(&value).unwrap().id);
        }
        let msg = from_llamaindex(&serde_json::from_str(r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "tool_call", "tool_call_id": "c1", "tool_name": "f", "tool_kwargs": {"a": 1}}]}"#).unwrap()).unwrap();
        assert_eq!(msg.tool_call_ids().collect::<Vec<_>>(), ["c1"]);
    }

    /// What llama-index-core 0.14.25 writes for `ChatMessage(role="user", blocks=[…])` with
    /// these blocks (`json.dumps(message.model_dump(mode="json"))`, captured with the real
    /// library): the media types, audio formats and document titles and types it fills in.
    #[test]
    fn media_get_llamaindexs_defaults() {
        const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
        let url = |u: &str| Media::url(u);
        let cases: Vec<(Vec<Part>, &str)> = vec![
            (
                vec![
                    Part::text("What is in this picture?"),
                    Part::Image(url("https://example.com/cat.png")),
                ],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "What is in this picture?"}, {"block_type": "image", "image": null, "path": null, "url": "https://example.com/cat.png", "image_mimetype": "image/png", "detail": null}]}"#,
            ),
            (
                vec![Part::Image(url(&format!("data:image/png;base64,{PNG}")))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "image_mimetype": "image/png", "detail": null}]}"#,
            ),
            (
                vec![Part::Image(
                    url("https://example.com/a.jpg").with_detail("low"),
                )],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "https://example.com/a.jpg", "image_mimetype": "image/jpeg", "detail": "low"}]}"#,
            ),
            (
                vec![Part::Image(url("https://example.com/a.svg"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "https://example.com/a.svg", "image_mimetype": null, "detail": null}]}"#,
            ),
            (
                vec![Part::Image(url("https://example.com/a.mp3"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "https://example.com/a.mp3", "image_mimetype": null, "detail": null}]}"#,
            ),
            (
                vec![Part::Image(Media {
                    media_type: Some("image/webp".into()),
                    ..url("https://example.com/a.png")
                })],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": null, "path": null, "url": "https://example.com/a.png", "image_mimetype": "image/webp", "detail": null}]}"#,
            ),
            (
                vec![Part::Image(Media::inline("image/png", PNG))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "image", "image": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "path": null, "url": null, "image_mimetype": "image/png", "detail": null}]}"#,
            ),
            (
                vec![Part::Video(url("https://example.com/clip.mp4"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "video", "video": null, "path": null, "url": "https://example.com/clip.mp4", "video_mimetype": "video/mp4", "detail": null, "fps": null}]}"#,
            ),
            (
                vec![Part::Video(url("https://example.com/clip.mpeg"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "video", "video": null, "path": null, "url": "https://example.com/clip.mpeg", "video_mimetype": null, "detail": null, "fps": null}]}"#,
            ),
            (
                vec![Part::Video(url("data:video/webm;base64,AAAA"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "video", "video": null, "path": null, "url": "data:video/webm;base64,AAAA", "video_mimetype": "video/webm", "detail": null, "fps": null}]}"#,
            ),
            (
                vec![Part::Audio(url("https://example.com/voice.wav"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "audio", "audio": null, "path": null, "url": "https://example.com/voice.wav", "format": "wav"}]}"#,
            ),
            (
                vec![Part::Audio(url("data:audio/mpeg;base64,AAAA"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "audio", "audio": null, "path": null, "url": "data:audio/mpeg;base64,AAAA", "format": "mp3"}]}"#,
            ),
            (
                vec![Part::Audio(url("data:audio/wav;base64,AAAA"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "audio", "audio": null, "path": null, "url": "data:audio/wav;base64,AAAA", "format": null}]}"#,
            ),
            (
                vec![Part::Document(url("https://example.com/report.pdf"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": null, "path": null, "url": "https://example.com/report.pdf", "title": "input_document", "document_mimetype": "application/pdf"}]}"#,
            ),
            (
                vec![Part::Document(url("https://example.com/report.docx"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": null, "path": null, "url": "https://example.com/report.docx", "title": "input_document", "document_mimetype": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}]}"#,
            ),
            (
                vec![Part::Document(url("https://example.com/notes.txt"))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": null, "path": null, "url": "https://example.com/notes.txt", "title": "input_document", "document_mimetype": null}]}"#,
            ),
            (
                vec![Part::Document(Media::inline(
                    "application/pdf",
                    "JVBERi0xLjQgdGlueQ==",
                ))],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": "JVBERi0xLjQgdGlueQ==", "path": null, "url": null, "title": "input_document", "document_mimetype": "application/pdf"}]}"#,
            ),
            (
                vec![Part::Document(Media {
                    filename: Some("Q3 report".into()),
                    ..url("https://example.com/report.pdf")
                })],
                r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "document", "data": null, "path": null, "url": "https://example.com/report.pdf", "title": "Q3 report", "document_mimetype": "application/pdf"}]}"#,
            ),
        ];
        for (parts, python) in cases {
            let ours = ChatMessage::new(Role::User, parts);
            let written = dumps(&to_llamaindex(&ours, &LiOptions::minimal()));
            assert_eq!(written, python);
            // Read back, the media carry what LlamaIndex filled in (what a Python `Memory`
            // holds for them), and are written again byte for byte.
            let back = from_llamaindex(&serde_json::from_str(python).unwrap()).unwrap();
            assert_eq!(
                back.parts,
                ours.parts.iter().map(with_defaults).collect::<Vec<_>>()
            );
            assert_eq!(dumps(&to_llamaindex(&back, &LiOptions::default())), python);
        }
    }

    #[test]
    fn python_path_extensions() {
        for (location, ext) in [
            ("https://example.com/cat.png", "png"),
            ("https://example.com/a.b/c", ""),
            ("https://example.com/a.png/", "png"),
            ("https://example.com/a.png?x=1", "png?x=1"),
            ("https://example.com/.png", ""),
            ("https://example.com/a.", ""),
            ("https://example.com/", "com"),
            ("data:image/png;base64,iVBOR+M9Q", ""),
            ("", ""),
        ] {
            assert_eq!(path_extension(location), ext, "{location}");
        }
    }

    /// A message read from a row Python wrote, to which a store gave the row's id and time,
    /// is written back as the row was, blocks we have no part for included; what the options
    /// record of its id and time goes into `agent_memory`, and reads back.
    #[test]
    fn messages_with_a_store_id_are_written_back_as_read() {
        let row = r#"{"role": "assistant", "additional_kwargs": {}, "blocks": [{"block_type": "thinking", "content": "Check the calendar.", "num_tokens": null, "additional_information": {}}, {"block_type": "text", "text": "You are on call until Friday."}, {"block_type": "cache", "cache_control": {"type": "ephemeral", "ttl": "5m"}}, {"block_type": "tool_call", "tool_call_id": "call_1", "tool_name": "get_weather", "tool_kwargs": {"city": "Oslo"}}]}"#;
        let mut msg = from_llamaindex(&serde_json::from_str(row).unwrap()).unwrap();
        msg.id = MessageId::new("llamaindex:llama_index_memory:7").unwrap();
        msg.created_at = DateTime::parse_from_rfc3339("2026-11-24T10:00:00.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(dumps(&to_llamaindex(&msg, &LiOptions::minimal())), row);
        let with_id = dumps(&to_llamaindex(&msg, &LiOptions::minimal().with_id(true)));
        assert_eq!(
            with_id,
            row.replace(
                r#""additional_kwargs": {}"#,
                r#""additional_kwargs": {"agent_memory": {"id": "llamaindex:llama_index_memory:7"}}"#
            )
        );
        let everything = to_llamaindex(
            &msg.clone().with_metadata("k", json!(1)),
            &LiOptions::default(),
        );
        let back = from_llamaindex(&everything).unwrap();
        assert_eq!(back.id, msg.id);
        assert_eq!(back.created_at, msg.created_at);
        assert_eq!(back.metadata.get("k"), Some(&json!(1)));
        assert_eq!(back.parts, msg.parts);
        assert_eq!(
            dumps(&to_llamaindex(&back, &LiOptions::default())),
            dumps(&everything)
        );
        // Read and unchanged, it is written back as read, whatever the options.
        assert_eq!(
            dumps(&to_llamaindex(&back, &LiOptions::minimal())),
            dumps(&everything)
        );
        // A changed message is not the row any more.
        let mut changed = msg.clone();
        changed.parts.push(Part::text("and more"));
        assert_ne!(dumps(&to_llamaindex(&changed, &LiOptions::minimal())), row);
    }

    /// Repeats of a message without a recorded id get ids of their own; the first keeps the
    /// derived one, and a later one records its id when written.
    #[test]
    fn repeated_messages_of_a_thread_get_ids_of_their_own() {
        let ok: Value = serde_json::from_str(r#"{"role": "user", "additional_kwargs": {}, "blocks": [{"block_type": "text", "text": "ok"}]}"#).unwrap();
        let mut ids = RepeatedIds::new();
        let first = from_llamaindex_in(&ok, &mut ids).unwrap();
        let second = from_llamaindex_in(&ok, &mut ids).unwrap();
        assert_eq!(first.id, from_llamaindex(&ok).unwrap().id);
        assert_ne!(first.id, second.id);
        assert_eq!(
            dumps(&to_llamaindex(&first, &LiOptions::default())),
            dumps(&ok)
        );
        let written = to_llamaindex(&second, &LiOptions::minimal().with_id(true));
        assert!(!derives_id(&written));
        assert_eq!(from_llamaindex(&written).unwrap().id, second.id);
        // A recorded id is the message's, repeated or not.
        let mut again = RepeatedIds::new();
        assert_eq!(
            from_llamaindex_in(&written, &mut again).unwrap().id,
            second.id
        );
    }

    #[test]
    fn row_ids_are_recognised() {
        for id in [
            "llamaindex:llama_index_memory:1",
            "llamaindex:T_2:-3",
            "llamaindex:x:0",
        ] {
            assert!(is_row_id(id), "{id}");
        }
        for id in [
            "llamaindex:llama_index_memory:01",
            "llamaindex:llama_index_memory:x",
            "llamaindex::1",
            "llamaindex:a-b:1",
            "llamaindex:1a:1",
            "llamaindex:1",
            "m-1",
        ] {
            assert!(!is_row_id(id), "{id}");
        }
        assert!(!is_row_id(&format!("llamaindex:{}:1", "t".repeat(64))));
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            json!("x"),
            json!({"blocks": []}),
            json!({"role": "user"}),
            json!({"role": "user", "blocks": [], "additional_kwargs": []}),
        ] {
            assert_eq!(
                from_llamaindex(&bad).unwrap_err().kind(),
                memory_core::ErrorKind::Serialization,
                "{bad}"
            );
        }
    }
}
