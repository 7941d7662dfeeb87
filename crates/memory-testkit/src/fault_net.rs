//! Network and server faults for backend tests: private database servers a test may kill and
//! restart ([`servers`]), a TCP proxy that cuts connections in the middle of a call
//! ([`proxy`]), and the checks both kinds of test share.
//!
//! The invariants checked after a fault: every acknowledged message is stored once, in order,
//! with gap-free sequence numbers; a batch is written all or nothing (a failed append left the
//! thread with none or all of its messages); a retried append with the same ids returns the
//! sequence numbers the batch first got.

mod kill;
pub mod proxy;
pub mod servers;
mod urls;

use std::time::{Duration, Instant};

use memory_core::{ChatMessage, ErrorKind, HistoryStore, MessageId, Scope, Window};

pub use kill::{ServerStep, failures_around_the_kill, kill_and_restart_after};
pub use proxy::{Cut, CutProxy, Traffic, Turn};
pub use servers::{PrivateMariadb, PrivatePostgres};
pub use urls::{server_addr, via_proxy};

/// The longest one call may take while connections are cut before the test calls it a hang.
pub const CALL_LIMIT: Duration = Duration::from_secs(20);

/// An error and its sources, as text.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The messages of batch `batch` (ids `b<batch>-m<i>`), `per_batch` of them.
pub fn batch_messages(batch: usize, per_batch: usize) -> Vec<ChatMessage> {
    (0..per_batch)
        .map(|i| {
            let id = format!("b{batch}-m{i}");
            ChatMessage::user(format!("text of {id}"))
                .with_id(MessageId::new(id).expect("b<n>-m<i> is a valid id"))
        })
        .collect()
}

/// Appends `batch` through `store` until it is acknowledged, retrying with the same ids after
/// each failure, within `limit`. The acknowledged sequence numbers must start at `first_seq`
/// and be consecutive; each failure must be temporary (`Unavailable` or `Timeout`) and come
/// within [`CALL_LIMIT`]. After a failure, `observer` (a store that reaches the server without
/// the fault, if the test has one) must see the thread with none or all of the batch. Returns
/// the errors of the failed attempts, as text.
///
/// # Panics
/// When one of those does not hold.
pub async fn append_until_acked(
    store: &dyn HistoryStore,
    observer: Option<&dyn HistoryStore>,
    scope: &Scope,
    batch: &[ChatMessage],
    first_seq: u64,
    limit: Duration,
) -> Vec<String> {
    let started = Instant::now();
    let mut failures = Vec::new();
    let before = first_seq - 1;
    loop {
        let call = Instant::now();
        let result = tokio::time::timeout(CALL_LIMIT, store.append(scope, batch))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "an append hung for {CALL_LIMIT:?} (batch at seq {first_seq}, attempt {})",
                    failures.len() + 1
                )
            });
        match result {
            Ok(out) => {
                let expected: Vec<u64> = (first_seq..first_seq + batch.len() as u64).collect();
                assert_eq!(
                    out.seqs,
                    expected,
                    "the batch at seq {first_seq} lands contiguously after the earlier ones \
                     (after {} failed attempts: {failures:?})",
                    failures.len()
                );
                return failures;
            }
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Timeout),
                    "a failed append during a fault is temporary, got {:?}: {}",
                    e.kind(),
                    chain(&e)
                );
                assert!(
                    e.is_temporary(),
                    "an append failed by a fault may succeed later: {e}"
                );
                failures.push(format!("{e} (after {:?})", call.elapsed()));
                if let Some(observer) = observer
                    && let Ok(Ok(count)) =
                        tokio::time::timeout(CALL_LIMIT, observer.count(scope)).await
                {
                    let stored = count.active + count.archived;
                    assert!(
                        stored == before || stored == before + batch.len() as u64,
                        "after a failed append the thread holds {stored} messages: neither the \
                         {before} before the batch nor all {} with it",
                        before + batch.len() as u64
                    );
                }
                assert!(
                    started.elapsed() < limit,
                    "the batch at seq {first_seq} was not acknowledged within {limit:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Checks that the thread holds exactly `batches` batches of `per_batch` messages (as
/// [`batch_messages`] builds them), each once, in order, with sequence numbers 1, 2, 3, … and
/// their texts intact.
///
/// # Panics
/// When it does not.
pub async fn assert_thread(
    store: &dyn HistoryStore,
    scope: &Scope,
    batches: usize,
    per_batch: usize,
) {
    let everything = tokio::time::timeout(CALL_LIMIT, store.read(scope, Window::Everything))
        .await
        .expect("the final read does not hang")
        .expect("the final read succeeds");
    let expected: Vec<ChatMessage> = (0..batches)
        .flat_map(|b| batch_messages(b, per_batch))
        .collect();
    let got: Vec<&str> = everything.iter().map(|m| m.message.id.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got, want, "every acknowledged message, once, in order");
    let seqs: Vec<u64> = everything.iter().map(|m| m.seq).collect();
    assert_eq!(
        seqs,
        (1..=expected.len() as u64).collect::<Vec<_>>(),
        "gap-free sequence numbers"
    );
    for (stored, sent) in everything.iter().zip(&expected) {
        assert_eq!(
            stored.message.text(),
            sent.text(),
            "message {} is stored as sent",
            sent.id
        );
    }
}

/// What [`cut_sweep`] did.
#[derive(Debug, Clone, Default)]
pub struct SweepReport {
    /// The bytes of one uncut append on a warm connection.
    pub append_traffic: Traffic,
    /// How many round trips one uncut append took.
    pub round_trips: usize,
    /// How many cut points were tried.
    pub points: usize,
    /// How many of them cut a connection during their append.
    pub landed: usize,
    /// How many append attempts failed in all.
    pub failed_attempts: usize,
}

/// Cuts the connections of `through` (a store connected via `proxy`) at points spread over
/// one append: before its request, inside its requests, after a request before its reply
/// (reply byte 0 of each round trip the sweep reaches) and inside its replies. Each append is
/// retried with the same ids until acknowledged; `direct` (the same data, no proxy) checks
/// all-or-nothing after each failure and the whole thread at the end.
///
/// # Panics
/// When an invariant breaks, a call hangs, or fewer than half the points cut an append.
pub async fn cut_sweep(
    proxy: &CutProxy,
    through: &dyn HistoryStore,
    direct: &dyn HistoryStore,
    scope: &Scope,
) -> SweepReport {
    cut_sweep_where(proxy, through, direct, scope, |_| true).await
}

/// [`cut_sweep`] at only the cut points `keep` selects (to leave out points that meet a known,
/// separately tested bug).
///
/// # Panics
/// As [`cut_sweep`].
pub async fn cut_sweep_where(
    proxy: &CutProxy,
    through: &dyn HistoryStore,
    direct: &dyn HistoryStore,
    scope: &Scope,
    keep: impl Fn(Cut) -> bool,
) -> SweepReport {
    const PER_BATCH: usize = 3;
    let limit = Duration::from_secs(30);
    let mut report = SweepReport::default();
    let mut batch = 0usize;
    // Appends batch `batch` (acked at its first seq) through the proxy, checked on `direct`.
    let append_batch = async |batch: usize, direct: Option<&dyn HistoryStore>| {
        append_until_acked(
            through,
            direct,
            scope,
            &batch_messages(batch, PER_BATCH),
            (batch * PER_BATCH) as u64 + 1,
            limit,
        )
        .await
    };
    // Two clean appends: the first warms the connection (prepared statements, scripts), the
    // second measures one append's traffic.
    for _ in 0..2 {
        proxy.reset_traffic();
        let failures = append_batch(batch, None).await;
        assert!(failures.is_empty(), "an uncut append failed: {failures:?}");
        batch += 1;
    }
    let traffic = proxy.traffic();
    let turns = proxy.turns();
    report.append_traffic = traffic;
    report.round_trips = turns.iter().filter(|t| matches!(t, Turn::Reply(_))).count();
    let spread = |total: u64| -> Vec<u64> {
        let mut points = vec![
            0,
            1,
            total / 4,
            total / 2,
            total * 3 / 4,
            total.saturating_sub(1),
        ];
        points.sort_unstable();
        points.dedup();
        points
    };
    let mut cuts: Vec<Cut> = spread(traffic.request_bytes)
        .into_iter()
        .map(Cut::AfterRequestBytes)
        .collect();
    cuts.extend(
        spread(traffic.reply_bytes)
            .into_iter()
            .map(Cut::AfterReplyBytes),
    );
    // Before each request, and after each request before (and just inside) its reply.
    for turn in turns {
        match turn {
            Turn::Request(k) => cuts.push(Cut::AfterRequestBytes(k)),
            Turn::Reply(k) => {
                cuts.push(Cut::AfterReplyBytes(k));
                cuts.push(Cut::AfterReplyBytes(k + 1));
            }
        }
    }
    cuts.sort_by_key(|c| match *c {
        Cut::AfterRequestBytes(k) => (0, k),
        Cut::AfterReplyBytes(k) => (1, k),
    });
    cuts.dedup();
    cuts.retain(|c| keep(*c));
    for cut in cuts {
        eprintln!("cut sweep: batch {batch}, {cut:?}");
        proxy.arm(cut);
        let failures = append_batch(batch, Some(direct)).await;
        let pending = proxy.disarm();
        report.points += 1;
        if !pending {
            report.landed += 1;
        }
        report.failed_attempts += failures.len();
        batch += 1;
    }
    assert_thread(direct, scope, batch, PER_BATCH).await;
    // The store recovered: a plain append through the proxy works again.
    let failures = append_batch(batch, None).await;
    assert!(
        failures.is_empty(),
        "an append after the sweep failed: {failures:?}"
    );
    assert_thread(direct, scope, batch + 1, PER_BATCH).await;
    assert!(
        report.landed * 2 >= report.points,
        "too few cuts landed during an append: {report:?}"
    );
    report
}
