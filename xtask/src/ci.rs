//! `cargo xtask ci`: every check CI makes, in order, stopping at the first failure.
//!
//! 1. `cargo fmt --all -- --check`
//! 2. `cargo xtask cycles`: no import circle between the modules of a crate
//! 3. `cargo clippy --workspace --all-targets --all-features -- -D warnings`
//! 4. `cargo xtask test` (unless `--no-tests`)
//! 5. `cargo doc --workspace --all-features --no-deps` with `RUSTDOCFLAGS="-D warnings"`
//! 6. `cargo deny check bans licenses sources` (installing cargo-deny first if it is missing;
//!    advisories need the network and are left out)
//!
//! CI (`.ci/run`) runs the checks other than the tests beside `cargo xtask test`, at the lowest
//! CPU priority and in a target directory of their own, so they use the CPU the tests leave idle.

use std::{
    env,
    process::Stdio,
    time::{Duration, Instant},
};

use crate::{
    cycles, test,
    util::{self, Result},
};

/// One CI step: a name and what it runs.
struct Step {
    /// Short name, used in headers and error messages.
    name: &'static str,
    /// The command line it runs, shown in the header.
    shown: &'static str,
    /// Runs the step.
    run: fn() -> Result,
}

/// Runs `cargo xtask ci`; with `no_tests` the test step is skipped.
pub(crate) fn run(no_tests: bool) -> Result {
    let steps: Vec<Step> = [
        Step {
            name: "fmt",
            shown: "cargo fmt --all -- --check",
            run: fmt,
        },
        Step {
            name: "cycles",
            shown: "cargo xtask cycles",
            run: cycles::run,
        },
        Step {
            name: "clippy",
            shown: "cargo clippy --workspace --all-targets --all-features -- -D warnings",
            run: clippy,
        },
        Step {
            name: "test",
            shown: "cargo xtask test",
            run: || test::run(&[]),
        },
        Step {
            name: "doc",
            shown: "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --all-features --no-deps",
            run: doc,
        },
        Step {
            name: "deny",
            shown: "cargo deny check bans licenses sources",
            run: deny,
        },
    ]
    .into_iter()
    .filter(|step| !(no_tests && step.name == "test"))
    .collect();

    let total = steps.len();
    let started = Instant::now();
    let mut timings: Vec<(&str, Duration)> = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        println!(
            "\n==> [{}/{total}] {}: {}",
            index.saturating_add(1),
            step.name,
            step.shown
        );
        let step_started = Instant::now();
        let result = (step.run)();
        let elapsed = step_started.elapsed();
        match result {
            Ok(()) => {
                println!("<== {}: ok in {}", step.name, util::secs(elapsed));
                timings.push((step.name, elapsed));
            }
            Err(err) => {
                println!("<== {}: FAILED after {}", step.name, util::secs(elapsed));
                return Err(format!("CI step `{}` failed: {err}", step.name).into());
            }
        }
    }

    println!("\nCI passed in {}:", util::secs(started.elapsed()));
    for (name, elapsed) in timings {
        println!("  {name:<8} {}", util::secs(elapsed));
    }
    if no_tests {
        println!("  (tests skipped: --no-tests)");
    }
    Ok(())
}

/// `cargo fmt --all -- --check`.
fn fmt() -> Result {
    util::run_checked(&mut util::cargo(["fmt", "--all", "--", "--check"])?)
}

/// `cargo clippy --workspace --all-targets --all-features -- -D warnings`.
fn clippy() -> Result {
    util::run_checked(&mut util::cargo([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])?)
}

/// `cargo doc --workspace --all-features --no-deps`, with rustdoc warnings denied.
fn doc() -> Result {
    let mut flags = String::from("-D warnings");
    if let Ok(extra) = env::var("RUSTDOCFLAGS")
        && !extra.trim().is_empty()
    {
        flags = format!("{extra} {flags}");
    }
    let mut cmd = util::cargo(["doc", "--workspace", "--all-features", "--no-deps"])?;
    cmd.env("RUSTDOCFLAGS", flags);
    util::run_checked(&mut cmd)
}

/// The cargo-deny release CI installs when the machine has none (its `deny.toml` format is the
/// one this release reads).
const CARGO_DENY_VERSION: &str = "0.20.2";

/// `cargo deny check bans licenses sources`, installing cargo-deny first if it is missing.
///
/// The install builds cargo-deny's debug profile without debug info: its release profile (fat
/// LTO, one codegen unit) took 3.5 minutes of both cores here, the debug build under one, and
/// the check itself takes seconds either way.
fn deny() -> Result {
    let installed = util::cargo(["deny", "--version"])?
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !installed {
        let mut install = util::cargo([
            "install",
            "cargo-deny",
            "--version",
            CARGO_DENY_VERSION,
            "--locked",
            "--debug",
        ])?;
        install.env("CARGO_PROFILE_DEV_DEBUG", "false");
        println!(
            "cargo-deny is not installed; installing it: {}",
            util::Shown(&install)
        );
        util::run_checked(&mut install).map_err(|err| format!("installing cargo-deny: {err}"))?;
    }
    util::run_checked(&mut util::cargo([
        "deny", "check", "bans", "licenses", "sources",
    ])?)
}
