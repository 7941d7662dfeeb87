//! The summarizing reducer (Semantic Kernel's `ChatHistorySummarizationReducer`, LlamaIndex's
//! summary buffer).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use super::{ChatReducer, Reduction, SUMMARY_METADATA_KEY, Segmentation, is_summary, keep_within};
use crate::error::{Error, Result};
use crate::history::StoredMessage;
use crate::message::{ChatMessage, tagged_transcript};
use crate::model::{ChatModel, ChatRequest};

/// The instructions the summarizer sends the model by default.
pub const DEFAULT_SUMMARY_INSTRUCTIONS: &str = "Summarize the conversation below for the assistant \
that continues it. Keep every fact, name, number, decision and open question; drop greetings and \
repetition. If an earlier summary is given, merge it in. Answer with the summary only.";

/// Over a threshold, replaces the older messages by a summary a model writes.
///
/// When more than `target + threshold` messages (not counting the pinned system message and
/// earlier summaries) are in the window, the reducer keeps the newest `target` messages (cut
/// along [`Segmentation`] groups, never into the last user turn) and asks the model to
/// summarize the rest, merging any earlier summary. The summary is an assistant message marked
/// with [`SUMMARY_METADATA_KEY`]; in the view it comes right after the pinned message.
///
/// With [`ReducerTrigger::AfterMessageAdded`](super::ReducerTrigger::AfterMessageAdded), the
/// agent archives the summarized messages (they stay stored) and stores the summary in the
/// thread, so the model is called once per `threshold` new messages. With
/// `BeforeMessagesRetrieval` nothing is stored and the summary is written on every run over the
/// threshold.
#[derive(Debug, Clone)]
pub struct SummarizingReducer {
    model: Arc<dyn ChatModel>,
    target: usize,
    threshold: usize,
    instructions: String,
}

impl SummarizingReducer {
    /// Keeps `target` messages, summarizing once more than `target + threshold` accumulate.
    pub fn new(model: Arc<dyn ChatModel>, target: usize, threshold: usize) -> Self {
        Self {
            model,
            target,
            threshold,
            instructions: DEFAULT_SUMMARY_INSTRUCTIONS.to_owned(),
        }
    }

    /// Replaces the summarization instructions.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }
}

#[async_trait]
impl ChatReducer for SummarizingReducer {
    async fn reduce(&self, messages: &[StoredMessage]) -> Result<Reduction> {
        let seg = Segmentation::of(messages);
        let live = |i: usize, m: &StoredMessage| Some(i) != seg.pinned && !is_summary(&m.message);
        let live_count = messages
            .iter()
            .enumerate()
            .filter(|(i, m)| live(*i, m))
            .count();
        if live_count <= self.target + self.threshold {
            return Ok(Reduction::keep_all());
        }
        let cut = keep_within(messages, &seg, self.target as u64, 0, |m| {
            u64::from(!is_summary(&m.message))
        });
        let start = seg.pinned.map_or(0, |p| p.saturating_add(1));
        let first_kept = cut.dropped.first().map_or(start, |d| d.end);
        // Earlier summaries are folded into the new one, wherever they sit.
        let mut reduction = Reduction::new(seg.pinned, first_kept);
        let earlier: Vec<usize> = (first_kept..messages.len())
            .filter(|&i| messages.get(i).is_some_and(|m| is_summary(&m.message)))
            .collect();
        for &i in &earlier {
            reduction = reduction.drop_index(i);
        }
        let dropped: Vec<&StoredMessage> = messages
            .iter()
            .enumerate()
            .filter(|(i, _)| reduction.is_dropped(*i))
            .map(|(_, m)| m)
            .collect();
        let (Some(first), Some(last)) = (dropped.first(), dropped.last()) else {
            return Ok(Reduction::keep_all());
        };
        let (first_seq, last_seq) = (first.seq, last.seq);
        let transcript = tagged_transcript(dropped.iter().map(|m| &*m.message));
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(self.instructions.clone()),
                ChatMessage::user(transcript),
            ],
            ..ChatRequest::default()
        };
        let response = self.model.complete(&request).await?;
        let text = response
            .messages
            .iter()
            .map(ChatMessage::text)
            .collect::<Vec<_>>()
            .join("\n");
        if text.trim().is_empty() {
            return Err(Error::new(
                crate::ErrorKind::Backend,
                "the model returned an empty summary",
            ));
        }
        tracing::info!(
            summarized = dropped.len(),
            first_seq,
            last_seq,
            "summarizing reducer replaced older messages by a summary"
        );
        let summary =
            ChatMessage::assistant(format!("Summary of the earlier conversation: {text}"))
                .with_metadata(
                    SUMMARY_METADATA_KEY,
                    json!({ "first_seq": first_seq, "last_seq": last_seq }),
                );
        Ok(reduction.with_summary(summary))
    }
}
