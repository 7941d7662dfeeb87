//! What spans and metric events record, shared by every module that records them: counts as
//! span integers ([`int`]), message text as `gen_ai` JSON when the application lets it in
//! ([`capture_content`]), the reducer's span and counters, and the metrics target. A leaf under
//! the modules that trace (agent, forget, memory, the retrievers); [`telemetry`](crate::telemetry)
//! re-exports its public items beside the names and the [`Traced`](crate::telemetry::Traced)
//! decorator.

use std::sync::atomic::{AtomicU8, Ordering};

/// The target of the metric events (see [`telemetry`](crate::telemetry)).
pub const METRICS_TARGET: &str = "agent_memory::metrics";

/// The environment variable that lets message text into spans when set to `true` or `1`
/// (read once, unless [`set_capture_content`] decided first).
pub const CAPTURE_CONTENT_ENV: &str = "AGENT_MEMORY_OTEL_CAPTURE_CONTENT";

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
        int(total.saturating_sub(dropped_messages)),
    );
    span.record(
        "agent_memory.reducer.messages_dropped",
        int(dropped_messages),
    );
    span.record(
        "agent_memory.reducer.tokens_kept",
        int(total_tokens.saturating_sub(dropped_tokens)),
    );
    span.record("agent_memory.reducer.tokens_dropped", int(dropped_tokens));
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
