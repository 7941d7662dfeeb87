//! `session_roundtrip`: a session's JSON both ways, and its state saved to and loaded from the
//! backend's session store.

use std::hint::black_box;

use memory_core::AgentSession;

use super::agents::AGENT;
use super::timer::Timer;
use crate::BenchResult;
use crate::backends::Stores;
use crate::harness::{Ctx, Recorder, Report, fresh_scope, round};

/// `session_roundtrip`: a session holding N messages in one agent's history; five lines:
/// `serialize` (`serialize()` + `serde_json::to_string`), `to_json` (`AgentSession::to_json`,
/// the same text written without a value tree), `deserialize`
/// (`AgentSession::from_json`), and the backend's `save` and `load` of the state.
pub(super) async fn session_roundtrip(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let rounds = ctx.ops.unwrap_or((100_000 / ctx.n).clamp(10, 200)).max(1);
    let warmup = 2;
    let mut session = AgentSession::new(fresh_scope()?);
    for message in ctx.thread() {
        session.add_history_message(AGENT, message.to_chat())?;
    }

    let mut json = String::new();
    for _ in 0..warmup {
        json = serde_json::to_string(&session.serialize()?)?;
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        json = recorder.time(|| -> BenchResult<String> {
            Ok(serde_json::to_string(&session.serialize()?)?)
        })?;
    }
    let serialize = recorder.finish();
    let bytes = json.len();

    // The same text, written straight from the session (`to_json`, no value tree).
    if session.to_json()? != json {
        return Err("to_json and serialize() write different texts".into());
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        black_box(recorder.time(|| session.to_json())?);
    }
    let to_json = recorder.finish();

    if AgentSession::from_json(&json)? != session {
        return Err("the session does not survive its JSON round trip".into());
    }
    for _ in 0..warmup {
        black_box(AgentSession::from_json(&json)?);
    }
    let mut recorder = Recorder::new(rounds);
    for _ in 0..rounds {
        recorder.time(|| {
            black_box(AgentSession::from_json(&json)?);
            BenchResult::Ok(())
        })?;
    }
    let deserialize = recorder.finish();

    let sessions = stores.sessions.as_ref();
    let scope = session.scope();
    let state = session.serialize()?;
    let mut version = None;
    for _ in 0..warmup {
        version = Some(sessions.save(scope, &state, version).await?);
    }
    let mut timer = Timer::new(rounds);
    for _ in 0..rounds {
        version = Some(
            timer
                .time(stores, async || {
                    Ok(sessions.save(scope, &state, version).await?)
                })
                .await?,
        );
    }
    let save = timer.finish();

    for _ in 0..warmup {
        black_box(sessions.load(scope).await?);
    }
    let mut timer = Timer::new(rounds);
    for _ in 0..rounds {
        timer
            .time(stores, async || {
                black_box(sessions.load(scope).await?);
                Ok(())
            })
            .await?;
    }
    let load = timer.finish();
    match sessions.load(scope).await? {
        Some(stored) if stored.state == state && Some(stored.version) == version => {}
        _ => return Err("the session store did not return the state it saved".into()),
    }
    sessions.delete(scope).await?;

    Ok([
        ("serialize", &serialize, 0.0),
        ("to_json", &to_json, 0.0),
        ("deserialize", &deserialize, 0.0),
        ("save", &save.stats, save.round_trips_per_op()),
        ("load", &load.stats, load.round_trips_per_op()),
    ]
    .into_iter()
    .map(|(phase, stats, round_trips)| {
        ctx.report(stats)
            .field("phase", phase)
            .field("round_trips_per_op", round_trips)
            .field("bytes", bytes)
            .field(
                "mb_per_s",
                round(stats.per_second(bytes as f64 * stats.ops as f64) / 1e6, 1),
            )
    })
    .collect())
}
