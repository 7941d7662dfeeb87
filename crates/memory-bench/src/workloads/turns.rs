//! The agent-turn workloads, one op being the three store calls of a turn (append the user's
//! message, read the window, append the answer): `agent_turn` on a warm store object,
//! `agent_turn_cold` (issue 17: the first turn of a process, a fresh history-store object each
//! op) and `agent_turn_shared` (issue 17: another writer appends between turns).

use memory_core::{ChatMessage, HistoryStore, Scope};

use super::WINDOW;
use super::threads::{Grown, Growth, grow};
use crate::BenchResult;
use crate::backends::Stores;
use crate::harness::{Ctx, Report};

/// One agent turn on the thread of `scope`: append `user`, read the window, append
/// `assistant`. Returns the window's length.
async fn turn(
    history: &dyn HistoryStore,
    scope: &Scope,
    user: ChatMessage,
    assistant: ChatMessage,
) -> BenchResult<usize> {
    history.append(scope, &[user]).await?;
    let window = history.read(scope, WINDOW).await?;
    let len = window.len();
    drop(window);
    history.append(scope, &[assistant]).await?;
    Ok(len)
}

/// The user and assistant messages of the `k`-th agent turn.
fn turn_messages(ctx: &Ctx<'_>, k: usize) -> (ChatMessage, ChatMessage) {
    (
        ChatMessage::user(ctx.later(2 * k).text.clone()),
        ChatMessage::assistant(ctx.later(2 * k + 1).text.clone()),
    )
}

/// The line of a turn workload: three store calls per op, and the average window, then
/// `extra` (a field of the workload's own, if any) and the rounds.
fn turn_report(ctx: &Ctx<'_>, grown: &Grown, extra: Option<(&str, &str)>) -> Vec<Report> {
    let mut report = grown
        .report(ctx, 3)
        .field("window_len_avg", grown.window_len_avg());
    if let Some((key, value)) = extra {
        report = report.field(key, value);
    }
    vec![grown.with_rounds(ctx, report)]
}

/// `agent_turn`: on a thread of N, append a user message, read the window, append an assistant
/// message. One op = those three store calls. The ops run in [`rounds`](super::threads) on
/// fresh threads of N.
pub(super) async fn agent_turn(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let growth = Growth::new(ctx, 10, 200, 2);
    let history = stores.history.as_ref();
    let grown = grow(ctx, stores, growth, async |session, k, timer| {
        let (user, assistant) = turn_messages(ctx, k);
        let scope = session.scope();
        timer
            .time(stores, async || turn(history, scope, user, assistant).await)
            .await
    })
    .await?;
    Ok(turn_report(ctx, &grown, None))
}

/// `agent_turn_cold`: `agent_turn` where every op runs on a history-store object opened for it
/// ([`Stores::reopen`], untimed): the first turn a process makes on a thread of N, whose window
/// read is a whole read. One op = the same three store calls. The ops run in
/// [`rounds`](super::threads) on fresh threads of N.
pub(super) async fn agent_turn_cold(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let growth = Growth::new(ctx, 5, 100, 2);
    let grown = grow(ctx, stores, growth, async |session, k, timer| {
        let fresh = stores.reopen().await?;
        let (user, assistant) = turn_messages(ctx, k);
        let (history, scope) = (fresh.history.as_ref(), session.scope());
        let window_len = timer
            .time(&fresh, async || turn(history, scope, user, assistant).await)
            .await?;
        fresh.close().await;
        Ok(window_len)
    })
    .await?;
    let object = stores.reopen_kind();
    Ok(turn_report(ctx, &grown, Some(("store_object", object))))
}

/// `agent_turn_shared`: `agent_turn` on a thread another writer shares: before each turn, a
/// second store object over the same data ([`Stores::reopen`]: a second connection where the
/// backend has connections) appends one message to the thread, untimed. Only the turn is timed,
/// so the figure is a turn that must pick up someone else's append (the refresh path of a
/// caching or cursor-reading store). The ops run in [`rounds`](super::threads) on fresh threads
/// of N.
pub(super) async fn agent_turn_shared(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let growth = Growth::new(ctx, 10, 200, 3);
    let history = stores.history.as_ref();
    let writer = stores.reopen().await?;
    let grown = grow(ctx, stores, growth, async |session, k, timer| {
        let scope = session.scope();
        // The other writer's message: a later message than the turn's own.
        let other = ChatMessage::user(ctx.later(3 * k + 2).text.clone());
        writer.history.append(scope, &[other]).await?;
        let user = ChatMessage::user(ctx.later(3 * k).text.clone());
        let assistant = ChatMessage::assistant(ctx.later(3 * k + 1).text.clone());
        timer
            .time(stores, async || turn(history, scope, user, assistant).await)
            .await
    })
    .await?;
    writer.close().await;
    let writer = stores.reopen_kind();
    Ok(turn_report(ctx, &grown, Some(("writer", writer))))
}
