//! The OpenTelemetry pipeline for applications (feature `otel`): the spans and metric events
//! the libraries emit through `tracing` (docs/telemetry.md), exported over OTLP or to exporters
//! the application gives.
//!
//! ```no_run
//! # fn main() -> agent_memory::Result<()> {
//! use agent_memory::telemetry::{self, TelemetryConfig};
//!
//! // OTLP over HTTP/protobuf to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318).
//! let _guard = telemetry::install(TelemetryConfig::new("my-agent"))?;
//! // … run agents; dropping the guard flushes and shuts the pipeline down.
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io::IsTerminal;

use memory_core::{Error, ErrorKind, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithHttpConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{SdkMeterProvider, Stream};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter};
use tracing::Subscriber;
pub use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

pub use memory_core::telemetry::{
    CAPTURE_CONTENT_ENV, METRICS_TARGET, Traced, capture_content, set_capture_content,
};

/// The environment variable naming the OTLP endpoint; [`install_from_env`] installs the
/// pipeline only when it is set.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The environment variable naming the format of the log on stderr: `text` (the default) or
/// `json` ([`LogFormat::from_name`]).
pub const LOG_FORMAT_ENV: &str = "AGENT_MEMORY_LOG_FORMAT";

/// How log lines on stderr are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogFormat {
    /// A line of text per event, with the spans it happened in; coloured only when stderr is
    /// a terminal (never escape codes in a file or a pipe).
    #[default]
    Text,
    /// A JSON object per line: `timestamp`, `level`, `target`, `fields` (the message and the
    /// event's fields) and `span` (the innermost span's name and fields).
    Json,
}

impl LogFormat {
    /// The format named `name` (`text` or `json`, any case); `None` for another name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// How the pipeline is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    service_name: String,
    capture_content: Option<bool>,
    log_to_stderr: bool,
    log_format: LogFormat,
    log_level: LevelFilter,
}

impl TelemetryConfig {
    /// A pipeline for the service `service_name` (the `service.name` resource attribute, unless
    /// `OTEL_SERVICE_NAME` sets it), without message text (unless [`CAPTURE_CONTENT_ENV`] says otherwise) and without a log
    /// on stderr.
    pub fn new(service_name: impl Into<String>) -> Self {
        Self {
            service_name: service_name.into(),
            capture_content: None,
            log_to_stderr: false,
            log_format: LogFormat::Text,
            log_level: LevelFilter::WARN,
        }
    }

    /// Lets message text into the agent's spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`) or keeps it out, for the whole process; unset, the
    /// [`CAPTURE_CONTENT_ENV`] environment variable decides (off by default).
    #[must_use]
    pub fn with_capture_content(mut self, capture: bool) -> Self {
        self.capture_content = Some(capture);
        self
    }

    /// Also writes log lines to stderr, filtered by `RUST_LOG` (default: the
    /// [default level](Self::with_default_log_level), `warn` unless set).
    #[must_use]
    pub fn with_log_to_stderr(mut self, log: bool) -> Self {
        self.log_to_stderr = log;
        self
    }

    /// The format of the log on stderr (default [`LogFormat::Text`]).
    #[must_use]
    pub fn with_log_format(mut self, format: LogFormat) -> Self {
        self.log_format = format;
        self
    }

    /// The level of the log on stderr when `RUST_LOG` does not set one (default `warn`).
    #[must_use]
    pub fn with_default_log_level(mut self, level: LevelFilter) -> Self {
        self.log_level = level;
        self
    }

    /// The service name.
    pub fn service_name(&self) -> &str {
        &self.service_name
    }
}

/// The providers of an installed (or built) pipeline. Dropping it flushes what is buffered
/// and shuts the providers down.
pub struct TelemetryGuard {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard").finish_non_exhaustive()
    }
}

impl TelemetryGuard {
    /// Exports every span and metric recorded so far.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when an exporter fails.
    pub fn force_flush(&self) -> Result<()> {
        self.tracer_provider
            .force_flush()
            .map_err(|e| export_error("spans", &e))?;
        self.meter_provider
            .force_flush()
            .map_err(|e| export_error("metrics", &e))
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        // Errors at shutdown have nowhere to go but the log.
        if let Err(error) = self.tracer_provider.shutdown() {
            tracing::debug!(%error, "the span pipeline did not shut down cleanly");
        }
        if let Err(error) = self.meter_provider.shutdown() {
            tracing::debug!(%error, "the metric pipeline did not shut down cleanly");
        }
    }
}

fn export_error(what: &str, error: &dyn fmt::Display) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("exporting {what} failed: {error}"),
    )
}

/// Installs the pipeline as the process's global `tracing` subscriber, exporting over OTLP
/// (HTTP/protobuf) to the endpoint of the standard `OTEL_EXPORTER_OTLP_*` environment
/// variables (default `http://localhost:4318`).
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when the exporters cannot be built from the environment, or a
/// global subscriber is already installed.
pub fn install(config: TelemetryConfig) -> Result<TelemetryGuard> {
    let client = http_client()?;
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client.clone())
        .build()
        .map_err(|e| config_error("span", &e))?;
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(client)
        .build()
        .map_err(|e| config_error("metric", &e))?;
    install_with(config, spans, metrics)
}

/// The exporters' blocking HTTP client (they send from the SDK's own threads), with
/// memory-http's TLS settings (rustls, ring, the platform's roots: reqwest is built without a
/// crypto provider of its own). Built on a thread of its own, outside any async runtime.
fn http_client() -> Result<reqwest::blocking::Client> {
    let tls = memory_http::tls_config()?;
    std::thread::spawn(move || {
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()
    })
    .join()
    .map_err(|_| Error::new(ErrorKind::Backend, "building the OTLP HTTP client panicked"))?
    .map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("could not build the OTLP HTTP client: {e}"),
        )
    })
}

/// [`install`] when [`ENDPOINT_ENV`] is set (and not empty); `None` otherwise, installing
/// nothing.
///
/// # Errors
/// As [`install`].
pub fn install_from_env(config: TelemetryConfig) -> Result<Option<TelemetryGuard>> {
    match std::env::var(ENDPOINT_ENV) {
        Ok(endpoint) if !endpoint.trim().is_empty() => install(config).map(Some),
        _ => Ok(None),
    }
}

fn config_error(what: &str, error: &dyn fmt::Display) -> Error {
    Error::invalid_input(format!(
        "the OTLP {what} exporter cannot be built from the environment: {error}"
    ))
}

/// Installs the pipeline as the global subscriber with the given exporters (spans through a
/// batch processor, metrics through a periodic reader).
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when a global subscriber is already installed.
pub fn install_with<S, M>(config: TelemetryConfig, spans: S, metrics: M) -> Result<TelemetryGuard>
where
    S: SpanExporter + 'static,
    M: PushMetricExporter,
{
    let (subscriber, guard) = build(&config, spans, metrics);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|_| Error::invalid_input("a global tracing subscriber is installed already"))?;
    Ok(guard)
}

/// The pipeline as a subscriber the caller installs (globally, or for a scope with
/// `tracing::subscriber::with_default` or `set_default`, as tests do), and its guard. It
/// applies [`TelemetryConfig::with_capture_content`] when set.
pub fn build<S, M>(
    config: &TelemetryConfig,
    spans: S,
    metrics: M,
) -> (
    impl Subscriber + Send + Sync + for<'a> LookupSpan<'a>,
    TelemetryGuard,
)
where
    S: SpanExporter + 'static,
    M: PushMetricExporter,
{
    if let Some(capture) = config.capture_content {
        memory_core::telemetry::set_capture_content(capture);
    }
    // The SDK reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the configured name
    // applies when the environment names no service.
    let resource = if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        Resource::builder().build()
    } else {
        Resource::builder()
            .with_service_name(config.service_name.clone())
            .build()
    };
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let meter_provider = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .with_view(units)
        .build();
    let tracer = tracer_provider.tracer("agent-memory");
    let log = config.log_to_stderr.then(|| stderr_log(config));
    let subscriber = tracing_subscriber::registry()
        .with(log)
        .with(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(span_filter()),
        )
        .with(
            tracing_opentelemetry::MetricsLayer::new(meter_provider.clone())
                .with_filter(Targets::new().with_target(METRICS_TARGET, LevelFilter::DEBUG)),
        );
    let guard = TelemetryGuard {
        tracer_provider,
        meter_provider,
    };
    (subscriber, guard)
}

/// Installs only the log on stderr as the process's global `tracing` subscriber (no
/// exporter): for an application that logs without an OTLP endpoint, in `config`'s
/// [format](TelemetryConfig::with_log_format), filtered by `RUST_LOG` (default: its
/// [default level](TelemetryConfig::with_default_log_level)).
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when a global subscriber is already installed.
pub fn install_log(config: &TelemetryConfig) -> Result<()> {
    let subscriber = tracing_subscriber::registry().with(stderr_log(config));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|_| Error::invalid_input("a global tracing subscriber is installed already"))
}

/// The log on stderr: `config`'s format, colours only on a terminal, filtered by `RUST_LOG`
/// (default `config`'s level), never the metric events.
fn stderr_log<S>(config: &TelemetryConfig) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let filter = EnvFilter::builder()
        .with_default_directive(config.log_level.into())
        .from_env_lossy();
    let no_metrics = Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target(METRICS_TARGET, LevelFilter::OFF);
    match config.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .with_filter(no_metrics)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter)
            .with_filter(no_metrics)
            .boxed(),
    }
}

/// The spans exported: this project's at `DEBUG` and above (store operations are `DEBUG`),
/// other crates' at `INFO` and above, never the metric events.
fn span_filter() -> Targets {
    Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("memory_core", LevelFilter::DEBUG)
        .with_target("memory_layers", LevelFilter::DEBUG)
        .with_target("agent_memory", LevelFilter::DEBUG)
        .with_target(METRICS_TARGET, LevelFilter::OFF)
}

/// The units of the instruments (the tracing bridge cannot say them).
fn units(instrument: &opentelemetry_sdk::metrics::Instrument) -> Option<Stream> {
    let unit = match instrument.name() {
        "db.client.operation.duration" => "s",
        "gen_ai.client.token.usage" => "{token}",
        name if name.ends_with("tokens") || name.ends_with("tokens_dropped") => "{token}",
        name if name.ends_with("messages") || name.ends_with("messages_dropped") => "{message}",
        _ => return None,
    };
    Stream::builder()
        .with_name(instrument.name().to_owned())
        .with_unit(unit)
        .build()
        .ok()
}
