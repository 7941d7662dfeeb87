//! `cargo xtask fetch-mem0`: install the pinned `mem0ai` Python package into a virtualenv in a
//! cache directory outside the repository and print the virtualenv's `python`.
//!
//! memory-mem0's `real_mem0` test runs its self-hosted client against Mem0's REST routes
//! backed by the real library (`crates/memory-mem0/tests/real_mem0/server.py`), with that
//! interpreter, read from `AGENT_MEMORY_MEM0_PYTHON`. `python3 -m venv` creates the virtualenv
//! and its pip installs `mem0ai` (which brings the in-process Qdrant client the server uses);
//! nothing else is installed. A marker file naming the pinned package is written last, so an
//! interrupted install is redone from scratch and a completed one is never repeated.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use crate::util::{self, Result, run_checked};

/// The pinned package: the newest `mem0ai` the `real_mem0` test was checked with.
pub(crate) const PACKAGE: &str = "mem0ai==2.2.1";
/// The environment variable the `real_mem0` test reads the interpreter from.
pub(crate) const PYTHON_ENV: &str = "AGENT_MEMORY_MEM0_PYTHON";
/// The file in the virtualenv that records a completed install (its content: [`PACKAGE`]).
const MARKER: &str = "agent-memory-installed.txt";

/// The virtualenv's directory: `<cache>/py/mem0ai-<version>`, where `<cache>` is
/// `--cache-dir`, else `$AGENT_MEMORY_CACHE_DIR`, else `$XDG_CACHE_HOME/agent-memory`, else
/// `~/.cache/agent-memory`.
fn venv_dir(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let cache = match explicit {
        Some(dir) => dir,
        None => match env::var_os("AGENT_MEMORY_CACHE_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => {
                let base = match env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
                    Some(dir) => PathBuf::from(dir),
                    None => PathBuf::from(
                        env::var_os("HOME").ok_or("neither XDG_CACHE_HOME nor HOME is set")?,
                    )
                    .join(".cache"),
                };
                base.join("agent-memory")
            }
        },
    };
    Ok(cache.join("py").join(PACKAGE.replace("==", "-")))
}

fn python_in(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn is_complete(venv: &Path) -> bool {
    python_in(venv).is_file()
        && fs::read_to_string(venv.join(MARKER)).is_ok_and(|text| text.trim() == PACKAGE)
}

/// Runs the command: prints the interpreter's path on stdout (and only that).
pub(crate) fn run(explicit_cache_dir: Option<PathBuf>) -> Result {
    let python = ensure(explicit_cache_dir)?;
    println!("{}", python.display());
    Ok(())
}

/// Makes sure the virtualenv with [`PACKAGE`] exists (installing it once) and returns its
/// `python`.
pub(crate) fn ensure(explicit_cache_dir: Option<PathBuf>) -> Result<PathBuf> {
    let venv = venv_dir(explicit_cache_dir)?;
    if is_complete(&venv) {
        eprintln!("fetch-mem0: {PACKAGE} is already in {}", venv.display());
        return Ok(python_in(&venv));
    }
    // A virtualenv without the marker is a leftover of an interrupted install.
    if venv.exists() {
        fs::remove_dir_all(&venv)?;
    }
    if let Some(parent) = venv.parent() {
        fs::create_dir_all(parent)?;
    }
    let started = Instant::now();
    eprintln!("fetch-mem0: python3 -m venv {}", venv.display());
    run_checked(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .stdout(Stdio::from(std::io::stderr())),
    )?;
    eprintln!("fetch-mem0: pip install {PACKAGE}");
    run_checked(
        Command::new(python_in(&venv))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                PACKAGE,
            ])
            // stdout carries only the printed path.
            .stdout(Stdio::from(std::io::stderr())),
    )?;
    fs::write(venv.join(MARKER), format!("{PACKAGE}\n"))?;
    eprintln!(
        "fetch-mem0: done in {}; export {PYTHON_ENV}={}",
        util::secs(started.elapsed()),
        python_in(&venv).display()
    );
    Ok(python_in(&venv))
}
