//! The `migrate` workload of issue 18: `memory_bundle::migrate` of a tenant holding N messages
//! into the backend under test (phase `in`) and back out of it into a fresh in-memory store
//! (phase `out`), each with its verification.
//!
//! A child module of [`workloads`](super), so it shares its constants (`IMPORT_BATCH`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_bundle::{Endpoint, MigrationReport, NoProgress, Selection, Tenants, migrate};
use memory_core::ScopeFilter;
use memory_core::forget::{ForgetMode, Forgetter};
use memory_core::{InMemoryHistoryStore, InMemorySessionStore, Scope, TenantId};
use serde_json::json;

use super::IMPORT_BATCH;
use crate::BenchResult;
use crate::backends::Stores;
use crate::data::DataMessage;
use crate::harness::{Ctx, Report, Stats, peak_rss_mb, round};

/// The sizes `migrate` measures when `--n` is not given: issue 18's 100,000 messages.
pub(crate) const MIGRATE_NS: [usize; 1] = [100_000];
/// The threads the N messages are spread over.
pub(crate) const THREADS: usize = 10;
/// The sessions saved in the tenant, besides its threads.
pub(crate) const SESSIONS: usize = 3;
/// The messages of the untimed warm-up tenant (or N, if smaller).
const WARMUP_MESSAGES: usize = 1_000;
/// The share of each thread archived, in percent (its oldest messages).
const ARCHIVED_PERCENT: usize = 3;

/// What one seeded tenant holds.
struct Seeded {
    tenant: TenantId,
    source: Endpoint,
    archived: u64,
}

/// The `k`-th message of a generated tenant: the data set's texts in order, cycling, each a
/// new message with a fresh id, so that N may exceed the data set.
fn nth_message(data: &[DataMessage], k: usize) -> memory_core::ChatMessage {
    data[k % data.len()].to_chat()
}

/// How many of N messages thread `t` of [`THREADS`] holds (the first threads take the
/// remainder).
fn thread_len(n: usize, t: usize) -> usize {
    n / THREADS + usize::from(t < n % THREADS)
}

/// A fresh in-memory endpoint.
fn in_memory_endpoint() -> Endpoint {
    Endpoint::new(
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
    )
}

/// Seeds a fresh tenant of an in-memory source (setup, untimed): `n` messages over [`THREADS`]
/// threads of three users, the oldest [`ARCHIVED_PERCENT`] % of each thread archived, and
/// [`SESSIONS`] session states.
async fn seed(ctx: &Ctx<'_>, n: usize) -> BenchResult<Seeded> {
    let tenant = TenantId::new(format!("bench-{}", uuid::Uuid::new_v4()))?;
    let source = in_memory_endpoint();
    let mut k = 0;
    let mut archived = 0u64;
    for t in 0..THREADS {
        let scope = thread_scope(&tenant, t)?;
        let len = thread_len(n, t);
        let mut first_seq = None;
        let mut left = len;
        while left > 0 {
            let batch: Vec<_> = (k..k + left.min(IMPORT_BATCH))
                .map(|k| nth_message(ctx.data, k))
                .collect();
            k += batch.len();
            left -= batch.len();
            let outcome = source.history.append(&scope, &batch).await?;
            if outcome.inserted != batch.len() {
                return Err(format!(
                    "seeding stored {} of {} messages",
                    outcome.inserted,
                    batch.len()
                )
                .into());
            }
            first_seq = first_seq.or(outcome.seqs.first().copied());
        }
        let to_archive = (len * ARCHIVED_PERCENT / 100) as u64;
        if let (Some(first), true) = (first_seq, to_archive > 0) {
            archived += source
                .history
                .archive(&scope, first..=first + to_archive - 1)
                .await?;
        }
    }
    for s in 0..SESSIONS {
        let scope = thread_scope(&tenant, s)?;
        let state = json!({
            "turns": thread_len(n, s),
            "summary": ctx.data[s % ctx.data.len()].text,
            "preferences": {"answers": "short", "commands": true},
        });
        source.sessions.save(&scope, &state, None).await?;
    }
    Ok(Seeded {
        tenant,
        source,
        archived,
    })
}

/// The scope of thread `t` of `tenant`: session `thread-t` of user `user-(t % 3)`.
fn thread_scope(tenant: &TenantId, t: usize) -> BenchResult<Scope> {
    Ok(Scope::new(
        tenant.clone(),
        memory_core::SessionId::new(format!("thread-{t}"))?,
    )
    .with_user(format!("user-{}", t % 3))?)
}

/// Checks that a migration copied the whole seeded tenant and verified it.
fn check(phase: &str, report: &MigrationReport, n: usize, seeded: &Seeded) -> BenchResult<()> {
    // Only threads that hold a message exist.
    let threads = THREADS.min(n) as u64;
    let copied = &report.copied;
    let expected_sessions = SESSIONS.min(THREADS) as u64;
    if copied.messages != n as u64
        || copied.archived != seeded.archived
        || copied.threads != threads
        || copied.sessions != expected_sessions
        || report.already_present != 0
        || report.verified_threads != threads
        || report.verified_sessions != expected_sessions
    {
        return Err(format!(
            "migrate {phase}: expected {n} messages ({} archived) in {threads} threads and \
             {expected_sessions} sessions, verified; the migration reported: {report}",
            seeded.archived
        )
        .into());
    }
    Ok(())
}

/// The per-phase samples of the migrations.
#[derive(Default)]
struct Phase {
    samples: Vec<Duration>,
    trips: u64,
    peak_rss_mb: Option<f64>,
}

impl Phase {
    /// Times `migrate(from → to)` of `selection`, counting the backend's round trips.
    async fn run(
        &mut self,
        stores: &Stores,
        from: &Endpoint,
        to: &Endpoint,
        selection: &Selection,
    ) -> BenchResult<MigrationReport> {
        let mark = stores.round_trips();
        let started = Instant::now();
        let report = migrate(from, to, selection, &NoProgress).await?;
        self.samples.push(started.elapsed());
        self.trips += stores.round_trips().saturating_sub(mark);
        self.peak_rss_mb = peak_rss_mb();
        Ok(report)
    }

    /// The phase's line.
    fn report(self, ctx: &Ctx<'_>, name: &str, archived: u64) -> Report {
        let busy: Duration = self.samples.iter().sum();
        let stats = Stats::from_samples(self.samples, busy);
        let messages = stats.ops * ctx.n;
        let per = |x: f64| {
            if stats.ops == 0 {
                0.0
            } else {
                x / stats.ops as f64
            }
        };
        let mut report =
            Report::with_units(ctx.workload, ctx.backend, ctx.n, &stats, messages as f64)
                .field("phase", name)
                .field("rate_unit", "messages")
                .field("migrations", stats.ops)
                .field("total_s", round(busy.as_secs_f64(), 3))
                .field("migration_s", round(per(busy.as_secs_f64()), 3))
                .field("round_trips_per_op", round(per(self.trips as f64), 2))
                .field(
                    "round_trips_per_message",
                    round(per(self.trips as f64) / ctx.n as f64, 4),
                )
                .field("threads", THREADS.min(ctx.n))
                .field("archived", archived)
                .field("sessions", SESSIONS.min(THREADS))
                .field("window_cache", false);
        if let Some(mb) = self.peak_rss_mb {
            report = report.field("phase_peak_rss_mb", round(mb, 1));
        }
        report
    }
}

/// `migrate`: after an untimed warm-up (a tenant of up to 1,000 messages in and out), per op
/// seed a fresh tenant of N messages in an in-memory source (untimed), time
/// `migrate(in-memory → backend)` (phase `in`) and `migrate(backend → fresh in-memory)`
/// (phase `out`), each with its verification, then forget the tenant in the backend
/// (untimed). The backend's history store is used directly, never through the window cache.
/// Two lines; `ops_per_s` is messages per second.
pub(super) async fn migrate_workload(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let migrations = ctx.ops.unwrap_or(1).max(1);
    let backend = Endpoint::new(
        Arc::clone(&stores.direct_history),
        Arc::clone(&stores.sessions),
    );
    let mut phase_in = Phase::default();
    let mut phase_out = Phase::default();
    // Warm-up, untimed: a small tenant in and out (connections, statements, first-use costs).
    let warm_n = ctx.n.min(WARMUP_MESSAGES);
    let seeded = seed(ctx, warm_n).await?;
    let selection = Selection::new(Tenants::one(seeded.tenant.clone()));
    let report = migrate(&seeded.source, &backend, &selection, &NoProgress).await?;
    check("in (warm-up)", &report, warm_n, &seeded)?;
    let report = migrate(&backend, &in_memory_endpoint(), &selection, &NoProgress).await?;
    check("out (warm-up)", &report, warm_n, &seeded)?;
    forget(&backend, &seeded.tenant, warm_n as u64).await?;

    let mut archived = 0;
    for _ in 0..migrations {
        let seeded = seed(ctx, ctx.n).await?;
        archived = seeded.archived;
        let selection = Selection::new(Tenants::one(seeded.tenant.clone()));

        let report = phase_in
            .run(stores, &seeded.source, &backend, &selection)
            .await?;
        check("in", &report, ctx.n, &seeded)?;

        let out = in_memory_endpoint();
        let report = phase_out.run(stores, &backend, &out, &selection).await?;
        check("out", &report, ctx.n, &seeded)?;
        drop(out);

        forget(&backend, &seeded.tenant, ctx.n as u64).await?;
    }
    Ok(vec![
        phase_in.report(ctx, "in", archived),
        phase_out.report(ctx, "out", archived),
    ])
}

/// Forgets `tenant` in the backend (cleanup, untimed) and checks that it deleted the `n`
/// messages.
async fn forget(backend: &Endpoint, tenant: &TenantId, n: u64) -> BenchResult<()> {
    let receipt = Forgetter::new()
        .history(Arc::clone(&backend.history))
        .sessions(Arc::clone(&backend.sessions))
        .forget(&ScopeFilter::tenant(tenant.clone()), ForgetMode::Delete)
        .await?;
    let deleted: Vec<u64> = receipt.stores.iter().map(|store| store.items).collect();
    if deleted != [n, SESSIONS as u64] {
        return Err(format!(
            "forgetting the tenant should delete {n} messages and {SESSIONS} sessions; it \
             deleted {}",
            receipt
                .stores
                .iter()
                .map(|store| format!("{} {}", store.items, store.unit))
                .collect::<Vec<_>>()
                .join(" and ")
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Case;
    use crate::data::test_messages;
    use crate::workloads::{Workload, run};

    #[test]
    fn threads_share_n_and_its_remainder() {
        assert_eq!(
            (0..THREADS).map(|t| thread_len(1_005, t)).sum::<usize>(),
            1_005
        );
        assert_eq!(thread_len(1_005, 0), 101);
        assert_eq!(thread_len(1_005, 9), 100);
        assert_eq!(thread_len(3, 2), 1);
        assert_eq!(thread_len(3, 3), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn migrate_cycles_the_data_set_past_its_end() {
        let data = test_messages(7, |i| format!("message {i} of a tiny data set"));
        let case = Case {
            workload: Workload::Migrate,
            backend: "in-memory".to_owned(),
            n: 2_000,
        };
        let reports = run(&case, &data, None).await.unwrap();
        assert_eq!(reports.len(), 2);
        for (report, phase) in reports.iter().zip(["in", "out"]) {
            let json = serde_json::to_value(report).unwrap();
            assert_eq!(json["phase"], phase);
            assert_eq!(json["n"], 2_000);
            assert_eq!(json["migrations"], 1);
            assert_eq!(json["rate_unit"], "messages");
            // 3 % of each thread of 200.
            assert_eq!(json["archived"], 60);
            assert_eq!(json["window_cache"], false);
            assert!(json["ops_per_s"].as_f64().unwrap() > 0.0, "{json}");
            assert!(json["total_s"].as_f64().unwrap() > 0.0, "{json}");
        }
    }
}
