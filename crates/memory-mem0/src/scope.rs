//! [`Mem0Scope`]: the entity ids (`user_id`, `agent_id`, `app_id`, `run_id`) that Mem0 files a
//! memory under, and that a search is limited to.

use std::fmt;

use memory_core::id::{MAX_ID_LEN, is_id_char};
use memory_core::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::filters::{Field, Filters};

const USER_ID: &str = "user_id";
const AGENT_ID: &str = "agent_id";
const APP_ID: &str = "app_id";
const RUN_ID: &str = "run_id";

/// The entity ids of Mem0: at least one is set, and each is a validated id.
///
/// Ids follow agent-memory's id rules (1–128 ASCII letters, digits and `- _ . : @ / + =`), so an
/// id can never be Mem0's wildcard `*`, which would widen a search to every user.
///
/// Several ids narrow: a memory stored with a scope carries all of its ids, and a search with a
/// scope finds only memories that carry every id of it.
///
/// ```
/// use memory_mem0::Mem0Scope;
///
/// let scope = Mem0Scope::user("alice")?.with_agent_id("travel-bot")?;
/// assert_eq!(scope.user_id(), Some("alice"));
/// assert_eq!(
///     serde_json::to_value(&scope)?,
///     serde_json::json!({"user_id": "alice", "agent_id": "travel-bot"})
/// );
/// assert!(Mem0Scope::user("*").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawScope", into = "RawScope")]
pub struct Mem0Scope {
    user_id: Option<String>,
    agent_id: Option<String>,
    app_id: Option<String>,
    run_id: Option<String>,
}

/// The serialized form, checked on the way in.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    app_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
}

impl TryFrom<RawScope> for Mem0Scope {
    type Error = Error;

    fn try_from(raw: RawScope) -> Result<Self> {
        Mem0Scope::new(raw.user_id, raw.agent_id, raw.app_id, raw.run_id)
    }
}

impl From<Mem0Scope> for RawScope {
    fn from(scope: Mem0Scope) -> Self {
        RawScope {
            user_id: scope.user_id,
            agent_id: scope.agent_id,
            app_id: scope.app_id,
            run_id: scope.run_id,
        }
    }
}

impl Mem0Scope {
    /// A scope with the given ids.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) when no id is given or
    /// one is not a valid id.
    pub fn new(
        user_id: Option<String>,
        agent_id: Option<String>,
        app_id: Option<String>,
        run_id: Option<String>,
    ) -> Result<Self> {
        for (name, value) in [
            (USER_ID, &user_id),
            (AGENT_ID, &agent_id),
            (APP_ID, &app_id),
            (RUN_ID, &run_id),
        ] {
            if let Some(value) = value {
                validate(name, value)?;
            }
        }
        if user_id.is_none() && agent_id.is_none() && app_id.is_none() && run_id.is_none() {
            return Err(Error::invalid_input(
                "a Mem0 scope needs at least one of user_id, agent_id, app_id and run_id",
            ));
        }
        Ok(Self {
            user_id,
            agent_id,
            app_id,
            run_id,
        })
    }

    /// A scope of one user.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an invalid id.
    pub fn user(user_id: impl Into<String>) -> Result<Self> {
        Self::new(Some(user_id.into()), None, None, None)
    }

    /// A scope of one agent.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn agent(agent_id: impl Into<String>) -> Result<Self> {
        Self::new(None, Some(agent_id.into()), None, None)
    }

    /// A scope of one application.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn app(app_id: impl Into<String>) -> Result<Self> {
        Self::new(None, None, Some(app_id.into()), None)
    }

    /// A scope of one run (a session or conversation).
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn run(run_id: impl Into<String>) -> Result<Self> {
        Self::new(None, None, None, Some(run_id.into()))
    }

    /// Adds or replaces the user id.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn with_user_id(mut self, id: impl Into<String>) -> Result<Self> {
        self.user_id = Some(checked(USER_ID, id.into())?);
        Ok(self)
    }

    /// Adds or replaces the agent id.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn with_agent_id(mut self, id: impl Into<String>) -> Result<Self> {
        self.agent_id = Some(checked(AGENT_ID, id.into())?);
        Ok(self)
    }

    /// Adds or replaces the application id.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn with_app_id(mut self, id: impl Into<String>) -> Result<Self> {
        self.app_id = Some(checked(APP_ID, id.into())?);
        Ok(self)
    }

    /// Adds or replaces the run id.
    ///
    /// # Errors
    /// As [`user`](Self::user).
    pub fn with_run_id(mut self, id: impl Into<String>) -> Result<Self> {
        self.run_id = Some(checked(RUN_ID, id.into())?);
        Ok(self)
    }

    /// The user id, if set.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    /// The agent id, if set.
    pub fn agent_id(&self) -> Option<&str> {
        self.agent_id.as_deref()
    }

    /// The application id, if set.
    pub fn app_id(&self) -> Option<&str> {
        self.app_id.as_deref()
    }

    /// The run id, if set.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The ids that are set, as `(field name, id)` pairs in the order user, agent, app, run.
    pub fn ids(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            (USER_ID, &self.user_id),
            (AGENT_ID, &self.agent_id),
            (APP_ID, &self.app_id),
            (RUN_ID, &self.run_id),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
    }

    /// One equality condition per id, in the order of [`ids`](Self::ids).
    pub fn conditions(&self) -> Vec<Filters> {
        [
            (Field::UserId, &self.user_id),
            (Field::AgentId, &self.agent_id),
            (Field::AppId, &self.app_id),
            (Field::RunId, &self.run_id),
        ]
        .into_iter()
        .filter_map(|(field, value)| value.as_ref().map(|v| Filters::eq(field, v.as_str())))
        .collect()
    }

    /// The platform filter that limits to this scope: `{"AND": [{"user_id": …}, …]}`.
    pub fn to_filters(&self) -> Filters {
        Filters::and(self.conditions())
    }
}

impl fmt::Debug for Mem0Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Mem0Scope");
        for (name, value) in self.ids() {
            out.field(name, &value);
        }
        out.finish()
    }
}

fn checked(name: &str, value: String) -> Result<String> {
    validate(name, &value)?;
    Ok(value)
}

fn validate(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid_input(format!("the Mem0 {what} is empty")));
    }
    if value.len() > MAX_ID_LEN {
        return Err(Error::invalid_input(format!(
            "the Mem0 {what} is {} bytes long; the limit is {MAX_ID_LEN}",
            value.len()
        )));
    }
    if let Some(bad) = value.chars().find(|c| !is_id_char(*c)) {
        return Err(Error::invalid_input(format!(
            "the Mem0 {what} contains {bad:?}; ids use ASCII letters, digits and - _ . : @ / + ="
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use serde_json::json;

    use super::*;

    #[test]
    fn needs_one_valid_id() {
        assert_eq!(
            Mem0Scope::new(None, None, None, None).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        for bad in ["", "*", "a b", "a|b", "ü", &"x".repeat(129)] {
            assert!(Mem0Scope::user(bad).is_err(), "{bad}");
            assert!(Mem0Scope::run("r").unwrap().with_app_id(bad).is_err());
        }
        let scope = Mem0Scope::app("app-1")
            .unwrap()
            .with_run_id("run:1")
            .unwrap();
        assert_eq!(
            scope.ids().collect::<Vec<_>>(),
            [("app_id", "app-1"), ("run_id", "run:1")]
        );
    }

    #[test]
    fn serde_round_trip_validates() {
        let scope = Mem0Scope::user("u")
            .unwrap()
            .with_agent_id("a")
            .unwrap()
            .with_app_id("p")
            .unwrap()
            .with_run_id("r")
            .unwrap();
        let value = serde_json::to_value(&scope).unwrap();
        assert_eq!(
            value,
            json!({"user_id": "u", "agent_id": "a", "app_id": "p", "run_id": "r"})
        );
        assert_eq!(serde_json::from_value::<Mem0Scope>(value).unwrap(), scope);
        assert!(serde_json::from_value::<Mem0Scope>(json!({})).is_err());
        assert!(serde_json::from_value::<Mem0Scope>(json!({"user_id": "*"})).is_err());
        assert!(serde_json::from_value::<Mem0Scope>(json!({"user": "u"})).is_err());
    }

    #[test]
    fn filters_and_debug() {
        let scope = Mem0Scope::user("u").unwrap().with_run_id("r").unwrap();
        assert_eq!(
            serde_json::to_value(scope.to_filters()).unwrap(),
            json!({"AND": [{"user_id": "u"}, {"run_id": "r"}]})
        );
        assert_eq!(
            format!("{scope:?}"),
            r#"Mem0Scope { user_id: "u", run_id: "r" }"#
        );
    }
}
