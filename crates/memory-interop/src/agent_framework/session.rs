//! Agent Framework's `AgentSession.to_dict()` ⇄ our [`AgentSession`] and its history.
//!
//! ```json
//! {"type": "session", "session_id": "session-1", "service_session_id": null,
//!  "state": {"in_memory": {"messages": [ … ]}, "redis_memory": {}}}
//! ```
//!
//! | Agent Framework | ours |
//! | --- | --- |
//! | `session_id` | the session id of the scope ([`import_session_into`] takes tenant, user, agent and source from a template scope) |
//! | `service_session_id`, a string | the service conversation id ([`Conversation::Service`](memory_core::Conversation::Service)) |
//! | `service_session_id`, any other value (a dict) | kept in the snapshot record (below); the conversation stays local |
//! | `state.in_memory.messages` | [`ImportedSession::messages`], beside the session, in order: they are the conversation's history, which in our design lives in a [`HistoryStore`](memory_core::HistoryStore) thread at the session's scope, so the caller appends them there (the session's per-agent histories are for team members and are left empty) |
//! | `state.<source_id>` | the provider state of that source id, verbatim |
//!
//! [`export_session`] writes the same shape from a session and the messages of its history (for
//! example read back from the `HistoryStore`); the messages go into `state.in_memory.messages`
//! in the session-state layout (`"type"` last). Our turn count, history windows, per-agent
//! histories, snapshot and the tenant, user and agent of the scope have no place in that shape
//! and are not written.
//!
//! What the shape holds and our session has no field for is kept in the session snapshot under
//! [`SNAPSHOT_KEY`] (`"agent_framework"`), only when present, so that exporting an imported session
//! gives back the same bytes:
//!
//! | key | holds |
//! | --- | --- |
//! | `session_id` | a `session_id` that is not a valid [`SessionId`]: our id is then UUIDv5 of it, deterministic |
//! | `service_session_id` | a `service_session_id` that is neither null nor a string |
//! | `source_names` | `{our source id: state key}` for state keys that are not valid [`SourceId`]s (our id is then UUIDv5 of the key) |
//! | `null_states` | state keys whose value is `null` (a provider state cannot be null) |
//! | `in_memory` | the `in_memory` dict when it holds more than `messages` (`messages` replaced by `null`) |
//! | `state_keys` | the order of the state keys, when it is not the default (`in_memory` first, then the others by source id) |
//! | `fields` | top-level keys besides `type`, `session_id`, `service_session_id` and `state` (such as the `version` of `FileSessionStore`), written after `state` |

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{AfOptions, from_agent_framework_in, to_agent_framework_in};
use crate::derived_uuid;
use crate::repeated::RepeatedIds;
use memory_core::error::{Error, Result};
use memory_core::id::{SessionId, SourceId};
use memory_core::message::ChatMessage;
use memory_core::scope::Scope;
use memory_core::session::AgentSession;

/// The source id of Agent Framework's `InMemoryHistoryProvider`, whose state holds the messages.
pub const IN_MEMORY_SOURCE: &str = "in_memory";

/// The snapshot key under which an imported session keeps what our session has no field for
/// (see the [module documentation](self)).
pub const SNAPSHOT_KEY: &str = "agent_framework";

const PEER: &str = "agent-framework-session";

const TOP_LEVEL: [&str; 4] = ["type", "session_id", "service_session_id", "state"];

/// A session read from `AgentSession.to_dict()`, with the messages of its in-memory history.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedSession {
    /// The session: scope, service conversation id and provider states.
    pub session: AgentSession,
    /// The messages of `state.in_memory.messages`, oldest first, for the caller to append to the
    /// session's history thread (empty when the session kept none, as with a Redis history).
    pub messages: Vec<ChatMessage>,
}

/// Reads `AgentSession.to_dict()` into a session in the default tenant with the default source.
///
/// ```
/// use memory_interop::agent_framework::session::{export_session, import_session};
/// use memory_interop::python_json::dumps;
///
/// let text = r#"{"type": "session", "session_id": "session-1", "service_session_id": null, "state": {"redis_memory": {}}}"#;
/// let imported = import_session(&serde_json::from_str(text)?)?;
/// assert_eq!(imported.session.id().as_str(), "session-1");
/// assert!(imported.messages.is_empty());
/// assert_eq!(dumps(&export_session(&imported.session, &imported.messages)), text);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ErrorKind::Serialization`](memory_core::ErrorKind::Serialization) when `value` is not a session
/// dict (not an object, a `type` other than `"session"`, no string `session_id`, a `state` that
/// is not an object) or holds a message that is not an Agent Framework message.
pub fn import_session(value: &Value) -> Result<ImportedSession> {
    // Only the tenant and source of the template are used: the defaults.
    import_session_into(value, &Scope::session("template")?)
}

/// Reads `AgentSession.to_dict()` into a session whose scope has the tenant, user, agent and
/// source of `template` and the session id of the dict.
///
/// # Errors
/// As [`import_session`].
pub fn import_session_into(value: &Value, template: &Scope) -> Result<ImportedSession> {
    let map = value
        .as_object()
        .ok_or_else(|| invalid("a session is a JSON object"))?;
    match map.get("type") {
        None => {}
        Some(Value::String(kind)) if kind == "session" => {}
        Some(other) => return Err(invalid(&format!("\"type\" is {other}, not \"session\""))),
    }
    let mut record = Map::new();
    let original_id = map
        .get("session_id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("no string \"session_id\""))?;
    let session_id = match SessionId::new(original_id) {
        Ok(id) => id,
        Err(_) => {
            record.insert(
                "session_id".to_owned(),
                Value::String(original_id.to_owned()),
            );
            session_id_for(original_id)?
        }
    };
    let mut scope =
        Scope::new(template.tenant().clone(), session_id).with_source_id(template.source().clone());
    if let Some(user) = template.user() {
        scope = scope.with_user(user.as_str())?;
    }
    if let Some(agent) = template.agent() {
        scope = scope.with_agent_id(agent.clone());
    }
    let mut session = AgentSession::new(scope);
    match map.get("service_session_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) => session.set_service_conversation_id(id.clone()),
        Some(other) => {
            record.insert("service_session_id".to_owned(), other.clone());
        }
    }
    let fields: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| !TOP_LEVEL.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !fields.is_empty() {
        record.insert("fields".to_owned(), Value::Object(fields));
    }

    let empty = Map::new();
    let state = match map.get("state") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(state)) => state,
        Some(_) => return Err(invalid("\"state\" is not an object")),
    };
    let mut messages = Vec::new();
    let mut source_names = Map::new();
    let mut null_states = Vec::new();
    for (key, item) in state {
        if key == IN_MEMORY_SOURCE
            && let Value::Object(in_memory) = item
            && in_memory.get("messages").is_none_or(Value::is_array)
        {
            // Repeats of one message without `message_id` get ids of their own.
            let mut ids = RepeatedIds::new();
            for message in in_memory
                .get("messages")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                messages.push(from_agent_framework_in(message, &mut ids)?);
            }
            if in_memory.len() != 1 || !in_memory.contains_key("messages") {
                let mut template = in_memory.clone();
                if let Some(slot) = template.get_mut("messages") {
                    *slot = Value::Null;
                }
                record.insert("in_memory".to_owned(), Value::Object(template));
            }
            continue;
        }
        if item.is_null() {
            null_states.push(Value::String(key.clone()));
            continue;
        }
        let source = match SourceId::new(key.as_str()) {
            Ok(source) => source,
            Err(_) => {
                let source = source_id_for(key)?;
                source_names.insert(source.as_str().to_owned(), Value::String(key.clone()));
                source
            }
        };
        session.set_provider_state(source, item.clone());
    }
    if !source_names.is_empty() {
        record.insert("source_names".to_owned(), Value::Object(source_names));
    }
    if !null_states.is_empty() {
        record.insert("null_states".to_owned(), Value::Array(null_states));
    }
    // Record the key order only if the default order would differ.
    let default_keys: Vec<String> = state_entries(&session, &messages, &record)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    if !default_keys.iter().eq(state.keys()) {
        record.insert(
            "state_keys".to_owned(),
            Value::Array(state.keys().cloned().map(Value::String).collect()),
        );
    }
    if !record.is_empty() {
        session.update_snapshot(SNAPSHOT_KEY, Value::Object(record));
    }
    Ok(ImportedSession { session, messages })
}

/// Writes `session` and the messages of its history as `AgentSession.to_dict()`.
///
/// Exporting a session read with [`import_session`] with the messages it returned gives back the
/// same bytes (compare with [`python_json::dumps`](crate::python_json::dumps)).
pub fn export_session(session: &AgentSession, messages: &[ChatMessage]) -> Value {
    let empty = Map::new();
    let record = session
        .snapshot()
        .get(SNAPSHOT_KEY)
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let session_id = match record.get("session_id").and_then(Value::as_str) {
        Some(original) if session_id_for(original).ok().as_ref() == Some(session.id()) => original,
        _ => session.id().as_str(),
    };
    let service = match session.service_conversation_id() {
        Some(id) => Value::String(id.to_owned()),
        None => record
            .get("service_session_id")
            .cloned()
            .unwrap_or(Value::Null),
    };
    let mut out = Map::new();
    out.insert("type".to_owned(), Value::String("session".to_owned()));
    out.insert(
        "session_id".to_owned(),
        Value::String(session_id.to_owned()),
    );
    out.insert("service_session_id".to_owned(), service);
    out.insert(
        "state".to_owned(),
        Value::Object(
            state_entries(session, messages, record)
                .into_iter()
                .collect(),
        ),
    );
    if let Some(Value::Object(fields)) = record.get("fields") {
        for (k, v) in fields {
            if !TOP_LEVEL.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The entries of `state`, in the recorded order if there is one, else `in_memory` first and
/// the provider states by source id; entries not in the recorded order follow it.
fn state_entries(
    session: &AgentSession,
    messages: &[ChatMessage],
    record: &Map<String, Value>,
) -> Vec<(String, Value)> {
    let in_memory_source = SourceId::new(IN_MEMORY_SOURCE).ok();
    let names = record.get("source_names").and_then(Value::as_object);
    // Provider states as (state key, value), by source id; the in-memory one is handled apart.
    let providers: Vec<(String, &Value)> = session
        .provider_sources()
        .filter(|s| Some(*s) != in_memory_source.as_ref())
        .filter_map(|source| {
            let name = names
                .and_then(|n| n.get(source.as_str()))
                .and_then(Value::as_str)
                .unwrap_or(source.as_str())
                .to_owned();
            session.provider_state(source).map(|state| (name, state))
        })
        .collect();
    let nulls: Vec<&str> = record
        .get("null_states")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let in_memory_state = in_memory_source
        .as_ref()
        .and_then(|s| session.provider_state(s));
    let template = record.get("in_memory").and_then(Value::as_object);
    let wants_in_memory = !messages.is_empty() || template.is_some() || in_memory_state.is_some();
    let in_memory = || -> Value {
        if messages.is_empty()
            && template.is_none()
            && let Some(state) = in_memory_state
        {
            return state.clone();
        }
        let mut dict = template.cloned().unwrap_or_default();
        // Repeats of one message are written as they were read: the ids that reading them in
        // order gives need no `message_id`.
        let mut ids = RepeatedIds::new();
        let items: Vec<Value> = messages
            .iter()
            .map(|m| to_agent_framework_in(m, &AfOptions::session_state(), &mut ids))
            .collect();
        if dict.contains_key("messages") || template.is_none() || !items.is_empty() {
            dict.insert("messages".to_owned(), Value::Array(items));
        }
        Value::Object(dict)
    };

    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut placed_in_memory = false;
    match record.get("state_keys").and_then(Value::as_array) {
        Some(order) => {
            for name in order.iter().filter_map(Value::as_str) {
                if used.contains(name) {
                    continue;
                }
                if name == IN_MEMORY_SOURCE {
                    entries.push((name.to_owned(), in_memory()));
                    placed_in_memory = true;
                } else if let Some((_, state)) = providers.iter().find(|(n, _)| n == name) {
                    entries.push((name.to_owned(), (*state).clone()));
                } else if nulls.contains(&name) {
                    entries.push((name.to_owned(), Value::Null));
                } else {
                    continue;
                }
                used.insert(name.to_owned());
            }
            if wants_in_memory && !placed_in_memory {
                entries.push((IN_MEMORY_SOURCE.to_owned(), in_memory()));
                used.insert(IN_MEMORY_SOURCE.to_owned());
            }
        }
        None => {
            if wants_in_memory {
                entries.push((IN_MEMORY_SOURCE.to_owned(), in_memory()));
                used.insert(IN_MEMORY_SOURCE.to_owned());
            }
        }
    }
    for (name, state) in providers {
        if used.insert(name.clone()) {
            entries.push((name, state.clone()));
        }
    }
    for name in nulls {
        if used.insert(name.to_owned()) {
            entries.push((name.to_owned(), Value::Null));
        }
    }
    entries
}

fn invalid(what: &str) -> Error {
    Error::serialization(format!("not an Agent Framework session: {what}"))
}

/// Our session id for a `session_id` that is not a valid id: UUIDv5 of it.
fn session_id_for(original: &str) -> Result<SessionId> {
    SessionId::new(derived_uuid(PEER, &format!("session_id\u{0}{original}")))
}

/// Our source id for a state key that is not a valid id: UUIDv5 of it.
fn source_id_for(key: &str) -> Result<SourceId> {
    SourceId::new(derived_uuid(PEER, &format!("source_id\u{0}{key}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python_json::dumps;
    use serde_json::json;

    fn round_trip(text: &str) -> ImportedSession {
        let value: Value = serde_json::from_str(text).unwrap();
        let imported = import_session(&value).unwrap();
        assert_eq!(
            dumps(&export_session(&imported.session, &imported.messages)),
            dumps(&value),
            "{text}"
        );
        imported
    }

    #[test]
    fn messages_are_returned_beside_the_session() {
        let imported = round_trip(
            r#"{"type": "session", "session_id": "s-1", "service_session_id": "conv_1", "state": {"in_memory": {"messages": [{"role": "user", "contents": [{"type": "text", "text": "hi", "additional_properties": {}}], "additional_properties": {}, "type": "message"}]}, "mem0": {"user_id": "dana"}}}"#,
        );
        assert_eq!(imported.messages.len(), 1);
        assert_eq!(imported.messages[0].text(), "hi");
        assert_eq!(imported.session.service_conversation_id(), Some("conv_1"));
        let mem0 = SourceId::new("mem0").unwrap();
        assert_eq!(
            imported.session.provider_state(&mem0),
            Some(&json!({"user_id": "dana"}))
        );
        assert!(imported.session.snapshot().is_empty());
        assert!(!imported.session.has_history());
    }

    /// A user who says "ok" twice: two messages with ids of their own, written back as Python
    /// wrote them.
    #[test]
    fn repeated_messages_keep_apart_and_round_trip() {
        let ok = r#"{"role": "user", "contents": [{"type": "text", "text": "ok", "additional_properties": {}}], "additional_properties": {}, "type": "message"}"#;
        let sure = r#"{"role": "assistant", "contents": [{"type": "text", "text": "Sure.", "additional_properties": {}}], "additional_properties": {}, "type": "message"}"#;
        let imported = round_trip(&format!(
            r#"{{"type": "session", "session_id": "s-1", "service_session_id": null, "state": {{"in_memory": {{"messages": [{ok}, {sure}, {ok}, {sure}, {ok}]}}}}}}"#
        ));
        let ids: BTreeSet<&str> = imported.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids.len(), 5);
    }

    #[test]
    fn odd_sessions_round_trip() {
        // Invalid session id and source key, a dict service id, a null state, an unusual order,
        // an in_memory dict with more than messages, and FileSessionStore's version field.
        let imported = round_trip(
            r#"{"type": "session", "session_id": "my session ü", "service_session_id": {"response_id": "r1"}, "state": {"z provider": {"a": 1}, "in_memory": {"extra": true, "messages": []}, "gone": null, "alpha": {}}, "version": "1.0"}"#,
        );
        assert!(SessionId::new(imported.session.id().as_str()).is_ok());
        assert_eq!(imported.session.service_conversation_id(), None);
        let record = imported.session.snapshot()[SNAPSHOT_KEY]
            .as_object()
            .unwrap();
        assert_eq!(record["session_id"], "my session ü");
        assert_eq!(record["service_session_id"], json!({"response_id": "r1"}));
        // Deterministic ids.
        let again = import_session(&export_session(&imported.session, &imported.messages)).unwrap();
        assert_eq!(again, imported);
        round_trip(
            r#"{"type": "session", "session_id": "s", "service_session_id": null, "state": {"in_memory": {"messages": []}}}"#,
        );
        round_trip(
            r#"{"type": "session", "session_id": "s", "service_session_id": null, "state": {"in_memory": {}}}"#,
        );
        round_trip(
            r#"{"type": "session", "session_id": "s", "service_session_id": null, "state": {"in_memory": "weird"}}"#,
        );
        round_trip(
            r#"{"type": "session", "session_id": "s", "service_session_id": null, "state": {}}"#,
        );
        round_trip(
            r#"{"type": "session", "session_id": "s", "service_session_id": null, "state": {"b": {}, "a": {}}}"#,
        );
    }

    #[test]
    fn template_scope_is_used() {
        let template = Scope::session("x")
            .unwrap()
            .with_tenant("acme")
            .unwrap()
            .with_user("dana")
            .unwrap()
            .with_source("af")
            .unwrap();
        let imported = import_session_into(
            &json!({"type": "session", "session_id": "s-9", "service_session_id": null, "state": {}}),
            &template,
        )
        .unwrap();
        let scope = imported.session.scope();
        assert_eq!(scope.tenant().as_str(), "acme");
        assert_eq!(scope.user().map(|u| u.as_str()), Some("dana"));
        assert_eq!(scope.source().as_str(), "af");
        assert_eq!(scope.session_id().as_str(), "s-9");
    }

    #[test]
    fn new_sessions_export_in_default_order() {
        let mut session = AgentSession::new(Scope::session("s-2").unwrap());
        session.set_provider_state(SourceId::new("redis_memory").unwrap(), json!({}));
        let messages =
            vec![ChatMessage::user("hello").with_id(memory_core::MessageId::new("m1").unwrap())];
        let value = export_session(&session, &messages);
        let text = dumps(&value);
        assert!(text.starts_with(r#"{"type": "session", "session_id": "s-2", "service_session_id": null, "state": {"in_memory": {"messages": [{"role": "user", "contents": [{"type": "text", "text": "hello", "additional_properties": {}}], "message_id": "m1", "additional_properties": {"agent_memory": {"created_at": "#), "{text}");
        assert!(
            text.ends_with(r#"}}, "type": "message"}]}, "redis_memory": {}}}"#),
            "{text}"
        );
        let imported = import_session(&value).unwrap();
        assert_eq!(imported.messages, messages);
    }

    #[test]
    fn malformed_sessions_are_errors() {
        for bad in [
            json!(null),
            json!({"type": "thread", "session_id": "s"}),
            json!({"type": "session"}),
            json!({"type": "session", "session_id": 1}),
            json!({"type": "session", "session_id": "s", "state": []}),
            json!({"type": "session", "session_id": "s", "state": {"in_memory": {"messages": [{"role": "user"}]}}}),
        ] {
            let err = import_session(&bad).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Serialization, "{bad}");
        }
    }
}
