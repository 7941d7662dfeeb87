//! [`Mem0Forget`]: Mem0 as a store of a [`Forgetter`](memory_core::Forgetter).

use std::collections::HashSet;

use async_trait::async_trait;
use memory_core::ScopeFilter;
use memory_core::forget::{Forget, ForgetMode, StoreReceipt};
use memory_core::{Error, ErrorKind, Result};
use tracing::Instrument;

use crate::client::Mem0Client;
use crate::request::ListRequest;
use crate::response::MemoryRecord;
use crate::scope::Mem0Scope;

/// The store name of a [`Mem0Forget`] in receipts and errors, by default.
pub const DEFAULT_FORGET_NAME: &str = "mem0";

/// Memories per listed page.
const PAGE_SIZE: u32 = 100;
/// How many pages a listing reads at most (a million memories of one scope).
const MAX_PAGES: u32 = 10_000;
/// How many times a forget deletes and lists again before it gives up.
const MAX_ROUNDS: usize = 5;

/// Forgets in Mem0: deletes every memory of the Mem0 entity that a
/// [`ScopeFilter`] names, on the platform or a self-hosted server.
///
/// # Which memories
/// A filter is mapped to Mem0's entity ids as [`Mem0Provider`](crate::Mem0Provider) and
/// [`Mem0MemoryBlock`](crate::Mem0MemoryBlock) file memories for a scope: the filter's user is
/// the `user_id`, its agent the `agent_id` and its session the `run_id`, each in the filter's
/// tenant (`<tenant>~<id>`, no prefix for the default tenant; see
/// [Tenants](Mem0Scope#tenants)). Mem0 selects the memories carrying *every* id sent, whatever
/// their other ids, which is how a filter matches scopes. Memories an application filed under
/// other ids (a storage scope with a `user_id` that is not the agent-memory user, an `app_id`)
/// are not this filter's: delete them with [`Mem0Client::delete_all`].
///
/// # A whole tenant is refused
/// Mem0 has no tenant, and deleting without any entity id is what once wiped every user of a
/// project. A filter naming only a tenant is therefore refused with
/// [`InvalidInput`](ErrorKind::InvalidInput) before any request: forget the tenant's users,
/// agents or sessions one by one. No configuration lifts this.
///
/// # A source is refused
/// Mem0 keeps no source: a filter naming one is refused with
/// [`InvalidInput`](ErrorKind::InvalidInput) before any request, since the delete would reach
/// the memories of every source.
///
/// # How
/// - [`ForgetMode::DryRun`] lists the entity's memories page by page and counts them.
/// - [`ForgetMode::Delete`] lists them, deletes them with one delete-all request for the
///   entity (`DELETE /v1/memories/?user_id=…` on the platform, `DELETE /memories?user_id=…`
///   on a self-hosted server), and lists again: memories still listed (a self-hosted server
///   deletes at most the 100 its store lists at a time; an index slow to drop deleted
///   memories) are deleted one by one, and listed again, up to five rounds. If Mem0 still
///   lists some after that, the forget fails with a [`Backend`](ErrorKind::Backend) error
///   saying how many: running it again goes on. It returns the distinct memories it listed.
/// - Before anything is deleted, every listed memory must carry the entity's ids (an id the
///   answer leaves out is not checked): a server that listed another entity's memories
///   ignored the filter, and would delete them too, so the forget stops with a
///   [`Backend`](ErrorKind::Backend) error and deletes nothing.
///
/// A self-hosted server lists at most the memories its `get_all` returns at once (100 on
/// mem0ai 1.x, 20 by default on 2.x): a dry run there counts at most that many.
///
/// ```no_run
/// use std::sync::Arc;
/// use memory_core::ScopeFilter;
/// use memory_core::forget::{ForgetMode, Forgetter};
/// use memory_core::{TenantId, UserId};
/// use memory_mem0::{Mem0Client, Mem0Config, Mem0Forget};
///
/// # async fn run() -> memory_core::Result<()> {
/// let client = Mem0Client::new(Mem0Config::platform("m0-..."))?;
/// let forgetter = Forgetter::new().target(Arc::new(Mem0Forget::new(client)));
/// let dana = ScopeFilter::tenant(TenantId::new("acme")?).with_user(UserId::new("dana")?);
/// println!("{}", forgetter.forget(&dana, ForgetMode::Delete).await?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Mem0Forget {
    name: String,
    client: Mem0Client,
}

impl Mem0Forget {
    /// Forgets through `client`, named `mem0` in receipts.
    pub fn new(client: Mem0Client) -> Self {
        Self::named(DEFAULT_FORGET_NAME, client)
    }

    /// Forgets through `client`, named `name` in receipts.
    pub fn named(name: impl Into<String>, client: Mem0Client) -> Self {
        Self {
            name: name.into(),
            client,
        }
    }

    /// The Mem0 entity a filter selects (see [Which memories](Self#which-memories)).
    ///
    /// # Errors
    /// [`InvalidInput`](ErrorKind::InvalidInput) for a filter that names only a tenant.
    pub fn scope_of(filter: &ScopeFilter) -> Result<Mem0Scope> {
        if filter.is_whole_tenant() {
            return Err(Error::invalid_input(format!(
                "Mem0 cannot forget a whole tenant ({filter}): Mem0 has no tenant, and a delete \
                 without a user, agent or session id would delete the memories of every tenant \
                 and user; forget the tenant's users, agents or sessions one by one instead"
            )));
        }
        if let Some(source) = &filter.source {
            return Err(Error::invalid_input(format!(
                "Mem0 cannot forget only the memories of one source ({filter}): Mem0 keeps no \
                 source, so the delete would reach every source's memories; leave the source \
                 out of the filter (source {source})"
            )));
        }
        let id = |v: Option<&str>| v.map(str::to_owned);
        Mem0Scope::new(
            id(filter.user.as_ref().map(|u| u.as_str())),
            id(filter.agent.as_ref().map(|a| a.as_str())),
            None,
            id(filter.session.as_ref().map(|s| s.as_str())),
        )?
        .with_tenant(filter.tenant.as_str())
    }

    /// Every memory Mem0 lists for `scope`, each id once, checked against the scope.
    async fn list_all(&self, scope: &Mem0Scope) -> Result<Vec<MemoryRecord>> {
        let wire = scope.wire_ids();
        let mut seen = HashSet::new();
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let listed = self
                .client
                .list(&ListRequest::new(scope.clone()).with_page(page, PAGE_SIZE))
                .await?;
            let mut new = 0usize;
            for record in listed.results {
                if let Some((field, found)) = foreign_id(&record, &wire) {
                    return Err(Error::new(
                        ErrorKind::Backend,
                        format!(
                            "Mem0 listed a memory of {field} {found:?} when asked for {}; it \
                             does not honour the filter, so nothing was deleted",
                            describe(&wire)
                        ),
                    ));
                }
                if seen.insert(record.id.clone()) {
                    new = new.saturating_add(1);
                    all.push(record);
                }
            }
            // A server that pages by repeating itself has nothing more to say.
            if !listed.has_more || new == 0 {
                break;
            }
        }
        Ok(all)
    }

    async fn delete_op(&self, scope: &Mem0Scope) -> Result<u64> {
        let mut forgotten: HashSet<String> = HashSet::new();
        let mut listed = self.list_all(scope).await?;
        for round in 0..MAX_ROUNDS {
            if listed.is_empty() {
                return Ok(forgotten.len() as u64);
            }
            forgotten.extend(listed.iter().map(|r| r.id.clone()));
            if round == 0 {
                self.client.delete_all(scope).await?;
            } else {
                // One by one, only what provably belongs to the entity: a record that does not
                // carry every id asked for could be another entity's, returned by a server that
                // ignores the filter (the listing's check lets an absent id pass).
                let wire = scope.wire_ids();
                if let Some(record) = listed.iter().find(|r| !carries_every_id(r, &wire)) {
                    return Err(Error::new(
                        ErrorKind::Backend,
                        format!(
                            "Mem0 still lists memory {:?} after deleting {} in bulk, without \
                             the ids that show it belongs there; nothing more was deleted one \
                             by one",
                            record.id,
                            describe(&wire)
                        ),
                    ));
                }
                for record in &listed {
                    match self.client.delete(&record.id).await {
                        Ok(()) => {}
                        // Deleted meanwhile (or by the delete-all, behind a stale listing).
                        Err(e) if e.kind() == ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            listed = self.list_all(scope).await?;
        }
        if listed.is_empty() {
            return Ok(forgotten.len() as u64);
        }
        Err(Error::new(
            ErrorKind::Backend,
            format!(
                "Mem0 still lists {} memories of {} after deleting them {MAX_ROUNDS} times; \
                 running the forget again goes on",
                listed.len(),
                describe(&scope.wire_ids())
            ),
        )
        .with_temporary(true))
    }
}

/// The first id of `record` that differs from the entity's, as `(field, id)`.
fn foreign_id<'r>(
    record: &'r MemoryRecord,
    wire: &[(&'static str, String)],
) -> Option<(&'static str, &'r str)> {
    wire.iter().find_map(|(field, wanted)| {
        let found = entity_id(record, field)?;
        (found != wanted).then_some((*field, found))
    })
}

/// Whether `record` carries every id of the entity, each equal to the one asked for.
fn carries_every_id(record: &MemoryRecord, wire: &[(&'static str, String)]) -> bool {
    wire.iter()
        .all(|(field, wanted)| entity_id(record, field) == Some(wanted.as_str()))
}

/// The id `record` carries in the entity field `field` (`user_id`, `agent_id`, `app_id`,
/// `run_id`).
fn entity_id<'r>(record: &'r MemoryRecord, field: &str) -> Option<&'r str> {
    match field {
        "user_id" => record.user_id.as_deref(),
        "agent_id" => record.agent_id.as_deref(),
        "app_id" => record.app_id.as_deref(),
        "run_id" => record.run_id.as_deref(),
        _ => None,
    }
}

/// `user_id "acme~dana", run_id "acme~s1"`.
fn describe(wire: &[(&'static str, String)]) -> String {
    wire.iter()
        .map(|(field, id)| format!("{field} {id:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[async_trait]
impl Forget for Mem0Forget {
    fn store_name(&self) -> &str {
        &self.name
    }

    async fn forget(&self, filter: &ScopeFilter, mode: ForgetMode) -> Result<StoreReceipt> {
        let scope = Self::scope_of(filter)?;
        let span = tracing::debug_span!("mem0.forget", store = %self.name);
        let memories = match mode {
            ForgetMode::DryRun => self.list_all(&scope).instrument(span).await?.len() as u64,
            ForgetMode::Delete => self.delete_op(&scope).instrument(span).await?,
        };
        Ok(StoreReceipt::new(&self.name, 0, memories, "memories"))
    }
}

#[cfg(test)]
mod tests {
    use memory_core::{AgentId, SessionId, TenantId, UserId};

    use super::*;

    fn acme() -> ScopeFilter {
        ScopeFilter::tenant(TenantId::new("acme").unwrap())
    }

    #[test]
    fn filters_map_to_the_entity_ids_of_the_provider_and_block() {
        let scope = Mem0Forget::scope_of(
            &acme()
                .with_user(UserId::new("dana").unwrap())
                .with_agent(AgentId::new("bot").unwrap())
                .with_session(SessionId::new("s1").unwrap()),
        )
        .unwrap();
        assert_eq!(
            scope.wire_ids(),
            [
                ("user_id", "acme~dana".to_owned()),
                ("agent_id", "acme~bot".to_owned()),
                ("run_id", "acme~s1".to_owned()),
            ]
        );
        // The same ids the block and provider file under for tenant acme.
        assert_eq!(
            scope,
            Mem0Scope::user("dana")
                .unwrap()
                .with_agent_id("bot")
                .unwrap()
                .with_run_id("s1")
                .unwrap()
                .in_tenant(&TenantId::new("acme").unwrap())
                .unwrap()
        );
        // The default tenant sends the ids as they are.
        let plain = Mem0Forget::scope_of(
            &ScopeFilter::tenant(TenantId::new("default").unwrap())
                .with_session(SessionId::new("s1").unwrap()),
        )
        .unwrap();
        assert_eq!(plain.wire_ids(), [("run_id", "s1".to_owned())]);
    }

    #[test]
    fn a_whole_tenant_is_invalid_input() {
        let err = Mem0Forget::scope_of(&acme()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("whole tenant"), "{err}");
    }

    #[test]
    fn a_source_is_invalid_input() {
        let err = Mem0Forget::scope_of(
            &acme()
                .with_user(UserId::new("dana").unwrap())
                .with_source(memory_core::SourceId::new("mem0").unwrap()),
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("source"), "{err}");
    }

    #[test]
    fn foreign_ids_are_found() {
        let record = |user: Option<&str>| MemoryRecord {
            user_id: user.map(str::to_owned),
            ..serde_json::from_value(serde_json::json!({"id": "m1", "memory": "x"})).unwrap()
        };
        let wire = vec![("user_id", "acme~dana".to_owned())];
        assert_eq!(foreign_id(&record(Some("acme~dana")), &wire), None);
        assert_eq!(foreign_id(&record(None), &wire), None);
        assert_eq!(
            foreign_id(&record(Some("dana")), &wire),
            Some(("user_id", "dana"))
        );
    }

    #[test]
    fn only_records_carrying_every_id_are_deleted_one_by_one() {
        let record = |user: Option<&str>, run: Option<&str>| MemoryRecord {
            user_id: user.map(str::to_owned),
            run_id: run.map(str::to_owned),
            ..serde_json::from_value(serde_json::json!({"id": "m1", "memory": "x"})).unwrap()
        };
        let wire = vec![
            ("user_id", "acme~dana".to_owned()),
            ("run_id", "acme~s1".to_owned()),
        ];
        assert!(carries_every_id(
            &record(Some("acme~dana"), Some("acme~s1")),
            &wire
        ));
        assert!(!carries_every_id(&record(Some("acme~dana"), None), &wire));
        assert!(!carries_every_id(&record(None, None), &wire));
        assert!(!carries_every_id(
            &record(Some("acme~dana"), Some("acme~s2")),
            &wire
        ));
    }
}
