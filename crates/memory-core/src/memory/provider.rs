//! [`Memory`] as a [`ContextProvider`], so an [`Agent`](crate::Agent) can use it.

use async_trait::async_trait;

use super::{FlushReport, Memory, RETRIEVAL_CONTEXT_MESSAGES};
use crate::context::{AiContext, ContextProvider, InvokedContext, InvokingContext};
use crate::error::Result;
use crate::history::Window;
use crate::id::SourceId;
use crate::message::ChatMessage;

/// As a context provider, a memory works on the agent's own thread (the session's scope):
/// before a run it adds the `<memory>` text of its blocks as instructions (truncated by priority
/// to what the token limit leaves beside the active messages); after a run it stores the request
/// and response (a no-op when the agent's history store is the memory's, since their ids are
/// already there) and flushes when the short-term window passed its threshold. Give the agent
/// and the memory the same history store, and the agent the window `Window::All`: the flush
/// keeps the active window within `token_limit × chat_history_token_ratio`.
///
/// Round trips: when the agent's store is the memory's (the same `Arc`), the memory uses the
/// window the agent read (its active tokens and newest messages) instead of counting and
/// reading, when that window shows them (`Window::All`, a short `Window::Last`, or a store that
/// returns counts with its reads); and after the run it neither appends (the agent stored the
/// batch) nor counts: the active tokens are the window's plus the batch's (counted with the
/// memory's counter, which is the store's), when the append directly followed the read. A run
/// then costs the agent's read and append and one block-state load; a flush adds its own reads
/// and writes.
#[async_trait]
impl ContextProvider for Memory {
    fn source_id(&self) -> &SourceId {
        &self.source
    }

    async fn invoking(&self, context: InvokingContext<'_>) -> Result<AiContext> {
        let held = context
            .window
            .filter(|window| window.is_from(&self.history))
            .and_then(|window| {
                Some((
                    window.active_tokens()?,
                    window.newest(RETRIEVAL_CONTEXT_MESSAGES)?,
                ))
            });
        let (active_tokens, mut recent): (u64, Vec<ChatMessage>) = match held {
            Some((tokens, newest)) => (
                tokens,
                newest.iter().map(|m| (*m.message).clone()).collect(),
            ),
            None => {
                let count = self.history.count(context.scope).await?;
                let recent = self
                    .history
                    .read(context.scope, Window::Last(RETRIEVAL_CONTEXT_MESSAGES))
                    .await?
                    .into_iter()
                    .map(|m| m.into_message())
                    .collect();
                (count.active_tokens, recent)
            }
        };
        let budget = self.config.token_limit.saturating_sub(active_tokens);
        recent.extend(context.input.iter().cloned());
        // The oldest message of the window the agent shows the model, when it read it here.
        let window_from_seq = context
            .window
            .filter(|window| window.is_from(&self.history))
            .and_then(|window| window.messages.first().map(|m| m.seq));
        let contents = self
            .block_contents(context.scope, &recent, window_from_seq, budget)
            .await?;
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
        let stored = context.stored.filter(|stored| {
            stored.is_in(&self.history) && stored.outcome.seqs.len() == messages.len()
        });
        let Some(stored) = stored else {
            self.put_messages_in(context.scope, &messages).await?;
            return Ok(());
        };
        // The agent stored the batch in this store. Its active tokens now are the window's plus
        // the batch's, when nothing else changed the thread between the read and the append.
        let active_tokens = context
            .window
            .filter(|window| {
                window.is_from(&self.history) && !stored.reduced && stored.follows(window)
            })
            .and_then(|window| window.active_tokens())
            .map(|before| {
                messages
                    .iter()
                    .map(|m| u64::from(self.counter.count_message(m)))
                    .fold(before, u64::saturating_add)
            });
        let appended_through = stored.outcome.seqs.iter().copied().max().unwrap_or(0);
        self.after_stored(context.scope, active_tokens, appended_through)
            .await?;
        Ok(())
    }
}

impl Memory {
    /// What [`put_messages_in`](Memory::put_messages_in) does after its append, for a batch
    /// the agent already stored (up to seq `appended_through`): flushes (counting first unless
    /// `active_tokens` is known), hands the blocks that take messages on append what they have
    /// not taken, and keeps the block states alive as long as the thread.
    async fn after_stored(
        &self,
        scope: &crate::Scope,
        active_tokens: Option<u64>,
        appended_through: u64,
    ) -> Result<FlushReport> {
        let mut report = match active_tokens {
            Some(tokens) if tokens <= self.config.flush_threshold() => FlushReport::default(),
            Some(tokens) => self.flush_over(scope, tokens).await?,
            None => self.flush_in(scope).await?,
        };
        let delivered = self.deliver_appended(scope, appended_through).await?;
        report.deliveries = report.deliveries.saturating_add(delivered);
        self.touch_states_after_append(scope, &report).await?;
        Ok(report)
    }
}
