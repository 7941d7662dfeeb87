//! The tool cache outside the repository (the embedding model, the Python virtualenvs, the test
//! jobs' durations): where it is.

use std::{env, path::PathBuf};

use crate::util::Result;

/// The cache's root: `--cache-dir`, else `$AGENT_MEMORY_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/agent-memory`, else `~/.cache/agent-memory`.
pub(crate) fn cache_root(explicit: Option<PathBuf>) -> Result<PathBuf> {
    match chosen(explicit) {
        Some(dir) => Ok(dir),
        None => default_root(),
    }
}

/// A cache directory of its own: `--cache-dir`, else `$AGENT_MEMORY_CACHE_DIR` (either used as
/// given), else `name` under the default root (`$XDG_CACHE_HOME/agent-memory/<name>`, else
/// `~/.cache/agent-memory/<name>`).
pub(crate) fn chosen_or_default_dir(explicit: Option<PathBuf>, name: &str) -> Result<PathBuf> {
    match chosen(explicit) {
        Some(dir) => Ok(dir),
        None => Ok(default_root()?.join(name)),
    }
}

/// The directory the user chose: `--cache-dir`, else `$AGENT_MEMORY_CACHE_DIR` (an empty value
/// is none).
fn chosen(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        env::var_os("AGENT_MEMORY_CACHE_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    })
}

/// `$XDG_CACHE_HOME/agent-memory`, else `~/.cache/agent-memory`.
fn default_root() -> Result<PathBuf> {
    let base = match env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env::var_os("HOME").ok_or("neither XDG_CACHE_HOME nor HOME is set")?)
            .join(".cache"),
    };
    Ok(base.join("agent-memory"))
}
