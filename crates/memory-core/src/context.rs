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

/// What a provider sees before a run.
#[derive(Debug)]
pub struct InvokingContext<'a> {
    /// The session's scope.
    pub scope: &'a Scope,
    /// The new input messages of this run.
    pub input: &'a [ChatMessage],
    /// The provider's own state in the session (`Value::Null` when it has none yet). Whatever
    /// the provider leaves here is saved with the session.
    pub state: &'a mut Value,
}

/// What a provider sees after a run.
#[derive(Debug)]
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
}

/// A source of long-term context for an agent.
///
/// Each provider has a [`SourceId`]; its state lives in the session under that id, so several
/// providers never share state, and a state whose provider an agent no longer has is kept.
/// A provider must not put secrets in its state: the state is serialized with the session.
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
    ) -> Result<AiContext> {
        let mut merged = AiContext::default();
        for provider in &self.providers {
            let source = provider.source_id().clone();
            let mut state = session.provider_state(&source).cloned().unwrap_or_default();
            let scope = session.scope().clone();
            let added = provider
                .invoking(InvokingContext {
                    scope: &scope,
                    input,
                    state: &mut state,
                })
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
    ) -> Result<()> {
        let mut first_error = None;
        for provider in &self.providers {
            let source = provider.source_id().clone();
            let mut state = session.provider_state(&source).cloned().unwrap_or_default();
            let scope = session.scope().clone();
            let outcome = provider
                .invoked(InvokedContext {
                    scope: &scope,
                    request,
                    response,
                    error,
                    state: &mut state,
                })
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
