//! [`Mem0Provider`]: Mem0 as a context provider (the Agent Framework's `Mem0Provider`).

use async_trait::async_trait;
use memory_core::{AiContext, ContextProvider, InvokedContext, InvokingContext, Result, SourceId};
use tracing::Instrument;

use crate::client::Mem0Client;
use crate::on_error::OnError;
use crate::render::{DEFAULT_CONTEXT_PROMPT, memory_lines, query_text};
use crate::request::{AddRequest, Mem0Message, SearchRequest};
use crate::scope::Mem0Scope;
use crate::search_builders::search_builders;
use crate::state::Mem0SessionState;

/// The source id the provider's state is kept under by default.
pub const DEFAULT_SOURCE_ID: &str = "mem0";
/// How many memories a search recalls by default (the platform's own default).
pub const DEFAULT_TOP_K: u32 = 10;

/// Long-term memory in Mem0 for an [`Agent`](memory_core::Agent), as the Microsoft Agent
/// Framework's `Mem0Provider` does it.
///
/// - Before a run, it searches Mem0 once with the text of the new input messages, within the
///   **search scope**, and adds what it finds as one instruction:
///   `"## Memories\nConsider the following memories when answering user questions:\n- …"`.
/// - After a successful run, it sends the request and response messages (the text of user
///   and assistant messages) to Mem0 once, filed under the **storage scope**.
///
/// The two scopes are separate settings, and without a search scope nothing is searched: a
/// provider only recalls what the application explicitly allowed it to see. (The Agent
/// Framework split them after memories leaked across users through a shared scope.) Both are
/// kept in the session's state, with the ids only — never the key — so a restored session
/// keeps its ids; see [`Mem0SessionState`].
/// Both are filed under the tenant of the session's scope (see [Tenants](Mem0Scope#tenants)).
///
/// When Mem0 fails, the run goes on without it and a warning is traced
/// ([`OnError::Degrade`], the default), or fails ([`OnError::Fail`]). A degraded add is lost:
/// the provider remembers a turn at most once (unlike
/// [`Mem0MemoryBlock`](crate::Mem0MemoryBlock), which keeps a failed batch and sends it again).
///
/// ```no_run
/// use std::sync::Arc;
/// use memory_mem0::{Mem0Client, Mem0Config, Mem0Provider, Mem0Scope};
///
/// # fn run() -> memory_core::Result<()> {
/// let client = Mem0Client::new(Mem0Config::platform("m0-..."))?;
/// let alice = Mem0Scope::user("alice")?;
/// let provider = Mem0Provider::new(client, alice.clone())
///     .with_search_scope(alice)
///     .with_top_k(5);
/// # let _ = Arc::new(provider);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Mem0Provider {
    client: Mem0Client,
    defaults: Mem0SessionState,
    top_k: u32,
    on_error: OnError,
    source: SourceId,
    context_prompt: String,
}

impl Mem0Provider {
    /// A provider that stores new memories under `storage_scope` and searches nothing until
    /// [`with_search_scope`](Self::with_search_scope) is set.
    pub fn new(client: Mem0Client, storage_scope: Mem0Scope) -> Self {
        Self {
            client,
            defaults: Mem0SessionState::new(storage_scope, None),
            top_k: DEFAULT_TOP_K,
            on_error: OnError::default(),
            source: default_source(),
            context_prompt: DEFAULT_CONTEXT_PROMPT.to_owned(),
        }
    }

    search_builders!();

    /// Sets the source id the state is kept under (default `mem0`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an invalid id.
    pub fn with_source_id(mut self, source: impl Into<String>) -> Result<Self> {
        self.source = SourceId::new(source)?;
        Ok(self)
    }

    /// Replaces the heading of the memories instruction.
    pub fn with_context_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.context_prompt = prompt.into();
        self
    }
}

#[async_trait]
impl ContextProvider for Mem0Provider {
    fn source_id(&self) -> &SourceId {
        &self.source
    }

    async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext> {
        let state = Mem0SessionState::resolve(context.state, &self.defaults)?;
        *context.state = state.to_value();
        let Some(scope) = state.search_scope else {
            tracing::debug!(source = %self.source, "no Mem0 search scope; nothing is recalled");
            return Ok(AiContext::default());
        };
        let query = query_text(context.input);
        if query.is_empty() {
            return Ok(AiContext::default());
        }
        let scope = scope.in_tenant(context.scope.tenant())?;
        let request = SearchRequest::new(query, scope).with_top_k(self.top_k);
        let found = self
            .client
            .search(&request)
            .instrument(tracing::debug_span!("mem0.provider.search", source = %self.source))
            .await;
        let records = match found {
            Ok(records) => records,
            Err(error) => {
                return self
                    .on_error
                    .handle(error, self.source.as_str(), "search")
                    .map(|_: Option<()>| AiContext::default());
            }
        };
        let lines = memory_lines(&records);
        if lines.is_empty() {
            return Ok(AiContext::default());
        }
        tracing::debug!(source = %self.source, memories = lines.len(), "recalled Mem0 memories");
        Ok(AiContext {
            instructions: vec![format!("{}\n{}", self.context_prompt, lines.join("\n"))],
            ..AiContext::default()
        })
    }

    async fn invoked(&self, context: InvokedContext<'_>) -> Result<()> {
        let state = Mem0SessionState::resolve(context.state, &self.defaults)?;
        *context.state = state.to_value();
        let Some(response) = context.response else {
            return Ok(());
        };
        let messages: Vec<Mem0Message> = context
            .request
            .iter()
            .chain(response)
            .filter_map(Mem0Message::from_chat)
            .collect();
        if messages.is_empty() {
            return Ok(());
        }
        let storage = state.storage_scope.in_tenant(context.scope.tenant())?;
        let request = AddRequest::new(storage, messages);
        match self
            .client
            .add(&request)
            .instrument(tracing::debug_span!("mem0.provider.add", source = %self.source))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => self
                .on_error
                .handle(error, self.source.as_str(), "add")
                .map(|_: Option<()>| ()),
        }
    }
}

fn default_source() -> SourceId {
    SourceId::new(DEFAULT_SOURCE_ID)
        .unwrap_or_else(|_| unreachable!("the default source id is valid"))
}
