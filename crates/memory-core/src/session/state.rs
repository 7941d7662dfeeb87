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
///
/// Version 2 writes the scope as its canonical key (see docs/format.md); version 1 states are
/// read and migrated.
pub const SESSION_STATE_VERSION: u64 = 2;
const FORMAT: &str = "agent-memory/session";

/// A state as read, generic over the form of its scope: an object ([`Scope`]) in version 1,
/// the canonical key (a `String`) in version 2. The other fields are the same in both.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateRead<S> {
    #[allow(dead_code)] // checked before the full decode
    format: String,
    #[allow(dead_code)] // checked before the full decode
    version: u64,
    scope: S,
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

type StateV1 = StateRead<Scope>;
type StateV2 = StateRead<String>;
/// A state of either version, read in one pass (see [`decode_str`]).
type StateAnyVersion = StateRead<ScopeAnyVersion>;

/// The scope of a state read before its version is checked: the canonical key (version 2) or
/// the object (version 1).
enum ScopeAnyVersion {
    Key(String),
    Object(Scope),
}

impl<'de> Deserialize<'de> for ScopeAnyVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScopeVisitor;
        impl<'de> serde::de::Visitor<'de> for ScopeVisitor {
            type Value = ScopeAnyVersion;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scope key or a scope object")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
                Ok(ScopeAnyVersion::Key(key.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Self::Value, E> {
                Ok(ScopeAnyVersion::Key(key))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                Scope::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ScopeAnyVersion::Object)
            }
        }
        deserializer.deserialize_any(ScopeVisitor)
    }
}

/// Version 2 as written, borrowing the session (no copy of the histories).
#[derive(Serialize)]
struct StateV2Ref<'a> {
    format: &'static str,
    version: u64,
    scope: String,
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

fn state_ref(session: &AgentSession) -> StateV2Ref<'_> {
    StateV2Ref {
        format: FORMAT,
        version: SESSION_STATE_VERSION,
        scope: session.scope.key(),
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

/// Checks the format tag and returns the version, one this library reads.
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
    if version == 0 || version > SESSION_STATE_VERSION {
        return Err(Error::serialization(format!(
            "session state version {version} is not supported; this library reads versions 1 to {SESSION_STATE_VERSION} (a newer state needs a newer agent-memory)"
        )));
    }
    Ok(version)
}

fn invalid(e: serde_json::Error) -> Error {
    Error::serialization(format!("invalid session state: {e}"))
}

/// Decodes one supported version with `read` (from a value or from text) and migrates it to
/// the newest shape: version 1 carries the scope as an object, version 2 as its key.
fn decode_version<D>(version: u64, read: D) -> Result<AgentSession>
where
    D: FnOnce(u64) -> Result<Decoded>,
{
    Ok(match read(version)? {
        Decoded::V1(state) => from_state(state.scope.clone(), state),
        Decoded::V2(state) => {
            let scope = Scope::from_key(&state.scope).map_err(|e| {
                Error::serialization(format!(
                    "invalid session state: the scope is not a canonical scope key: {}",
                    e.message()
                ))
            })?;
            from_state(scope, state)
        }
    })
}

enum Decoded {
    V1(StateV1),
    V2(StateV2),
}

pub(crate) fn decode(value: &Value) -> Result<AgentSession> {
    if !value.is_object() {
        return Err(Error::serialization(
            "a session state must be a JSON object",
        ));
    }
    let version = check_header(&Header::deserialize(value).map_err(invalid)?)?;
    decode_version(version, |version| {
        Ok(if version == 1 {
            Decoded::V1(StateV1::deserialize(value).map_err(invalid)?)
        } else {
            Decoded::V2(StateV2::deserialize(value).map_err(invalid)?)
        })
    })
}

/// Decodes a state from its text.
///
/// The common case, a valid state, is read in one pass ([`decode_one_pass`]). Anything that
/// pass does not accept is decoded again by [`decode_str_checked`], the header first and then
/// the body of its version, which gives the precise error (or, for a form only the checked
/// decoder reads, the session): the one pass is never more lenient than the checked decode, so
/// both give the same answer.
pub(crate) fn decode_str(json: &str) -> Result<AgentSession> {
    match decode_one_pass(json) {
        Some(session) => Ok(session),
        None => decode_str_checked(json),
    }
}

/// Reads a state of either version in one pass, or `None` when it is not a valid state of a
/// supported version whose scope has its version's form.
fn decode_one_pass(json: &str) -> Option<AgentSession> {
    let state: StateAnyVersion = serde_json::from_str(json).ok()?;
    if state.format != FORMAT {
        return None;
    }
    let scope = match (state.version, &state.scope) {
        (1, ScopeAnyVersion::Object(scope)) => scope.clone(),
        (2, ScopeAnyVersion::Key(key)) => Scope::from_key(key).ok()?,
        _ => return None,
    };
    Some(from_state(scope, state))
}

/// Decodes a state from its text: the header, then the body of the header's version.
fn decode_str_checked(json: &str) -> Result<AgentSession> {
    let header: Header = serde_json::from_str(json).map_err(|e| {
        if e.is_data() {
            Error::serialization("a session state must be a JSON object")
        } else {
            invalid(e)
        }
    })?;
    let version = check_header(&header)?;
    decode_version(version, |version| {
        Ok(if version == 1 {
            Decoded::V1(serde_json::from_str(json).map_err(invalid)?)
        } else {
            Decoded::V2(serde_json::from_str(json).map_err(invalid)?)
        })
    })
}

/// Checks that a decoded session belongs at `expected`.
pub(crate) fn check_scope(session: &AgentSession, expected: &Scope) -> Result<()> {
    if session.scope == *expected {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "the session state belongs to scope {}, not to scope {expected}, where it was loaded; it was saved for another session",
            session.scope
        )))
    }
}

fn from_state<S>(scope: Scope, body: StateRead<S>) -> AgentSession {
    AgentSession::from_parts(SessionParts {
        scope,
        conversation: match body.service_conversation_id {
            Some(id) => Conversation::Service(id),
            None => Conversation::Local,
        },
        turns: body.turns,
        history_window: body.history_window,
        agent_windows: body.agent_windows,
        agent_histories: body.agent_histories,
        snapshot: body.snapshot,
        provider_states: body.provider_states,
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
        s.record_turn().unwrap();
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
        unknown_version["version"] = json!(SESSION_STATE_VERSION + 1);
        let mut bad_key = good.clone();
        bad_key["scope"] = json!("default|~|~|history");
        let mut v1_with_key = good.clone();
        v1_with_key["version"] = json!(1);
        let mut v2_with_object = good.clone();
        v2_with_object["scope"] =
            json!({"tenant": "default", "session": "s-1", "source": "history"});
        let mut wrong_type = good.clone();
        wrong_type["turns"] = json!("three");
        let mut bad_id = good.clone();
        bad_id["scope"] = json!("default|u|~|history|no spaces allowed");
        let mut extra = good.clone();
        extra["password"] = json!("x");
        for bad in [
            json!(null),
            json!([]),
            json!("state"),
            json!({}),
            json!({"format": "other", "version": 1}),
            json!({"format": FORMAT}),
            json!({"format": FORMAT, "version": 0}),
            unknown_version,
            bad_key,
            v1_with_key,
            v2_with_object,
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
    fn a_future_version_names_both_versions() {
        let mut future = sample().serialize().unwrap();
        future["version"] = json!(3);
        for err in [
            AgentSession::deserialize(&future).unwrap_err(),
            AgentSession::from_json(&future.to_string()).unwrap_err(),
        ] {
            assert_eq!(err.kind(), ErrorKind::Serialization);
            let message = err.to_string();
            assert!(message.contains("version 3"), "{message}");
            assert!(
                message.contains(&format!("1 to {SESSION_STATE_VERSION}")),
                "{message}"
            );
        }
    }

    #[test]
    fn version_2_writes_the_scope_key_and_version_1_migrates() {
        let s = sample();
        let v2 = s.serialize().unwrap();
        assert_eq!(v2["version"], json!(2));
        assert_eq!(v2["scope"], json!(s.scope().key()));
        let mut v1 = v2.clone();
        v1["version"] = json!(1);
        v1["scope"] = serde_json::to_value(s.scope()).unwrap();
        let migrated = AgentSession::deserialize(&v1).unwrap();
        assert_eq!(migrated, s);
        assert_eq!(migrated.serialize().unwrap(), v2);
        assert_eq!(AgentSession::from_json(&v1.to_string()).unwrap(), s);
    }

    #[test]
    fn a_turn_counter_at_its_maximum_is_a_typed_error() {
        let mut state = sample().serialize().unwrap();
        state["turns"] = json!(u64::MAX);
        let mut s = AgentSession::deserialize(&state).unwrap();
        let err = s.record_turn().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("turns"), "{err}");
        assert_eq!(s.turns(), u64::MAX);
    }

    #[test]
    fn deserialize_at_refuses_a_state_of_another_scope() {
        let s = sample();
        let state = s.serialize().unwrap();
        assert_eq!(AgentSession::deserialize_at(&state, s.scope()).unwrap(), s);
        let other_tenant = s.scope().clone().with_tenant("other").unwrap();
        let err = AgentSession::deserialize_at(&state, &other_tenant).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains(&other_tenant.key()), "{err}");
        assert!(err.to_string().contains(&s.scope().key()), "{err}");
        let mut future = state.clone();
        future["version"] = json!(3);
        let err = AgentSession::deserialize_at(&future, s.scope()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Serialization);
    }

    #[test]
    fn the_one_pass_decode_never_accepts_what_the_checked_decode_refuses() {
        let good = sample().serialize().unwrap();
        let mut v1 = good.clone();
        v1["version"] = json!(1);
        v1["scope"] = serde_json::to_value(sample().scope()).unwrap();
        let mut states: Vec<String> = vec![good.to_string(), v1.to_string()];
        for (field, value) in [
            ("version", json!(3)),
            ("version", json!(1)),
            ("version", json!(0)),
            ("version", json!(2.0)),
            ("version", json!("2")),
            ("format", json!("other")),
            ("format", json!(null)),
            ("scope", json!("default|~|~|history")),
            (
                "scope",
                json!({"tenant": "default", "session": "s-1", "source": "history"}),
            ),
            ("scope", json!(["default", null, null, "s-1", "history"])),
            ("turns", json!("three")),
            ("password", json!("x")),
        ] {
            for base in [&good, &v1] {
                let mut state = base.clone();
                state[field] = value.clone();
                states.push(state.to_string());
            }
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/format");
        for dir in [dir.clone(), dir.join("invalid")] {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_file() {
                    states.push(std::fs::read_to_string(path).unwrap());
                }
            }
        }
        let mut accepted = 0;
        for text in &states {
            let checked = decode_str_checked(text);
            match decode_one_pass(text) {
                Some(session) => {
                    accepted += 1;
                    assert_eq!(checked.unwrap(), session, "{text}");
                }
                None => {
                    // The fallback answers: what decode_str returns is the checked answer.
                    assert_eq!(
                        decode_str(text).map_err(|e| e.to_string()),
                        checked.map_err(|e| e.to_string()),
                        "{text}"
                    );
                }
            }
        }
        // The valid states of both versions take the one pass.
        assert!(accepted >= 4, "{accepted}");
        assert!(decode_one_pass(&good.to_string()).is_some());
        assert!(decode_one_pass(&v1.to_string()).is_some());
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
