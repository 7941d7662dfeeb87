//! The model loop of a run: call the model; when it calls tools, run them (concurrently) and
//! call it again with their results, until it answers or the run reaches its limit of model
//! calls.

use std::sync::Arc;

use tracing::Instrument;

use super::{Agent, StopReason};
use crate::error::Result;
use crate::history::StoredMessage;
use crate::message::{ChatMessage, Role};
use crate::model::{ChatRequest, ChatResponse, Usage};
use crate::reducer::ChatReducer;
use crate::session::AgentSession;
use crate::tokens::{TokenCounter, default_token_counter};
use crate::tool::{ToolCallRecord, ToolCallStatus, tool_calls};

/// A run's first request, and what the later ones are built from.
pub(super) struct Opening {
    /// The leading messages every request repeats: the instructions and the providers'
    /// messages.
    pub(super) prefix: Vec<ChatMessage>,
    /// The conversation after the prefix: the view of the history, then the input.
    pub(super) conversation: Vec<ChatMessage>,
    /// The first request (`prefix` then `conversation`, with the tools).
    pub(super) request: ChatRequest,
}

/// What the model loop of one run produced.
pub(super) struct ModelTurn {
    /// Every message of the run after its input, in order: each response's messages and each
    /// tool result.
    pub(super) produced: Vec<ChatMessage>,
    /// Every tool call, in order, with what it was answered.
    pub(super) tool_calls: Vec<ToolCallRecord>,
    /// The request of the last model call.
    pub(super) request: ChatRequest,
    /// Token usage summed over the model calls, if the model reported it.
    pub(super) usage: Option<Usage>,
    /// The conversation id of the last response that carried one (the service holds the
    /// history).
    pub(super) conversation_id: Option<String>,
    /// How many times the model was called.
    pub(super) iterations: usize,
    /// Why the loop stopped.
    pub(super) stop_reason: StopReason,
    /// How many messages the reducer left out of the request between model calls.
    pub(super) reduced: usize,
}

impl Agent {
    /// Calls the model, and the tools it calls, until it answers (step 5 of a run). `service_id`
    /// is the session's service conversation, if any; `counter` the token counter of the
    /// run, set on first use.
    ///
    /// # Errors
    /// When the model or (between model calls) the reducer fails: the providers are told
    /// (see [`fail`](Agent::fail)) and the error is returned; nothing is stored.
    pub(super) async fn model_loop(
        &self,
        session: &mut AgentSession,
        input: &[ChatMessage],
        opening: Opening,
        service_id: Option<String>,
        counter: &mut Option<Arc<dyn TokenCounter>>,
    ) -> Result<ModelTurn> {
        let Opening {
            prefix,
            mut conversation,
            mut request,
        } = opening;
        let mut produced: Vec<ChatMessage> = Vec::new();
        let mut records: Vec<ToolCallRecord> = Vec::new();
        let mut usage: Option<Usage> = None;
        let mut conversation_id: Option<String> = None;
        let mut iterations = 0usize;
        let mut reduced = 0usize;
        let stop_reason = loop {
            iterations = iterations.saturating_add(1);
            let response = match self.complete(&request, iterations).await {
                Ok(response) => response,
                Err(error) => return Err(self.fail(session, input, error).await),
            };
            if let Some(u) = response.usage {
                let total = usage.get_or_insert_with(Usage::default);
                total.input_tokens = total.input_tokens.saturating_add(u.input_tokens);
                total.output_tokens = total.output_tokens.saturating_add(u.output_tokens);
            }
            if let Some(id) = response.conversation_id {
                conversation_id = Some(id);
            }
            let mut answer = response.messages;
            for m in &mut answer {
                if m.role == Role::Assistant && m.author_name.is_none() {
                    m.author_name = Some(self.name.to_string());
                }
            }
            produced.extend(answer.iter().cloned());
            if !answer.iter().any(ChatMessage::has_tool_calls) {
                break StopReason::Answered;
            }

            let last = iterations >= self.max_iterations;
            let calls = if last {
                self.calls_not_run(&answer, iterations)
            } else {
                self.call_tools(&answer, iterations).await
            };
            let results: Vec<ChatMessage> = calls.iter().map(ToolCallRecord::to_message).collect();
            produced.extend(results.iter().cloned());
            records.extend(calls);
            if last {
                tracing::warn!(
                    max_iterations = self.max_iterations,
                    "the run reached its iteration limit with tool calls pending"
                );
                break StopReason::MaxIterations;
            }

            // The next request.
            let service = conversation_id.clone().or_else(|| service_id.clone());
            if service.is_some() {
                // The service holds what it was sent and answered; send only the results.
                request.messages = [prefix.as_slice(), results.as_slice()].concat();
                request.conversation_id = service;
            } else {
                conversation.extend(answer);
                conversation.extend(results);
                if let Some((reducer, _)) = &self.reducer {
                    let counter = counter.get_or_insert_with(default_token_counter);
                    match self
                        .reduce_in_flight(reducer.as_ref(), counter.as_ref(), &mut conversation)
                        .await
                    {
                        Ok(dropped) => reduced = reduced.saturating_add(dropped),
                        Err(error) => {
                            tracing::warn!(%error, "the reducer failed between model calls; nothing is stored");
                            return Err(self.fail(session, input, error).await);
                        }
                    }
                }
                request.messages = [prefix.as_slice(), conversation.as_slice()].concat();
            }
        };
        Ok(ModelTurn {
            produced,
            tool_calls: records,
            request,
            usage,
            conversation_id,
            iterations,
            stop_reason,
            reduced,
        })
    }

    /// One model call (iteration `iteration` of the run), in its `chat` span.
    async fn complete(&self, request: &ChatRequest, iteration: usize) -> Result<ChatResponse> {
        let model_span = tracing::info_span!(
            "model.complete",
            otel.name = "chat",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.agent.name = %self.name,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
            iteration = iteration,
            messages = request.messages.len()
        );
        match self
            .model
            .complete(request)
            .instrument(model_span.clone())
            .await
        {
            Ok(response) => {
                if let Some(u) = response.usage {
                    model_span.record(
                        "gen_ai.usage.input_tokens",
                        crate::span_fields::int(u.input_tokens),
                    );
                    model_span.record(
                        "gen_ai.usage.output_tokens",
                        crate::span_fields::int(u.output_tokens),
                    );
                }
                Ok(response)
            }
            Err(error) => {
                model_span.record("otel.status_code", "ERROR");
                model_span.record("error.type", error.kind().as_str());
                tracing::warn!(%error, "the model failed; nothing is stored");
                Err(error)
            }
        }
    }

    /// Runs the calls of one response concurrently, each answered with its result or an
    /// error sentence.
    async fn call_tools(&self, answer: &[ChatMessage], iteration: usize) -> Vec<ToolCallRecord> {
        let runs = answer.iter().map(|m| self.tools.call_all(m, iteration));
        futures::future::join_all(runs)
            .instrument(tracing::debug_span!("tools.call", iteration = iteration))
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// The calls of a response that came at the run's last allowed model call: none is run,
    /// each is answered with a sentence saying why.
    fn calls_not_run(&self, answer: &[ChatMessage], iteration: usize) -> Vec<ToolCallRecord> {
        let limit = self.max_iterations;
        answer
            .iter()
            .flat_map(tool_calls)
            .map(|(id, name, arguments)| ToolCallRecord {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: arguments.to_owned(),
                result: format!(
                    "Error: the call was not run: the agent reached its limit of {limit} model calls in one run."
                ),
                status: ToolCallStatus::NotRun,
                iteration,
            })
            .collect()
    }

    /// Applies the reducer to the conversation of a run between two model calls (view only:
    /// nothing is stored or archived), when it no longer fits. The reducer cuts along
    /// [`Segmentation`](crate::Segmentation), so no tool call loses its results, and the
    /// run's own input and tool groups (the last user turn) stay. Returns how many messages
    /// left the view.
    async fn reduce_in_flight(
        &self,
        reducer: &dyn ChatReducer,
        counter: &dyn TokenCounter,
        conversation: &mut Vec<ChatMessage>,
    ) -> Result<usize> {
        let stored: Vec<StoredMessage> = conversation
            .drain(..)
            .zip(1..)
            .map(|(message, seq)| StoredMessage {
                seq,
                tokens: counter.count_message(&message),
                archived: false,
                message: Arc::new(message),
            })
            .collect();
        let span = crate::span_fields::reducer_span("in_flight", stored.len());
        let reduction = reducer.reduce(&stored).instrument(span.clone()).await?;
        crate::span_fields::record_reduction(&span, "in_flight", &stored, &reduction);
        let dropped = reduction.dropped_count();
        if dropped > 0 {
            tracing::info!(
                dropped,
                kept = stored.len().saturating_sub(dropped),
                "the reducer shrank the request between tool iterations"
            );
        }
        *conversation = if reduction.is_noop() {
            stored.into_iter().map(|m| m.into_message()).collect()
        } else {
            reduction.view(&stored)
        };
        Ok(dropped)
    }
}
