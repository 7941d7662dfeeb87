//! [`Agent`]: the small agent loop that runs the whole memory pipeline.

use std::sync::Arc;

use tracing::Instrument;

use crate::context::{ContextProvider, ContextProviders, ReadWindow, StoredTurn};
use crate::error::{Error, Result};
use crate::history::{AppendOutcome, HistoryStore, StoredMessage, ThreadCount, Window};
use crate::id::{AgentId, MessageId};
use crate::message::{ChatMessage, Role};
use crate::model::{ChatModel, ChatRequest, Usage};
use crate::reducer::{ChatReducer, ReducerTrigger, Reduction, is_summary};
use crate::session::{AgentSession, Conversation};
use crate::tokens::{TokenCounter, default_token_counter};
use crate::tool::{Tool, ToolCallRecord, ToolCallStatus, Tools, tool_calls};

/// The default history window an agent reads: the newest messages within 30,000 tokens.
pub const DEFAULT_WINDOW: Window = Window::TokenBudget(30_000);

/// The default limit of model calls in one run.
pub const DEFAULT_MAX_ITERATIONS: usize = 8;

/// What one run gives as input: its messages, and whether the run derives their ids.
///
/// Text (`From<&str>`, `From<String>`) makes one user message whose id the run derives
/// deterministically from the session's scope, its turn count and the text (see
/// [`Agent::run`]), so retrying a run whose store write committed but whose reply was lost
/// stores the turn once in a store that dedupes ids. Messages given as such
/// (`From<ChatMessage>`, `From<Vec<ChatMessage>>`, [`new`](Self::new)) keep their ids; a retry
/// that passes the same messages (the same ids) is deduped likewise.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInput {
    messages: Vec<ChatMessage>,
    derive_ids: bool,
}

impl AgentInput {
    /// The given messages, with their own ids.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            derive_ids: false,
        }
    }

    /// One user message of `text`, its id derived by the run.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::user(text.into())],
            derive_ids: true,
        }
    }

    /// The messages.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Whether the run derives the messages' ids (text input).
    pub fn derives_ids(&self) -> bool {
        self.derive_ids
    }

    /// The messages, taken out.
    pub fn into_messages(self) -> Vec<ChatMessage> {
        self.messages
    }
}

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        AgentInput::text(text)
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        AgentInput::text(text)
    }
}

impl From<ChatMessage> for AgentInput {
    fn from(message: ChatMessage) -> Self {
        AgentInput::new(vec![message])
    }
}

impl From<Vec<ChatMessage>> for AgentInput {
    fn from(messages: Vec<ChatMessage>) -> Self {
        AgentInput::new(messages)
    }
}

/// The id of input message `index` of the run at turn `turn` of the session at `scope`: a
/// UUIDv5 of the scope key, the turn, the index, the role and the content, so the same text
/// retried at the same turn gets the same id, and the next turn (or other text) another.
fn derived_input_id(
    scope: &crate::Scope,
    turn: u64,
    index: usize,
    message: &ChatMessage,
) -> MessageId {
    let parts = serde_json::to_string(&message.parts).unwrap_or_default();
    let name = format!(
        "agent-memory/input\n{}\n{turn}\n{index}\n{:?}\n{parts}",
        scope.key(),
        message.role
    );
    // A UUID is 36 characters of the id alphabet: always a valid id.
    let uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string();
    MessageId::new(uuid).unwrap_or_else(|_| MessageId::generate())
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The model answered without calling a tool.
    Answered,
    /// The model still called tools when the run reached the agent's
    /// [`max_iterations`](AgentBuilder::max_iterations). Those last calls were not run; each is
    /// answered (and stored) with a tool message saying so, so the stored thread holds no call
    /// without its result and the model learns why on the next turn.
    MaxIterations,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// Every message the run produced, in order, as stored after the input: each assistant
    /// message (tool calls and the final answer) and each tool result.
    pub messages: Vec<ChatMessage>,
    /// Exactly what the model was sent in the last model call.
    pub request: ChatRequest,
    /// Every tool call the model made, in order, with what it was answered.
    pub tool_calls: Vec<ToolCallRecord>,
    /// How many times the model was called.
    pub iterations: usize,
    /// Why the run stopped.
    pub stop_reason: StopReason,
    /// How many history messages the window read.
    pub window_len: usize,
    /// How many messages the reducer left out of the view (`BeforeMessagesRetrieval`: of the
    /// window before the first model call; any trigger: of the request between model calls).
    pub reduced: usize,
    /// How many stored messages the reducer archived (trigger `AfterMessageAdded`).
    pub archived: u64,
    /// Token usage summed over the model calls, if the model reported it.
    pub usage: Option<Usage>,
}

impl AgentRun {
    /// The text of the final answer: the messages of the last model response, when it called
    /// no tool (empty after [`StopReason::MaxIterations`]).
    pub fn text(&self) -> String {
        let start = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Tool)
            .map_or(0, |i| i.saturating_add(1));
        let texts: Vec<String> = self
            .messages
            .get(start..)
            .unwrap_or_default()
            .iter()
            .map(ChatMessage::text)
            .collect();
        texts.join("\n")
    }
}

/// A chat agent: a model, instructions, a history store, an optional reducer, context
/// providers and tools.
///
/// [`run`](Agent::run) loads the session's window from the history store, lets the reducer
/// shape the view, asks the context providers for more context, then calls the model until it
/// answers: after each response that calls tools, the calls run concurrently and their results
/// go back to the model (at most [`max_iterations`](AgentBuilder::max_iterations) model calls).
/// It then stores the input, every tool call, every result and the answer as one atomic batch,
/// lets the reducer archive on `AfterMessageAdded`, and tells the providers what happened.
/// Each step is a `tracing` span.
///
/// The model is offered the agent's [`Tool`]s and the tools the providers add; a call the
/// agent has no tool for, arguments that are not JSON and a tool's error are answered to the
/// model as the call's result (an error sentence), never failing the run.
///
/// ```
/// use std::sync::Arc;
/// use memory_core::*;
///
/// #[derive(Debug)]
/// struct Parrot;
///
/// #[async_trait::async_trait]
/// impl ChatModel for Parrot {
///     async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
///         let last = request.messages.last().map(ChatMessage::text).unwrap_or_default();
///         Ok(ChatResponse { messages: vec![ChatMessage::assistant(last)], ..Default::default() })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Arc::new(InMemoryHistoryStore::new());
/// let agent = Agent::builder("parrot", Arc::new(Parrot), store.clone())
///     .instructions("Repeat the user.")
///     .build()?;
/// let mut session = AgentSession::new(Scope::session("s-1")?);
/// let run = agent.run("hello", &mut session).await?;
/// assert_eq!(run.text(), "hello");
/// assert_eq!(store.count(session.scope()).await?.active, 2);
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Agent {
    name: AgentId,
    instructions: Option<String>,
    model: Arc<dyn ChatModel>,
    history: Arc<dyn HistoryStore>,
    window: Window,
    reducer: Option<(Arc<dyn ChatReducer>, ReducerTrigger)>,
    providers: ContextProviders,
    tools: Tools,
    max_iterations: usize,
    counter: Option<Arc<dyn TokenCounter>>,
}

/// Builds an [`Agent`].
#[derive(Debug)]
pub struct AgentBuilder {
    name: String,
    instructions: Option<String>,
    model: Arc<dyn ChatModel>,
    history: Arc<dyn HistoryStore>,
    window: Window,
    reducer: Option<(Arc<dyn ChatReducer>, ReducerTrigger)>,
    providers: Vec<Arc<dyn ContextProvider>>,
    tools: Vec<Arc<dyn Tool>>,
    max_iterations: usize,
    counter: Option<Arc<dyn TokenCounter>>,
}

impl AgentBuilder {
    /// Sets the instructions (sent as the leading system message).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets which part of the stored history is read each run (default
    /// [`DEFAULT_WINDOW`]).
    pub fn window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// Sets the reducer and when it runs.
    pub fn reducer(mut self, reducer: Arc<dyn ChatReducer>, trigger: ReducerTrigger) -> Self {
        self.reducer = Some((reducer, trigger));
        self
    }

    /// Adds a context provider; providers run in the order added.
    pub fn context_provider(mut self, provider: Arc<dyn ContextProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    /// Adds a tool the model may call; tools are offered in the order added, before the
    /// providers' tools.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets how many times one run may call the model (default [`DEFAULT_MAX_ITERATIONS`]):
    /// the first call, and one more after each response that calls tools. A run whose last
    /// allowed call still asks for tools stops with [`StopReason::MaxIterations`].
    pub fn max_iterations(mut self, max_iterations: usize) -> Self {
        self.max_iterations = max_iterations;
        self
    }

    /// Sets the tokenizer the agent counts messages with that the store has not counted: the
    /// request between model calls (when a reducer is set), and the run's own messages when an
    /// `AfterMessageAdded` reducer works on the window the agent holds (default: the stores'
    /// default, [`default_token_counter`]). Give it the history store's counter.
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// Builds the agent.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid name, two
    /// providers sharing a source id, an invalid tool name, two tools sharing a name, or a
    /// `max_iterations` of 0.
    pub fn build(self) -> Result<Agent> {
        if self.max_iterations == 0 {
            return Err(Error::invalid_input(
                "an agent's max_iterations must be at least 1 (one model call per run)",
            ));
        }
        Ok(Agent {
            tools: Tools::new(self.tools)?,
            max_iterations: self.max_iterations,
            name: AgentId::new(self.name)?,
            instructions: self.instructions,
            model: self.model,
            history: self.history,
            window: self.window,
            reducer: self.reducer,
            providers: ContextProviders::new(self.providers)?,
            counter: self.counter,
        })
    }
}

impl Agent {
    /// Starts building an agent named `name` on `model`, storing history in `history`.
    pub fn builder(
        name: impl Into<String>,
        model: Arc<dyn ChatModel>,
        history: Arc<dyn HistoryStore>,
    ) -> AgentBuilder {
        AgentBuilder {
            name: name.into(),
            instructions: None,
            model,
            history,
            window: DEFAULT_WINDOW,
            reducer: None,
            providers: Vec::new(),
            tools: Vec::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            counter: None,
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &AgentId {
        &self.name
    }

    /// The history store.
    pub fn history(&self) -> &Arc<dyn HistoryStore> {
        &self.history
    }

    /// The agent's own tools.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// Runs one turn of `session` with `input`: model calls and tool calls until the model
    /// answers or the run reaches [`max_iterations`](AgentBuilder::max_iterations) (see
    /// [`AgentRun::stop_reason`]).
    ///
    /// Between model calls, when a reducer is set (whatever its trigger), it is applied to the
    /// request's history and input and the tool messages so far (view only; the store is
    /// untouched), so a run with many tool calls stays within the reducer's limit; it cuts
    /// along [`Segmentation`](crate::Segmentation), so a tool call keeps its results.
    ///
    /// Retries: text input ([`AgentInput::text`]) gets an id derived from the session's scope,
    /// its turn count and the text, so retrying a run that failed after its append committed
    /// (a timeout, a lost reply) with the same text and session stores the input once in a
    /// store that [dedupes ids](crate::HistoryCapabilities::dedupes_ids); the turn count moves
    /// only on success, so the retry derives the same id. When the window already holds the
    /// input's id, that earlier attempt (the input and what followed it) leaves the model's
    /// view. The retry's answer is a new model call: it is stored after the earlier attempt's.
    ///
    /// # Errors
    /// Whatever the store, a provider, the model or (between model calls) the reducer returns.
    /// When the model fails, even after tools ran, nothing of the run is stored, the providers
    /// are told of the error, and the session's turn count is unchanged.
    pub async fn run(
        &self,
        input: impl Into<AgentInput>,
        session: &mut AgentSession,
    ) -> Result<AgentRun> {
        let input = input.into();
        let derive_ids = input.derives_ids();
        let mut input = input.into_messages();
        if input.is_empty() {
            return Err(Error::invalid_input(
                "a run needs at least one input message",
            ));
        }
        if derive_ids {
            let turn = session.turns();
            for (index, message) in input.iter_mut().enumerate() {
                message.id = derived_input_id(session.scope(), turn, index, message);
            }
        }
        let span = turn_span(&self.name, session.scope());
        let capture = !span.is_disabled() && crate::telemetry::capture_content();
        if capture {
            span.record(
                "gen_ai.input.messages",
                crate::telemetry::messages_json(&input).as_str(),
            );
        }
        let result = self
            .run_inner(input, session)
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            record_turn(&span, &result, capture);
        }
        result
    }

    async fn run_inner(
        &self,
        input: Vec<ChatMessage>,
        session: &mut AgentSession,
    ) -> Result<AgentRun> {
        let scope = session.scope().clone();
        let service_id = session.service_conversation_id().map(str::to_owned);

        // 1. The history window, unless the service holds the history: one round trip, with
        //    the thread's counts when the store answers cursor reads.
        let (read, read_count): (Vec<StoredMessage>, Option<ThreadCount>) = if service_id.is_some()
        {
            (Vec::new(), None)
        } else {
            self.read_window(&scope)
                .instrument(tracing::debug_span!("history.read", window = ?self.window))
                .await?
        };
        let read_window = service_id.is_none().then(|| {
            let held = ReadWindow::new(&self.history, self.window, &read);
            match read_count {
                Some(count) => held.with_count(count),
                None => held,
            }
        });

        // A retried run whose earlier attempt was stored (its reply lost): the window holds
        // that attempt from the input on. It leaves the view, so the model sees the turn once.
        let mut window: &[StoredMessage] = &read;
        if let Some(at) = input
            .first()
            .and_then(|first| window.iter().position(|m| m.message.id == first.id))
        {
            tracing::info!(
                dropped = window.len().saturating_sub(at),
                "the input is stored already (a retried run): its earlier attempt leaves the view"
            );
            window = window.get(..at).unwrap_or_default();
        }

        // 2. The reducer shapes the view before retrieval.
        let window_len = window.len();
        let mut reduced = 0;
        let view: Vec<ChatMessage> = match &self.reducer {
            Some((reducer, ReducerTrigger::BeforeMessagesRetrieval)) if !window.is_empty() => {
                let span =
                    crate::telemetry::reducer_span("before_messages_retrieval", window.len());
                let reduction = reducer.reduce(window).instrument(span.clone()).await?;
                crate::telemetry::record_reduction(
                    &span,
                    "before_messages_retrieval",
                    window,
                    &reduction,
                );
                reduced = reduction.dropped_count();
                if reduced > 0 {
                    tracing::info!(
                        dropped = reduced,
                        kept = window_len.saturating_sub(reduced),
                        "reducer shrank the view"
                    );
                }
                reduction.view(window)
            }
            // Stored summaries go first in the view, where they belong in time.
            _ if window.iter().any(|m| is_summary(&m.message)) => {
                Reduction::keep_all().view(window)
            }
            _ => window.iter().map(|m| (*m.message).clone()).collect(),
        };

        // 3. Context providers.
        let context = self
            .providers
            .invoking(session, &input, read_window)
            .instrument(tracing::debug_span!("providers.invoking"))
            .await?;

        // 4. The request: the agent's tools, then the providers' (a provider's tool that
        //    shadows one of the agent's is not offered twice).
        let mut prefix = Vec::with_capacity(context.messages.len().saturating_add(1));
        let mut instructions: Vec<&str> = self.instructions.iter().map(String::as_str).collect();
        instructions.extend(context.instructions.iter().map(String::as_str));
        if !instructions.is_empty() {
            prefix.push(ChatMessage::system(instructions.join("\n\n")));
        }
        prefix.extend(context.messages);
        let mut tools = self.tools.definitions();
        for tool in context.tools {
            if tools.iter().any(|t| t.name == tool.name) {
                tracing::warn!(tool = %tool.name, "a provider's tool shadows one of the agent's; the agent's runs");
            } else {
                tools.push(tool);
            }
        }
        let mut conversation = view;
        conversation.extend(input.iter().cloned());
        let mut request = ChatRequest {
            messages: [prefix.as_slice(), conversation.as_slice()].concat(),
            tools,
            conversation_id: service_id.clone(),
        };

        // 5. The model, and the tools it calls, until it answers.
        let mut produced: Vec<ChatMessage> = Vec::new();
        let mut records: Vec<ToolCallRecord> = Vec::new();
        let mut usage: Option<Usage> = None;
        let mut response_conversation_id: Option<String> = None;
        let mut iterations = 0usize;
        let mut counter: Option<Arc<dyn TokenCounter>> = self.counter.clone();
        let stop_reason = loop {
            iterations = iterations.saturating_add(1);
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
                iteration = iterations,
                messages = request.messages.len()
            );
            let response = match self
                .model
                .complete(&request)
                .instrument(model_span.clone())
                .await
            {
                Ok(response) => {
                    if let Some(u) = response.usage {
                        model_span.record(
                            "gen_ai.usage.input_tokens",
                            crate::telemetry::int(u.input_tokens),
                        );
                        model_span.record(
                            "gen_ai.usage.output_tokens",
                            crate::telemetry::int(u.output_tokens),
                        );
                    }
                    response
                }
                Err(error) => {
                    model_span.record("otel.status_code", "ERROR");
                    model_span.record("error.type", error.kind().as_str());
                    tracing::warn!(%error, "the model failed; nothing is stored");
                    return Err(self.fail(session, &input, error).await);
                }
            };
            if let Some(u) = response.usage {
                let total = usage.get_or_insert_with(Usage::default);
                total.input_tokens = total.input_tokens.saturating_add(u.input_tokens);
                total.output_tokens = total.output_tokens.saturating_add(u.output_tokens);
            }
            if let Some(id) = response.conversation_id {
                response_conversation_id = Some(id);
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

            // The calls of this response run concurrently.
            let last = iterations >= self.max_iterations;
            let calls: Vec<ToolCallRecord> = if last {
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
                        iteration: iterations,
                    })
                    .collect()
            } else {
                let runs = answer.iter().map(|m| self.tools.call_all(m, iterations));
                futures::future::join_all(runs)
                    .instrument(tracing::debug_span!("tools.call", iteration = iterations))
                    .await
                    .into_iter()
                    .flatten()
                    .collect()
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
            let service = response_conversation_id
                .clone()
                .or_else(|| service_id.clone());
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
                            return Err(self.fail(session, &input, error).await);
                        }
                    }
                }
                request.messages = [prefix.as_slice(), conversation.as_slice()].concat();
            }
        };

        // 6. Store the input and everything the run produced as one batch, or follow the
        //    service's conversation.
        let mut archived = 0;
        let mut appended: Option<(AppendOutcome, bool)> = None;
        match (response_conversation_id, session.conversation()) {
            (Some(id), _) => session.set_service_conversation_id(id),
            (None, Conversation::Service(_)) => {}
            (None, Conversation::Local) => {
                let mut batch = input.clone();
                batch.extend(produced.iter().cloned());
                let outcome = self
                    .history
                    .append(&scope, &batch)
                    .instrument(tracing::debug_span!(
                        "history.append",
                        messages = batch.len()
                    ))
                    .await?;
                let mut changed = false;
                if let Some((reducer, ReducerTrigger::AfterMessageAdded)) = &self.reducer {
                    let held = read_window.as_ref().and_then(|read| {
                        self.window_after_append(read, &batch, &outcome, &mut counter)
                    });
                    let (moved, summarized) =
                        self.reduce_stored(reducer.as_ref(), session, held).await?;
                    archived = moved;
                    changed = moved > 0 || summarized;
                }
                appended = Some((outcome, changed));
            }
        }

        // 7. Providers learn from the run: the input, and every call, result and answer, with
        //    what was stored.
        let stored = appended.as_ref().map(|(outcome, changed)| {
            StoredTurn::new(&self.history, outcome).with_reduced(*changed)
        });
        self.providers
            .invoked(session, &input, Some(&produced), None, read_window, stored)
            .instrument(tracing::debug_span!("providers.invoked"))
            .await?;
        session.record_turn()?;

        Ok(AgentRun {
            messages: produced,
            request,
            tool_calls: records,
            iterations,
            stop_reason,
            window_len,
            reduced,
            archived,
            usage,
        })
    }

    /// Tells the providers that the run failed with `error` (their own failures are logged)
    /// and gives the error back.
    async fn fail(&self, session: &mut AgentSession, input: &[ChatMessage], error: Error) -> Error {
        if let Err(provider_error) = self
            .providers
            .invoked(session, input, None, Some(&error), None, None)
            .await
        {
            tracing::warn!(%provider_error, "a provider failed while being told of the run's failure");
        }
        error
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
        let span = crate::telemetry::reducer_span("in_flight", stored.len());
        let reduction = reducer.reduce(&stored).instrument(span.clone()).await?;
        crate::telemetry::record_reduction(&span, "in_flight", &stored, &reduction);
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

    /// Reads the agent's window: with [`read_since`](HistoryStore::read_since) (no cursor: the
    /// whole window and the thread's counts in one round trip) when the store answers cursor
    /// reads (and does not refuse it as unsupported), else with [`read`](HistoryStore::read)
    /// (no counts).
    async fn read_window(
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
        let span = crate::telemetry::reducer_span("after_message_added", window.len());
        let reduction = reducer.reduce(&window).instrument(span.clone()).await?;
        crate::telemetry::record_reduction(&span, "after_message_added", &window, &reduction);
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

/// The span of one agent turn (OpenTelemetry `gen_ai` `invoke_agent`); its fields are
/// evaluated only when a subscriber wants it.
fn turn_span(agent: &AgentId, scope: &crate::Scope) -> tracing::Span {
    let span = tracing::info_span!(
        "agent.run",
        otel.name = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %agent,
        gen_ai.conversation.id = %scope.key(),
        agent_memory.scope.tenant = %scope.tenant(),
        agent_memory.scope.user = scope.user().map(|u| u.as_str()),
        agent_memory.scope.agent = scope.agent().map(|a| a.as_str()),
        agent_memory.scope.session = %scope.session_id(),
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        agent_memory.turn.window_messages = tracing::field::Empty,
        agent_memory.turn.iterations = tracing::field::Empty,
        agent_memory.turn.tool_calls = tracing::field::Empty,
        agent_memory.turn.messages_produced = tracing::field::Empty,
        agent_memory.reducer.messages_dropped = tracing::field::Empty,
        agent_memory.history.archived = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("invoke_agent {agent}"));
    }
    span
}

/// Records what a turn did on its span, and the `gen_ai.client.token.usage` data points.
fn record_turn(span: &tracing::Span, result: &Result<AgentRun>, capture: bool) {
    let run = match result {
        Ok(run) => run,
        Err(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", error.kind().as_str());
            return;
        }
    };
    if let Some(usage) = run.usage {
        span.record(
            "gen_ai.usage.input_tokens",
            crate::telemetry::int(usage.input_tokens),
        );
        span.record(
            "gen_ai.usage.output_tokens",
            crate::telemetry::int(usage.output_tokens),
        );
        for (kind, tokens) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
        ] {
            tracing::event!(
                target: "agent_memory::metrics",
                parent: None,
                tracing::Level::DEBUG,
                histogram.gen_ai.client.token.usage = tokens,
                gen_ai.operation.name = "invoke_agent",
                gen_ai.token.type = kind,
            );
        }
    }
    span.record(
        "agent_memory.turn.window_messages",
        crate::telemetry::int(run.window_len),
    );
    span.record(
        "agent_memory.turn.iterations",
        crate::telemetry::int(run.iterations),
    );
    span.record(
        "agent_memory.turn.tool_calls",
        crate::telemetry::int(run.tool_calls.len()),
    );
    span.record(
        "agent_memory.turn.messages_produced",
        crate::telemetry::int(run.messages.len()),
    );
    span.record(
        "agent_memory.reducer.messages_dropped",
        crate::telemetry::int(run.reduced),
    );
    span.record(
        "agent_memory.history.archived",
        crate::telemetry::int(run.archived),
    );
    if capture {
        span.record(
            "gen_ai.output.messages",
            crate::telemetry::messages_json(&run.messages).as_str(),
        );
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
