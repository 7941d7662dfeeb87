//! The workloads that run on no store: `count_tokens` and `decode_message`.

use std::hint::black_box;

use memory_core::{ChatMessage, TiktokenCounter, TokenCounter};

use crate::BenchResult;
use crate::data::DataMessage;
use crate::harness::{Ctx, Recorder, Report, average, round};

/// The average cl100k tokens per message text of the full data set, as published with it.
const README_AVG_CL100K_TOKENS: f64 = 57.9;

/// `count_tokens`: count the tokens of the N messages with o200k and cl100k, a message at a
/// time (`count_message`), in as many passes as make about `--ops` messages (default 10,000).
/// One line per encoding, with tokens per second and the average tokens per message text.
pub(super) fn count_tokens(ctx: &Ctx<'_>) -> BenchResult<Vec<Report>> {
    let target = ctx.ops.unwrap_or(10_000);
    let passes = target.div_ceil(ctx.n).max(1);
    let messages: Vec<ChatMessage> = ctx.thread().iter().map(DataMessage::to_chat).collect();
    let mut reports = Vec::new();
    for (encoding, counter) in [
        ("o200k_base", TiktokenCounter::o200k()),
        ("cl100k_base", TiktokenCounter::cl100k()),
    ] {
        let text_tokens: usize = ctx
            .thread()
            .iter()
            .map(|m| counter.count_text(&m.text) as usize)
            .sum();
        let avg_tokens = average(text_tokens, ctx.n);
        for message in messages.iter().take(100) {
            black_box(counter.count_message(message));
        }
        let mut tokens = 0u64;
        let mut recorder = Recorder::new(passes * ctx.n);
        for _ in 0..passes {
            for message in &messages {
                let count = recorder.time(|| counter.count_message(black_box(message)));
                tokens += u64::from(count);
            }
        }
        let stats = recorder.finish();
        if encoding == "cl100k_base"
            && ctx.n == ctx.data.len()
            && (avg_tokens - README_AVG_CL100K_TOKENS).abs() > 0.5
        {
            eprintln!(
                "  WARNING: cl100k averages {avg_tokens} tokens per message text; \
                 the data set is published with {README_AVG_CL100K_TOKENS}"
            );
        }
        let message_tokens = tokens / passes as u64;
        reports.push(
            ctx.report(&stats)
                .field("encoding", encoding)
                .field("tokens_per_s", round(stats.per_second(tokens as f64), 0))
                .field("avg_tokens", avg_tokens)
                .field(
                    "avg_message_tokens",
                    average(message_tokens as usize, ctx.n),
                )
                .field("passes", passes),
        );
    }
    Ok(reports)
}

/// `decode_message`: decode the stored bodies (the versioned JSON form) of the N messages, as a
/// store's read does; one operation decodes all N, and `ns_per_message` is the median
/// operation's time over N. One line.
pub(super) fn decode_message(ctx: &Ctx<'_>) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(20).max(1);
    let bodies: Vec<String> = ctx
        .thread()
        .iter()
        .map(|m| m.to_chat().to_json())
        .collect::<memory_core::Result<_>>()?;
    let bytes: usize = bodies.iter().map(String::len).sum();
    for body in &bodies {
        if ChatMessage::from_json(body)?.to_json()? != *body {
            return Err("a message does not survive its JSON round trip".into());
        }
    }
    let mut recorder = Recorder::new(ops);
    for _ in 0..ops {
        recorder.time(|| {
            for body in &bodies {
                black_box(ChatMessage::from_json(black_box(body))?);
            }
            BenchResult::Ok(())
        })?;
    }
    let stats = recorder.finish();
    let per_message = |d: std::time::Duration| round(d.as_secs_f64() * 1e9 / ctx.n as f64, 1);
    Ok(vec![
        Report::with_units(
            ctx.workload,
            ctx.backend,
            ctx.n,
            &stats,
            (ops * ctx.n) as f64,
        )
        .field("rate_unit", "messages")
        .field("ns_per_message", per_message(stats.p50))
        .field("ns_per_message_p99", per_message(stats.p99))
        .field("avg_bytes", average(bytes, ctx.n)),
    ])
}
