//! The versioned JSON state of an [`AgentSession`] (docs/format.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AgentSession, Conversation};
use crate::error::{Error, Result};
use crate::id::{AgentId, SourceId};
use crate::message::ChatMessage;
use crate::scope::Scope;

/// The version of the session state this library writes.
pub const SESSION_STATE_VERSION: u64 = 1;
const FORMAT: &str = "agent-memory/session";

/// Version 1 as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateV1 {
    #[allow(dead_code)] // checked before the full decode
    format: String,
    #[allow(dead_code)] // checked before the full decode
    version: u64,
    scope: Scope,
    #[serde(default)]
    service_conversation_id: Option<String>,
    #[serde(default)]
    turns: u64,
    #[serde(default)]
    history_window: Option<usize>,
    #[serde(default)]
    agent_windows: BTreeMap<AgentId, usize>,
    #[serde(default)]
    agent_histories: BTreeMap<AgentId, Vec<ChatMessage>>,
    #[serde(default)]
    snapshot: serde_json::Map<String, Value>,
    #[serde(default)]
    provider_states: BTreeMap<SourceId, Value>,
}

/// Version 1 as written, borrowing the session (no copy of the histories).
#[derive(Serialize)]
struct StateV1Ref<'a> {
    format: &'static str,
    version: u64,
    scope: &'a Scope,
    service_conversation_id: Option<&'a str>,
    turns: u64,
    history_window: Option<usize>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    agent_windows: &'a BTreeMap<AgentId, usize>,
    agent_histories: &'a BTreeMap<AgentId, Vec<ChatMessage>>,
    snapshot: &'a serde_json::Map<String, Value>,
    provider_states: &'a BTreeMap<SourceId, Value>,
}

/// The two fields read before anything else, to pick the decoder.
#[derive(Deserialize)]
struct Header {
    format: Option<Value>,
    version: Option<Value>,
}

pub(crate) struct SessionParts {
    pub(crate) scope: Scope,
    pub(crate) conversation: Conversation,
    pub(crate) turns: u64,
    pub(crate) history_window: Option<usize>,
    pub(crate) agent_windows: BTreeMap<AgentId, usize>,
    pub(crate) agent_histories: BTreeMap<AgentId, Vec<ChatMessage>>,
    pub(crate) snapshot: serde_json::Map<String, Value>,
    pub(crate) provider_states: BTreeMap<SourceId, Value>,
}

fn state_ref(session: &AgentSession) -> StateV1Ref<'_> {
    StateV1Ref {
        format: FORMAT,
        version: SESSION_STATE_VERSION,
        scope: &session.scope,
        service_conversation_id: session.service_conversation_id(),
        turns: session.turns,
        history_window: session.history_window,
        agent_windows: &session.agent_windows,
        agent_histories: &session.agent_histories,
        snapshot: &session.snapshot,
        provider_states: &session.provider_states,
    }
}

pub(crate) fn encode(session: &AgentSession) -> Result<Value> {
    Ok(serde_json::to_value(state_ref(session))?)
}

pub(crate) fn encode_string(session: &AgentSession) -> Result<String> {
    Ok(serde_json::to_string(&state_ref(session))?)
}

/// Checks the format tag and returns the version.
fn check_header(header: &Header) -> Result<u64> {
    match header.format.as_ref().and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(Error::serialization(format!(
                "not a session state: format is {other:?}, expected {FORMAT:?}"
            )));
        }
        None => {
            return Err(Error::serialization(format!(
                "not a session state: no \"format\": {FORMAT:?} field"
            )));
        }
    }
    let version = header
        .version
        .as_ref()
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::serialization("the session state has no integer \"version\""))?;
    if version != SESSION_STATE_VERSION {
        // Versions to come migrate here, oldest first, into the newest shape.
        return Err(Error::serialization(format!(
            "session state version {version} is not supported; this library reads versions 1 to {SESSION_STATE_VERSION}"
        )));
    }
    Ok(version)
}

fn invalid(e: serde_json::Error) -> Error {
    Error::serialization(format!("invalid session state: {e}"))
}

pub(crate) fn decode(value: &Value) -> Result<AgentSession> {
    if !value.is_object() {
        return Err(Error::serialization(
            "a session state must be a JSON object",
        ));
    }
    check_header(&Header::deserialize(value).map_err(invalid)?)?;
    Ok(from_state(StateV1::deserialize(value).map_err(invalid)?))
}

pub(crate) fn decode_str(json: &str) -> Result<AgentSession> {
    let header: Header = serde_json::from_str(json).map_err(|e| {
        if e.is_data() {
            Error::serialization("a session state must be a JSON object")
        } else {
            invalid(e)
        }
    })?;
    check_header(&header)?;
    Ok(from_state(serde_json::from_str(json).map_err(invalid)?))
}

fn from_state(state: StateV1) -> AgentSession {
    AgentSession::from_parts(SessionParts {
        scope: state.scope,
        conversation: match state.service_conversation_id {
            Some(id) => Conversation::Service(id),
            None => Conversation::Local,
        },
        turns: state.turns,
        history_window: state.history_window,
        agent_windows: state.agent_windows,
        agent_histories: state.agent_histories,
        snapshot: state.snapshot,
        provider_states: state.provider_states,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde_json::json;

    fn sample() -> AgentSession {
        let mut s = AgentSession::new(Scope::session("s-1").unwrap().with_user("u").unwrap());
        s.add_history_message("planner", ChatMessage::user("hi"))
            .unwrap();
        s.update_snapshot("step", json!(3));
        s.set_provider_state(SourceId::new("mem0").unwrap(), json!({"user_id": "u"}));
        s.set_history_window(Some(5));
        s.record_turn();
        s
    }

    #[test]
    fn round_trip_is_exact() {
        let s = sample();
        let back = AgentSession::deserialize(&s.serialize().unwrap()).unwrap();
        assert_eq!(back, s);
        let text = s.to_json().unwrap();
        assert_eq!(AgentSession::from_json(&text).unwrap(), s);
    }

    #[test]
    fn service_conversation_survives() {
        let mut s = sample();
        s.set_service_conversation_id("conv_123");
        let back = AgentSession::deserialize(&s.serialize().unwrap()).unwrap();
        assert_eq!(back.service_conversation_id(), Some("conv_123"));
    }

    #[test]
    fn bad_states_are_typed_errors() {
        let good = sample().serialize().unwrap();
        let mut unknown_version = good.clone();
        unknown_version["version"] = json!(2);
        let mut wrong_type = good.clone();
        wrong_type["turns"] = json!("three");
        let mut bad_id = good.clone();
        bad_id["scope"]["session"] = json!("no spaces allowed");
        let mut extra = good.clone();
        extra["password"] = json!("x");
        for bad in [
            json!(null),
            json!([]),
            json!("state"),
            json!({}),
            json!({"format": "other", "version": 1}),
            json!({"format": FORMAT}),
            unknown_version,
            wrong_type,
            bad_id,
            extra,
        ] {
            let err = AgentSession::deserialize(&bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Serialization, "{bad}");
        }
        let text = sample().to_json().unwrap();
        for cut in [0, 1, text.len() / 2, text.len() - 1] {
            let err = AgentSession::from_json(&text[..cut]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Serialization);
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = AgentSession::from_json(&deep).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
    }

    #[test]
    fn restore_into_used_session_fails_and_keeps_it() {
        let original = sample();
        let state = original.serialize().unwrap();
        let mut used = AgentSession::new(Scope::session("other").unwrap());
        used.add_history_message("a", ChatMessage::user("x"))
            .unwrap();
        let before = used.clone();
        let err = used.restore(&state).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_eq!(used, before);
        let mut fresh = AgentSession::new(Scope::session("other").unwrap());
        fresh.restore(&state).unwrap();
        assert_eq!(fresh, original);
    }
}
