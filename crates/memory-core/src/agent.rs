//! [`Agent`]: the small agent loop that runs the whole memory pipeline.

use std::sync::Arc;

use tracing::Instrument;

use crate::context::{ContextProvider, ContextProviders};
use crate::error::{Error, Result};
use crate::history::{HistoryStore, StoredMessage, Window};
use crate::id::AgentId;
use crate::message::{ChatMessage, Role};
use crate::model::{ChatModel, ChatRequest, Usage};
use crate::reducer::{ChatReducer, ReducerTrigger, Reduction, is_summary};
use crate::session::{AgentSession, Conversation};

/// The default history window an agent reads: the newest messages within 30,000 tokens.
pub const DEFAULT_WINDOW: Window = Window::TokenBudget(30_000);

/// What one run gives as input.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInput(pub Vec<ChatMessage>);

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        AgentInput(vec![ChatMessage::user(text)])
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        AgentInput(vec![ChatMessage::user(text)])
    }
}

impl From<ChatMessage> for AgentInput {
    fn from(message: ChatMessage) -> Self {
        AgentInput(vec![message])
    }
}

impl From<Vec<ChatMessage>> for AgentInput {
    fn from(messages: Vec<ChatMessage>) -> Self {
        AgentInput(messages)
    }
}

/// What one run did.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// The model's response messages.
    pub messages: Vec<ChatMessage>,
    /// Exactly what the model was sent.
    pub request: ChatRequest,
    /// How many history messages the window read.
    pub window_len: usize,
    /// How many of them the reducer left out of the view.
    pub reduced: usize,
    /// How many stored messages the reducer archived (trigger `AfterMessageAdded`).
    pub archived: u64,
    /// Token usage, if the model reported it.
    pub usage: Option<Usage>,
}

impl AgentRun {
    /// The text of the response.
    pub fn text(&self) -> String {
        let texts: Vec<String> = self.messages.iter().map(ChatMessage::text).collect();
        texts.join("\n")
    }
}

/// A chat agent: a model, instructions, a history store, an optional reducer and context
/// providers.
///
/// [`run`](Agent::run) loads the session's window from the history store, lets the reducer
/// shape the view, asks the context providers for more context, calls the model, stores the
/// input and the response as one atomic batch, lets the reducer archive on
/// `AfterMessageAdded`, and tells the providers what happened. Each step is a `tracing` span.
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

    /// Builds the agent.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid name or two
    /// providers sharing a source id.
    pub fn build(self) -> Result<Agent> {
        Ok(Agent {
            name: AgentId::new(self.name)?,
            instructions: self.instructions,
            model: self.model,
            history: self.history,
            window: self.window,
            reducer: self.reducer,
            providers: ContextProviders::new(self.providers)?,
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

    /// Runs one turn of `session` with `input`.
    ///
    /// # Errors
    /// Whatever the store, a provider or the model returns. When the model fails, nothing is
    /// stored, the providers are told of the error, and the session's turn count is unchanged.
    pub async fn run(
        &self,
        input: impl Into<AgentInput>,
        session: &mut AgentSession,
    ) -> Result<AgentRun> {
        let AgentInput(input) = input.into();
        if input.is_empty() {
            return Err(Error::invalid_input(
                "a run needs at least one input message",
            ));
        }
        let span = tracing::info_span!("agent.run", agent = %self.name, scope = %session.scope());
        self.run_inner(input, session).instrument(span).await
    }

    async fn run_inner(
        &self,
        input: Vec<ChatMessage>,
        session: &mut AgentSession,
    ) -> Result<AgentRun> {
        let scope = session.scope().clone();
        let service_id = session.service_conversation_id().map(str::to_owned);

        // 1. The history window, unless the service holds the history.
        let window: Vec<StoredMessage> = if service_id.is_some() {
            Vec::new()
        } else {
            self.history
                .read(&scope, self.window)
                .instrument(tracing::debug_span!("history.read", window = ?self.window))
                .await?
        };

        // 2. The reducer shapes the view before retrieval.
        let window_len = window.len();
        let mut reduced = 0;
        let view: Vec<ChatMessage> = match &self.reducer {
            Some((reducer, ReducerTrigger::BeforeMessagesRetrieval)) if !window.is_empty() => {
                let reduction = reducer
                    .reduce(&window)
                    .instrument(tracing::debug_span!(
                        "reducer.reduce",
                        messages = window.len()
                    ))
                    .await?;
                reduced = reduction.dropped_count();
                if reduced > 0 {
                    tracing::info!(
                        dropped = reduced,
                        kept = window_len - reduced,
                        "reducer shrank the view"
                    );
                }
                reduction.view(&window)
            }
            // Stored summaries go first in the view, where they belong in time.
            _ if window.iter().any(|m| is_summary(&m.message)) => {
                Reduction::keep_all().view(&window)
            }
            _ => window.into_iter().map(|m| m.message).collect(),
        };

        // 3. Context providers.
        let context = self
            .providers
            .invoking(session, &input)
            .instrument(tracing::debug_span!("providers.invoking"))
            .await?;

        // 4. The request.
        let mut messages = Vec::with_capacity(view.len() + input.len() + 2);
        let mut instructions: Vec<&str> = self.instructions.iter().map(String::as_str).collect();
        instructions.extend(context.instructions.iter().map(String::as_str));
        if !instructions.is_empty() {
            messages.push(ChatMessage::system(instructions.join("\n\n")));
        }
        messages.extend(context.messages);
        messages.extend(view);
        messages.extend(input.iter().cloned());
        let request = ChatRequest {
            messages,
            tools: context.tools,
            conversation_id: service_id.clone(),
        };

        // 5. The model.
        let response = match self
            .model
            .complete(&request)
            .instrument(tracing::debug_span!(
                "model.complete",
                messages = request.messages.len()
            ))
            .await
        {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(%error, "the model failed; nothing is stored");
                if let Err(provider_error) = self
                    .providers
                    .invoked(session, &input, None, Some(&error))
                    .await
                {
                    tracing::warn!(%provider_error, "a provider failed while being told of the model's failure");
                }
                return Err(error);
            }
        };
        let mut answer = response.messages;
        for m in &mut answer {
            if m.role == Role::Assistant && m.author_name.is_none() {
                m.author_name = Some(self.name.to_string());
            }
        }

        // 6. Store input and response as one batch, or follow the service's conversation.
        let mut archived = 0;
        match (response.conversation_id, session.conversation()) {
            (Some(id), _) => session.set_service_conversation_id(id),
            (None, Conversation::Service(_)) => {}
            (None, Conversation::Local) => {
                let mut batch = input.clone();
                batch.extend(answer.iter().cloned());
                self.history
                    .append(&scope, &batch)
                    .instrument(tracing::debug_span!(
                        "history.append",
                        messages = batch.len()
                    ))
                    .await?;
                if let Some((reducer, ReducerTrigger::AfterMessageAdded)) = &self.reducer {
                    archived = self.reduce_stored(reducer.as_ref(), session).await?;
                }
            }
        }

        // 7. Providers learn from the run.
        self.providers
            .invoked(session, &input, Some(&answer), None)
            .instrument(tracing::debug_span!("providers.invoked"))
            .await?;
        session.record_turn();

        Ok(AgentRun {
            messages: answer,
            request,
            window_len,
            reduced,
            archived,
            usage: response.usage,
        })
    }

    /// Applies the reducer to the stored window: archives what it drops (and every active
    /// message older than the window) and stores the summary it wrote, if any.
    async fn reduce_stored(
        &self,
        reducer: &dyn ChatReducer,
        session: &AgentSession,
    ) -> Result<u64> {
        let scope = session.scope();
        let window = self.history.read(scope, self.window).await?;
        let reduction = reducer
            .reduce(&window)
            .instrument(tracing::debug_span!(
                "reducer.reduce",
                messages = window.len()
            ))
            .await?;
        let mut archived = 0;
        for range in archive_ranges(&window, &reduction) {
            archived += self
                .history
                .archive(scope, range.clone())
                .instrument(tracing::debug_span!("history.archive", ?range))
                .await?;
        }
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
        }
        Ok(archived)
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
        ranges.push(1..=first_seq - 1);
    }
    for run in &reduction.dropped {
        if let (Some(first), Some(last)) = (window.get(run.start), window.get(run.end - 1)) {
            ranges.push(first.seq..=last.seq);
        }
    }
    ranges
}
