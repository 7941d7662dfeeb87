//! The load run (`--load`, behind `cargo xtask load`): on each backend, the memory server
//! started in-process on 127.0.0.1 ([`crate::server`]) under memory-testkit's
//! [`http_load`]: `--clients` concurrent clients on one conversation thread (three quarters
//! appenders making `--appends` appends of `--batch` messages each, every 7th sent twice as a
//! retry; the rest readers reading windows and the memory context meanwhile), then the
//! verification: nothing lost, nothing stored twice, one order.
//!
//! Three JSON lines per backend, `workload` `load_append`, `load_window` and `load_context`:
//! `ops_per_s` is requests per second of the append phase's wall-clock time (the clients run
//! concurrently), `p50_us` / `p99_us` the requests' latencies. Every line carries the plan and
//! `verified`; the run fails when a verification fails (its problems go to stderr).

use std::io::Write;
use std::time::Duration;

use memory_testkit::http_load::{self, LoadPlan, LoadRun, LoadTarget};

use crate::BenchResult;
use crate::backends;
use crate::harness::{Report, Stats, round};
use crate::server;

/// What one load run does on each backend.
#[derive(Debug, Clone)]
pub(crate) struct LoadOptions {
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// Appends per appender.
    pub(crate) appends: usize,
    /// Messages per append.
    pub(crate) batch: usize,
}

/// How many problems of a failed verification are printed.
const SHOWN_PROBLEMS: usize = 20;

/// Runs the load on each of `backends` (every available one when empty), printing its lines.
///
/// # Errors
/// When a backend cannot be opened or a verification fails.
pub(crate) async fn run(backends_named: &[String], options: &LoadOptions) -> BenchResult<()> {
    let selected = backends::select(backends_named)?;
    let mut failed = Vec::new();
    for backend in selected {
        eprintln!(
            "load on {}: {} clients, {} appends of {} each",
            backend.name, options.clients, options.appends, options.batch
        );
        let stores = (backend.connect)()
            .await
            .map_err(|e| format!("cannot open the {} backend: {e}", backend.name))?;
        let running = server::start(&stores).await?;
        let mut plan = LoadPlan::new(
            options.clients,
            options.appends,
            format!("load-{}", uuid::Uuid::new_v4().simple()),
        );
        plan.batch = options.batch.max(1);
        let target = LoadTarget {
            base: running.base.clone(),
            token: None,
            client: running.client.clone(),
        };
        let run = http_load::run(&target, &plan).await;
        let verified = run.verify();
        let mut out = std::io::stdout().lock();
        for report in reports(backend.name, &run, verified.is_ok()) {
            let report = report.with_peak_rss();
            eprintln!("  {}", report.summary());
            writeln!(out, "{}", serde_json::to_string(&report)?)?;
        }
        out.flush()?;
        drop(out);
        if let Err(problems) = verified {
            eprintln!(
                "  VERIFICATION FAILED on {}: {} problems",
                backend.name,
                problems.len()
            );
            for problem in problems.iter().take(SHOWN_PROBLEMS) {
                eprintln!("    {problem}");
            }
            failed.push(backend.name);
        }
        // The thread is left to the backend's cleanup: its scope is one of its own.
        let _ = clear(&running).await;
        running.stop().await?;
        stores.close().await;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("the load's verification failed on {}", failed.join(", ")).into())
    }
}

/// Deletes the load's threads (every thread of the bench tenant this run wrote).
async fn clear(running: &server::RunningServer) -> BenchResult<()> {
    let filter = memory_core::ScopeFilter::tenant(running.principal.tenant.clone());
    let threads = running
        .ops
        .stores()
        .history
        .list_threads(&filter, memory_core::PageRequest::first(1_000))
        .await?;
    for scope in threads.items {
        if scope.session_id().as_str().starts_with("load-") {
            running.ops.stores().history.clear(&scope).await?;
        }
    }
    Ok(())
}

/// The three lines of one backend's run.
fn reports(backend: &str, run: &LoadRun, verified: bool) -> Vec<Report> {
    let plan = &run.plan;
    let phase = run.append_phase;
    let line = |workload: &'static str, samples: &[Duration]| {
        let stats = Stats::from_samples(samples.to_vec(), phase);
        Report::new(workload, backend, plan.messages(), &stats)
            .field("clients", plan.appenders + plan.readers)
            .field("appenders", plan.appenders)
            .field("readers", plan.readers)
            .field("appends", plan.appends)
            .field("batch", plan.batch)
            .field("retry_every", plan.retry_every)
            .field("append_phase_s", round(phase.as_secs_f64(), 3))
            .field("verified", verified)
    };
    let messages_per_s = if phase.is_zero() {
        0.0
    } else {
        round(plan.messages() as f64 / phase.as_secs_f64(), 1)
    };
    vec![
        line("load_append", &run.appends.samples)
            .field("messages_per_s", messages_per_s)
            .field("resent_after_failure", run.resent_after_failure),
        line("load_window", &run.windows.samples),
        line("load_context", &run.contexts.samples)
            .field("context_token_limit", plan.context_token_limit),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_load_verifies_on_the_in_memory_stores() {
        let options = LoadOptions {
            clients: 4,
            appends: 8,
            batch: 2,
        };
        run(&["in-memory".to_owned()], &options).await.unwrap();
    }

    #[test]
    fn each_run_has_three_lines() {
        let mut run = LoadRun::new(LoadPlan::new(4, 2, "s"));
        run.append_phase = Duration::from_secs(2);
        run.appends.samples = vec![Duration::from_millis(1); 6];
        let lines = reports("in-memory", &run, true);
        let names: Vec<&str> = lines.iter().map(|r| r.workload).collect();
        assert_eq!(names, ["load_append", "load_window", "load_context"]);
        // Requests per second of the append phase's wall-clock time: 6 in 2 s.
        assert_eq!(lines[0].ops_per_s, 3.0);
        assert_eq!(lines[0].extra["messages_per_s"], 3.0);
    }
}
