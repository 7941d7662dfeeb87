//! `cargo xtask fetch-pytools`: install the Python tools of the server's client tests —
//! `schemathesis` and the official MCP SDK (`mcp`) — into a virtualenv in a cache directory
//! outside the repository, and print the virtualenv's `python`.
//!
//! The packages and everything they bring are pinned in `xtask/pytools/requirements.txt`
//! (compiled in); the virtualenv's directory name carries a hash of that file, and its marker
//! the whole file, so editing a pin installs a fresh virtualenv beside the old one. The
//! agent-memory command's `python_clients` tests read the interpreter from
//! `AGENT_MEMORY_PYTOOLS_PYTHON`, which `cargo xtask test` sets after installing.

use std::{ffi::OsStr, fs, path::PathBuf};

use crate::{cache, util::Result, venv};

/// The pinned requirements (`pip install -r`): the two tools and their dependencies.
pub(crate) const REQUIREMENTS: &str = include_str!("../pytools/requirements.txt");
/// The environment variable the `python_clients` tests read the interpreter from.
pub(crate) const PYTHON_ENV: &str = "AGENT_MEMORY_PYTOOLS_PYTHON";

/// Runs the command: prints the interpreter's path on stdout (and only that).
pub(crate) fn run(explicit_cache_dir: Option<PathBuf>) -> Result {
    let python = ensure(explicit_cache_dir)?;
    println!("{}", python.display());
    Ok(())
}

/// FNV-1a (64 bits) of `text`: names the virtualenv after the requirements it holds.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Makes sure the virtualenv `<cache>/py/pytools-<hash>` with [`REQUIREMENTS`] exists
/// (installing it once) and returns its `python`.
pub(crate) fn ensure(explicit_cache_dir: Option<PathBuf>) -> Result<PathBuf> {
    let dir_name = format!("pytools-{:016x}", fnv1a(REQUIREMENTS));
    let py_dir = cache::cache_root(explicit_cache_dir.clone())?.join("py");
    fs::create_dir_all(&py_dir)?;
    // pip reads the requirements from a file: the compiled-in copy, beside the virtualenvs.
    let requirements = py_dir.join(format!("{dir_name}-requirements.txt"));
    fs::write(&requirements, REQUIREMENTS)?;
    venv::ensure(
        explicit_cache_dir,
        &venv::Spec {
            label: "fetch-pytools",
            dir_name: &dir_name,
            pip_args: &[
                OsStr::new("--only-binary=:all:"),
                OsStr::new("-r"),
                requirements.as_os_str(),
            ],
            marker: REQUIREMENTS,
            python_env: PYTHON_ENV,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_pin_every_package() {
        let pins: Vec<&str> = REQUIREMENTS
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        assert!(pins.iter().any(|p| p.starts_with("schemathesis==")));
        assert!(pins.iter().any(|p| p.starts_with("mcp==")));
        for pin in pins {
            let (name, version) = pin.split_once("==").expect("every line pins with ==");
            assert!(!name.is_empty() && !version.is_empty(), "{pin}");
        }
    }

    #[test]
    fn hash_changes_with_the_text() {
        assert_ne!(fnv1a("mcp==1"), fnv1a("mcp==2"));
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    }
}
