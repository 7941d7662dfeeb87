//! MCP over stdio: one client per process, newline-delimited JSON-RPC on stdin and stdout,
//! every call as the principal the process was started as.

use std::sync::Arc;

use agent_memory::{TenantId, UserId};
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

use super::MemoryMcp;
use super::lines::LineTransport;
use crate::auth::Principal;
use crate::config::{ConfigError, DEFAULT_MAX_BODY_BYTES, ServerConfig};
use crate::ops::Ops;

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
        .map_err(|e| ConfigError(format!("the MCP tenant is invalid: {}", e.message())))?;
    let user = user
        .map(UserId::new)
        .transpose()
        .map_err(|e| ConfigError(format!("the MCP user is invalid: {}", e.message())))?;
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
/// client closes them, every call as `principal` (see [`stdio_principal`]). A line longer than
/// the configured body limit (`[limits] max_body_bytes`, as over HTTP) is refused with a
/// JSON-RPC error, as is any line that is not a JSON-RPC request ([`LineTransport`]).
///
/// Nothing else may write to stdout meanwhile: log to stderr.
///
/// # Errors
/// [`StdioError`] for a configuration or store that cannot be used, or a failed session.
pub async fn serve_stdio(config: &ServerConfig, principal: Principal) -> Result<(), StdioError> {
    let limits = config.ops_limits()?;
    let max_line_bytes = config.max_body_bytes()?;
    let ops = config.open_ops::<StdioError>(limits).await?;
    let server =
        MemoryMcp::for_principal(ops, principal).with_settings(Arc::new(config.mcp.clone()));
    serve_lines(
        server,
        LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), max_line_bytes),
    )
    .await
}

/// Serves MCP over stdio with already opened operations (see [`serve_stdio`]), lines bounded
/// by the default body limit ([`DEFAULT_MAX_BODY_BYTES`]).
///
/// # Errors
/// [`StdioError::Transport`] when the session cannot start or fails.
pub async fn serve_stdio_with(ops: Ops, principal: Principal) -> Result<(), StdioError> {
    serve_lines_with(
        ops,
        principal,
        tokio::io::stdin(),
        tokio::io::stdout(),
        DEFAULT_MAX_BODY_BYTES,
    )
    .await
}

/// Serves MCP as over stdio on any `reader` and `writer` (a pipe, a socket, a test's in-memory
/// stream): newline-delimited JSON-RPC, lines bounded by `max_line_bytes`, every call as
/// `principal`, until the client closes `reader`.
///
/// # Errors
/// [`StdioError::Transport`] when the session cannot start or fails.
pub async fn serve_lines_with<R, W>(
    ops: Ops,
    principal: Principal,
    reader: R,
    writer: W,
    max_line_bytes: usize,
) -> Result<(), StdioError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_lines(
        MemoryMcp::for_principal(ops, principal),
        LineTransport::new(reader, writer, max_line_bytes),
    )
    .await
}

async fn serve_lines<R, W>(
    server: MemoryMcp,
    transport: LineTransport<R, W>,
) -> Result<(), StdioError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let running = server
        .serve(transport)
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
