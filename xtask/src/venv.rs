//! Python virtualenvs in the cache outside the repository, shared by `fetch-mem0` and
//! `fetch-pytools`: `python3 -m venv`, then its pip installs pinned packages, then a marker file
//! naming what was installed is written last, so an interrupted install is redone from scratch
//! and a completed one is never repeated.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use crate::cache;
use crate::util::{self, Result, run_checked};

/// The file in a virtualenv that records a completed install (its content: the spec's
/// `marker`).
const MARKER: &str = "agent-memory-installed.txt";

/// What to install, and where.
pub(crate) struct Spec<'a> {
    /// The command's name, for the progress lines (`fetch-mem0`).
    pub(crate) label: &'a str,
    /// The virtualenv's directory name under `<cache>/py/`.
    pub(crate) dir_name: &'a str,
    /// The arguments after `pip install` (package specs, or `-r FILE`).
    pub(crate) pip_args: &'a [&'a std::ffi::OsStr],
    /// What the marker file holds once the install is complete: changing it redoes the install.
    pub(crate) marker: &'a str,
    /// The environment variable the tests read the interpreter from (for the closing line).
    pub(crate) python_env: &'a str,
}

/// The virtualenv's `python`.
pub(crate) fn python_in(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn is_complete(venv: &Path, marker: &str) -> bool {
    python_in(venv).is_file()
        && fs::read_to_string(venv.join(MARKER)).is_ok_and(|text| text.trim() == marker.trim())
}

/// Makes sure the virtualenv `<cache>/py/<dir_name>` holds the spec's packages (installing
/// them once) and returns its `python`.
pub(crate) fn ensure(explicit_cache_dir: Option<PathBuf>, spec: &Spec<'_>) -> Result<PathBuf> {
    let label = spec.label;
    let venv = cache::cache_root(explicit_cache_dir)?
        .join("py")
        .join(spec.dir_name);
    if is_complete(&venv, spec.marker) {
        eprintln!("{label}: already installed in {}", venv.display());
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
    eprintln!("{label}: python3 -m venv {}", venv.display());
    run_checked(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .stdout(Stdio::from(std::io::stderr())),
    )?;
    eprintln!("{label}: pip install (into {})", venv.display());
    run_checked(
        Command::new(python_in(&venv))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(spec.pip_args)
            // stdout carries only the printed path.
            .stdout(Stdio::from(std::io::stderr())),
    )?;
    fs::write(venv.join(MARKER), format!("{}\n", spec.marker.trim()))?;
    eprintln!(
        "{label}: done in {}; export {}={}",
        util::secs(started.elapsed()),
        spec.python_env,
        python_in(&venv).display()
    );
    Ok(python_in(&venv))
}
