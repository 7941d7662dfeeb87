//! The bound server: its accept loop (at most [`Transport::max_connections`] connections at
//! once, each watched by [`connection`](super::connection)), its bounded graceful shutdown,
//! and [`serve`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::connection;
use crate::auth::Authenticator;
use crate::config::{AllowedHosts, ConfigError, McpConfig, ServerConfig, Transport};
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
    listener: TcpListener,
    addr: SocketAddr,
    router: Router,
    transport: Transport,
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
        let transport = config.transport()?;
        let hosts = config.allowed_hosts()?;
        let ops = config.open_ops::<ServeError>(limits).await?;
        let router = super::router_with(ops, auth, max_body, &config.mcp, &hosts);
        Self::bind_router(addr, router, transport).await
    }

    /// Binds `addr` with already opened operations (for embedders and tests), with the
    /// default `[http]` settings (a server without tokens answers to loopback names and the
    /// IP of `addr`).
    ///
    /// # Errors
    /// [`ServeError::Io`] when the address cannot be bound.
    pub async fn bind_with(
        addr: SocketAddr,
        ops: Ops,
        auth: Authenticator,
        max_body_bytes: usize,
    ) -> Result<Self, ServeError> {
        let hosts = AllowedHosts::loopback(addr);
        let router = super::router_with(ops, auth, max_body_bytes, &McpConfig::default(), &hosts);
        Self::bind_router(addr, router, Transport::default()).await
    }

    async fn bind_router(
        addr: SocketAddr,
        router: Router,
        transport: Transport,
    ) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Io { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Io { addr, source })?;
        Ok(Self {
            listener,
            addr,
            router,
            transport,
        })
    }

    /// The address it listens on (the chosen port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting connections, lets the requests
    /// in flight (appends included) finish, and returns once every connection is closed, or
    /// once [`shutdown_timeout`](Transport::shutdown_timeout) has passed, cutting the
    /// connections still open (an append is atomic: stored whole or not at all).
    ///
    /// At most [`max_connections`](Transport::max_connections) connections are served at
    /// once; further ones wait in the listen backlog until one closes.
    ///
    /// # Errors
    /// None today: a failed accept is logged and retried; the signature keeps room for
    /// failures of the listener.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let Self {
            listener,
            addr,
            router,
            transport,
        } = self;
        tracing::info!(%addr, "agent-memory server listening");
        let slots = Arc::new(Semaphore::new(transport.max_connections));
        let (stop, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            while connections.try_join_next().is_some() {}
            let slot = tokio::select! {
                () = &mut shutdown => break,
                slot = Arc::clone(&slots).acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break,
                },
            };
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    if !is_connection_error(&error) {
                        // Out of file descriptors or the like: wait, still listening for the
                        // shutdown.
                        tracing::warn!(%error, "could not accept a connection; retrying in 1 s");
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                    continue;
                }
            };
            // Small requests and answers: no Nagle delay.
            let _ = stream.set_nodelay(true);
            let router = router.clone();
            let stopped = stopped.clone();
            connections.spawn(async move {
                connection::serve(stream, router, transport, stopped).await;
                drop(slot);
            });
        }
        drop(listener);
        tracing::info!(
            connections = connections.len(),
            "agent-memory server shutting down"
        );
        let _ = stop.send(true);
        let drained = tokio::time::timeout(transport.shutdown_timeout, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                connections = connections.len(),
                timeout_ms =
                    u64::try_from(transport.shutdown_timeout.as_millis()).unwrap_or(u64::MAX),
                "connections still open at the shutdown deadline were cut"
            );
            connections.shutdown().await;
        }
        Ok(())
    }
}

/// Whether an accept error concerns that one connection only (the next accept may succeed).
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
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
