//! The MCP server (rmcp, the official Rust SDK): the memory as tools and resources for any
//! agent that speaks the Model Context Protocol, over stdio and streamable HTTP.
//!
//! Tools: `remember` (append messages or a fact), `recall` (a session's context within a token
//! budget, with the memory blocks' text), `search_memory` (the memory block's search, dense,
//! lexical or hybrid, when the server's memory is searchable, else a case-insensitive text
//! match over a thread's messages),
//! `list_threads` and `forget` (with a dry run). Resources: the template `thread://{session}`,
//! a thread's history as JSON, and each listed thread.
//!
//! Every call runs as one [`Principal`], with the HTTP API's tenancy: over streamable HTTP the
//! bearer token of each request names it ([`router`] authenticates with the server's
//! [`Authenticator`]); over stdio it is fixed when the process starts ([`serve_stdio`]). The
//! tenant never comes from a tool's arguments.
//!
//! Failures are tool errors (`isError: true`) whose text is the operation's sentence; no token
//! and no store URL ever reaches one.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig as McpInfo,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use agent_memory::{TenantId, UserId};

use crate::auth::{Authenticator, Principal};
use crate::config::{ConfigError, McpConfig, ServerConfig};
use crate::error::{ErrorCode, OpError, OpResult};
use crate::ops::{Address, ForgetRequest, ListRequest, MessageInput, Ops};
use crate::retrieval::RetrievalKind;

/// Where [`router`] serves the streamable HTTP endpoint.
pub const MCP_PATH: &str = "/mcp";
/// The token budget of a `recall` that names none.
pub const DEFAULT_RECALL_TOKENS: u64 = 4_000;
/// The most matches a `search_memory` returns (and its default).
pub const MAX_SEARCH_RESULTS: usize = 100;
/// The server's name in the MCP handshake.
pub const SERVER_NAME: &str = "agent-memory";
/// The instructions the server gives MCP clients when `[mcp] instructions` sets none.
pub const DEFAULT_INSTRUCTIONS: &str = "agent-memory: durable memory for agents. `remember` stores messages or facts of a session, `recall` returns the session's context within a token budget, `search_memory` searches a session's memory, `list_threads` lists your threads, `forget` deletes data (try `dry_run` first). Each thread's history is the resource `thread://<session>`.";
/// The URI scheme of a thread's resource.
pub const THREAD_SCHEME: &str = "thread://";

/// Who the calls of one [`MemoryMcp`] run as.
#[derive(Debug, Clone)]
enum Identity {
    /// Every call (stdio, in-process): the principal the process was started as.
    Fixed(Principal),
    /// Each HTTP request's: the [`Principal`] that [`router`]'s authentication put in the
    /// request's extensions.
    PerRequest,
}

/// The MCP server: a [`ServerHandler`] over [`Ops`], one per connection (stdio) or per request
/// (streamable HTTP, stateless).
#[derive(Debug, Clone)]
pub struct MemoryMcp {
    ops: Ops,
    identity: Identity,
    tool_router: ToolRouter<Self>,
    settings: Arc<McpConfig>,
}

/// A message to remember.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpMessage {
    /// The message id (1-128 of `A-Z a-z 0-9 - _ . : @`): give one to make a retry
    /// idempotent (a message whose id the thread holds is not stored again).
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
    /// The session id (1-128 of `A-Z a-z 0-9 - _ . : @`).
    pub session: String,
    /// The user, if the thread has one (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// The agent, if the thread has one.
    #[serde(default)]
    pub agent: Option<String>,
    /// The source (default `history`).
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
    /// The session id.
    pub session: String,
    /// The user, if the thread has one (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// The agent, if the thread has one.
    #[serde(default)]
    pub agent: Option<String>,
    /// The source (default `history`).
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
    /// The session id of the thread to search.
    pub session: String,
    /// The user, if the thread has one (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// The agent, if the thread has one.
    #[serde(default)]
    pub agent: Option<String>,
    /// The source (default `history`).
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
    /// Only this user's threads (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's threads.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this source's threads.
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
    /// Only this session's data.
    #[serde(default)]
    pub session: Option<String>,
    /// Only this user's data (a user-bound token's user when omitted).
    #[serde(default)]
    pub user: Option<String>,
    /// Only this agent's data.
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

impl MemoryMcp {
    /// A server whose every call runs as `principal` (stdio, or an embedder's in-process use).
    pub fn for_principal(ops: Ops, principal: Principal) -> Self {
        Self {
            ops,
            identity: Identity::Fixed(principal),
            tool_router: Self::tool_router(),
            settings: Arc::new(McpConfig::default()),
        }
    }

    /// A server whose calls run as the [`Principal`] in each HTTP request's extensions (put
    /// there by [`router`]'s authentication); a call without one is refused.
    pub fn per_request(ops: Ops) -> Self {
        Self {
            ops,
            identity: Identity::PerRequest,
            tool_router: Self::tool_router(),
            settings: Arc::new(McpConfig::default()),
        }
    }

    /// The same server, introducing itself with `settings`' name and instructions.
    #[must_use]
    pub fn with_settings(mut self, settings: Arc<McpConfig>) -> Self {
        self.settings = settings;
        self
    }

    fn principal(&self, context: &RequestContext<RoleServer>) -> OpResult<Principal> {
        match &self.identity {
            Identity::Fixed(principal) => Ok(principal.clone()),
            Identity::PerRequest => context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Principal>())
                .cloned()
                .ok_or_else(|| {
                    OpError::new(
                        ErrorCode::Unauthorized,
                        "the request carries no authenticated principal",
                    )
                }),
        }
    }
}

#[tool_router(router = tool_router)]
impl MemoryMcp {
    /// `remember`: appends messages (one atomic, idempotent batch) or one fact.
    #[tool(
        name = "remember",
        description = "Store messages of a conversation thread (one atomic batch; a message whose `id` the thread already holds is not stored twice), or one fact about the session. Give the session (and user, agent, source when the thread has them) and either `messages` or `fact`. Facts are kept in the session's `facts` thread and returned first by `recall`.",
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
        description = "Recall a session's memory: its facts and the newest messages of its thread that fit in `max_tokens` (default 4000), as one text ready for a prompt (`context`) and as messages in order.",
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
                to_json(&self.ops.append(&who, &address, messages).await?)
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

/// The resource URI of a thread: `thread://<session>`, with `?user=…&agent=…&source=…` for
/// the parts it has (`:` and `@` percent-encoded, so the session reads as a URI host).
pub fn thread_uri(
    session: &str,
    user: Option<&str>,
    agent: Option<&str>,
    source: Option<&str>,
) -> String {
    let mut uri = format!("{THREAD_SCHEME}{}", encode_id(session));
    let mut separator = '?';
    for (name, value) in [("user", user), ("agent", agent), ("source", source)] {
        if let Some(value) = value {
            uri.push(separator);
            uri.push_str(name);
            uri.push('=');
            uri.push_str(&encode_id(value));
            separator = '&';
        }
    }
    uri
}

fn encode_id(id: &str) -> String {
    id.replace('%', "%25")
        .replace(':', "%3A")
        .replace('@', "%40")
}

fn decode_id(text: &str) -> OpResult<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let code = tail
            .get(1..3)
            .ok_or_else(|| bad_uri("a `%` escape is cut short"))?;
        let byte = u8::from_str_radix(code, 16).map_err(|_| bad_uri("a `%` escape is not hex"))?;
        out.push(char::from(byte));
        rest = tail.get(3..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

fn bad_uri(why: &str) -> OpError {
    OpError::invalid(format!(
        "the resource URI is not `thread://<session>[?user=…&agent=…&source=…]`: {why}"
    ))
}

/// The address a `thread://` URI names.
fn parse_thread_uri(uri: &str) -> OpResult<Address> {
    let rest = uri
        .strip_prefix(THREAD_SCHEME)
        .ok_or_else(|| bad_uri("it does not start with `thread://`"))?;
    let (session, query) = match rest.split_once('?') {
        Some((session, query)) => (session, Some(query)),
        None => (rest, None),
    };
    let session = session.strip_suffix('/').unwrap_or(session);
    if session.is_empty() {
        return Err(bad_uri("the session is missing"));
    }
    let mut address = Address::session(decode_id(session)?);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad_uri("a query parameter has no `=`"))?;
        let value = Some(decode_id(value)?);
        match name {
            "user" => address.user = value,
            "agent" => address.agent = value,
            "source" => address.source = value,
            _ => {
                return Err(bad_uri(
                    "the query names something other than user, agent or source",
                ));
            }
        }
    }
    Ok(address)
}

fn resource_error(error: OpError) -> ErrorData {
    let message = error.to_string();
    match error.code {
        ErrorCode::NotFound => ErrorData::resource_not_found(message, None),
        ErrorCode::InvalidInput | ErrorCode::Forbidden | ErrorCode::LimitExceeded => {
            ErrorData::invalid_params(message, None)
        }
        ErrorCode::Unauthorized => ErrorData::invalid_request(message, None),
        _ => ErrorData::internal_error(message, None),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryMcp {
    fn get_info(&self) -> McpInfo {
        McpInfo::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            self.settings.name.as_deref().unwrap_or(SERVER_NAME),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            self.settings
                .instructions
                .as_deref()
                .unwrap_or(DEFAULT_INSTRUCTIONS),
        )
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self.principal(&context).map_err(resource_error)?;
        let cursor = request.and_then(|r| r.cursor);
        let page = self
            .ops
            .list_threads(
                &who,
                ListRequest {
                    cursor,
                    ..ListRequest::default()
                },
            )
            .await
            .map_err(resource_error)?;
        let resources = page
            .items
            .iter()
            .map(|thread| {
                let source = (thread.source != agent_memory::scope::DEFAULT_SOURCE)
                    .then_some(thread.source.as_str());
                Resource::new(
                    thread_uri(
                        &thread.session,
                        thread.user.as_deref(),
                        thread.agent.as_deref(),
                        source,
                    ),
                    format!("thread {}", thread.session),
                )
                .with_mime_type("application/json")
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("thread://{session}", "thread")
                .with_title("A thread's history")
                .with_description("Every message of the session's thread (archived ones too, marked), in order, as JSON. Add `?user=…&agent=…&source=…` for a thread that has them.")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.principal(&context).map_err(resource_error)?;
        let address = parse_thread_uri(&request.uri).map_err(resource_error)?;
        let messages = self
            .ops
            .read(&who, &address, crate::ops::WindowSpec::Everything)
            .await
            .map_err(resource_error)?;
        let body = json!({ "session": address.session, "messages": messages });
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(body.to_string(), request.uri.clone())
                .with_mime_type("application/json"),
        ])
        .into())
    }
}

/// The streamable HTTP endpoint at [`MCP_PATH`], for the HTTP server to merge into its router.
///
/// Every request is authenticated by `authenticator` (a missing or unknown bearer token is a
/// 401 with `WWW-Authenticate: Bearer`, before any MCP processing); its [`Principal`] is the
/// identity of the tools it calls. The endpoint is stateless (no `Mcp-Session-Id`; any instance
/// answers any request) and answers plain JSON, so the server's graceful shutdown waits for
/// the calls in flight like any request. Bodies over `max_body_bytes` are refused (413). The
/// `Host` / `Origin` check of a server without tokens (against DNS rebinding) is not made
/// here but by the HTTP server's one rule for every route
/// ([`http::router_with`](crate::http::router_with), [`AllowedHosts`](crate::config::AllowedHosts)):
/// mount this router through it.
pub fn router(ops: Ops, authenticator: Arc<Authenticator>, max_body_bytes: usize) -> axum::Router {
    router_with(
        ops,
        authenticator,
        max_body_bytes,
        Arc::new(McpConfig::default()),
    )
}

/// As [`router`], introducing itself with `settings`' name and instructions.
pub fn router_with(
    ops: Ops,
    authenticator: Arc<Authenticator>,
    max_body_bytes: usize,
    settings: Arc<McpConfig>,
) -> axum::Router {
    let mut http = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(max_body_bytes);
    // The HTTP server checks Host and Origin for every route, this one included.
    http = http.disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(MemoryMcp::per_request(ops.clone()).with_settings(Arc::clone(&settings))),
        Arc::new(NeverSessionManager::default()),
        http,
    );
    axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            authenticator,
            authenticate,
        ))
}

/// Puts the request's [`Principal`] in its extensions, or answers 401.
async fn authenticate(
    State(authenticator): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or_default());
    match authenticator.authenticate(header) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => (
            axum::http::StatusCode::UNAUTHORIZED,
            [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(json!({ "error": error.code.as_str(), "detail": error.detail })),
        )
            .into_response(),
    }
}

/// The environment variable naming the tenant of an MCP server over stdio.
pub const STDIO_TENANT_ENV: &str = "AGENT_MEMORY_SERVER_MCP_TENANT";
/// The environment variable naming the user of an MCP server over stdio (optional).
pub const STDIO_USER_ENV: &str = "AGENT_MEMORY_SERVER_MCP_USER";

/// The principal of an MCP server over stdio: the tenant and user given (a command's flags),
/// else those of [`STDIO_TENANT_ENV`] and [`STDIO_USER_ENV`] as `env` reads them, else the
/// `default` tenant and no user.
///
/// # Errors
/// A [`ConfigError`] for an invalid tenant or user id.
pub fn stdio_principal(
    tenant: Option<&str>,
    user: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Principal, ConfigError> {
    let tenant = tenant
        .map(str::to_owned)
        .or_else(|| env(STDIO_TENANT_ENV))
        .unwrap_or_else(|| agent_memory::scope::DEFAULT_TENANT.to_owned());
    let user = user.map(str::to_owned).or_else(|| env(STDIO_USER_ENV));
    let tenant = TenantId::new(tenant)
        .map_err(|e| ConfigError(format!("the MCP tenant is invalid: {e}")))?;
    let user = user
        .map(UserId::new)
        .transpose()
        .map_err(|e| ConfigError(format!("the MCP user is invalid: {e}")))?;
    Ok(Principal { tenant, user })
}

/// Why [`serve_stdio`] could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened.
    #[error("could not open the store: {0}")]
    Store(#[from] agent_memory::Error),
    /// The MCP session failed (stdin or stdout closed badly, or the client broke the protocol).
    #[error("the MCP session over stdio failed: {0}")]
    Transport(String),
}

/// Opens the store `config` names and serves MCP on this process's stdin and stdout until the
/// client closes them, every call as `principal` (see [`stdio_principal`]).
///
/// Nothing else may write to stdout meanwhile: log to stderr.
///
/// # Errors
/// [`StdioError`] for a configuration or store that cannot be used, or a failed session.
pub async fn serve_stdio(config: &ServerConfig, principal: Principal) -> Result<(), StdioError> {
    let limits = config.ops_limits()?;
    config.check_memory()?;
    let stores = agent_memory::open(config.store_url()).await?;
    let vector = config.vector_memory(&stores).await?;
    let mut ops = Ops::new(stores, limits);
    if let Some(memory) = vector {
        ops = ops.with_vector_memory(memory);
    }
    let running = MemoryMcp::for_principal(ops, principal)
        .with_settings(Arc::new(config.mcp.clone()))
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| StdioError::Transport(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| StdioError::Transport(e.to_string()))?;
    Ok(())
}

/// Serves MCP over stdio with already opened operations (see [`serve_stdio`]).
///
/// # Errors
/// [`StdioError::Transport`] when the session cannot start or fails.
pub async fn serve_stdio_with(ops: Ops, principal: Principal) -> Result<(), StdioError> {
    let running = MemoryMcp::for_principal(ops, principal)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| StdioError::Transport(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| StdioError::Transport(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_uris_parse_back_to_their_address() {
        let uri = thread_uri("a:b@c", Some("u@x"), Some("ag"), Some("facts"));
        let address = parse_thread_uri(&uri).unwrap();
        assert_eq!(address.session, "a:b@c");
        assert_eq!(address.user.as_deref(), Some("u@x"));
        assert_eq!(address.agent.as_deref(), Some("ag"));
        assert_eq!(address.source.as_deref(), Some("facts"));
        // Raw `:` and `@`, and a trailing slash some URI libraries add, read the same.
        assert_eq!(
            parse_thread_uri("thread://a:b@c/").unwrap().session,
            "a:b@c"
        );
        for bad in [
            "thread://",
            "thread://s?owner=x",
            "thread://s?user",
            "thread://s%4",
            "thread://s%zz",
            "threads://s",
        ] {
            let error = parse_thread_uri(bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput, "{bad}");
            assert!(
                error.detail.contains("thread://<session>"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn the_stdio_principal_comes_from_flags_then_env_then_default() {
        let env = |name: &str| match name {
            STDIO_TENANT_ENV => Some("envtenant".to_owned()),
            STDIO_USER_ENV => Some("envuser".to_owned()),
            _ => None,
        };
        let p = stdio_principal(Some("flag"), None, env).unwrap();
        assert_eq!(p.tenant.as_str(), "flag");
        assert_eq!(p.user.unwrap().as_str(), "envuser");
        let p = stdio_principal(None, Some("u"), env).unwrap();
        assert_eq!(p.tenant.as_str(), "envtenant");
        assert_eq!(p.user.unwrap().as_str(), "u");
        let p = stdio_principal(None, None, |_| None).unwrap();
        assert_eq!(p.tenant.as_str(), agent_memory::scope::DEFAULT_TENANT);
        assert!(p.user.is_none());
        let error = stdio_principal(Some("bad tenant!"), None, |_| None).unwrap_err();
        assert!(error.0.contains("MCP tenant is invalid"), "{error}");
    }
}
