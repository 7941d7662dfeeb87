//! Telemetry: the names of the spans, attributes and metrics every crate emits, and the
//! opt-in that lets message text into them.
//!
//! The libraries emit only [`tracing`] spans and events; an application chooses what to do
//! with them (the facade's `otel` feature installs an OpenTelemetry pipeline). Attributes follow
//! the OpenTelemetry semantic conventions where they exist (`gen_ai.*` for the agent and its
//! model, `db.*` for store operations, `error.type`) and use the `agent_memory.*` namespace
//! where they do not; docs/telemetry.md lists every name.
//!
//! Metrics are `tracing` events of target [`METRICS_TARGET`] at `DEBUG` level, with no parent
//! span, whose fields carry the `monotonic_counter.` / `histogram.` prefixes that
//! tracing-opentelemetry's `MetricsLayer` turns into OpenTelemetry instruments (the other
//! fields of the event are the data point's attributes).
//!
//! What is never recorded: a secret (store URLs go through [`redact_url`](crate::redact_url)),
//! and message text, unless the application opts in with [`set_capture_content`] or the
//! [`CAPTURE_CONTENT_ENV`] environment variable.

mod traced;

pub use crate::span_fields::{
    CAPTURE_CONTENT_ENV, METRICS_TARGET, capture_content, int, set_capture_content,
};
pub use traced::Traced;

/// The attribute names used by more than one crate.
pub mod attr {
    /// The kind of operation (OpenTelemetry `gen_ai`): `invoke_agent`, `chat`.
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The conversation (OpenTelemetry `gen_ai`): the thread's scope key.
    pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// The agent's name (OpenTelemetry `gen_ai`).
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    /// Input tokens the model reported (OpenTelemetry `gen_ai`).
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Output tokens the model reported (OpenTelemetry `gen_ai`).
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// The database system of a store operation (OpenTelemetry `db`).
    pub const DB_SYSTEM_NAME: &str = "db.system.name";
    /// The store operation (OpenTelemetry `db`): `append`, `read`, `save`…
    pub const DB_OPERATION_NAME: &str = "db.operation.name";
    /// The error kind of a failed operation (OpenTelemetry `error.type`).
    pub const ERROR_TYPE: &str = "error.type";
    /// The tenant of the scope.
    pub const TENANT: &str = "agent_memory.scope.tenant";
    /// The session of the scope.
    pub const SESSION: &str = "agent_memory.scope.session";
}
