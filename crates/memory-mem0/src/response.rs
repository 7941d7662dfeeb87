//! What Mem0 answers: memories, add results, history entries, pages, the ping.
//!
//! Parsing is tolerant, as the answers differ between the platform's API versions, the
//! self-hosted server and mem0 releases: lists come bare (`[...]`) or wrapped
//! (`{"results": [...]}`), unknown fields are ignored, optional fields may be missing or
//! `null`. A memory must still have an `id`.

use memory_core::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryRecord {
    /// Mem0's id of the memory.
    pub id: String,
    /// The remembered text.
    #[serde(default, deserialize_with = "null_as_default")]
    pub memory: String,
    /// The user it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The agent it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The application it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    /// The run it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The hash of the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Metadata stored with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The categories the platform assigned.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub categories: Vec<String>,
    /// When it was created, as Mem0 wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it last changed, as Mem0 wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// The similarity to the query (search results only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

impl MemoryRecord {
    /// The scope the memory was filed under, read back from its ids (tenant included, see
    /// [`Mem0Scope::from_wire`](crate::Mem0Scope::from_wire)).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) when the record carries
    /// no id, or ids that no [`Mem0Scope`](crate::Mem0Scope) sends.
    pub fn scope(&self) -> Result<crate::Mem0Scope> {
        crate::Mem0Scope::from_wire(
            self.user_id.as_deref(),
            self.agent_id.as_deref(),
            self.app_id.as_deref(),
            self.run_id.as_deref(),
        )
    }
}

/// What an add did to one memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryEvent {
    /// A memory was added.
    Add,
    /// A memory was changed.
    Update,
    /// A memory was deleted.
    Delete,
    /// Nothing changed.
    None,
    /// An event this crate does not know.
    Unknown,
}

impl<'de> Deserialize<'de> for MemoryEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(match text.to_ascii_uppercase().as_str() {
            "ADD" => MemoryEvent::Add,
            "UPDATE" => MemoryEvent::Update,
            "DELETE" => MemoryEvent::Delete,
            "NONE" | "NOOP" => MemoryEvent::None,
            _ => MemoryEvent::Unknown,
        })
    }
}

/// One memory an add touched.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AddedMemory {
    /// The memory's id.
    pub id: Option<String>,
    /// Its text (`memory`, or `data.memory` in the platform's v1 answer).
    pub memory: Option<String>,
    /// What happened to it.
    pub event: Option<MemoryEvent>,
}

/// The answer to an add: the memories it touched when Mem0 processed it at once, or the id
/// of the background event when Mem0 queued it (the platform's v3 endpoint always queues).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct AddResponse {
    /// The memories touched (empty when queued).
    pub results: Vec<AddedMemory>,
    /// The background event's id, to poll with `GET /v1/event/{event_id}/`.
    pub event_id: Option<String>,
    /// The processing status (`PENDING`, `SUCCEEDED`...).
    pub status: Option<String>,
    /// A message the server added.
    pub message: Option<String>,
}

impl AddResponse {
    /// Whether Mem0 queued the request for background processing.
    pub fn is_queued(&self) -> bool {
        self.event_id.is_some() && self.results.is_empty()
    }

    /// Reads the platform's `{"event_id", "status"}`, `[{"id", "data": {"memory"}, "event"}]`
    /// or `[{"message", "status", "event_id"}]`, or the self-hosted server's
    /// `{"results": [{"id", "memory", "event"}]}`.
    pub(crate) fn from_value(value: Value) -> Result<Self> {
        let mut out = AddResponse::default();
        let items = match value {
            Value::Array(items) => items,
            Value::Object(mut map) => {
                out.event_id = map.get("event_id").and_then(text);
                out.status = map.get("status").and_then(text);
                out.message = map.get("message").and_then(text);
                match map.remove("results") {
                    Some(Value::Array(items)) => items,
                    Some(Value::Null) | None => Vec::new(),
                    Some(_) => return Err(shape("add", "`results` is not a list")),
                }
            }
            Value::Null => Vec::new(),
            _ => return Err(shape("add", "expected an object or a list")),
        };
        for item in items {
            let Value::Object(item) = item else {
                return Err(shape("add", "a result is not an object"));
            };
            let id = item.get("id").and_then(text);
            if id.is_none() && item.contains_key("event_id") {
                // A queued notice in a list (the platform's v1 asynchronous answer).
                out.event_id = out.event_id.or_else(|| item.get("event_id").and_then(text));
                out.status = out.status.or_else(|| item.get("status").and_then(text));
                out.message = out.message.or_else(|| item.get("message").and_then(text));
                continue;
            }
            let memory = item.get("memory").and_then(text).or_else(|| {
                item.get("data")
                    .and_then(|d| d.get("memory"))
                    .and_then(text)
            });
            let event = item
                .get("event")
                .cloned()
                .and_then(|e| serde_json::from_value(e).ok());
            out.results.push(AddedMemory { id, memory, event });
        }
        Ok(out)
    }
}

/// One message of the input that changed a memory (platform history only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HistoryMessage {
    /// Who wrote it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub role: String,
    /// Its text.
    #[serde(default, deserialize_with = "null_as_default")]
    pub content: String,
}

/// One change of a memory.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The change's id.
    #[serde(default)]
    pub id: Option<String>,
    /// The memory changed.
    #[serde(default)]
    pub memory_id: Option<String>,
    /// What happened.
    #[serde(default)]
    pub event: Option<MemoryEvent>,
    /// The text before.
    #[serde(default)]
    pub old_memory: Option<String>,
    /// The text after.
    #[serde(default)]
    pub new_memory: Option<String>,
    /// The user the memory belongs to (platform).
    #[serde(default)]
    pub user_id: Option<String>,
    /// The messages that caused the change (platform).
    #[serde(default, deserialize_with = "null_as_default")]
    pub input: Vec<HistoryMessage>,
    /// The memory's metadata at the time (platform).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// The memory's categories at the time (platform).
    #[serde(default, deserialize_with = "null_as_default")]
    pub categories: Vec<String>,
    /// When the change was recorded.
    #[serde(default)]
    pub created_at: Option<String>,
    /// When the entry last changed.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct MemoryPage {
    /// The memories of this page.
    pub results: Vec<MemoryRecord>,
    /// How many memories match in all, when the server says.
    pub count: Option<u64>,
    /// The next page's URL, when the platform gives one.
    pub next: Option<String>,
    /// The previous page's URL, when the platform gives one.
    pub previous: Option<String>,
    /// Whether a later page has more memories.
    pub has_more: bool,
}

impl MemoryPage {
    /// Reads `{"count", "next", "previous", "results"}` or a bare list.
    pub(crate) fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(mut map) if map.contains_key("results") => {
                let count = map.get("count").and_then(Value::as_u64);
                let next = map.get("next").and_then(text);
                let previous = map.get("previous").and_then(text);
                let results = records(map.remove("results").unwrap_or(Value::Null), "list")?;
                Ok(MemoryPage {
                    has_more: next.is_some(),
                    results,
                    count,
                    next,
                    previous,
                })
            }
            other => Ok(MemoryPage {
                results: records(other, "list")?,
                ..MemoryPage::default()
            }),
        }
    }
}

/// The platform's answer to `GET /v1/ping/`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[non_exhaustive]
pub struct PingInfo {
    /// `ok` when the key works.
    #[serde(default)]
    pub status: Option<String>,
    /// The key's organization.
    #[serde(default)]
    pub org_id: Option<String>,
    /// The key's project.
    #[serde(default)]
    pub project_id: Option<String>,
    /// The key owner's e-mail address.
    #[serde(default)]
    pub user_email: Option<String>,
}

/// Reads a list of memories: `[...]`, `{"results": [...]}` (`null` is an empty list).
pub(crate) fn records(value: Value, what: &str) -> Result<Vec<MemoryRecord>> {
    list(value, what)?
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).map_err(|err| {
                Error::serialization(format!(
                    "a memory in the Mem0 {what} answer is malformed: {err}"
                ))
                .with_source(err)
            })
        })
        .collect()
}

/// Reads a list of history entries, in either shape.
pub(crate) fn history(value: Value) -> Result<Vec<HistoryEntry>> {
    list(value, "history")?
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).map_err(|err| {
                Error::serialization(format!(
                    "an entry of the Mem0 history answer is malformed: {err}"
                ))
                .with_source(err)
            })
        })
        .collect()
}

fn list(value: Value, what: &str) -> Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        Value::Object(mut map) => match map.remove("results") {
            Some(Value::Array(items)) => Ok(items),
            Some(Value::Null) => Ok(Vec::new()),
            _ => Err(shape(what, "expected a list or {\"results\": [...]}")),
        },
        _ => Err(shape(what, "expected a list or {\"results\": [...]}")),
    }
}

fn shape(what: &str, detail: &str) -> Error {
    Error::serialization(format!(
        "the Mem0 {what} answer has an unexpected shape: {detail}"
    ))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use serde_json::json;

    use super::*;

    #[test]
    fn records_in_both_shapes_ignore_unknown_fields() {
        let item = json!({
            "id": "m1", "memory": "Likes tea", "user_id": "u", "score": 0.8,
            "categories": null, "metadata": {"k": 1}, "brand_new_field": [1, 2]
        });
        let bare = records(json!([item.clone()]), "search").unwrap();
        let wrapped = records(json!({"results": [item], "relations": []}), "search").unwrap();
        assert_eq!(bare, wrapped);
        assert_eq!(bare[0].memory, "Likes tea");
        assert_eq!(bare[0].score, Some(0.8));
        assert!(bare[0].categories.is_empty());
        assert!(records(json!(null), "search").unwrap().is_empty());
        let err = records(json!([{"memory": "no id"}]), "search").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
        assert!(records(json!("text"), "search").is_err());
    }

    #[test]
    fn add_answers_of_every_shape() {
        let queued =
            AddResponse::from_value(json!({"event_id": "e1", "status": "PENDING"})).unwrap();
        assert!(queued.is_queued());
        assert_eq!(queued.event_id.as_deref(), Some("e1"));

        let v1 = AddResponse::from_value(
            json!([{"id": "m1", "data": {"memory": "Is vegan"}, "event": "ADD"}]),
        )
        .unwrap();
        assert_eq!(v1.results[0].memory.as_deref(), Some("Is vegan"));
        assert_eq!(v1.results[0].event, Some(MemoryEvent::Add));

        let v1_async = AddResponse::from_value(
            json!([{"message": "queued", "status": "PENDING", "event_id": "e2"}]),
        )
        .unwrap();
        assert!(v1_async.is_queued());
        assert_eq!(v1_async.message.as_deref(), Some("queued"));

        let oss = AddResponse::from_value(json!({"results": [
            {"id": "m2", "memory": "Lives in Lisbon", "event": "UPDATE", "previous_memory": "x"},
            {"id": "m3", "memory": "y", "event": "SOMETHING_NEW"}
        ]}))
        .unwrap();
        assert_eq!(oss.results.len(), 2);
        assert_eq!(oss.results[0].event, Some(MemoryEvent::Update));
        assert_eq!(oss.results[1].event, Some(MemoryEvent::Unknown));
        assert!(!oss.is_queued());
        assert!(AddResponse::from_value(json!(3)).is_err());
    }

    #[test]
    fn pages_and_history() {
        let page = MemoryPage::from_value(json!({
            "count": 3, "next": "https://api.mem0.ai/v3/memories/?page=2&page_size=2",
            "previous": null, "results": [{"id": "a", "memory": "x"}, {"id": "b", "memory": "y"}]
        }))
        .unwrap();
        assert_eq!(page.count, Some(3));
        assert!(page.has_more);
        assert_eq!(page.results.len(), 2);
        let bare = MemoryPage::from_value(json!([{"id": "a", "memory": "x"}])).unwrap();
        assert!(!bare.has_more);

        let entries = history(json!([{
            "id": "h1", "memory_id": "m1", "event": "UPDATE", "old_memory": null,
            "new_memory": "Likes tea", "input": [{"role": "user", "content": "tea please"}],
            "is_deleted": 0
        }]))
        .unwrap();
        assert_eq!(entries[0].event, Some(MemoryEvent::Update));
        assert_eq!(entries[0].old_memory, None);
        assert_eq!(entries[0].input[0].content, "tea please");
    }
}
