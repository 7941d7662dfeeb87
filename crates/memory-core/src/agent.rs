//! [`Agent`]: the small agent loop that runs the whole memory pipeline.

mod input;
mod spans;
mod tools;
mod window;

use std::sync::Arc;

use tracing::Instrument;

use crate::context::{AiContext, ContextProvider, ContextProviders, ReadWindow, StoredTurn};
use crate::error::{Error, Result};
use crate::history::{HistoryStore, StoredMessage, ThreadCount, Window};
use crate::id::AgentId;
use crate::message::{ChatMessage, Role};
use crate::model::{ChatModel, ChatRequest, Usage};
use crate::reducer::{ChatReducer, ReducerTrigger};
use crate::session::AgentSession;
use crate::tokens::TokenCounter;
use crate::tool::{Tool, ToolCallRecord, Tools};

pub use input::AgentInput;
use tools::Opening;

/// The default history window an agent reads: the newest messages within 30,000 tokens.
pub const DEFAULT_WINDOW: Window = Window::TokenBudget(30_000);

/// The default limit of model calls in one run.
pub const DEFAULT_MAX_ITERATIONS: usize = 8;

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
    /// default, [`default_token_counter`](crate::default_token_counter)). Give it the history
    /// store's counter.
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
                message.id = input::derived_input_id(session.scope(), turn, index, message);
            }
        }
        let span = spans::turn_span(&self.name, session.scope());
        let capture = !span.is_disabled() && crate::span_fields::capture_content();
        if capture {
            span.record(
                "gen_ai.input.messages",
                crate::span_fields::messages_json(&input).as_str(),
            );
        }
        let result = self
            .run_inner(input, session)
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            spans::record_turn(&span, &result, capture);
        }
        result
    }

    /// One run, in its span: the seven steps of the [`Agent`]'s description.
    async fn run_inner(
        &self,
        input: Vec<ChatMessage>,
        session: &mut AgentSession,
    ) -> Result<AgentRun> {
        let service_id = session.service_conversation_id().map(str::to_owned);

        // 1. The history window, unless the service holds the history: one round trip, with
        //    the thread's counts when the store answers cursor reads.
        let (read, read_count): (Vec<StoredMessage>, Option<ThreadCount>) = if service_id.is_some()
        {
            (Vec::new(), None)
        } else {
            self.read_window(session.scope())
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
        let window = window::without_retried_attempt(&read, &input);

        // 2. The reducer shapes the view before retrieval.
        let (view, reduced_before) = self.view_of(window).await?;

        // 3. Context providers.
        let context = self
            .providers
            .invoking(session, &input, read_window)
            .instrument(tracing::debug_span!("providers.invoking"))
            .await?;

        // 4. The request.
        let opening = self.opening(context, view, &input, service_id.clone());

        // 5. The model, and the tools it calls, until it answers.
        let mut counter: Option<Arc<dyn TokenCounter>> = self.counter.clone();
        let turn = self
            .model_loop(session, &input, opening, service_id, &mut counter)
            .await?;

        // 6. Store the input and everything the run produced as one batch, or follow the
        //    service's conversation.
        let (appended, archived) = self
            .store_turn(
                session,
                &input,
                &turn.produced,
                turn.conversation_id,
                read_window.as_ref(),
                &mut counter,
            )
            .await?;

        // 7. Providers learn from the run: the input, and every call, result and answer, with
        //    what was stored.
        let stored = appended.as_ref().map(|(outcome, changed)| {
            StoredTurn::new(&self.history, outcome).with_reduced(*changed)
        });
        self.providers
            .invoked(
                session,
                &input,
                Some(&turn.produced),
                None,
                read_window,
                stored,
            )
            .instrument(tracing::debug_span!("providers.invoked"))
            .await?;
        session.record_turn()?;

        Ok(AgentRun {
            messages: turn.produced,
            request: turn.request,
            tool_calls: turn.tool_calls,
            iterations: turn.iterations,
            stop_reason: turn.stop_reason,
            window_len: window.len(),
            reduced: reduced_before.saturating_add(turn.reduced),
            archived,
            usage: turn.usage,
        })
    }

    /// The first request of a run (step 4): the instructions and the providers' instructions
    /// as one leading system message, the providers' messages, the view, the input; the
    /// agent's tools, then the providers' (a provider's tool that shadows one of the agent's
    /// is not offered twice).
    fn opening(
        &self,
        context: AiContext,
        view: Vec<ChatMessage>,
        input: &[ChatMessage],
        service_id: Option<String>,
    ) -> Opening {
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
        let request = ChatRequest {
            messages: [prefix.as_slice(), conversation.as_slice()].concat(),
            tools,
            conversation_id: service_id,
        };
        Opening {
            prefix,
            conversation,
            request,
        }
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
}
