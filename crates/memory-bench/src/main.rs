//! `memory-bench`: the benchmark runner behind `cargo xtask bench`.
//!
//! It measures agent-memory's hot paths (an agent turn, an append, a budgeted window read, a
//! bulk import, a session round trip, token counting) on the first N messages of the shared chat
//! data set, for every registered backend, and prints one JSON line per figure on stdout
//! (`{"workload", "backend", "n", "ops_per_s", "p50_us", "p99_us", "peak_rss_mb", ...}`).
//! Human progress goes to stderr only.
//!
//! Every `(workload, backend, n)` case runs in its own child process (the binary re-executes
//! itself with `--case workload:backend:n`), so each line's peak RSS is that case's alone. See
//! the crate's README for the workloads and the fields of each line.
// A measuring tool run by `cargo xtask bench`, not shipped code: its arithmetic and indexing are on data it generates and sizes
// itself, never on stored or network data, and a panic is how it reports a fault.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod backends;
mod data;
mod harness;
mod load;
mod quality;
mod quality_server;
mod remembered;
mod server;
mod text_index;
mod vectors;
mod workloads;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use clap::Parser;

use crate::backends::Backend;
use crate::workloads::{BackendKind, Workload};

/// The error type of the runner: anything displayable, from any layer.
pub(crate) type BenchError = Box<dyn std::error::Error + Send + Sync>;
/// The result type of the runner.
pub(crate) type BenchResult<T> = Result<T, BenchError>;

/// The sizes of thread measured when `--n` is not given (the vector workloads have their own:
/// [`vectors::VECTOR_NS`], [`vectors::EMBED_NS`]).
pub(crate) const DEFAULT_NS: [usize; 3] = [100, 1_000, 10_000];

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "memory-bench",
    about = "Benchmarks agent-memory's hot paths; prints one JSON line per figure on stdout.",
    after_help = "Each (workload, backend, n) case runs in a child process of its own, so that \
                  peak_rss_mb is the case's own peak."
)]
struct Cli {
    /// The chat data set: JSON lines `{"i", "role", "text"}` (shared/bench/chat-10000.jsonl).
    /// Not needed by `--load`.
    #[arg(long, value_name = "PATH", required_unless_present = "load")]
    data: Option<PathBuf>,

    /// A workload to run (repeatable or comma-separated; default: all).
    #[arg(
        long = "workload",
        value_name = "NAME",
        value_enum,
        value_delimiter = ','
    )]
    workloads: Vec<Workload>,

    /// A backend to run (repeatable or comma-separated; default: every available backend). The
    /// vector workloads take the vector backends (exact, qdrant-edge), embed takes candle.
    #[arg(long = "backend", value_name = "NAME", value_delimiter = ',')]
    backends: Vec<String>,

    /// A thread size: the first N messages of the data set, or for vector_upsert and
    /// vector_search a number of points (repeatable or comma-separated; default: 100, 1000,
    /// 10000; for the vector workloads 10000, 100000; for embed 1000; for migrate 100000, which
    /// cycles the data set's texts and so may exceed it).
    #[arg(long = "n", value_name = "N", value_delimiter = ',')]
    ns: Vec<usize>,

    /// Operations measured per case (default: per workload, see the README).
    #[arg(long, value_name = "K")]
    ops: Option<usize>,

    /// Runs the history stores without the window cache (memory-layers' `WindowCache`, on by
    /// default as `agent_memory::open` gives it), to measure the path without it. Every line
    /// says which it measured in its `window_cache` field.
    #[arg(long)]
    no_cache: bool,

    /// Lists the workloads and backends and exits.
    #[arg(long)]
    list: bool,

    /// Runs the load (`cargo xtask load`) instead of the workloads: on each backend, the memory
    /// server in-process on 127.0.0.1 under `--clients` concurrent clients on one thread, then
    /// the verification (nothing lost or duplicated, one order); fails if it fails.
    #[arg(long)]
    load: bool,

    /// With `--load`: concurrent clients (three quarters append, the rest read).
    #[arg(long, value_name = "N", default_value_t = 16, requires = "load")]
    clients: usize,

    /// With `--load`: appends per appending client.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "load")]
    appends: usize,

    /// With `--load`: messages per append.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "load")]
    batch: usize,

    /// Runs one case in this process: `workload:backend:n` (used by the parent process).
    #[arg(long, value_name = "WORKLOAD:BACKEND:N", hide = true)]
    case: Option<String>,
}

/// One `(workload, backend, n)` case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Case {
    /// What is measured.
    pub(crate) workload: Workload,
    /// The backend's registry name, or [`backends::NO_BACKEND`] for store-free workloads.
    pub(crate) backend: String,
    /// The thread size.
    pub(crate) n: usize,
}

impl Case {
    /// Parses `workload:backend:n`.
    fn parse(spec: &str) -> BenchResult<Self> {
        let mut parts = spec.splitn(3, ':');
        let (Some(workload), Some(backend), Some(n)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("a case is workload:backend:n, not {spec:?}").into());
        };
        let workload = Workload::from_name(workload)?;
        let n = n
            .parse()
            .map_err(|e| format!("bad n {n:?} in case {spec:?}: {e}"))?;
        Ok(Self {
            workload,
            backend: backend.to_owned(),
            n,
        })
    }

    /// The `workload:backend:n` form [`parse`](Self::parse) reads.
    fn spec(&self) -> String {
        format!("{}:{}:{}", self.workload.name(), self.backend, self.n)
    }
}

fn main() -> ExitCode {
    harness::record_base_rss();
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("quality") {
        return match quality::run(args.collect()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("memory-bench quality: error: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let result = if cli.list {
        list()
    } else if cli.load {
        run_load(&cli)
    } else if let Some(spec) = &cli.case {
        run_child(&cli, spec)
    } else {
        run_parent(&cli)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memory-bench: error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The data set's path (`--data`).
fn data_path(cli: &Cli) -> BenchResult<&Path> {
    cli.data
        .as_deref()
        .ok_or_else(|| "--data PATH is needed to run the workloads".into())
}

/// Runs the load on the selected backends (`--load`).
fn run_load(cli: &Cli) -> BenchResult<()> {
    if cli.clients < 2 || cli.appends == 0 || cli.batch == 0 {
        return Err(
            "--load needs at least 2 --clients, 1 --appends and a --batch of at least 1".into(),
        );
    }
    let options = load::LoadOptions {
        clients: cli.clients,
        appends: cli.appends,
        batch: cli.batch,
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(load::run(&cli.backends, &options))
}

/// Prints the workloads and backends (`--list`).
fn list() -> BenchResult<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "workloads:")?;
    for workload in Workload::ALL {
        writeln!(out, "  {:<18} {}", workload.name(), workload.description())?;
    }
    writeln!(out, "backends (chat stores):")?;
    for backend in backends::BACKENDS {
        let status = match (backend.available)() {
            Ok(()) => "available".to_owned(),
            Err(why) => format!("not available: {why}"),
        };
        writeln!(
            out,
            "  {:<18} {} ({status})",
            backend.name, backend.description
        )?;
    }
    writeln!(out, "backends (vector_upsert, vector_search):")?;
    for (name, description) in vectors::VECTOR_BACKENDS {
        writeln!(out, "  {name:<18} {description} (available)")?;
    }
    writeln!(out, "backends (text_index):")?;
    for (name, description) in text_index::TEXT_BACKENDS {
        writeln!(out, "  {name:<18} {description} (available)")?;
    }
    writeln!(out, "backends (embed):")?;
    let status = match vectors::embed_available() {
        Ok(()) => "available".to_owned(),
        Err(why) => format!("not available: {why}"),
    };
    writeln!(
        out,
        "  {:<18} BertEmbedder (memory-vector) on the CPU, model in ${} ({status})",
        vectors::EMBED_BACKEND,
        memory_vector::MODEL_DIR_ENV
    )?;
    Ok(())
}

/// Whether `name` is a backend of the vector workloads, of `embed` or of `text_index`.
fn is_vector_or_embed_backend(name: &str) -> bool {
    name == vectors::EMBED_BACKEND
        || vectors::VECTOR_BACKENDS.iter().any(|(n, _)| *n == name)
        || text_index::TEXT_BACKENDS.iter().any(|(n, _)| *n == name)
}

/// The cases the arguments select, in output order: workload, then backend, then n.
fn plan(cli: &Cli) -> BenchResult<Vec<Case>> {
    let workloads: Vec<Workload> = if cli.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        cli.workloads.clone()
    };
    let wants = |kind: BackendKind| workloads.iter().any(|w| w.backend_kind() == kind);
    let selected: Vec<&Backend> = if cli.backends.is_empty() {
        if wants(BackendKind::Stores) {
            backends::available()
        } else {
            Vec::new()
        }
    } else {
        cli.backends
            .iter()
            .filter(|name| !is_vector_or_embed_backend(name))
            .map(|name| backends::find(name))
            .collect::<BenchResult<_>>()?
    };
    let named = |name: &str| cli.backends.is_empty() || cli.backends.iter().any(|b| b == name);
    if let Some(&zero) = cli.ns.iter().find(|&&n| n == 0) {
        return Err(format!("--n must be at least 1, not {zero}").into());
    }
    let mut cases = Vec::new();
    for &workload in &workloads {
        let names: Vec<&str> = match workload.backend_kind() {
            BackendKind::Stores => selected.iter().map(|b| b.name).collect(),
            BackendKind::Vector => vectors::VECTOR_BACKENDS
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| named(name))
                .collect(),
            BackendKind::Embedder => match vectors::embed_available() {
                _ if !named(vectors::EMBED_BACKEND) => Vec::new(),
                Ok(()) => vec![vectors::EMBED_BACKEND],
                Err(why) => {
                    eprintln!("note: workload embed left out ({why})");
                    Vec::new()
                }
            },
            BackendKind::Text => text_index::TEXT_BACKENDS
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| named(name))
                .collect(),
            BackendKind::None => vec![backends::NO_BACKEND],
        };
        let ns: &[usize] = if cli.ns.is_empty() {
            workload.default_ns()
        } else {
            &cli.ns
        };
        for name in names {
            for &n in ns {
                cases.push(Case {
                    workload,
                    backend: name.to_owned(),
                    n,
                });
            }
        }
    }
    Ok(cases)
}

/// Runs every selected case in a child process and forwards the children's JSON lines.
fn run_parent(cli: &Cli) -> BenchResult<()> {
    // Fail on a bad data set here, once, rather than in every child.
    let data_path = data_path(cli)?;
    let data = data::load(data_path)?;
    let cases = plan(cli)?;
    if let Some(largest) = cases
        .iter()
        .filter(|c| c.workload.n_is_messages())
        .map(|c| c.n)
        .max()
        && largest > data.len()
    {
        return Err(format!(
            "--n {largest} is larger than the data set ({} messages in {})",
            data.len(),
            data_path.display()
        )
        .into());
    }
    drop(data);
    let exe = std::env::current_exe()?;
    let total = cases.len();
    let mut failed = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        eprintln!(
            "[{}/{total}] {} on {} with n = {}",
            index + 1,
            case.workload.name(),
            case.backend,
            case.n
        );
        if let Err(error) = run_case_process(&exe, cli, case) {
            eprintln!("  FAILED: {error}");
            failed.push(case.spec());
        }
    }
    if failed.is_empty() {
        eprintln!("done: {total} cases");
        Ok(())
    } else {
        Err(format!(
            "{} of {total} cases failed: {}",
            failed.len(),
            failed.join(", ")
        )
        .into())
    }
}

/// Runs one case in a child process, copying its stdout lines to ours as they come.
fn run_case_process(exe: &Path, cli: &Cli, case: &Case) -> BenchResult<()> {
    let mut command = Command::new(exe);
    command
        .arg("--data")
        .arg(data_path(cli)?)
        .arg("--case")
        .arg(case.spec())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(ops) = cli.ops {
        command.arg("--ops").arg(ops.to_string());
    }
    if cli.no_cache {
        command.arg("--no-cache");
    }
    let mut child = command.spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or("the child process has no stdout pipe")?;
    let mut out = std::io::stdout().lock();
    let mut lines = 0usize;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        writeln!(out, "{line}")?;
        out.flush()?;
        lines += 1;
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("the child process exited with {status}").into());
    }
    if lines == 0 {
        return Err("the child process printed no result".into());
    }
    Ok(())
}

/// Runs the one case of `--case` in this process and prints its JSON lines.
fn run_child(cli: &Cli, spec: &str) -> BenchResult<()> {
    let case = Case::parse(spec)?;
    let data = data::load(data_path(cli)?)?;
    if case.workload.n_is_messages() && case.n > data.len() {
        return Err(format!(
            "n = {} is larger than the data set ({} messages)",
            case.n,
            data.len()
        )
        .into());
    }
    backends::set_window_cache(!cli.no_cache);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let reports = runtime.block_on(workloads::run(&case, &data, cli.ops))?;
    let uses_stores = case.workload.backend_kind() == BackendKind::Stores;
    let reports: Vec<_> = reports
        .into_iter()
        .map(|report| {
            // A workload that bypasses the cache (`migrate`) says so itself.
            if uses_stores && !report.extra.contains_key("window_cache") {
                report.field("window_cache", backends::window_cache())
            } else {
                report
            }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    for report in &reports {
        eprintln!("  {}", report.summary());
        writeln!(out, "{}", serde_json::to_string(report)?)?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_round_trip_through_their_spec() {
        let case = Case {
            workload: Workload::AgentTurn,
            backend: "in-memory".to_owned(),
            n: 1000,
        };
        assert_eq!(case.spec(), "agent_turn:in-memory:1000");
        assert_eq!(Case::parse(&case.spec()).unwrap(), case);
        assert!(Case::parse("agent_turn:in-memory").is_err());
        assert!(Case::parse("nope:in-memory:1").is_err());
        assert!(Case::parse("agent_turn:in-memory:x").is_err());
    }

    #[test]
    fn the_default_plan_covers_every_workload_and_size() {
        let cli = Cli::parse_from(["memory-bench", "--data", "x.jsonl"]);
        let cases = plan(&cli).unwrap();
        let available = backends::BACKENDS
            .iter()
            .filter(|b| (b.available)().is_ok())
            .count();
        let expected: usize = Workload::ALL
            .iter()
            .map(|w| {
                let backends = match w.backend_kind() {
                    BackendKind::Stores => available,
                    BackendKind::Vector => vectors::VECTOR_BACKENDS.len(),
                    BackendKind::Embedder => usize::from(vectors::embed_available().is_ok()),
                    BackendKind::Text => text_index::TEXT_BACKENDS.len(),
                    BackendKind::None => 1,
                };
                backends * w.default_ns().len()
            })
            .sum();
        assert_eq!(cases.len(), expected);
        assert!(cases.iter().any(|c| c.workload == Workload::VectorSearch
            && c.backend == "qdrant-edge"
            && c.n == 100_000));
        assert!(
            cases
                .iter()
                .any(|c| c.workload == Workload::CountTokens && c.backend == backends::NO_BACKEND)
        );
    }

    #[test]
    fn arguments_repeat_or_split_on_commas() {
        let cli = Cli::parse_from([
            "memory-bench",
            "--data",
            "x",
            "--workload",
            "agent_turn,read_window",
            "--workload",
            "count_tokens",
            "--n",
            "10,20",
            "--backend",
            "in-memory",
        ]);
        assert_eq!(
            cli.workloads,
            vec![
                Workload::AgentTurn,
                Workload::ReadWindow,
                Workload::CountTokens
            ]
        );
        assert_eq!(cli.ns, vec![10, 20]);
        assert!(!cli.no_cache);
        assert!(Cli::parse_from(["memory-bench", "--data", "x", "--no-cache"]).no_cache);
        assert_eq!(plan(&cli).unwrap().len(), 6);
        let unknown = Cli::parse_from(["memory-bench", "--data", "x", "--backend", "nope"]);
        assert!(plan(&unknown).is_err());
        let vectors = Cli::parse_from([
            "memory-bench",
            "--data",
            "x",
            "--workload",
            "vector_search,agent_turn",
            "--backend",
            "exact,in-memory",
        ]);
        let specs: Vec<String> = plan(&vectors).unwrap().iter().map(Case::spec).collect();
        assert_eq!(
            specs,
            [
                "vector_search:exact:10000",
                "vector_search:exact:100000",
                "agent_turn:in-memory:100",
                "agent_turn:in-memory:1000",
                "agent_turn:in-memory:10000",
            ]
        );
    }
}
