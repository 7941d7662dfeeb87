//! [`Memory`] as a [`ContextProvider`], so an [`Agent`](crate::Agent) can use it.

use async_trait::async_trait;

use super::Memory;
use crate::context::{AiContext, ContextProvider, InvokedContext, InvokingContext};
use crate::error::Result;
use crate::history::Window;
use crate::id::SourceId;

/// As a context provider, a memory works on the agent's own thread (the session's scope):
/// before a run it adds the `<memory>` text of its blocks as instructions (truncated by priority
/// to what the token limit leaves beside the active messages); after a run it stores the request
/// and response (a no-op when the agent's history store is the memory's, since their ids are
/// already there) and flushes when the short-term window passed its threshold. Give the agent
/// and the memory the same history store, and the agent the window `Window::All`: the flush
/// keeps the active window within `token_limit × chat_history_token_ratio`.
#[async_trait]
impl ContextProvider for Memory {
    fn source_id(&self) -> &SourceId {
        &self.source
    }

    async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext> {
        let count = self.history.count(context.scope).await?;
        let budget = self.config.token_limit.saturating_sub(count.active_tokens);
        let mut recent: Vec<_> = self
            .history
            .read(
                context.scope,
                Window::Last(super::RETRIEVAL_CONTEXT_MESSAGES),
            )
            .await?
            .into_iter()
            .map(|m| m.into_message())
            .collect();
        recent.extend(context.input.iter().cloned());
        let contents = self.block_contents(context.scope, &recent, budget).await?;
        Ok(AiContext {
            instructions: self.render(&contents).into_iter().collect(),
            ..AiContext::default()
        })
    }

    async fn invoked(&self, context: InvokedContext<'_>) -> Result<()> {
        let Some(response) = context.response else {
            return Ok(());
        };
        let mut messages = context.request.to_vec();
        messages.extend(response.iter().cloned());
        self.put_messages_in(context.scope, &messages).await?;
        Ok(())
    }
}
