//! The run's window of the thread: reading it, the view the model gets of it, and after the
//! run, the append of the turn and the reduction of what is stored.

use std::sync::Arc;

use tracing::Instrument;

use super::Agent;
use crate::context::{ReadWindow, StoredTurn};
use crate::error::Result;
use crate::history::{AppendOutcome, StoredMessage, ThreadCount, Window};
use crate::message::ChatMessage;
use crate::reducer::{ChatReducer, ReducerTrigger, Reduction, is_summary};
use crate::session::{AgentSession, Conversation};
use crate::tokens::{TokenCounter, default_token_counter};

/// The window without a retried run's earlier attempt: when the window already holds the
/// input's first message (a run whose append committed but whose reply was lost), that
/// attempt, from the input on, leaves the view, so the model sees the turn once.
pub(super) fn without_retried_attempt<'w>(
    window: &'w [StoredMessage],
    input: &[ChatMessage],
) -> &'w [StoredMessage] {
    let Some(at) = input
        .first()
        .and_then(|first| window.iter().position(|m| m.message.id == first.id))
    else {
        return window;
    };
    tracing::info!(
        dropped = window.len().saturating_sub(at),
        "the input is stored already (a retried run): its earlier attempt leaves the view"
    );
    window.get(..at).unwrap_or_default()
}

impl Agent {
    /// Reads the agent's window: with [`read_since`](HistoryStore::read_since) (no cursor: the
    /// whole window and the thread's counts in one round trip) when the store answers cursor
    /// reads (and does not refuse it as unsupported), else with [`read`](HistoryStore::read)
    /// (no counts).
    pub(super) async fn read_window(
        &self,
        scope: &crate::Scope,
    ) -> Result<(Vec<StoredMessage>, Option<ThreadCount>)> {
        if self.history.capabilities().cursor_reads {
            match self.history.read_since(scope, self.window, None).await {
                Ok(read) => return Ok((read.messages, Some(read.count))),
                // A wrapper that forwards the capabilities but not `read_since` (its default
                // answers without a round trip): read as without cursor reads.
                Err(e) if e.kind() == crate::ErrorKind::Unsupported => {}
                Err(e) => return Err(e),
            }
        }
        Ok((self.history.read(scope, self.window).await?, None))
    }

    /// The model's view of `window` (step 2 of a run): a `BeforeMessagesRetrieval` reducer's
    /// view, or the window with stored summaries first (where they belong in time). Returns
    /// the view and how many messages the reducer left out.
    pub(super) async fn view_of(
        &self,
        window: &[StoredMessage],
    ) -> Result<(Vec<ChatMessage>, usize)> {
        match &self.reducer {
            Some((reducer, ReducerTrigger::BeforeMessagesRetrieval)) if !window.is_empty() => {
                let span =
                    crate::span_fields::reducer_span("before_messages_retrieval", window.len());
                let reduction = reducer.reduce(window).instrument(span.clone()).await?;
                crate::span_fields::record_reduction(
                    &span,
                    "before_messages_retrieval",
                    window,
                    &reduction,
                );
                let reduced = reduction.dropped_count();
                if reduced > 0 {
                    tracing::info!(
                        dropped = reduced,
                        kept = window.len().saturating_sub(reduced),
                        "reducer shrank the view"
                    );
                }
                Ok((reduction.view(window), reduced))
            }
            _ if window.iter().any(|m| is_summary(&m.message)) => {
                Ok((Reduction::keep_all().view(window), 0))
            }
            _ => Ok((window.iter().map(|m| (*m.message).clone()).collect(), 0)),
        }
    }

    /// Stores the run (step 6): the input and everything it produced as one batch, unless the
    /// service holds the conversation (its id, when the model returned one, goes to the
    /// session); then an `AfterMessageAdded` reducer reduces what is stored. Returns the
    /// append's outcome with whether the reducer changed the thread (`None` when nothing was
    /// appended), and how many messages the reducer archived.
    pub(super) async fn store_turn(
        &self,
        session: &mut AgentSession,
        input: &[ChatMessage],
        produced: &[ChatMessage],
        conversation_id: Option<String>,
        read: Option<&ReadWindow<'_>>,
        counter: &mut Option<Arc<dyn TokenCounter>>,
    ) -> Result<(Option<(AppendOutcome, bool)>, u64)> {
        match (conversation_id, session.conversation()) {
            (Some(id), _) => {
                session.set_service_conversation_id(id);
                Ok((None, 0))
            }
            (None, Conversation::Service(_)) => Ok((None, 0)),
            (None, Conversation::Local) => {
                let mut batch = input.to_vec();
                batch.extend(produced.iter().cloned());
                let outcome = self
                    .history
                    .append(session.scope(), &batch)
                    .instrument(tracing::debug_span!(
                        "history.append",
                        messages = batch.len()
                    ))
                    .await?;
                let (mut archived, mut changed) = (0, false);
                if let Some((reducer, ReducerTrigger::AfterMessageAdded)) = &self.reducer {
                    let held = read
                        .and_then(|read| self.window_after_append(read, &batch, &outcome, counter));
                    let (moved, summarized) =
                        self.reduce_stored(reducer.as_ref(), session, held).await?;
                    archived = moved;
                    changed = moved > 0 || summarized;
                }
                Ok((Some((outcome, changed)), archived))
            }
        }
    }

    /// The agent's window of the thread right after its append of `batch`, built from the
    /// window it read and the append's sequence numbers (the run's messages counted with the
    /// agent's counter), when the append directly follows the read (nothing was appended in
    /// between) and the window kind allows it; `None` otherwise (the caller reads instead).
    fn window_after_append(
        &self,
        read: &ReadWindow<'_>,
        batch: &[ChatMessage],
        outcome: &AppendOutcome,
        counter: &mut Option<Arc<dyn TokenCounter>>,
    ) -> Option<Vec<StoredMessage>> {
        if outcome.seqs.len() != batch.len()
            || !StoredTurn::new(&self.history, outcome).follows(read)
        {
            return None;
        }
        let counter = counter.get_or_insert_with(default_token_counter);
        let mut window: Vec<StoredMessage> = read.messages.to_vec();
        window.extend(
            batch
                .iter()
                .zip(&outcome.seqs)
                .map(|(message, seq)| StoredMessage {
                    seq: *seq,
                    tokens: counter.count_message(message),
                    archived: false,
                    message: Arc::new(message.clone()),
                }),
        );
        match self.window {
            Window::All | Window::After(_) => {}
            Window::Last(n) => {
                window.drain(..window.len().saturating_sub(n));
            }
            Window::TokenBudget(budget) => {
                let mut spent = 0u64;
                let fits = window
                    .iter()
                    .rev()
                    .take_while(|m| {
                        spent = spent.saturating_add(u64::from(m.tokens));
                        spent <= budget
                    })
                    .count();
                window.drain(..window.len().saturating_sub(fits));
            }
            _ => return None,
        }
        Some(window)
    }

    /// Applies the reducer to the stored window (`held`, the agent's window after its append,
    /// or else read again): archives what it drops (and every active message older than the
    /// window) and stores the summary it wrote, if any. Returns how many messages it archived
    /// and whether it stored a summary.
    async fn reduce_stored(
        &self,
        reducer: &dyn ChatReducer,
        session: &AgentSession,
        held: Option<Vec<StoredMessage>>,
    ) -> Result<(u64, bool)> {
        let scope = session.scope();
        let window = match held {
            Some(window) => window,
            None => {
                self.history
                    .read(scope, self.window)
                    .instrument(tracing::debug_span!("history.read_after_append"))
                    .await?
            }
        };
        let span = crate::span_fields::reducer_span("after_message_added", window.len());
        let reduction = reducer.reduce(&window).instrument(span.clone()).await?;
        crate::span_fields::record_reduction(&span, "after_message_added", &window, &reduction);
        let mut archived = 0u64;
        for range in archive_ranges(&window, &reduction) {
            let moved = self
                .history
                .archive(scope, range.clone())
                .instrument(tracing::debug_span!("history.archive", ?range))
                .await?;
            archived = archived.saturating_add(moved);
        }
        let summarized = reduction.summary.is_some();
        if let Some(summary) = reduction.summary {
            self.history
                .append(scope, &[summary])
                .instrument(tracing::debug_span!("history.append_summary"))
                .await?;
        }
        if archived > 0 {
            tracing::info!(
                archived,
                "reducer archived messages out of the active window"
            );
            tracing::event!(
                target: "agent_memory::metrics",
                parent: None,
                tracing::Level::DEBUG,
                monotonic_counter.agent_memory.history.archived_messages = archived,
                agent_memory.archive.reason = "reducer",
            );
        }
        Ok((archived, summarized))
    }
}

/// The sequence ranges to archive so that the stored active window becomes the reduction's
/// view: the dropped runs, and every active message older than the window (except a pinned
/// message there).
fn archive_ranges(
    window: &[StoredMessage],
    reduction: &Reduction,
) -> Vec<std::ops::RangeInclusive<u64>> {
    if reduction.dropped.is_empty() {
        return Vec::new();
    }
    let mut ranges = Vec::new();
    let first_seq = window.first().map_or(1, |m| m.seq);
    if first_seq > 1 {
        ranges.push(1..=first_seq.saturating_sub(1));
    }
    for run in &reduction.dropped {
        if let (Some(first), Some(last)) =
            (window.get(run.start), window.get(run.end.saturating_sub(1)))
        {
            ranges.push(first.seq..=last.seq);
        }
    }
    ranges
}
