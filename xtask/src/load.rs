//! `cargo xtask load`: build `memory-bench` in release mode and run its load (`--load`): on each
//! backend, the memory server in-process on 127.0.0.1 under concurrent clients on one thread,
//! then the verification (nothing lost or duplicated, one order). Prints JSON lines; fails
//! when a verification fails.

use crate::util::{self, Result};

/// Runs `cargo xtask load ARGS...` (`--backend`, `--clients`, `--appends`, `--batch`).
pub(crate) fn run(args: &[String]) -> Result {
    let mut cmd = util::cargo([
        "run",
        "--release",
        "--package",
        "memory-bench",
        "--",
        "--load",
    ])?;
    cmd.args(args);
    util::run_checked(&mut cmd)
}
