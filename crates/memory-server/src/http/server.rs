//! The bound server, its graceful shutdown, and [`serve`].

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;

use super::router;
use crate::auth::Authenticator;
use crate::config::{ConfigError, ServerConfig};
use crate::ops::Ops;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened.
    #[error("could not open the store: {0}")]
    Store(#[from] agent_memory::Error),
    /// The listener failed.
    #[error("could not listen on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A bound server, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    router: Router,
}

impl Server {
    /// Checks `config`, opens its store and binds its listen address.
    ///
    /// # Errors
    /// [`ServeError`] for a configuration that cannot be used, a store that cannot be opened
    /// or an address that cannot be bound.
    pub async fn bind(config: &ServerConfig) -> Result<Self, ServeError> {
        let auth = config.authenticator()?;
        let limits = config.ops_limits()?;
        let max_body = config.max_body_bytes()?;
        let addr = config.listen_addr()?;
        config.check_memory()?;
        let stores = agent_memory::open(config.store_url()).await?;
        let vector = config.vector_memory(&stores).await?;
        let mut ops = Ops::new(stores, limits);
        if let Some(memory) = vector {
            ops = ops.with_vector_memory(memory);
        }
        let router = super::router_with(ops, auth, max_body, &config.mcp);
        Self::bind_router(addr, router).await
    }

    /// Binds `addr` with already opened operations (for embedders and tests).
    ///
    /// # Errors
    /// [`ServeError::Io`] when the address cannot be bound.
    pub async fn bind_with(
        addr: SocketAddr,
        ops: Ops,
        auth: Authenticator,
        max_body_bytes: usize,
    ) -> Result<Self, ServeError> {
        Self::bind_router(addr, router(ops, auth, max_body_bytes)).await
    }

    async fn bind_router(addr: SocketAddr, router: Router) -> Result<Self, ServeError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Io { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Io { addr, source })?;
        Ok(Self {
            listener,
            addr,
            router,
        })
    }

    /// The address it listens on (the chosen port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting connections and returns once
    /// every request in flight (appends included) has finished.
    ///
    /// # Errors
    /// [`ServeError::Io`] when serving fails.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let addr = self.addr;
        tracing::info!(%addr, "agent-memory server listening");
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|source| ServeError::Io { addr, source })
    }
}

/// Binds the server `config` describes and serves until `shutdown` completes (see
/// [`Server::run`]).
///
/// # Errors
/// As [`Server::bind`] and [`Server::run`].
pub async fn serve(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    Server::bind(&config).await?.run(shutdown).await
}
