//! `agent-memory mcp`: memory-server's MCP server on stdin and stdout, for one client.

use memory_server::config::ServerConfig;
use memory_server::mcp::{serve_stdio, stdio_principal};

use crate::cli::McpArgs;
use crate::error::{CliResult, Failed};

/// Serves MCP on stdin and stdout until the client closes them. Stdout carries the protocol
/// only; what is said to people goes to stderr.
///
/// The store URL: `--url` when given on the command line, else the file's `store_url` or
/// `AGENT_MEMORY_URL`, else the default (as `serve`).
pub(crate) async fn mcp(args: &McpArgs, url: &str, url_given: bool) -> CliResult<()> {
    let mut config = ServerConfig::load(args.config.as_deref())
        .map_err(|e| Failed::with("could not load the server configuration", e))?;
    if url_given || config.store_url.is_none() {
        config.store_url = Some(url.to_owned());
    }
    let principal = stdio_principal(args.tenant.as_deref(), args.user.as_deref(), |name| {
        std::env::var(name).ok()
    })
    .map_err(|e| Failed::with("could not start the MCP server", e))?;
    eprintln!(
        "agent-memory MCP server on stdio as tenant {} (store {})",
        principal.tenant,
        agent_memory::redact_url(config.store_url())
    );
    serve_stdio(&config, principal)
        .await
        .map_err(|e| Failed::with("the MCP server failed", e))
}
