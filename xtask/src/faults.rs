//! `cargo xtask faults`: the fault tests of the writer processes at the full counts.
//!
//! `cargo xtask test` runs the same tests with smaller counts. This command sets
//! `AGENT_MEMORY_FAULTS_FULL=1` (16 writers in 2 processes × 1,000 appends per engine, ten
//! SIGKILLs per kill test) and runs the `fault_writers` test binaries of memory-sql (SQLite
//! file, PostgreSQL, MariaDB) and memory-redis (standalone, cluster) one test at a time, with
//! their reports (wall times, kills) on the terminal.

use crate::{
    services,
    util::{self, Result},
};

/// The environment variable the fault tests read for the full counts.
const FULL_ENV: &str = "AGENT_MEMORY_FAULTS_FULL";

/// The crates whose `fault_writers` test binaries run.
const CRATES: [&str; 2] = ["memory-sql", "memory-redis"];

/// Runs `cargo xtask faults ARGS...`; `args` go to the test binaries (e.g. a name filter).
pub(crate) fn run(args: &[String]) -> Result {
    services::run()?;
    for krate in CRATES {
        let mut cmd = util::cargo([
            "test",
            "--package",
            krate,
            "--all-features",
            "--test",
            "fault_writers",
            "--",
            "--nocapture",
            "--test-threads=1",
        ])?;
        cmd.args(args).env(FULL_ENV, "1");
        util::run_checked(&mut cmd)?;
    }
    Ok(())
}
