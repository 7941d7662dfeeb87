//! `cargo xtask fuzz [--inputs N] [--target NAME] [--seed S] [--repro HEX]`: build the
//! `memory-fuzz` binary in release mode and run it.
//!
//! The binary fuzzes every decoder of outside bytes (10,000,000 inputs in all by default,
//! split evenly between the targets) on stable Rust, prints per target the inputs run and the
//! panics, and fails on any panic after printing the failing input in hex.

use crate::util::{self, Result};

/// Runs `cargo xtask fuzz ARGS...`.
pub(crate) fn run(args: &[String]) -> Result {
    let mut cmd = util::cargo(["run", "--release", "--package", "memory-fuzz", "--"])?;
    cmd.args(args);
    util::run_checked(&mut cmd)
}
