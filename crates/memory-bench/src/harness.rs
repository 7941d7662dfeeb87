//! The measuring harness: what one case is ([`Ctx`]), per-operation timings, percentiles,
//! peak RSS and the JSON line.

use std::time::Duration;

use memory_core::Scope;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::BenchResult;
use crate::data::DataMessage;

/// Everything one case needs.
pub(crate) struct Ctx<'a> {
    pub(crate) workload: &'static str,
    pub(crate) backend: &'a str,
    pub(crate) n: usize,
    pub(crate) data: &'a [DataMessage],
    pub(crate) ops: Option<usize>,
}

impl Ctx<'_> {
    /// The first `n` messages of the data set.
    pub(crate) fn thread(&self) -> &[DataMessage] {
        &self.data[..self.n]
    }

    /// The `k`-th message after the first `n` (cycling through the data set): the new messages
    /// the timed operations append.
    pub(crate) fn later(&self, k: usize) -> &DataMessage {
        &self.data[(self.n + k) % self.data.len()]
    }

    /// A report line of this case.
    pub(crate) fn report(&self, stats: &Stats) -> Report {
        Report::new(self.workload, self.backend, self.n, stats)
    }
}

/// A fresh random scope, so a case never meets data of another run.
pub(crate) fn fresh_scope() -> BenchResult<Scope> {
    Ok(Scope::session(format!("bench-{}", uuid::Uuid::new_v4()))?)
}

/// Collects the duration of each measured operation.
///
/// Time each operation with [`Instant`](std::time::Instant) and [`push`](Recorder::push) its
/// duration; [`finish`](Recorder::finish) computes the statistics. Throughput is measured on
/// the sum of the operations' times, so untimed setup between operations (a fresh thread for
/// the next round) never counts.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    samples: Vec<Duration>,
}

impl Recorder {
    /// A recorder for about `ops` operations.
    pub(crate) fn new(ops: usize) -> Self {
        Self {
            samples: Vec::with_capacity(ops),
        }
    }

    /// Records one operation's duration.
    pub(crate) fn push(&mut self, elapsed: Duration) {
        self.samples.push(elapsed);
    }

    /// Runs `op` as one timed operation and returns what it returned (dropped, if the caller
    /// drops it, after the clock stopped).
    pub(crate) fn time<T>(&mut self, op: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let output = op();
        self.push(started.elapsed());
        output
    }

    /// Computes the statistics.
    pub(crate) fn finish(self) -> Stats {
        let total = self.samples.iter().sum();
        Stats::from_samples(self.samples, total)
    }
}

/// Statistics of one measured loop.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stats {
    /// Operations measured.
    pub(crate) ops: usize,
    /// Total time of the measured operations.
    pub(crate) total: Duration,
    /// Median operation time.
    pub(crate) p50: Duration,
    /// 99th percentile operation time.
    pub(crate) p99: Duration,
}

impl Stats {
    /// Statistics of `samples`, which took `total` time in all.
    pub(crate) fn from_samples(mut samples: Vec<Duration>, total: Duration) -> Self {
        samples.sort_unstable();
        Self {
            ops: samples.len(),
            total,
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
        }
    }

    /// `units` per second of total time (operations per second when `units` is the op count).
    pub(crate) fn per_second(&self, units: f64) -> f64 {
        let secs = self.total.as_secs_f64();
        if secs > 0.0 { units / secs } else { 0.0 }
    }
}

/// The nearest-rank percentile `p` (0 to 100) of sorted `samples`; zero when there are none.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`) in MiB, or `None`
/// where it cannot be read (not Linux).
pub(crate) fn peak_rss_mb() -> Option<f64> {
    status_mb("VmHWM:")
}

/// The process's current resident set size (`VmRSS` of `/proc/self/status`) in MiB, or `None`
/// where it cannot be read (not Linux).
pub(crate) fn rss_mb() -> Option<f64> {
    status_mb("VmRSS:")
}

/// The resident set when [`record_base_rss`] first ran (at the start of `main`, before the data
/// set is read or a runtime built): the binary and its libraries alone. Where nothing recorded
/// it (the unit tests), the resident set now. `None` off Linux.
pub(crate) fn base_rss_mb() -> Option<f64> {
    *BASE_RSS_MB.get_or_init(rss_mb)
}

/// Records [`base_rss_mb`]; later calls keep the first figure.
pub(crate) fn record_base_rss() {
    BASE_RSS_MB.get_or_init(rss_mb);
}

static BASE_RSS_MB: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();

/// A `kB` line of `/proc/self/status` (`VmHWM:`, `VmRSS:`) in MiB.
fn status_mb(key: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line
        .trim_start_matches(key)
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// `x` rounded to `digits` decimals (keeps the JSON lines readable).
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// The average of `total` over `count` items, rounded to 0.1.
pub(crate) fn average(total: usize, count: usize) -> f64 {
    if count == 0 {
        0.0
    } else {
        round(total as f64 / count as f64, 1)
    }
}

/// Microseconds of `d`, rounded to 0.01 µs.
pub(crate) fn micros(d: Duration) -> f64 {
    round(d.as_secs_f64() * 1e6, 2)
}

/// One JSON line of output.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The workload.
    pub(crate) workload: &'static str,
    /// The backend, or `"none"` for store-free workloads.
    pub(crate) backend: String,
    /// The thread size: the first `n` messages of the data set.
    pub(crate) n: usize,
    /// Operations measured.
    pub(crate) ops: usize,
    /// Operations (or, where the workload says so, messages) per second of measured time.
    pub(crate) ops_per_s: f64,
    /// Median operation latency, in microseconds.
    pub(crate) p50_us: f64,
    /// 99th percentile operation latency, in microseconds.
    pub(crate) p99_us: f64,
    /// Peak RSS of the case's process when the line was written, in MiB.
    pub(crate) peak_rss_mb: Option<f64>,
    /// Workload-specific fields ("phase", "encoding", "tokens_per_s", ...).
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

impl Report {
    /// A report of `stats` where one operation is one unit of throughput.
    pub(crate) fn new(workload: &'static str, backend: &str, n: usize, stats: &Stats) -> Self {
        Self::with_units(workload, backend, n, stats, stats.ops as f64)
    }

    /// A report of `stats` whose throughput counts `units` (e.g. messages) rather than
    /// operations.
    pub(crate) fn with_units(
        workload: &'static str,
        backend: &str,
        n: usize,
        stats: &Stats,
        units: f64,
    ) -> Self {
        Self {
            workload,
            backend: backend.to_owned(),
            n,
            ops: stats.ops,
            ops_per_s: round(stats.per_second(units), 1),
            p50_us: micros(stats.p50),
            p99_us: micros(stats.p99),
            peak_rss_mb: None,
            extra: Map::new(),
        }
    }

    /// Adds a workload-specific field.
    pub(crate) fn field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    /// Sets the peak RSS to the process's peak now.
    pub(crate) fn with_peak_rss(mut self) -> Self {
        self.peak_rss_mb = peak_rss_mb().map(|mb| round(mb, 1));
        self
    }

    /// A one-line human summary for stderr.
    pub(crate) fn summary(&self) -> String {
        let mut label = String::new();
        for key in ["phase", "encoding", "op"] {
            if let Some(Value::String(v)) = self.extra.get(key) {
                label.push_str(&format!(" {key}={v}"));
            }
        }
        let rss = self
            .peak_rss_mb
            .map_or_else(|| "?".to_owned(), |mb| format!("{mb:.1}"));
        format!(
            "{} {} n={}{label}: {:.0}/s, p50 {:.2} us, p99 {:.2} us, peak RSS {rss} MiB",
            self.workload, self.backend, self.n, self.ops_per_s, self.p50_us, self.p99_us
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<Duration> = (1..=100).map(us).collect();
        assert_eq!(percentile(&sorted, 50.0), us(50));
        assert_eq!(percentile(&sorted, 99.0), us(99));
        assert_eq!(percentile(&sorted, 100.0), us(100));
        assert_eq!(percentile(&[us(7)], 99.0), us(7));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn stats_sort_and_rate() {
        let stats = Stats::from_samples(vec![us(30), us(10), us(20)], Duration::from_secs(2));
        assert_eq!(stats.ops, 3);
        assert_eq!(stats.p50, us(20));
        assert_eq!(stats.p99, us(30));
        assert!((stats.per_second(3.0) - 1.5).abs() < 1e-9);
    }

    #[test]
    fn reports_serialize_flat_with_extras() {
        let stats = Stats::from_samples(vec![us(5)], Duration::from_millis(1));
        let report = Report::new("append_one", "in-memory", 100, &stats)
            .field("phase", "serialize")
            .with_peak_rss();
        let json: Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["workload"], "append_one");
        assert_eq!(json["n"], 100);
        assert_eq!(json["ops_per_s"], 1000.0);
        assert_eq!(json["p50_us"], 5.0);
        assert_eq!(json["phase"], "serialize");
        if cfg!(target_os = "linux") {
            assert!(json["peak_rss_mb"].as_f64().unwrap() > 0.0);
        }
        assert!(report.summary().contains("phase=serialize"));
    }
}
