//! The telemetry of a run: the `invoke_agent` span of a turn and what it records when the turn
//! ends.

use super::AgentRun;
use crate::error::Result;
use crate::id::AgentId;

/// The span of one agent turn (OpenTelemetry `gen_ai` `invoke_agent`); its fields are
/// evaluated only when a subscriber wants it.
pub(super) fn turn_span(agent: &AgentId, scope: &crate::Scope) -> tracing::Span {
    let span = tracing::info_span!(
        "agent.run",
        otel.name = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %agent,
        gen_ai.conversation.id = %scope.key(),
        agent_memory.scope.tenant = %scope.tenant(),
        agent_memory.scope.user = scope.user().map(|u| u.as_str()),
        agent_memory.scope.agent = scope.agent().map(|a| a.as_str()),
        agent_memory.scope.session = %scope.session_id(),
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        agent_memory.turn.window_messages = tracing::field::Empty,
        agent_memory.turn.iterations = tracing::field::Empty,
        agent_memory.turn.tool_calls = tracing::field::Empty,
        agent_memory.turn.messages_produced = tracing::field::Empty,
        agent_memory.reducer.messages_dropped = tracing::field::Empty,
        agent_memory.history.archived = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format_args!("invoke_agent {agent}"));
    }
    span
}

/// Records what a turn did on its span, and the `gen_ai.client.token.usage` data points.
pub(super) fn record_turn(span: &tracing::Span, result: &Result<AgentRun>, capture: bool) {
    let run = match result {
        Ok(run) => run,
        Err(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", error.kind().as_str());
            return;
        }
    };
    if let Some(usage) = run.usage {
        span.record(
            "gen_ai.usage.input_tokens",
            crate::span_fields::int(usage.input_tokens),
        );
        span.record(
            "gen_ai.usage.output_tokens",
            crate::span_fields::int(usage.output_tokens),
        );
        for (kind, tokens) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
        ] {
            tracing::event!(
                target: "agent_memory::metrics",
                parent: None,
                tracing::Level::DEBUG,
                histogram.gen_ai.client.token.usage = tokens,
                gen_ai.operation.name = "invoke_agent",
                gen_ai.token.type = kind,
            );
        }
    }
    span.record(
        "agent_memory.turn.window_messages",
        crate::span_fields::int(run.window_len),
    );
    span.record(
        "agent_memory.turn.iterations",
        crate::span_fields::int(run.iterations),
    );
    span.record(
        "agent_memory.turn.tool_calls",
        crate::span_fields::int(run.tool_calls.len()),
    );
    span.record(
        "agent_memory.turn.messages_produced",
        crate::span_fields::int(run.messages.len()),
    );
    span.record(
        "agent_memory.reducer.messages_dropped",
        crate::span_fields::int(run.reduced),
    );
    span.record(
        "agent_memory.history.archived",
        crate::span_fields::int(run.archived),
    );
    if capture {
        span.record(
            "gen_ai.output.messages",
            crate::span_fields::messages_json(&run.messages).as_str(),
        );
    }
}
