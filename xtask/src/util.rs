//! Helpers shared by the commands: the error type, the workspace root and running processes.

use std::{
    env,
    ffi::OsStr,
    fmt,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

/// The error every command returns: a message for the user.
pub(crate) type DynError = Box<dyn std::error::Error>;

/// Result alias for the commands.
pub(crate) type Result<T = ()> = std::result::Result<T, DynError>;

/// The root of the workspace: the parent of this crate's directory.
///
/// `cargo run` (and so `cargo xtask`) sets `CARGO_MANIFEST_DIR` for the process it starts; that
/// runtime value wins over the one compiled in, which goes stale when the work tree moves but a
/// target directory is reused (cargo does not rebuild for it).
pub(crate) fn workspace_root() -> Result<PathBuf> {
    let compiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.file_name() == compiled.file_name() && dir.join("Cargo.toml").is_file())
        .unwrap_or(compiled);
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "xtask's manifest directory has no parent directory".into())
}

/// A `cargo` command run from the workspace root.
///
/// Uses `$CARGO` when cargo started us (so the same toolchain runs the nested commands), else
/// `cargo` from `PATH`.
pub(crate) fn cargo<I, S>(args: I) -> Result<Command>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let program = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(workspace_root()?);
    for (name, _) in env::vars_os() {
        if name.to_str().is_some_and(is_set_by_cargo_run) {
            cmd.env_remove(name);
        }
    }
    Ok(cmd)
}

/// Whether `name` is one of the variables `cargo run` sets for the program it starts (the
/// package's manifest directory, name, version, ...).
///
/// They describe xtask, not the command we start, and a nested cargo must not see them: build
/// scripts such as ring's watch `CARGO_PKG_NAME` and `CARGO_MANIFEST_DIR` with
/// `rerun-if-env-changed`, so a `cargo test` started from xtask with them set rebuilt ring and
/// everything above it (rustls, redis, tantivy, qdrant-edge, ...) that a plain `cargo test` had
/// built, and the other way round.
fn is_set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
        )
}

/// Runs `cmd` with inherited stdio and fails unless it exits successfully.
pub(crate) fn run_checked(cmd: &mut Command) -> Result {
    let shown = Shown(cmd).to_string();
    let status = cmd
        .status()
        .map_err(|err| format!("could not start `{shown}`: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})").into())
    }
}

/// Whether this is a CI run (`CI=true`, as CI sets it).
pub(crate) fn is_ci() -> bool {
    env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

/// Formats a duration as seconds with one decimal, e.g. `12.3s`.
pub(crate) fn secs(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

/// Displays a [`Command`] as the shell line a user would type (program and arguments).
pub(crate) struct Shown<'a>(pub(crate) &'a Command);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = Path::new(self.0.get_program());
        // Show `cargo`, not the full path of `$CARGO`.
        let name = if program.file_stem() == Some(OsStr::new("cargo")) {
            OsStr::new("cargo")
        } else {
            program.as_os_str()
        };
        write!(f, "{}", name.to_string_lossy())?;
        for arg in self.0.get_args() {
            let arg = arg.to_string_lossy();
            if arg.is_empty() || arg.contains(char::is_whitespace) {
                write!(f, " \"{arg}\"")?;
            } else {
                write!(f, " {arg}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_cargo_run_sets_are_recognised_and_cargo_settings_are_not() {
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            assert!(is_set_by_cargo_run(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_TERM_COLOR",
            "CARGO_PROFILE_DEV_DEBUG",
            "CARGO_BUILD_JOBS",
        ] {
            assert!(!is_set_by_cargo_run(name), "{name}");
        }
    }
}
