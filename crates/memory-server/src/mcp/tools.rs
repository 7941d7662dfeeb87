//! The tools (`remember`, `recall`, `search_memory`, `list_threads`, `forget`) and their
//! arguments, each a call of [`Ops`](crate::ops::Ops) as the caller's principal.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, IntoContents};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{DEFAULT_RECALL_TOKENS, MAX_SEARCH_RESULTS, MemoryMcp};
use agent_memory::ID_RULE;

use crate::error::{ErrorCode, OpError, OpResult};
use crate::ops::{Address, ForgetRequest, ListRequest, MessageInput};
use crate::retrieval::RetrievalKind;

/// The schema description of an id argument: `what`, then the id rule ([`ID_RULE`], the
/// one every description of ids quotes).
fn id_arg(what: &str) -> String {
    format!("{what}: {ID_RULE}.")
}

/// A message to remember.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpMessage {
    /// The message id ([`ID_RULE`]): give one to make a retry idempotent (a message whose
    /// id the thread holds is not stored again).
    #[schemars(description = id_arg("The message id: give one to make a retry idempotent (a message whose id the thread holds is not stored again)"))]
    #[serde(default)]
    pub id: Option<String>,
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (give `text` or `parts`).
    #[serde(default)]
    pub text: Option<String>,
    /// The parts, each an object tagged by `type` (`{"type": "text", "text": "..."}`, ...).
    #[serde(default)]
    pub parts: Option<Vec<Value>>,
    /// Who wrote it.
    #[serde(default)]
    pub author_name: Option<String>,
    /// When it was created (RFC 3339, UTC); now when omitted.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

impl McpMessage {
    fn into_input(self) -> OpResult<MessageInput> {
        let role = serde_json::from_value(Value::String(self.role.clone())).map_err(|_| {
            OpError::invalid(format!(
                "`{}` is not a role; use system, developer, user, assistant or tool",
                self.role
            ))
        })?;
        Ok(MessageInput {
            id: self.id,
            role,
            text: self.text,
            parts: self.parts,
            author_name: self.author_name,
            created_at: self.created_at,
            metadata: self.metadata,
        })
    }
}

/// Declares a tool's arguments that address one thread: the `session`, `user`, `agent` and
/// `source` of an [`Address`] (the session described by the given sentence), between the
/// tool's own leading and trailing fields, in that order (the schema keeps it), and
/// `address()`, the [`Address`] they name.
macro_rules! thread_args {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$lead_meta:meta])* pub $lead:ident: $lead_ty:ty,)*
            session: $session:literal,
            $($(#[$tail_meta:meta])* pub $tail:ident: $tail_ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$lead_meta])* pub $lead: $lead_ty,)*
            #[doc = concat!($session, " ([`ID_RULE`]).")]
            #[schemars(description = id_arg($session))]
            pub session: String,
            /// The user, if the thread has one (a user-bound token's user when omitted) ([`ID_RULE`]).
            #[schemars(description = id_arg("The user, if the thread has one (a user-bound token's user when omitted)"))]
            #[serde(default)]
            pub user: Option<String>,
            /// The agent, if the thread has one ([`ID_RULE`]).
            #[schemars(description = id_arg("The agent, if the thread has one"))]
            #[serde(default)]
            pub agent: Option<String>,
            /// The source (default `history`) ([`ID_RULE`]).
            #[schemars(description = id_arg("The source (default `history`)"))]
            #[serde(default)]
            pub source: Option<String>,
            $($(#[$tail_meta])* pub $tail: $tail_ty,)*
        }

        impl $name {
            /// The thread these arguments address.
            fn address(&self) -> Address {
                Address {
                    session: self.session.clone(),
                    user: self.user.clone(),
                    agent: self.agent.clone(),
                    source: self.source.clone(),
                }
            }
        }
    };
}

thread_args! {
    /// The arguments of `remember`.
    pub struct RememberArgs {
        session: "The session id",
        /// The messages to append, in order, as one atomic batch (give `messages` or `fact`).
        #[serde(default)]
        pub messages: Option<Vec<McpMessage>>,
        /// A fact to remember about the session (give `messages` or `fact`).
        #[serde(default)]
        pub fact: Option<String>,
    }
}

thread_args! {
    /// The arguments of `recall`.
    pub struct RecallArgs {
        session: "The session id",
        /// The most tokens the context may take (default 4000).
        #[serde(default)]
        pub max_tokens: Option<u64>,
    }
}

thread_args! {
    /// The arguments of `search_memory`.
    pub struct SearchArgs {
        /// What to look for: matched by meaning when the server has an embedder, else a
        /// case-insensitive substring of a message's text.
        pub query: String,
        session: "The session id of the thread to search",
        /// The most matches to return, newest first (default and at most 100).
        #[serde(default)]
        pub limit: Option<usize>,
        /// Text mode only: search archived messages too (default: only the active window).
        #[serde(default)]
        pub include_archived: bool,
        /// Searchable memory only: search every session of the user, not only this one
        /// (default: true when the thread has a user: a user-bound token's, or `user`).
        #[serde(default)]
        pub across_sessions: Option<bool>,
    }
}

/// The arguments of `list_threads`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListThreadsArgs {
    /// Only this user's threads (a user-bound token's user when omitted) ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this user's threads (a user-bound token's user when omitted)"))]
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's threads ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this agent's threads"))]
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this source's threads ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this source's threads"))]
    #[serde(default)]
    pub source: Option<String>,
    /// Page size (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The arguments of `forget`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// Only this session's data ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this session's data"))]
    #[serde(default)]
    pub session: Option<String>,
    /// Only this user's data (a user-bound token's user when omitted) ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this user's data (a user-bound token's user when omitted)"))]
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's data ([`ID_RULE`]).
    #[schemars(description = id_arg("Only this agent's data"))]
    #[serde(default)]
    pub agent: Option<String>,
    /// Count what would be deleted and delete nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Required (true) to forget the whole tenant, when no session, user or agent is given.
    #[serde(default)]
    pub everything: bool,
}

/// A tool's answer: its JSON as structured content (and as text), or the failure's sentence
/// as a tool error (`isError: true`, by [`OpError`]'s [`IntoContents`]).
type Answer = Result<CallToolResult, OpError>;

/// The request a tool is called in (its principal's source over HTTP).
type Request = RequestContext<RoleServer>;

impl IntoContents for OpError {
    fn into_contents(self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(self.to_string())]
    }
}

/// `value` as a tool's structured answer.
fn answer<T: serde::Serialize>(value: &T) -> Answer {
    to_json(value).map(CallToolResult::structured)
}

fn to_json<T: serde::Serialize>(value: &T) -> OpResult<Value> {
    serde_json::to_value(value).map_err(|e| {
        OpError::new(
            ErrorCode::Serialization,
            format!("the answer could not be encoded: {e}"),
        )
    })
}

#[tool_router(router = tool_router, vis = "pub(super)")]
impl MemoryMcp {
    /// `remember`: appends messages (one atomic, idempotent batch) or one fact.
    #[tool(
        name = "remember",
        description = "Store messages of a conversation thread (one atomic batch; a message whose `id` the thread already holds is not stored twice), or one fact about the session. Give the session (and user, agent, source when the thread has them) and either `messages` or `fact`. When the server's memory is searchable, the oldest messages are moved into it once the thread passes its token threshold, as the HTTP memory put does, and `search_memory` finds them there. Facts are kept in the session's `facts` thread and returned by `recall`.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn remember(&self, request: Request, args: Parameters<RememberArgs>) -> Answer {
        let (who, address) = (self.principal(&request)?, args.0.address());
        match (args.0.messages, args.0.fact) {
            (Some(messages), None) => {
                let messages = messages
                    .into_iter()
                    .map(McpMessage::into_input)
                    .collect::<OpResult<Vec<_>>>()?;
                answer(&self.ops.remember_messages(&who, &address, messages).await?)
            }
            (None, Some(fact)) => answer(&self.ops.remember_fact(&who, &address, &fact).await?),
            _ => Err(OpError::invalid(
                "`remember` needs exactly one of `messages` and `fact`",
            )),
        }
    }

    /// `recall`: the session's context within a token budget.
    #[tool(
        name = "recall",
        description = "Recall a session's memory within `max_tokens` (default 4000): what its long-term memory holds for the conversation (`memory`, when the server's memory is searchable), its facts and the newest messages of its thread, as one text ready for a prompt (`context`, remembered text escaped) and as messages in order.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn recall(&self, request: Request, args: Parameters<RecallArgs>) -> Answer {
        let (who, address) = (self.principal(&request)?, args.0.address());
        let budget = args.0.max_tokens.unwrap_or(DEFAULT_RECALL_TOKENS);
        answer(&self.ops.recall(&who, &address, budget).await?)
    }

    /// `search_memory`: a text match over one thread.
    #[tool(
        name = "search_memory",
        description = "Search memory for `query`. When the server's memory is searchable: the batches its memory holds, best first, each with its text, score and the session it came from, at most `limit` (default and at most 100), ranked by meaning (`mode: vector`, an embedder), by words (`mode: lexical`, a text index) or both fused (`mode: hybrid`); by default across every session of the user when the thread has a user (`across_sessions: false` searches this session only). Otherwise (`mode: text`): a case-insensitive substring match on each message's text of this thread, newest first, at most `limit`; only the active window unless `include_archived` is true.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_memory(&self, request: Request, args: Parameters<SearchArgs>) -> Answer {
        let (who, address, args) = (self.principal(&request)?, args.0.address(), args.0);
        let limit = args.limit.unwrap_or(MAX_SEARCH_RESULTS);
        if limit == 0 || limit > MAX_SEARCH_RESULTS {
            return Err(OpError::invalid(format!(
                "`limit` must be between 1 and {MAX_SEARCH_RESULTS}"
            )));
        }
        if let Some(retrieval) = self.ops.retrieval() {
            let user = who.user_for(address.user.as_deref())?;
            let found = if args.across_sessions.unwrap_or(user.is_some()) {
                let user = user.as_ref().map(|u| u.as_str());
                self.ops
                    .search_user_memory(
                        &who,
                        user,
                        address.agent.as_deref(),
                        &args.query,
                        Some(limit),
                    )
                    .await?
            } else {
                self.ops
                    .search_memory(&who, &address, &args.query, Some(limit))
                    .await?
            };
            let mode = match retrieval {
                RetrievalKind::Dense => "vector",
                RetrievalKind::Lexical => "lexical",
                RetrievalKind::Hybrid => "hybrid",
            };
            return answer(&json!({ "mode": mode, "results": to_json(&found.results)? }));
        }
        let matches = self
            .ops
            .search_text(&who, &address, &args.query, limit, args.include_archived)
            .await?;
        answer(&json!({ "mode": "text", "matches": to_json(&matches)? }))
    }

    /// `list_threads`: the caller's threads, a page at a time.
    #[tool(
        name = "list_threads",
        description = "List the threads of your tenant (optionally only a user's, agent's or source's), a page at a time: pass `next_cursor` back as `cursor` for the next page.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_threads(&self, request: Request, args: Parameters<ListThreadsArgs>) -> Answer {
        let Parameters(args) = args;
        let listing = ListRequest {
            user: args.user,
            agent: args.agent,
            source: args.source,
            limit: args.limit,
            cursor: args.cursor,
        };
        answer(
            &self
                .ops
                .list_threads(&self.principal(&request)?, listing)
                .await?,
        )
    }

    /// `forget`: deletes (or counts, in a dry run) the selected threads and sessions.
    #[tool(
        name = "forget",
        description = "Delete every thread and session of a session, user or agent (any combination narrows it), and return a receipt of what was deleted per store. With `dry_run` true nothing is deleted and the receipt counts what would be. Forgetting the whole tenant (no session, user or agent) needs `everything: true`.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn forget(&self, request: Request, args: Parameters<ForgetArgs>) -> Answer {
        let Parameters(args) = args;
        // `ops` refuses a whole-tenant forget without `everything`, for every transport.
        let selection = ForgetRequest {
            user: args.user,
            agent: args.agent,
            session: args.session,
            dry_run: args.dry_run,
            everything: args.everything,
        };
        answer(
            &self
                .ops
                .forget(&self.principal(&request)?, selection)
                .await?,
        )
    }
}
