//! `agent-memory`: inspect, export, import, migrate and forget the memory of LLM agents on any
//! backend the facade opens.
//!
//! Tables and sentences for people, `--json` for scripts (on stdout), progress bars on stderr
//! (only on a terminal), errors as sentences with a non-zero exit code. URLs are printed only
//! with their secrets redacted.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

mod cli;
mod commands;
mod error;
mod mcp;
mod output;
mod serve;
mod transfer;

use std::process::ExitCode;

use agent_memory::telemetry::{self, TelemetryConfig};
use agent_memory::{OpenOptions, Stores, redact_url};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};
use crate::error::{CliResult, Failed, error_lines};

#[tokio::main]
async fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let url_given = matches.value_source("url") == Some(ValueSource::CommandLine);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let (serving, log_format) = match &cli.command {
        Command::Serve(args) => (true, serve::log_format(args)),
        _ => (false, env_log_format()),
    };
    let _telemetry = install_telemetry(serving, log_format);
    match run(cli, url_given).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            for line in error_lines(&error) {
                eprintln!("{line}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Installs the process's `tracing` subscriber. With `OTEL_EXPORTER_OTLP_ENDPOINT` set, every
/// command's spans and metrics go to that collector (docs/telemetry.md; the guard returned
/// flushes them when main returns), with log lines on stderr. `serve` always logs on stderr,
/// at `info` unless `RUST_LOG` says otherwise (the access log), as text or JSON lines
/// (`format`: its configuration's `[log] format`, or `AGENT_MEMORY_LOG_FORMAT` over it);
/// other commands log (at `warn`) only with the collector. Colours only on a terminal.
fn install_telemetry(
    serving: bool,
    format: telemetry::LogFormat,
) -> Option<telemetry::TelemetryGuard> {
    let level = if serving {
        telemetry::LevelFilter::INFO
    } else {
        telemetry::LevelFilter::WARN
    };
    let config = TelemetryConfig::new("agent-memory")
        .with_log_to_stderr(true)
        .with_log_format(format)
        .with_default_log_level(level);
    match telemetry::install_from_env(config.clone()) {
        Ok(Some(guard)) => return Some(guard),
        Ok(None) => {}
        Err(error) => eprintln!("telemetry is off: {error}"),
    }
    if serving && let Err(error) = telemetry::install_log(&config) {
        eprintln!("the log is off: {error}");
    }
    None
}

/// The log format `AGENT_MEMORY_LOG_FORMAT` names (text when unset; a warning and text when
/// it names another).
fn env_log_format() -> telemetry::LogFormat {
    match std::env::var(telemetry::LOG_FORMAT_ENV) {
        Ok(name) if !name.trim().is_empty() => telemetry::LogFormat::from_name(&name)
            .unwrap_or_else(|| {
                eprintln!(
                    "{} must be `text` or `json`; logging as text",
                    telemetry::LOG_FORMAT_ENV
                );
                telemetry::LogFormat::Text
            }),
        _ => telemetry::LogFormat::Text,
    }
}

/// Runs one command; `url_given`: whether `--url` was on the command line.
async fn run(cli: Cli, url_given: bool) -> CliResult<()> {
    let json = cli.json;
    match &cli.command {
        Command::Threads(args) => commands::threads(&open(&cli.url).await?, args, json).await,
        Command::Show(args) => commands::show(&open(&cli.url).await?, args, json).await,
        Command::Stats(args) => commands::stats(&open(&cli.url).await?, args, json).await,
        Command::Forget(args) => commands::forget(&open(&cli.url).await?, args, json).await,
        Command::PurgeExpired => commands::purge_expired(&open(&cli.url).await?, json).await,
        Command::Export(args) => transfer::export(&open(&cli.url).await?, args, json).await,
        Command::Import(args) => {
            transfer::import(&open_or_create(&cli.url).await?, args, json).await
        }
        Command::Migrate(args) => transfer::migrate(args, json).await,
        Command::Doctor(args) => {
            let url = args.target.as_deref().unwrap_or(&cli.url);
            transfer::doctor(url, json).await
        }
        Command::Upgrade(args) => {
            let url = args.target.as_deref().unwrap_or(&cli.url);
            transfer::upgrade(url, json).await
        }
        Command::Serve(args) => serve::serve(args, &cli.url, url_given).await,
        Command::Mcp(args) => mcp::mcp(args, &cli.url, url_given).await,
    }
}

/// Opens the stores that exist at `url`, creating and migrating nothing (a mistyped URL or
/// prefix is an error, not a new empty store; a production schema is never upgraded behind
/// the applications' back), without the window cache (the command reads each thread once);
/// the error names the URL with its secrets redacted.
pub(crate) async fn open(url: &str) -> CliResult<Stores> {
    open_with(url, OpenOptions::new().existing_only()).await
}

/// Opens the stores at `url` as an application does: creating the tables, or applying the
/// pending migrations, when needed. For `import`, `migrate`'s target and `upgrade`.
pub(crate) async fn open_or_create(url: &str) -> CliResult<Stores> {
    open_with(url, OpenOptions::new()).await
}

async fn open_with(url: &str, options: OpenOptions) -> CliResult<Stores> {
    options
        .without_window_cache()
        .open(url)
        .await
        .map_err(|source| {
            Failed::with(
                format!("could not open the store at {}", redact_url(url)),
                source,
            )
        })
}
