//! `cargo xtask test`: the services, then every test of the workspace, with a summary.
//!
//! 1. The services are checked (and started where down).
//! 2. `cargo test --workspace --all-features --no-run` compiles every test binary while the
//!    tools the tests read from the environment are fetched beside it (see [`fetch_tools`]).
//! 3. The test binaries and the doctests (`cargo test --doc`) run as jobs of
//!    [`test_pool`], [`DEFAULT_JOBS`] at a time (`AGENT_MEMORY_TEST_JOBS` to change it), the
//!    longest first: by the durations the previous run on this machine recorded in the tool
//!    cache, else by how many tests each binary lists.
//! 4. `N passed, M failed` summed over every `test result:` line, the slowest jobs, and the
//!    failed ones by name.
//!
//! cargo-nextest would run the binaries side by side too, but installing it on a fresh machine
//! costs CI more minutes than this module's few lines.

use std::{
    collections::HashMap,
    env, fs,
    io::{self, IsTerminal},
    path::PathBuf,
    process::Command,
    thread,
};

use crate::{
    cache, fetch_mem0, fetch_model, fetch_pytools, services,
    test_binaries::{self, TestBinary},
    test_pool::{self, Finished, Job, Totals},
    util::{self, Result},
};

/// The environment variable the local-model tests read the model directory from.
const MODEL_DIR_ENV: &str = "AGENT_MEMORY_MODEL_DIR";

/// The environment variable that sets how many test jobs run at a time.
const JOBS_ENV: &str = "AGENT_MEMORY_TEST_JOBS";

/// Test jobs at a time by default: each binary runs two tests at a time (libtest's default on
/// two cores), and most of them wait on a database server.
const DEFAULT_JOBS: usize = 3;

/// The file, in the tool cache (`~/.cache/agent-memory`), where a run records how long each
/// job took.
const DURATIONS_FILE: &str = "xtask-test-durations.tsv";

/// The name of the doctest job.
const DOCTESTS: &str = "doctests";

/// The tools the tests read from the environment: `(variable, value)` pairs.
type ToolEnv = Vec<(&'static str, PathBuf)>;

/// A tool's `ensure`: fetches it into the cache (or the given directory) once, returns its path.
type Ensure = fn(Option<PathBuf>) -> Result<PathBuf>;

/// Runs `cargo xtask test`. `extra` are more `cargo test` arguments: those before a `--` go to
/// the build and the doctests (e.g. `-p memory-sql`, which tests that package alone instead of
/// the workspace), those after it to every test binary (e.g. a test name filter).
pub(crate) fn run(extra: &[String]) -> Result {
    services::run()?;

    let mut parts = extra.splitn(2, |arg| arg == "--");
    let cargo_args = parts.next().unwrap_or_default();
    let binary_args = parts.next().unwrap_or_default();

    let tools = thread::spawn(fetch_tools);
    let mut build = util::cargo(["test", "--all-features", "--no-run"])?;
    build
        .args(workspace_unless_packages(cargo_args))
        .args(cargo_args);
    let built = test_binaries::build(build);
    let tools = tools
        .join()
        .map_err(|_| "the thread fetching the test tools panicked")?
        .map_err(|err| format!("fetching the tools the tests need: {err}"))?;
    let binaries = built.map_err(|err| format!("compiling the tests: {err}"))?;
    for (name, value) in &tools {
        println!("{name}={}", value.display());
    }

    // Kept beside the fetched tools, so a fresh clone on this machine orders its jobs well too.
    let durations_path = cache::cache_root(None)?.join(DURATIONS_FILE);
    let recorded = read_durations(&durations_path);
    let mut jobs = Vec::with_capacity(binaries.len().saturating_add(1));
    let mut doctests = util::cargo(["test", "--all-features", "--doc"])?;
    doctests
        .args(workspace_unless_packages(cargo_args))
        .args(cargo_args)
        .arg("--")
        .args(binary_args);
    if io::stdout().is_terminal() && env::var_os("CARGO_TERM_COLOR").is_none() {
        doctests.env("CARGO_TERM_COLOR", "always");
    }
    jobs.push(job(DOCTESTS.to_owned(), doctests, &tools));
    let mut ordered: Vec<(f64, Job)> = binaries
        .iter()
        .map(|binary| {
            let mut command = Command::new(&binary.executable);
            command.current_dir(&binary.package_dir).args(binary_args);
            let name = job_name(binary);
            let expected = expected_seconds(binary, &name, &recorded);
            (expected, job(name, command, &tools))
        })
        .collect();
    // The longest first, so the last job to end is a short one. The doctests go first of all:
    // they compile before they run.
    ordered.sort_by(|a, b| b.0.total_cmp(&a.0));
    jobs.extend(ordered.into_iter().map(|(_, job)| job));

    let parallel = parallel_jobs()?;
    println!(
        "running {} test jobs, {parallel} at a time ({JOBS_ENV} to change it)",
        jobs.len()
    );
    let finished = test_pool::run(jobs, parallel);
    // Recording is best effort: it only orders the next run.
    if let Some(dir) = durations_path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    let _ = write_durations(&durations_path, &recorded, &finished);
    summarize(&finished)
}

/// Prints the totals, the slowest jobs and the failed ones, and says whether the run passed.
fn summarize(finished: &[Finished]) -> Result {
    let mut totals = Totals::default();
    for job in finished {
        totals.add(job.totals);
    }
    let mut slowest: Vec<&Finished> = finished.iter().collect();
    slowest.sort_by_key(|job| std::cmp::Reverse(job.elapsed));
    println!("\nslowest test jobs:");
    for job in slowest.iter().take(8) {
        println!("  {:>8}  {}", util::secs(job.elapsed), job.name);
    }
    let failed: Vec<&str> = finished
        .iter()
        .filter(|job| !job.success)
        .map(|job| job.name.as_str())
        .collect();
    println!("{} passed, {} failed", totals.passed, totals.failed);
    if !failed.is_empty() {
        return Err(format!("these test jobs failed: {}", failed.join(", ")).into());
    }
    if totals.failed > 0 {
        return Err(format!("{} test(s) failed", totals.failed).into());
    }
    if totals.passed == 0 {
        return Err("no test passed: a run with zero tests is not a success".into());
    }
    Ok(())
}

/// `--workspace`, unless `cargo_args` choose packages (`-p`, `--package`): cargo would let
/// `--workspace` win and build and run every package.
fn workspace_unless_packages(cargo_args: &[String]) -> Option<&'static str> {
    let chooses_packages = cargo_args
        .iter()
        .any(|arg| arg.starts_with("-p") || arg.starts_with("--package"));
    (!chooses_packages).then_some("--workspace")
}

/// A job running `command` with the tools' variables set.
fn job(name: String, mut command: Command, tools: &ToolEnv) -> Job {
    for (variable, value) in tools {
        command.env(variable, value);
    }
    Job { name, command }
}

/// How the output and the durations file name a test binary: `memory-sql tests/sql/main.rs`.
fn job_name(binary: &TestBinary) -> String {
    format!("{} {}", binary.package, binary.label)
}

/// How long `binary` is expected to take, to order the jobs: the recorded duration, else (for a
/// first run) a tenth of a second per test it lists.
fn expected_seconds(binary: &TestBinary, name: &str, recorded: &HashMap<String, f64>) -> f64 {
    if let Some(seconds) = recorded.get(name) {
        return *seconds;
    }
    let listed = Command::new(&binary.executable)
        .current_dir(&binary.package_dir)
        .args(["--list", "--format", "terse"])
        .output();
    let tests = listed.map_or(0, |output| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.ends_with(": test"))
            .count()
    });
    // Counts are far below 2^52: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let seconds = tests as f64 / 10.0;
    seconds
}

/// How many jobs run at a time: `AGENT_MEMORY_TEST_JOBS`, else [`DEFAULT_JOBS`].
fn parallel_jobs() -> Result<usize> {
    match env::var(JOBS_ENV) {
        Err(_) => Ok(DEFAULT_JOBS),
        Ok(value) => value
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|jobs| *jobs > 0)
            .ok_or_else(|| {
                format!("{JOBS_ENV} must be a whole number above 0, not {value:?}").into()
            }),
    }
}

/// The durations a previous run recorded (`name<TAB>seconds` lines); empty when there are none.
fn read_durations(path: &std::path::Path) -> HashMap<String, f64> {
    parse_durations(&fs::read_to_string(path).unwrap_or_default())
}

/// Parses `name<TAB>seconds` lines, skipping any that do not parse.
fn parse_durations(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter_map(|line| {
            let (name, seconds) = line.rsplit_once('\t')?;
            let seconds = seconds.trim().parse::<f64>().ok()?;
            seconds.is_finite().then(|| (name.to_owned(), seconds))
        })
        .collect()
}

/// Records this run's durations over the recorded ones (jobs this run did not have are kept).
fn write_durations(
    path: &std::path::Path,
    recorded: &HashMap<String, f64>,
    finished: &[Finished],
) -> io::Result<()> {
    let mut durations = recorded.clone();
    for job in finished {
        durations.insert(job.name.clone(), job.elapsed.as_secs_f64());
    }
    let mut lines: Vec<String> = durations
        .iter()
        .map(|(name, seconds)| format!("{name}\t{seconds:.1}"))
        .collect();
    lines.sort();
    fs::write(path, lines.join("\n") + "\n")
}

/// Fetches what the tests need from outside the repository, each once into a cache (never
/// committed), unless the caller's environment already points at it: the local embedding model
/// the vector tests use, the real Mem0 library memory-mem0's `real_mem0` test serves, and
/// schemathesis and the MCP SDK, which the server's client tests run.
fn fetch_tools() -> std::result::Result<ToolEnv, String> {
    let mut tools = ToolEnv::new();
    let fetchers: [(&'static str, Ensure); 3] = [
        (MODEL_DIR_ENV, fetch_model::ensure),
        (fetch_mem0::PYTHON_ENV, fetch_mem0::ensure),
        (fetch_pytools::PYTHON_ENV, fetch_pytools::ensure),
    ];
    for (name, ensure) in fetchers {
        if env::var_os(name).is_none() {
            tools.push((name, ensure(None).map_err(|err| err.to_string())?));
        }
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_whole_workspace_is_tested_unless_packages_are_chosen() {
        let args = |list: &[&str]| list.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>();
        assert_eq!(workspace_unless_packages(&[]), Some("--workspace"));
        assert_eq!(
            workspace_unless_packages(&args(&["--lib"])),
            Some("--workspace")
        );
        for chosen in [
            &["-p", "memory-sql"][..],
            &["-pmemory-sql"],
            &["--package", "memory-sql"],
            &["--package=memory-sql"],
        ] {
            assert_eq!(workspace_unless_packages(&args(chosen)), None, "{chosen:?}");
        }
    }

    #[test]
    fn recorded_durations_round_trip_and_bad_lines_are_skipped() {
        let parsed = parse_durations("memory-sql tests/sql/main.rs\t190.5\nbroken line\nx\tNaN\n");
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed.get("memory-sql tests/sql/main.rs"), Some(&190.5));

        let dir = std::env::temp_dir().join(format!("xtask-durations-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DURATIONS_FILE);
        let finished = [Finished {
            name: "memory-core unittests src/lib.rs".to_owned(),
            totals: Totals::default(),
            success: true,
            elapsed: Duration::from_millis(2_500),
        }];
        write_durations(&path, &parsed, &finished).unwrap();
        let read = read_durations(&path);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read.get("memory-core unittests src/lib.rs"), Some(&2.5));
        assert_eq!(read.get("memory-sql tests/sql/main.rs"), Some(&190.5));
    }
}
