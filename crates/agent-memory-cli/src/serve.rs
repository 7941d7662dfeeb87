//! `agent-memory serve`: the HTTP server of memory-server, stopped by Ctrl-C or SIGTERM.
//!
//! A signal stops the server accepting connections; the requests in flight get
//! `http.shutdown_timeout_secs` (10 s by default) to finish, then the connections still open
//! are cut (slow or stalled clients cannot hold the process).

use agent_memory::telemetry;
use memory_server::config::{LogFormat, ServerConfig};
use memory_server::http::Server;

use crate::cli::ServeArgs;
use crate::error::{CliResult, Failed};

/// Serves until Ctrl-C or SIGTERM, then lets the requests in flight finish within the
/// configured shutdown deadline.
///
/// The store URL: `--url` when given on the command line, else the file's `store_url` or
/// `AGENT_MEMORY_URL`, else the default.
pub(crate) async fn serve(args: &ServeArgs, url: &str, url_given: bool) -> CliResult<()> {
    let mut config = ServerConfig::load(args.config.as_deref())
        .map_err(|e| Failed::with("could not load the server configuration", e))?;
    if url_given || config.store_url.is_none() {
        config.store_url = Some(url.to_owned());
    }
    if let Some(listen) = &args.listen {
        config.listen.clone_from(listen);
    }
    let server = Server::bind(&config)
        .await
        .map_err(|e| Failed::with("could not start the server", e))?;
    eprintln!(
        "agent-memory server listening on http://{} (store {})",
        server.local_addr(),
        agent_memory::redact_url(config.store_url())
    );
    server
        .run(shutdown_signal(config.http.shutdown_timeout))
        .await
        .map_err(|e| Failed::with("the server failed", e))?;
    eprintln!("agent-memory server stopped");
    Ok(())
}

/// The format of the server's log: the configuration's `[log] format`, or
/// `AGENT_MEMORY_LOG_FORMAT` over it. A configuration that cannot be loaded (which [`serve`]
/// then reports) leaves the variable alone to decide, text when it names no format.
pub(crate) fn log_format(args: &ServeArgs) -> telemetry::LogFormat {
    let format = match ServerConfig::load(args.config.as_deref()) {
        Ok(config) => config.log.format,
        Err(_) => std::env::var(telemetry::LOG_FORMAT_ENV)
            .ok()
            .and_then(|name| LogFormat::from_name(&name))
            .unwrap_or_default(),
    };
    match format {
        LogFormat::Text => telemetry::LogFormat::Text,
        LogFormat::Json => telemetry::LogFormat::Json,
    }
}

/// Completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM; `deadline` is what the shutdown then
/// waits for the requests in flight, at most.
async fn shutdown_signal(deadline: std::time::Duration) {
    let ctrl_c = async {
        // If the handler cannot be installed, only SIGTERM stops the server.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    eprintln!(
        "agent-memory server shutting down: finishing the requests in flight (at most {:.1} s)",
        deadline.as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_server_configuration_reads_the_variable_the_log_is_named_by() {
        assert_eq!(
            memory_server::config::LOG_FORMAT_ENV,
            agent_memory::telemetry::LOG_FORMAT_ENV
        );
    }
}
