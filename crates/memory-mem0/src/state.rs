//! [`Mem0SessionState`]: the scoping ids a session keeps for Mem0 — never a key.

use memory_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scope::Mem0Scope;

/// The ids the [`Mem0Provider`](crate::Mem0Provider) and the
/// [`Mem0MemoryBlock`](crate::Mem0MemoryBlock) use for one session, kept in the session's
/// state so that a restored session goes on with the same ids.
///
/// The storage scope stamps new memories; the search scope limits searches, and without one
/// nothing is searched. A session that has no such state yet takes the provider's (or
/// block's) configured scopes on its first run; an application that serves many users with
/// one provider can instead write each session's ids itself, before the first run:
///
/// ```
/// use memory_core::{AgentSession, Scope, SourceId};
/// use memory_mem0::{Mem0Scope, Mem0SessionState};
///
/// let mut session = AgentSession::new(Scope::session("chat-1")?);
/// let alice = Mem0Scope::user("alice")?;
/// let state = Mem0SessionState::new(alice.clone(), Some(alice));
/// session.set_provider_state(SourceId::new("mem0")?, state.to_value());
/// assert_eq!(
///     session.provider_state(&SourceId::new("mem0")?).unwrap(),
///     &serde_json::json!({"storage_scope": {"user_id": "alice"}, "search_scope": {"user_id": "alice"}})
/// );
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Mem0SessionState {
    /// The ids stamped on new memories.
    pub storage_scope: Mem0Scope,
    /// The ids searches are limited to; `None`: nothing is searched.
    #[serde(default)]
    pub search_scope: Option<Mem0Scope>,
}

impl Mem0SessionState {
    /// Storage and search scopes.
    pub fn new(storage_scope: Mem0Scope, search_scope: Option<Mem0Scope>) -> Self {
        Self {
            storage_scope,
            search_scope,
        }
    }

    /// The JSON kept in the session.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads a session's state: `None` when there is none (`null`).
    ///
    /// # Errors
    /// [`ErrorKind::Serialization`](memory_core::ErrorKind::Serialization) for a state that is
    /// not a valid Mem0 session state.
    pub fn from_value(value: &Value) -> Result<Option<Self>> {
        if value.is_null() {
            return Ok(None);
        }
        serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|err| {
                Error::serialization(format!(
                    "the session's Mem0 state is not a valid Mem0SessionState: {err}"
                ))
                .with_source(err)
            })
    }

    /// The session's own state, or `defaults` when it has none.
    pub(crate) fn resolve(value: &Value, defaults: &Self) -> Result<Self> {
        Ok(Self::from_value(value)?.unwrap_or_else(|| defaults.clone()))
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use serde_json::json;

    use super::*;

    #[test]
    fn round_trip_and_resolution() {
        let defaults = Mem0SessionState::new(Mem0Scope::user("u").unwrap(), None);
        assert_eq!(
            defaults.to_value(),
            json!({"storage_scope": {"user_id": "u"}, "search_scope": null})
        );
        assert_eq!(
            Mem0SessionState::resolve(&Value::Null, &defaults).unwrap(),
            defaults
        );
        let own = json!({"storage_scope": {"agent_id": "a"}, "search_scope": {"agent_id": "a"}});
        let resolved = Mem0SessionState::resolve(&own, &defaults).unwrap();
        assert_eq!(resolved.storage_scope.agent_id(), Some("a"));
        assert_eq!(resolved.to_value(), own);
        let bad = json!({"storage_scope": {"user_id": "*"}});
        assert_eq!(
            Mem0SessionState::resolve(&bad, &defaults)
                .unwrap_err()
                .kind(),
            ErrorKind::Serialization
        );
    }
}
