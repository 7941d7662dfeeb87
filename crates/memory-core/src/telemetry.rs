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

use std::sync::atomic::{AtomicU8, Ordering};

pub use traced::Traced;

/// The target of the metric events (see the module's documentation).
pub const METRICS_TARGET: &str = "agent_memory::metrics";

/// The environment variable that lets message text into spans when set to `true` or `1`
/// (read once, unless [`set_capture_content`] decided first).
pub const CAPTURE_CONTENT_ENV: &str = "AGENT_MEMORY_OTEL_CAPTURE_CONTENT";

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

/// Unset, off or on.
static CAPTURE_CONTENT: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Lets message text into spans (`true`) or keeps it out (`false`, the default), for the
/// whole process; it overrides [`CAPTURE_CONTENT_ENV`].
pub fn set_capture_content(capture: bool) {
    CAPTURE_CONTENT.store(if capture { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether message text may go into spans: what [`set_capture_content`] set, else whether
/// [`CAPTURE_CONTENT_ENV`] is `true` or `1` (read on the first call).
pub fn capture_content() -> bool {
    match CAPTURE_CONTENT.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let on = std::env::var(CAPTURE_CONTENT_ENV).is_ok_and(|v| {
                let v = v.trim();
                v == "1" || v.eq_ignore_ascii_case("true")
            });
            // A racing `set_capture_content` wins over the environment.
            let _ = CAPTURE_CONTENT.compare_exchange(
                UNSET,
                if on { ON } else { OFF },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            CAPTURE_CONTENT.load(Ordering::Relaxed) == ON
        }
    }
}

/// The JSON (`[{"role": …, "content": …}]`) of `messages`' text, the form of the `gen_ai`
/// `gen_ai.input.messages` / `gen_ai.output.messages` attributes; only called when
/// [`capture_content`] is on.
pub(crate) fn messages_json<'a>(
    messages: impl IntoIterator<Item = &'a crate::ChatMessage>,
) -> String {
    let items: Vec<serde_json::Value> = messages
        .into_iter()
        .map(|m| {
            serde_json::json!({
                "role": m.role.as_str(),
                "parts": [{"type": "text", "content": m.text()}],
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// A count as a span attribute: OpenTelemetry integers are `i64` (the tracing bridge would
/// record a `u64` as text), saturated at `i64::MAX`.
pub fn int<T: TryInto<i64>>(count: T) -> i64 {
    count.try_into().unwrap_or(i64::MAX)
}

/// Records a reducer's decision on `span` (a span with the `agent_memory.reducer.*` fields)
/// and in the `agent_memory.reducer.*` counters: messages and stored tokens kept and
/// dropped from `window`.
pub(crate) fn record_reduction(
    span: &tracing::Span,
    trigger: &'static str,
    window: &[crate::StoredMessage],
    reduction: &crate::Reduction,
) {
    if span.is_disabled() && !tracing::enabled!(target: METRICS_TARGET, tracing::Level::DEBUG) {
        return;
    }
    let mut dropped_messages = 0u64;
    let mut dropped_tokens = 0u64;
    for run in &reduction.dropped {
        for message in window.get(run.clone()).unwrap_or_default() {
            dropped_messages = dropped_messages.saturating_add(1);
            dropped_tokens = dropped_tokens.saturating_add(u64::from(message.tokens));
        }
    }
    let total_tokens = window
        .iter()
        .fold(0u64, |sum, m| sum.saturating_add(u64::from(m.tokens)));
    let total = u64::try_from(window.len()).unwrap_or(u64::MAX);
    span.record(
        "agent_memory.reducer.messages_kept",
        crate::telemetry::int(total.saturating_sub(dropped_messages)),
    );
    span.record(
        "agent_memory.reducer.messages_dropped",
        crate::telemetry::int(dropped_messages),
    );
    span.record(
        "agent_memory.reducer.tokens_kept",
        crate::telemetry::int(total_tokens.saturating_sub(dropped_tokens)),
    );
    span.record(
        "agent_memory.reducer.tokens_dropped",
        crate::telemetry::int(dropped_tokens),
    );
    span.record(
        "agent_memory.reducer.summarized",
        reduction.summary.is_some(),
    );
    tracing::event!(
        target: "agent_memory::metrics",
        parent: None,
        tracing::Level::DEBUG,
        monotonic_counter.agent_memory.reducer.messages_dropped = dropped_messages,
        monotonic_counter.agent_memory.reducer.tokens_dropped = dropped_tokens,
        agent_memory.reducer.trigger = trigger,
    );
}

/// The span of one reducer decision (fields recorded by [`record_reduction`]).
pub(crate) fn reducer_span(trigger: &'static str, messages: usize) -> tracing::Span {
    tracing::info_span!(
        "agent_memory.reducer.reduce",
        agent_memory.reducer.trigger = trigger,
        agent_memory.reducer.messages = int(messages),
        agent_memory.reducer.messages_kept = tracing::field::Empty,
        agent_memory.reducer.messages_dropped = tracing::field::Empty,
        agent_memory.reducer.tokens_kept = tracing::field::Empty,
        agent_memory.reducer.tokens_dropped = tracing::field::Empty,
        agent_memory.reducer.summarized = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_text_is_captured_only_when_asked() {
        set_capture_content(false);
        assert!(!capture_content());
        set_capture_content(true);
        assert!(capture_content());
        set_capture_content(false);
        let json = messages_json([&crate::ChatMessage::user("hi")]);
        assert_eq!(
            json,
            r#"[{"role":"user","parts":[{"type":"text","content":"hi"}]}]"#
        );
    }
}
