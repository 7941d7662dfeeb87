//! Context providers (Agent Framework's `AIContextProvider`): long-term memory that adds
//! instructions, messages and tools before a run and learns from the run after it.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::id::SourceId;
use crate::message::ChatMessage;
use crate::model::ToolDefinition;
use crate::scope::Scope;
use crate::session::AgentSession;

mod turn;

pub use turn::{ReadWindow, StoredTurn};

/// What providers add to a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AiContext {
    /// Extra instructions, appended to the agent's.
    pub instructions: Vec<String>,
    /// Extra messages, placed before the history.
    pub messages: Vec<ChatMessage>,
    /// Extra tools.
    pub tools: Vec<ToolDefinition>,
}

impl AiContext {
    /// Appends `other`'s contents to this context.
    pub fn extend(&mut self, other: AiContext) {
        self.instructions.extend(other.instructions);
        self.messages.extend(other.messages);
        self.tools.extend(other.tools);
    }
}

/// What a provider sees before a run. Made with [`new`](Self::new) (fields may be added).
#[derive(Debug)]
#[non_exhaustive]
pub struct InvokingContext<'a> {
    /// The session's scope.
    pub scope: &'a Scope,
    /// The new input messages of this run.
    pub input: &'a [ChatMessage],
    /// The provider's own state in the session (`Value::Null` when it has none yet). Whatever
    /// the provider leaves here is saved with the session.
    pub state: &'a mut Value,
    /// The history window the agent read for this run from its store (at the session's scope),
    /// when it read one (`None` when the service holds the conversation, or outside an agent).
    pub window: Option<ReadWindow<'a>>,
}

impl<'a> InvokingContext<'a> {
    /// The context of a run at `scope` with `input`, the provider's `state`, and no window.
    pub fn new(scope: &'a Scope, input: &'a [ChatMessage], state: &'a mut Value) -> Self {
        Self {
            scope,
            input,
            state,
            window: None,
        }
    }

    /// The same, with the window the agent read.
    pub fn with_window(mut self, window: Option<ReadWindow<'a>>) -> Self {
        self.window = window;
        self
    }
}

/// What a provider sees after a run. Made with [`new`](Self::new) (fields may be added).
#[derive(Debug)]
#[non_exhaustive]
pub struct InvokedContext<'a> {
    /// The session's scope.
    pub scope: &'a Scope,
    /// The input messages of the run.
    pub request: &'a [ChatMessage],
    /// The model's response messages, when the run succeeded.
    pub response: Option<&'a [ChatMessage]>,
    /// The error, when the run failed.
    pub error: Option<&'a Error>,
    /// The provider's own state in the session.
    pub state: &'a mut Value,
    /// The history window the agent read before the model (as in [`InvokingContext`]).
    pub window: Option<ReadWindow<'a>>,
    /// What the agent stored of a successful run (`request` then `response`, one batch), when
    /// it stored it (`None` after a failure, or when the service holds the conversation).
    pub stored: Option<StoredTurn<'a>>,
}

impl<'a> InvokedContext<'a> {
    /// The context after a run at `scope` with `request`, answered with `response` or failed
    /// with `error`, the provider's `state`, and no window or stored turn.
    pub fn new(
        scope: &'a Scope,
        request: &'a [ChatMessage],
        response: Option<&'a [ChatMessage]>,
        error: Option<&'a Error>,
        state: &'a mut Value,
    ) -> Self {
        Self {
            scope,
            request,
            response,
            error,
            state,
            window: None,
            stored: None,
        }
    }

    /// The same, with the window the agent read and what it stored.
    pub fn with_history(
        mut self,
        window: Option<ReadWindow<'a>>,
        stored: Option<StoredTurn<'a>>,
    ) -> Self {
        self.window = window;
        self.stored = stored;
        self
    }
}

/// A source of long-term context for an agent.
///
/// Each provider has a [`SourceId`]; its state lives in the session under that id, so several
/// providers never share state, and a state whose provider an agent no longer has is kept.
///
/// # Behavior
/// - [`source_id`](ContextProvider::source_id) is constant for a provider object. Two providers
///   of one agent never share it: [`ContextProviders::new`] refuses that with
///   [`InvalidInput`](crate::ErrorKind::InvalidInput).
/// - [`invoking`](ContextProvider::invoking) is called once per run, before the model, in the
///   order the providers were given, with the session's scope, the run's new input, the
///   provider's own state (`Value::Null` until the provider first leaves one) and the history
///   window the agent read, if it read one (a provider over the same store can use it instead
///   of reading). It returns what
///   to add: instructions (appended to the agent's, in provider order), messages (placed before
///   the history) and tools. What it leaves in `state` is saved with the session when it
///   returns `Ok`; when it fails, its state change is dropped, the later providers and the
///   model are not called, nothing is stored, and the run returns its error.
/// - [`invoked`](ContextProvider::invoked) is called once per run after the model: with
///   `response` set (and `error` `None`) after a successful run, once the history holds the
///   run's messages (or the session follows the service's conversation), with what the agent
///   stored ([`StoredTurn`]: a provider over the same store need not append or count again);
///   with `error` set (and `response` `None`) when the model failed. Every provider is
///   told, in order, even when an earlier one fails; its state change is saved even when it
///   returns an error. After a successful run the first error is the run's error (the messages
///   stay stored); after a failed model call, provider errors are logged and the model's error
///   is returned. The default does nothing.
/// - One provider object serves every session: per-session data lives in `state` (or in a
///   store keyed by the scope), never on the object. The state is serialized with the session,
///   so it holds JSON only and never a secret.
#[async_trait]
pub trait ContextProvider: Send + Sync + fmt::Debug + 'static {
    /// The id under which this provider's state is kept.
    fn source_id(&self) -> &SourceId;

    /// Called before the model is called; returns what to add to the request.
    async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext>;

    /// Called after the model answered (or failed).
    async fn invoked(&self, context: InvokedContext<'_>) -> Result<()> {
        let _ = context;
        Ok(())
    }
}

/// Forwards [`ContextProvider`] through smart pointers, so `Arc<dyn ContextProvider>` and
/// `Box<dyn ContextProvider>` are providers too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here. Without the lint, a provider whose
/// own `invoked` is reached through an `Arc` would silently run the default (doing nothing).
macro_rules! forward_context_provider {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: ContextProvider + ?Sized> ContextProvider for $pointer<T> {
            fn source_id(&self) -> &SourceId {
                (**self).source_id()
            }
            async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext> {
                (**self).invoking(context).await
            }
            async fn invoked(&self, context: InvokedContext<'_>) -> Result<()> {
                (**self).invoked(context).await
            }
        }
    )*};
}

forward_context_provider!(Arc, Box);

/// Several providers, run in order.
#[derive(Debug, Clone, Default)]
pub struct ContextProviders {
    providers: Vec<Arc<dyn ContextProvider>>,
}

impl ContextProviders {
    /// The providers, in the order they run.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when two providers share a
    /// source id (they would overwrite each other's state).
    pub fn new(providers: Vec<Arc<dyn ContextProvider>>) -> Result<Self> {
        let mut seen = HashSet::new();
        for p in &providers {
            if !seen.insert(p.source_id().clone()) {
                return Err(Error::invalid_input(format!(
                    "two context providers share the source id {}",
                    p.source_id()
                )));
            }
        }
        Ok(Self { providers })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// Runs every provider's `invoking` in order and merges what they add.
    ///
    /// # Errors
    /// The first provider error.
    pub async fn invoking(
        &self,
        session: &mut AgentSession,
        input: &[ChatMessage],
        window: Option<ReadWindow<'_>>,
    ) -> Result<AiContext> {
        let mut merged = AiContext::default();
        for provider in &self.providers {
            let source = provider.source_id().clone();
            let mut state = session.provider_state(&source).cloned().unwrap_or_default();
            let scope = session.scope().clone();
            let added = provider
                .invoking(InvokingContext::new(&scope, input, &mut state).with_window(window))
                .await?;
            session.set_provider_state(source, state);
            merged.extend(added);
        }
        Ok(merged)
    }

    /// Runs every provider's `invoked` in order. Every provider is told, even when an earlier
    /// one fails; the first failure is returned.
    ///
    /// # Errors
    /// The first provider error.
    pub async fn invoked(
        &self,
        session: &mut AgentSession,
        request: &[ChatMessage],
        response: Option<&[ChatMessage]>,
        error: Option<&Error>,
        window: Option<ReadWindow<'_>>,
        stored: Option<StoredTurn<'_>>,
    ) -> Result<()> {
        let mut first_error = None;
        for provider in &self.providers {
            let source = provider.source_id().clone();
            let mut state = session.provider_state(&source).cloned().unwrap_or_default();
            let scope = session.scope().clone();
            let outcome = provider
                .invoked(
                    InvokedContext::new(&scope, request, response, error, &mut state)
                        .with_history(window, stored),
                )
                .await;
            session.set_provider_state(source, state);
            if let Err(e) = outcome {
                tracing::warn!(provider = %provider.source_id(), error = %e, "context provider failed after the run");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
