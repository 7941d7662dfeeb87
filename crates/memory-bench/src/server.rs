//! The memory server, started in-process on a backend's stores on 127.0.0.1 (a free port),
//! with a keep-alive HTTP client: what the `server_cost` workload and the load run (`--load`,
//! `cargo xtask load`) send their requests to.
//!
//! The server has no token (every request is the tenant [`TENANT`]), as `agent-memory serve`
//! allows on a loopback address, and the default limits.

use std::net::{Ipv4Addr, SocketAddr};

use memory_server::Server;
use memory_server::auth::{Authenticator, Principal};
use memory_server::config::DEFAULT_MAX_BODY_BYTES;
use memory_server::ops::{Ops, OpsLimits};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::BenchResult;
use crate::backends::Stores;

/// The tenant of every request.
pub(crate) const TENANT: &str = "bench";

/// A server running on a task of the current runtime.
pub(crate) struct RunningServer {
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// A client with keep-alive connections to it.
    pub(crate) client: reqwest::Client,
    /// The operations it serves: the same object its routes call.
    pub(crate) ops: Ops,
    /// Who every request is.
    pub(crate) principal: Principal,
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), String>>,
}

/// Starts a server over `stores` on 127.0.0.1 with a free port.
///
/// # Errors
/// When the tenant is invalid, the port cannot be bound or the client cannot be built.
pub(crate) async fn start(stores: &Stores) -> BenchResult<RunningServer> {
    let ops = Ops::new(
        agent_memory::Stores::new(
            std::sync::Arc::clone(&stores.history),
            std::sync::Arc::clone(&stores.sessions),
        ),
        OpsLimits::default(),
    );
    let principal = Principal::tenant(agent_memory::TenantId::new(TENANT)?);
    let server = Server::bind_with(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ops.clone(),
        Authenticator::Open(principal.clone()),
        DEFAULT_MAX_BODY_BYTES,
    )
    .await?;
    let base = format!("http://{}", server.local_addr());
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        server
            .run(async move {
                let _ = rx.await;
            })
            .await
            .map_err(|e| e.to_string())
    });
    let client = memory_http::build_client(memory_http::http_client_builder()?)?;
    Ok(RunningServer {
        base,
        client,
        ops,
        principal,
        shutdown: Some(tx),
        handle,
    })
}

impl RunningServer {
    /// The URL of `path` (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Stops the server gracefully and waits for it.
    ///
    /// # Errors
    /// When serving failed.
    pub(crate) async fn stop(mut self) -> BenchResult<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.handle.await??;
        Ok(())
    }
}
