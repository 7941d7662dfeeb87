//! Search over a session's memory: the batches the `Memory`'s memory block holds, ranked by
//! its retriever (dense, lexical or hybrid, [`crate::retrieval`]) for a query.

use agent_memory::memory::blocks::{SESSION_KEY, VectorMemoryBlock};
use agent_memory::retrieval::Retrieved;
use agent_memory::{AgentId, ScopeFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{Address, Ops};
use crate::auth::Principal;
use crate::error::{ErrorCode, OpError, OpResult};

/// The most results one search returns.
pub const MAX_SEARCH_TOP_K: usize = 100;
/// The results a search that names no `top_k` returns.
pub const DEFAULT_SEARCH_TOP_K: usize = 5;

/// One result of a memory search: a batch of messages the memory indexed in its vector block
/// (as soon as they were put, or when flushed: `[memory] index_on_append`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchHitView {
    /// The batch's transcript as the memory shows it to a model: one
    /// `<message role='…'>…</message>` line a message, the text escaped (`&lt;`, `&gt;`,
    /// `&amp;`), so a remembered message cannot forge another.
    pub text: String,
    /// The retriever's score: higher is better; it ranks one search's results and is not
    /// comparable across configurations.
    pub score: f32,
    /// The seq of the batch's first message in the thread, when known.
    pub first_seq: Option<u64>,
    /// The seq of the batch's last message in the thread, when known.
    pub last_seq: Option<u64>,
    /// The session whose thread the batch came from.
    pub session: Option<String>,
}

/// The answer of a memory search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchView {
    /// The results, best first.
    pub results: Vec<SearchHitView>,
}

/// The detail of the error a search answers when the server's memory is not searchable (no
/// embedder, and no lexical retrieval).
pub const SEARCH_UNAVAILABLE: &str = "search unavailable (no embedder configured, and no lexical retrieval): set [embedder] (dense search), or [memory] retrieval = \"lexical\" (a text index, no embedder), in the server's configuration";

impl Ops {
    /// The memory block searches run on, if the server's memory is searchable.
    pub fn vector_block(&self) -> Option<&VectorMemoryBlock> {
        self.vector.as_deref()
    }

    /// The `top_k` batches of the session's memory (the addressed thread's indexed messages)
    /// that best match `query`, best first.
    ///
    /// # Errors
    /// [`ErrorCode::Unsupported`] when neither an embedder nor lexical retrieval is configured
    /// ([`SEARCH_UNAVAILABLE`]);
    /// [`ErrorCode::InvalidInput`] for an empty query or a `top_k` of 0 or above
    /// [`MAX_SEARCH_TOP_K`]; as [`scope`](Self::scope); the retriever's errors.
    pub async fn search_memory(
        &self,
        who: &Principal,
        address: &Address,
        query: &str,
        top_k: Option<usize>,
    ) -> OpResult<SearchView> {
        let scope = self.scope(who, address)?;
        let (query, top_k) = checked(query, top_k)?;
        let block = self.searchable()?;
        Ok(view(block.search(&scope, query, top_k).await?))
    }

    /// The `top_k` batches of a user's memory across all their sessions (their threads' indexed
    /// messages) that best match `query`, best first, each naming its session: the user is a
    /// user-bound token's, or `user` for a tenant token; `agent` narrows to one agent's
    /// sessions.
    ///
    /// # Errors
    /// As [`search_memory`](Self::search_memory); [`ErrorCode::InvalidInput`] when no user is
    /// known (a tenant token naming none); [`ErrorCode::Forbidden`] for another user than a
    /// user-bound token's.
    pub async fn search_user_memory(
        &self,
        who: &Principal,
        user: Option<&str>,
        agent: Option<&str>,
        query: &str,
        top_k: Option<usize>,
    ) -> OpResult<SearchView> {
        let Some(user) = who.user_for(user)? else {
            return Err(OpError::invalid(
                "a search across sessions needs a user: use a user-bound token, or name `user`",
            ));
        };
        let mut filter = ScopeFilter::tenant(who.tenant.clone()).with_user(user);
        if let Some(agent) = agent {
            let agent = AgentId::new(agent).map_err(super::invalid)?;
            filter = filter.with_agent(agent);
        }
        let (query, top_k) = checked(query, top_k)?;
        let block = self.searchable()?;
        Ok(view(block.search_across(filter, query, top_k).await?))
    }

    /// The memory block, or the error a search answers without one.
    fn searchable(&self) -> OpResult<&VectorMemoryBlock> {
        self.vector_block()
            .ok_or_else(|| OpError::new(ErrorCode::Unsupported, SEARCH_UNAVAILABLE))
    }
}

/// The query, trimmed, and the `top_k` (the default when none), checked.
fn checked(query: &str, top_k: Option<usize>) -> OpResult<(&str, usize)> {
    let query = query.trim();
    if query.is_empty() {
        return Err(OpError::invalid("the search query is empty"));
    }
    let top_k = top_k.unwrap_or(DEFAULT_SEARCH_TOP_K);
    if top_k == 0 || top_k > MAX_SEARCH_TOP_K {
        return Err(OpError::invalid(format!(
            "`top_k` must be between 1 and {MAX_SEARCH_TOP_K}"
        )));
    }
    Ok((query, top_k))
}

/// A block's search results as the answer shows them.
fn view(found: Vec<Retrieved>) -> SearchView {
    let seq = |payload: &serde_json::Map<String, Value>, key: &str| {
        payload.get(key).and_then(Value::as_u64)
    };
    SearchView {
        results: found
            .into_iter()
            .map(|hit| SearchHitView {
                text: hit.text().unwrap_or_default().to_owned(),
                score: hit.score,
                first_seq: seq(&hit.payload, "first_seq"),
                last_seq: seq(&hit.payload, "last_seq"),
                session: hit
                    .payload
                    .get(SESSION_KEY)
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
            .collect(),
    }
}
