//! The session operations: load, save over a version, delete, list.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::threads::{ListRequest, ScopePage, ScopeView};
use super::{Address, Ops, page_request};
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError, OpResult};

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionView {
    /// The state, exactly as saved (any JSON value).
    #[schema(value_type = Value)]
    pub state: Value,
    /// Its version (send it back in `If-Match` to save over it).
    pub version: u64,
}

impl Ops {
    /// Loads the session, or `None`.
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn load_session(
        &self,
        who: &Principal,
        address: &Address,
    ) -> OpResult<Option<SessionView>> {
        let scope = self.scope(who, address)?;
        Ok(self
            .stores
            .sessions
            .load(&scope)
            .await?
            .map(|s| SessionView {
                state: s.state,
                version: s.version,
            }))
    }

    /// Saves the session's `state` if its stored version is `expected` (`None`: only if it does
    /// not exist); returns the new version.
    ///
    /// # Errors
    /// [`ErrorCode::PreconditionFailed`] when the stored version is another (a stale write);
    /// [`ErrorCode::InvalidInput`] or [`ErrorCode::LimitExceeded`] for a state over the size or
    /// depth limits; the store's errors.
    pub async fn save_session(
        &self,
        who: &Principal,
        address: &Address,
        state: &Value,
        expected: Option<u64>,
    ) -> OpResult<u64> {
        let scope = self.scope(who, address)?;
        match self.stores.sessions.save(&scope, state, expected).await {
            Ok(version) => Ok(version),
            Err(e) if e.kind() == agent_memory::ErrorKind::Conflict => Err(OpError::new(
                ErrorCode::PreconditionFailed,
                match expected {
                    Some(v) => format!(
                        "the session is not at version {v}: another writer saved it, or it does not exist; load it and retry"
                    ),
                    None => {
                        "the session already exists; send its version in If-Match to replace it"
                            .to_owned()
                    }
                },
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the session; returns whether it existed.
    ///
    /// # Errors
    /// As [`scope`](Self::scope); the store's errors.
    pub async fn delete_session(&self, who: &Principal, address: &Address) -> OpResult<bool> {
        let scope = self.scope(who, address)?;
        let deleted = self.stores.sessions.delete(&scope).await?;
        self.forget_vector_memory(&scope).await?;
        Ok(deleted)
    }

    /// Lists the caller's sessions matching `request`, a page at a time.
    ///
    /// # Errors
    /// As [`list_threads`](Self::list_threads).
    pub async fn list_sessions(
        &self,
        who: &Principal,
        request: ListRequest,
    ) -> OpResult<ScopePage> {
        let filter = self.filter(who, &request)?;
        let page = page_request(request.limit, request.cursor)?;
        let page = self.stores.sessions.list(&filter, page).await?;
        Ok(ScopePage {
            items: page.items.iter().map(ScopeView::from).collect(),
            next_cursor: page.next_cursor,
        })
    }
}
