//! Compiling the workspace's tests and finding the test binaries cargo built.
//!
//! `cargo test --no-run --message-format=json-render-diagnostics` builds every test target
//! (compiler messages still reach the terminal, rendered, on stderr) and describes each
//! artifact as a JSON line on stdout; the ones built with the test profile and with an
//! executable are the test binaries `cargo test` would run.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::Value;

use crate::util::{Result, Shown};

/// One test binary: what it tests and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestBinary {
    /// The package it belongs to (`memory-sql`).
    pub(crate) package: String,
    /// How cargo names it: `unittests src/lib.rs`, `tests/sql/main.rs`.
    pub(crate) label: String,
    /// The executable.
    pub(crate) executable: PathBuf,
    /// The package's directory: cargo runs a test binary from there, and tests open files
    /// relative to it.
    pub(crate) package_dir: PathBuf,
}

/// Runs `build` (a `cargo test ... --no-run` command, to which the JSON message format is
/// added) and returns the test binaries it built, in the order cargo reported them.
pub(crate) fn build(mut build: Command) -> Result<Vec<TestBinary>> {
    build
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let shown = Shown(&build).to_string();
    println!("$ {shown}");
    let mut child = build
        .spawn()
        .map_err(|err| format!("could not start `{shown}`: {err}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or("cargo test --no-run: no stdout pipe")?;
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|err| format!("reading `{shown}`'s output: {err}"))?;
        if let Some(binary) = parse_artifact(&line) {
            binaries.push(binary);
        }
    }
    let status = child
        .wait()
        .map_err(|err| format!("waiting for `{shown}`: {err}"))?;
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    Ok(binaries)
}

/// The test binary a line of cargo's JSON output describes, if it describes one: a
/// `compiler-artifact` built with the test profile that has an executable.
pub(crate) fn parse_artifact(line: &str) -> Option<TestBinary> {
    let message: Value = serde_json::from_str(line).ok()?;
    if message.get("reason")?.as_str()? != "compiler-artifact"
        || !message.get("profile")?.get("test")?.as_bool()?
    {
        return None;
    }
    let executable = PathBuf::from(message.get("executable")?.as_str()?);
    let package_dir = Path::new(message.get("manifest_path")?.as_str()?)
        .parent()?
        .to_path_buf();
    let target = message.get("target")?;
    let source = Path::new(target.get("src_path")?.as_str()?);
    let relative = source.strip_prefix(&package_dir).unwrap_or(source);
    let kinds = target.get("kind")?.as_array()?;
    let is_integration_test = kinds.iter().any(|kind| kind.as_str() == Some("test"));
    let label = if is_integration_test {
        relative.display().to_string()
    } else {
        format!("unittests {}", relative.display())
    };
    let package = package_name(message.get("package_id")?.as_str()?);
    Some(TestBinary {
        package,
        label,
        executable,
        package_dir,
    })
}

/// The package name in a cargo package id: `path+file:///w/crates/memory-sql#0.1.0` (the
/// directory's name), `path+file:///w/crates/x#name@0.1.0` (the name given), or the older
/// `memory-sql 0.1.0 (path+file:///...)`.
fn package_name(package_id: &str) -> String {
    if let Some((before, fragment)) = package_id.rsplit_once('#') {
        if let Some((name, _version)) = fragment.split_once('@') {
            return name.to_owned();
        }
        return before.rsplit('/').next().unwrap_or(before).to_owned();
    }
    package_id
        .split_whitespace()
        .next()
        .unwrap_or(package_id)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integration_test_artifact_is_a_test_binary_run_from_its_package() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/memory-sql#0.1.0","manifest_path":"/w/crates/memory-sql/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"sql","src_path":"/w/crates/memory-sql/tests/sql/main.rs","test":true},"profile":{"opt_level":"0","test":true},"features":[],"filenames":["/w/target/debug/deps/sql-1"],"executable":"/w/target/debug/deps/sql-1","fresh":true}"#;
        assert_eq!(
            parse_artifact(line),
            Some(TestBinary {
                package: "memory-sql".to_owned(),
                label: "tests/sql/main.rs".to_owned(),
                executable: PathBuf::from("/w/target/debug/deps/sql-1"),
                package_dir: PathBuf::from("/w/crates/memory-sql"),
            })
        );
    }

    #[test]
    fn a_library_unit_test_artifact_is_labelled_like_cargo_does() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/core#memory-core@0.1.0","manifest_path":"/w/crates/core/Cargo.toml","target":{"kind":["lib"],"name":"memory_core","src_path":"/w/crates/core/src/lib.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/memory_core-2"}"#;
        let binary = parse_artifact(line).expect("a test binary");
        assert_eq!(binary.label, "unittests src/lib.rs");
        assert_eq!(binary.package, "memory-core");
    }

    #[test]
    fn libraries_build_scripts_binaries_and_other_messages_are_not_test_binaries() {
        let lines = [
            // A library built for linking: no executable, not the test profile.
            r#"{"reason":"compiler-artifact","package_id":"a#0.1.0","manifest_path":"/w/a/Cargo.toml","target":{"kind":["lib"],"src_path":"/w/a/src/lib.rs"},"profile":{"test":false},"executable":null}"#,
            // A binary the tests run: an executable, but not the test profile.
            r#"{"reason":"compiler-artifact","package_id":"a#0.1.0","manifest_path":"/w/a/Cargo.toml","target":{"kind":["bin"],"src_path":"/w/a/src/main.rs"},"profile":{"test":false},"executable":"/w/target/debug/a"}"#,
            r#"{"reason":"build-script-executed","package_id":"a#0.1.0"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json at all",
        ];
        for line in lines {
            assert_eq!(parse_artifact(line), None, "{line}");
        }
    }

    #[test]
    fn package_names_are_read_from_every_package_id_form() {
        assert_eq!(
            package_name("path+file:///w/crates/memory-sql#0.1.0"),
            "memory-sql"
        );
        assert_eq!(package_name("path+file:///w/xtask#xtask@0.1.0"), "xtask");
        assert_eq!(
            package_name("memory-sql 0.1.0 (path+file:///w/crates/memory-sql)"),
            "memory-sql"
        );
    }
}
