//! `cargo xtask fetch-mem0`: install the pinned `mem0ai` Python package into a virtualenv in a
//! cache directory outside the repository and print the virtualenv's `python`.
//!
//! memory-mem0's `real_mem0` test runs its self-hosted client against Mem0's REST routes
//! backed by the real library (`crates/memory-mem0/tests/real_mem0/server.py`), with that
//! interpreter, read from `AGENT_MEMORY_MEM0_PYTHON`. `python3 -m venv` creates the virtualenv
//! and its pip installs `mem0ai` (which brings the in-process Qdrant client the server uses);
//! nothing else is installed. A marker file naming the pinned package is written last, so an
//! interrupted install is redone from scratch and a completed one is never repeated (see
//! [`crate::venv`]).

use std::{ffi::OsStr, path::PathBuf};

use crate::{util::Result, venv};

/// The pinned package: the newest `mem0ai` the `real_mem0` test was checked with.
pub(crate) const PACKAGE: &str = "mem0ai==2.2.1";
/// The environment variable the `real_mem0` test reads the interpreter from.
pub(crate) const PYTHON_ENV: &str = "AGENT_MEMORY_MEM0_PYTHON";

/// Runs the command: prints the interpreter's path on stdout (and only that).
pub(crate) fn run(explicit_cache_dir: Option<PathBuf>) -> Result {
    let python = ensure(explicit_cache_dir)?;
    println!("{}", python.display());
    Ok(())
}

/// Makes sure the virtualenv `<cache>/py/mem0ai-<version>` with [`PACKAGE`] exists
/// (installing it once) and returns its `python`.
pub(crate) fn ensure(explicit_cache_dir: Option<PathBuf>) -> Result<PathBuf> {
    let dir_name = PACKAGE.replace("==", "-");
    venv::ensure(
        explicit_cache_dir,
        &venv::Spec {
            label: "fetch-mem0",
            dir_name: &dir_name,
            pip_args: &[OsStr::new(PACKAGE)],
            marker: PACKAGE,
            python_env: PYTHON_ENV,
        },
    )
}
