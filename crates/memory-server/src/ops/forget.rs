//! Forget: delete (or count) the caller's data a filter selects, with a receipt.

use agent_memory::ScopeFilter;
use agent_memory::{AgentId, ForgetMode, SessionId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Ops, invalid};
use crate::auth::Principal;
use crate::error::{OpError, OpResult};

/// What a forget selects, inside the caller's tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// Only this user's data (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's data.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this session's data.
    #[serde(default)]
    pub session: Option<String>,
    /// Count what would be deleted; delete nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Must be `true` to forget the whole tenant (no user, agent or session named, and a token
    /// bound to no user): an empty body never deletes a tenant by accident.
    #[serde(default)]
    pub everything: bool,
}

/// What one store forgot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StoreReceiptView {
    /// The store (`history`, `sessions`, `texts`, `vectors`, `memory texts`).
    pub store: String,
    /// Scopes (threads, sessions) that held matching data; `null` when the store cannot tell
    /// its items' scopes apart (a vector store or text index deleting by filter), rather than
    /// a count of 0 beside the items it deleted.
    pub scopes: Option<u64>,
    /// Items deleted (or, in a dry run, that would be).
    pub items: u64,
    /// What `items` counts (`messages`, `sessions`, `documents`, `points`).
    pub unit: String,
}

/// The receipt of a forget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ForgetReceiptView {
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// Each store's receipt, in the order they ran.
    pub stores: Vec<StoreReceiptView>,
    /// Items across every store.
    pub total_items: u64,
}

impl Ops {
    /// Deletes (or, in a dry run, counts) every thread and session of the caller's tenant that
    /// `request` selects, and returns the receipt.
    ///
    /// # Errors
    /// [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput) for an invalid id; [`ErrorCode::Forbidden`](crate::ErrorCode::Forbidden) for a user the
    /// token is not bound to; the stores' errors (a failed forget is finished by a rerun).
    pub async fn forget(
        &self,
        who: &Principal,
        request: ForgetRequest,
    ) -> OpResult<ForgetReceiptView> {
        let mut filter = ScopeFilter::tenant(who.tenant.clone());
        if let Some(user) = who.user_for(request.user.as_deref())? {
            filter = filter.with_user(user);
        }
        if let Some(agent) = &request.agent {
            filter = filter.with_agent(AgentId::new(agent.as_str()).map_err(invalid)?);
        }
        if let Some(session) = &request.session {
            filter = filter.with_session(SessionId::new(session.as_str()).map_err(invalid)?);
        }
        if filter.is_whole_tenant() && !request.everything {
            return Err(OpError::invalid(
                "forgetting the whole tenant needs `everything: true`; name a user, agent or \
                 session to forget less",
            ));
        }
        let mode = if request.dry_run {
            ForgetMode::DryRun
        } else {
            ForgetMode::Delete
        };
        let receipt = self.forgetter().forget(&filter, mode).await?;
        Ok(ForgetReceiptView {
            dry_run: request.dry_run,
            total_items: receipt.total_items(),
            stores: receipt
                .stores
                .into_iter()
                .map(|s| StoreReceiptView {
                    scopes: s.known_scopes(),
                    store: s.store,
                    items: s.items,
                    unit: s.unit,
                })
                .collect(),
        })
    }
}
