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
//! [`Authenticator`](crate::auth::Authenticator)); over stdio it is fixed when the process
//! starts ([`serve_stdio`]). The tenant never comes from a tool's arguments.
//!
//! The module is split along those seams: `tools` (the tools and their arguments),
//! `resources` (the `thread://` resources) and `uri` (their URIs), `stdio` (with `lines`, its
//! line transport) and `http` (the two transports), and `jsonrpc`, where both read and check a
//! request before rmcp does, so every request is answered: a request that cannot be read
//! gets a JSON-RPC error (parse error -32700, invalid request -32600) under its id when the id
//! can be read, over stdio as over HTTP (where it is a 400, or a 413 past the body limit).
//!
//! Failures are tool errors (`isError: true`) whose text is the operation's sentence; no token
//! and no store URL ever reaches one.

mod http;
mod jsonrpc;
mod lines;
mod resources;
mod stdio;
mod tools;
mod uri;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig as McpInfo,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use crate::auth::Principal;
use crate::config::McpConfig;
use crate::error::{ErrorCode, OpError, OpResult};
use crate::ops::Ops;

pub(crate) use http::{oversized_body, unreadable_request_body};
pub use http::{router, router_with};
pub use jsonrpc::MAX_REQUEST_DEPTH;
pub use lines::LineTransport;
pub use stdio::{
    STDIO_TENANT_ENV, STDIO_USER_ENV, StdioError, serve_lines_with, serve_stdio, serve_stdio_with,
    stdio_principal,
};
pub use tools::{ForgetArgs, ListThreadsArgs, McpMessage, RecallArgs, RememberArgs, SearchArgs};
pub use uri::thread_uri;

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
        self.resources_list(request, &context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.resource_read(request, &context).await
    }
}
