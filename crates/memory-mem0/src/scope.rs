//! [`Mem0Scope`]: the entity ids (`user_id`, `agent_id`, `app_id`, `run_id`) that Mem0 files a
//! memory under, and that a search is limited to.

use std::fmt;

use memory_core::id::{MAX_ID_LEN, TenantId, is_id_char};
use memory_core::scope::DEFAULT_TENANT;
use memory_core::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::filters::{Field, Filters};

const USER_ID: &str = "user_id";
const AGENT_ID: &str = "agent_id";
const APP_ID: &str = "app_id";
const RUN_ID: &str = "run_id";
const TENANT: &str = "tenant";

/// What separates the tenant from an id in the ids Mem0 sees: `<tenant>~<id>`.
pub const TENANT_SEPARATOR: char = '~';

/// The entity ids of Mem0: at least one is set, and each is a validated id.
///
/// Ids follow agent-memory's id rules (1–128 ASCII letters, digits and `- _ . : @ / + =`), so an
/// id can never be Mem0's wildcard `*`, which would widen a search to every user.
///
/// Several ids narrow: a memory stored with a scope carries all of its ids, and a search with a
/// scope finds only memories that carry every id of it.
///
/// # Tenants
/// Mem0 has no tenant of its own, so a scope can carry agent-memory's tenant
/// ([`with_tenant`](Self::with_tenant)): every id Mem0 sees is then `<tenant>~<id>`
/// ([`TENANT_SEPARATOR`]), so the same user id in two tenants names two different Mem0 users.
/// `~` is not an id character, so no id of another tenant (or of none) can take that form, and
/// [`from_wire`](Self::from_wire) reads a record's ids back into the scope it was filed under.
/// The default tenant (`memory_core::scope::DEFAULT_TENANT`) is no tenant: its ids are sent as
/// they are, as before tenants were carried. [`Mem0MemoryBlock`](crate::Mem0MemoryBlock) and
/// [`Mem0Provider`](crate::Mem0Provider) put the session's tenant on their scopes themselves.
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
    tenant: Option<String>,
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
    tenant: Option<String>,
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
        let scope = Mem0Scope::new(raw.user_id, raw.agent_id, raw.app_id, raw.run_id)?;
        match raw.tenant {
            Some(tenant) => scope.with_tenant(tenant),
            None => Ok(scope),
        }
    }
}

impl From<Mem0Scope> for RawScope {
    fn from(scope: Mem0Scope) -> Self {
        RawScope {
            tenant: scope.tenant,
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
            tenant: None,
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

    /// Files the scope under `tenant` (see [Tenants](Self#tenants)); the default tenant
    /// (`"default"`) clears it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an invalid tenant
    /// id.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Result<Self> {
        let tenant = checked(TENANT, tenant.into())?;
        self.tenant = (tenant != DEFAULT_TENANT).then_some(tenant);
        Ok(self)
    }

    /// The scope in the tenant of an agent-memory scope: `self` with `tenant` set, or an error
    /// when `self` already names another tenant.
    pub(crate) fn in_tenant(self, tenant: &TenantId) -> Result<Self> {
        let wanted = (tenant.as_str() != DEFAULT_TENANT).then_some(tenant.as_str());
        match (self.tenant.as_deref(), wanted) {
            (None, None) => Ok(self),
            (None, Some(_)) => self.with_tenant(tenant.as_str()),
            (Some(own), Some(wanted)) if own == wanted => Ok(self),
            (Some(own), _) => Err(Error::invalid_input(format!(
                "the Mem0 scope belongs to tenant {own:?}, not to the session's tenant {:?}",
                tenant.as_str()
            ))),
        }
    }

    /// The scope a memory was filed under, from the ids Mem0 returned with it (a
    /// [`MemoryRecord`](crate::MemoryRecord)'s `user_id`, `agent_id`, `app_id` and `run_id`):
    /// the inverse of the ids this scope sends (see [Tenants](Self#tenants)).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) when no id is given, an
    /// id is not valid, or the ids name different tenants.
    pub fn from_wire(
        user_id: Option<&str>,
        agent_id: Option<&str>,
        app_id: Option<&str>,
        run_id: Option<&str>,
    ) -> Result<Self> {
        let mut tenant: Option<Option<&str>> = None;
        let mut ids: [Option<String>; 4] = Default::default();
        for (slot, value) in ids.iter_mut().zip([user_id, agent_id, app_id, run_id]) {
            let Some(value) = value else { continue };
            let (own, id) = match value.split_once(TENANT_SEPARATOR) {
                Some((own, id)) => (Some(own), id),
                None => (None, value),
            };
            match tenant {
                None => tenant = Some(own),
                Some(seen) if seen == own => {}
                Some(_) => {
                    return Err(Error::invalid_input(
                        "the ids of a Mem0 memory name different tenants",
                    ));
                }
            }
            *slot = Some(id.to_owned());
        }
        let [user_id, agent_id, app_id, run_id] = ids;
        let scope = Self::new(user_id, agent_id, app_id, run_id)?;
        match tenant.flatten() {
            Some(tenant) => scope.with_tenant(tenant),
            None => Ok(scope),
        }
    }

    /// The tenant, if one other than the default is set.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The ids as Mem0 sees them, as `(field name, id)` pairs in the order of
    /// [`ids`](Self::ids): each prefixed with `<tenant>~` when a tenant is set.
    pub fn wire_ids(&self) -> Vec<(&'static str, String)> {
        self.ids().map(|(name, id)| (name, self.wire(id))).collect()
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

    /// One equality condition per id as Mem0 sees it ([`wire_ids`](Self::wire_ids)), in the
    /// order of [`ids`](Self::ids).
    pub fn conditions(&self) -> Vec<Filters> {
        [
            (Field::UserId, &self.user_id),
            (Field::AgentId, &self.agent_id),
            (Field::AppId, &self.app_id),
            (Field::RunId, &self.run_id),
        ]
        .into_iter()
        .filter_map(|(field, value)| value.as_ref().map(|v| Filters::eq(field, self.wire(v))))
        .collect()
    }

    fn wire(&self, id: &str) -> String {
        match &self.tenant {
            Some(tenant) => format!("{tenant}{TENANT_SEPARATOR}{id}"),
            None => id.to_owned(),
        }
    }

    /// The platform filter that limits to this scope: `{"AND": [{"user_id": …}, …]}`.
    pub fn to_filters(&self) -> Filters {
        Filters::and(self.conditions())
    }
}

impl fmt::Debug for Mem0Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Mem0Scope");
        if let Some(tenant) = &self.tenant {
            out.field(TENANT, tenant);
        }
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
    fn tenants_prefix_every_wire_id_and_round_trip() {
        let scope = Mem0Scope::user("alice")
            .unwrap()
            .with_run_id("r:1")
            .unwrap()
            .with_tenant("acme")
            .unwrap();
        assert_eq!(scope.tenant(), Some("acme"));
        assert_eq!(
            scope.wire_ids(),
            [
                ("user_id", "acme~alice".to_owned()),
                ("run_id", "acme~r:1".to_owned())
            ]
        );
        assert_eq!(
            serde_json::to_value(scope.to_filters()).unwrap(),
            json!({"AND": [{"user_id": "acme~alice"}, {"run_id": "acme~r:1"}]})
        );
        assert_eq!(
            Mem0Scope::from_wire(Some("acme~alice"), None, None, Some("acme~r:1")).unwrap(),
            scope
        );
        let value = serde_json::to_value(&scope).unwrap();
        assert_eq!(
            value,
            json!({"tenant": "acme", "user_id": "alice", "run_id": "r:1"})
        );
        assert_eq!(serde_json::from_value::<Mem0Scope>(value).unwrap(), scope);
        // The default tenant is no tenant; plain ids read back without one.
        let plain = Mem0Scope::user("alice").unwrap();
        assert_eq!(plain.clone().with_tenant("default").unwrap(), plain);
        assert_eq!(plain.wire_ids(), [("user_id", "alice".to_owned())]);
        assert_eq!(
            Mem0Scope::from_wire(Some("alice"), None, None, None).unwrap(),
            plain
        );
        // Mixed tenants, bad tenants and a tenant of another session are refused.
        assert!(Mem0Scope::from_wire(Some("a~x"), Some("b~y"), None, None).is_err());
        assert!(Mem0Scope::from_wire(Some("a~x"), Some("y"), None, None).is_err());
        assert!(plain.clone().with_tenant("a~b").is_err());
        assert!(Mem0Scope::user("a~b").is_err());
        let other = TenantId::new("other").unwrap();
        assert_eq!(
            scope.clone().in_tenant(&other).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        let acme = TenantId::new("acme").unwrap();
        assert_eq!(scope.clone().in_tenant(&acme).unwrap(), scope);
        assert_eq!(
            plain.in_tenant(&acme).unwrap(),
            Mem0Scope::user("alice")
                .unwrap()
                .with_tenant("acme")
                .unwrap()
        );
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
