//! The tools (`remember`, `recall`, `search_memory`, `list_threads`, `forget`) and their
//! arguments, each a call of [`Ops`](crate::ops::Ops) as the caller's principal.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
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

/// The arguments of `remember`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The session id ([`ID_RULE`]).
    #[schemars(description = id_arg("The session id"))]
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
    /// The messages to append, in order, as one atomic batch (give `messages` or `fact`).
    #[serde(default)]
    pub messages: Option<Vec<McpMessage>>,
    /// A fact to remember about the session (give `messages` or `fact`).
    #[serde(default)]
    pub fact: Option<String>,
}

/// The arguments of `recall`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// The session id ([`ID_RULE`]).
    #[schemars(description = id_arg("The session id"))]
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
    /// The most tokens the context may take (default 4000).
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

/// The arguments of `search_memory`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for: matched by meaning when the server has an embedder, else a
    /// case-insensitive substring of a message's text.
    pub query: String,
    /// The session id of the thread to search ([`ID_RULE`]).
    #[schemars(description = id_arg("The session id of the thread to search"))]
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
    /// The most matches to return, newest first (default and at most 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Text mode only: search archived messages too (default: only the active window).
    #[serde(default)]
    pub include_archived: bool,
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
/// as a tool error.
fn answer(result: OpResult<Value>) -> CallToolResult {
    match result {
        Ok(value) => CallToolResult::structured(value),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]),
    }
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
    async fn remember(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<RememberArgs>,
    ) -> CallToolResult {
        answer(self.remember_op(&context, args).await)
    }

    /// `recall`: the session's context within a token budget.
    #[tool(
        name = "recall",
        description = "Recall a session's memory within `max_tokens` (default 4000): what its long-term memory holds for the conversation (`memory`, when the server's memory is searchable), its facts and the newest messages of its thread, as one text ready for a prompt (`context`, remembered text escaped) and as messages in order.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn recall(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<RecallArgs>,
    ) -> CallToolResult {
        answer(self.recall_op(&context, args).await)
    }

    /// `search_memory`: a text match over one thread.
    #[tool(
        name = "search_memory",
        description = "Search a session's memory for `query`. When the server's memory is searchable: the batches of the thread its memory holds, best first, each with its text and score, at most `limit` (default and at most 100), ranked by meaning (`mode: vector`, an embedder), by words (`mode: lexical`, a text index) or both fused (`mode: hybrid`). Otherwise (`mode: text`): a case-insensitive substring match on each message's text, newest first, at most `limit`; only the active window unless `include_archived` is true.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_memory(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<SearchArgs>,
    ) -> CallToolResult {
        answer(self.search_op(&context, args).await)
    }

    /// `list_threads`: the caller's threads, a page at a time.
    #[tool(
        name = "list_threads",
        description = "List the threads of your tenant (optionally only a user's, agent's or source's), a page at a time: pass `next_cursor` back as `cursor` for the next page.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_threads(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<ListThreadsArgs>,
    ) -> CallToolResult {
        answer(self.list_op(&context, args).await)
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
    async fn forget(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<ForgetArgs>,
    ) -> CallToolResult {
        answer(self.forget_op(&context, args).await)
    }
}

impl MemoryMcp {
    async fn remember_op(
        &self,
        context: &RequestContext<RoleServer>,
        args: RememberArgs,
    ) -> OpResult<Value> {
        let who = self.principal(context)?;
        let address = Address {
            session: args.session,
            user: args.user,
            agent: args.agent,
            source: args.source,
        };
        match (args.messages, args.fact) {
            (Some(messages), None) => {
                let messages = messages
                    .into_iter()
                    .map(McpMessage::into_input)
                    .collect::<OpResult<Vec<_>>>()?;
                to_json(&self.ops.remember_messages(&who, &address, messages).await?)
            }
            (None, Some(fact)) => to_json(&self.ops.remember_fact(&who, &address, &fact).await?),
            _ => Err(OpError::invalid(
                "`remember` needs exactly one of `messages` and `fact`",
            )),
        }
    }

    async fn recall_op(
        &self,
        context: &RequestContext<RoleServer>,
        args: RecallArgs,
    ) -> OpResult<Value> {
        let who = self.principal(context)?;
        let address = Address {
            session: args.session,
            user: args.user,
            agent: args.agent,
            source: args.source,
        };
        let budget = args.max_tokens.unwrap_or(DEFAULT_RECALL_TOKENS);
        to_json(&self.ops.recall(&who, &address, budget).await?)
    }

    async fn search_op(
        &self,
        context: &RequestContext<RoleServer>,
        args: SearchArgs,
    ) -> OpResult<Value> {
        let who = self.principal(context)?;
        let address = Address {
            session: args.session,
            user: args.user,
            agent: args.agent,
            source: args.source,
        };
        let limit = args.limit.unwrap_or(MAX_SEARCH_RESULTS);
        if limit == 0 || limit > MAX_SEARCH_RESULTS {
            return Err(OpError::invalid(format!(
                "`limit` must be between 1 and {MAX_SEARCH_RESULTS}"
            )));
        }
        if let Some(retrieval) = self.ops.retrieval() {
            let found = self
                .ops
                .search_memory(&who, &address, &args.query, Some(limit))
                .await?;
            let mode = match retrieval {
                RetrievalKind::Dense => "vector",
                RetrievalKind::Lexical => "lexical",
                RetrievalKind::Hybrid => "hybrid",
            };
            return Ok(json!({ "mode": mode, "results": to_json(&found.results)? }));
        }
        let matches = self
            .ops
            .search_text(&who, &address, &args.query, limit, args.include_archived)
            .await?;
        Ok(json!({ "mode": "text", "matches": to_json(&matches)? }))
    }

    async fn list_op(
        &self,
        context: &RequestContext<RoleServer>,
        args: ListThreadsArgs,
    ) -> OpResult<Value> {
        let who = self.principal(context)?;
        let request = ListRequest {
            user: args.user,
            agent: args.agent,
            source: args.source,
            limit: args.limit,
            cursor: args.cursor,
        };
        to_json(&self.ops.list_threads(&who, request).await?)
    }

    async fn forget_op(
        &self,
        context: &RequestContext<RoleServer>,
        args: ForgetArgs,
    ) -> OpResult<Value> {
        let who = self.principal(context)?;
        // `ops` refuses a whole-tenant forget without `everything`, for every transport.
        let request = ForgetRequest {
            user: args.user,
            agent: args.agent,
            session: args.session,
            dry_run: args.dry_run,
            everything: args.everything,
        };
        to_json(&self.ops.forget(&who, request).await?)
    }
}
