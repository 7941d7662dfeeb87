//! `cargo xtask bench`: build and run the `memory-bench` binary in release mode.
//!
//! The binary prints one JSON line per measurement on stdout. Unless the arguments already
//! name a data file (`--data PATH` or `--data=PATH`), `--data` is added: the file named by
//! `AGENT_MEMORY_BENCH_DATA`, or else `<workspace>/../shared/bench/chat-10000.jsonl`.

use std::{env, path::PathBuf};

use crate::fetch_model;
use crate::util::{self, Result};

/// Environment variable that names the benchmark data file.
const DATA_ENV: &str = "AGENT_MEMORY_BENCH_DATA";

/// Environment variable that names the LoCoMo file of `cargo xtask bench quality`.
const QUALITY_DATA_ENV: &str = "AGENT_MEMORY_QUALITY_DATA";

/// Environment variable that names the local embedding model's directory (read by
/// `memory_vector::BertEmbedder::from_env`).
const MODEL_DIR_ENV: &str = "AGENT_MEMORY_MODEL_DIR";

/// Runs `cargo xtask bench ARGS...`; `cargo xtask bench quality ARGS...` runs the recall
/// harness on LoCoMo (docs/quality.md), fetching the local model first (as `cargo xtask
/// fetch-model` does) when the dense retriever is measured and `AGENT_MEMORY_MODEL_DIR` is not
/// set.
pub(crate) fn run(args: &[String]) -> Result {
    let quality = args.first().map(String::as_str) == Some("quality");
    let mut cmd = util::cargo(["run", "--release", "--package", "memory-bench", "--"])?;
    cmd.args(args);
    let model_dir_set = env::var_os(MODEL_DIR_ENV).is_some_and(|dir| !dir.is_empty());
    if quality && wants_dense(args) && !model_dir_set {
        let dir = fetch_model::ensure(None)?;
        eprintln!("bench quality: {MODEL_DIR_ENV}={}", dir.display());
        cmd.env(MODEL_DIR_ENV, dir);
    }
    if !has_data_arg(args) {
        let data = if quality {
            default_file(QUALITY_DATA_ENV, "shared/quality/locomo10.json")?
        } else {
            default_file(DATA_ENV, "shared/bench/chat-10000.jsonl")?
        };
        cmd.arg("--data").arg(data);
    }
    util::run_checked(&mut cmd)
}

/// Whether `args` already pass `--data`.
fn has_data_arg(args: &[String]) -> bool {
    args.iter()
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "--data" || arg.starts_with("--data="))
}

/// Whether `memory-bench quality ARGS` measures the dense retriever (it does unless the
/// arguments pass `--dense false` or `--dense=false`; the last one wins, as clap reads them).
fn wants_dense(args: &[String]) -> bool {
    let mut dense = true;
    let mut args = args.iter().take_while(|arg| *arg != "--");
    while let Some(arg) = args.next() {
        if arg == "--dense" {
            dense = args.next().map(String::as_str) != Some("false");
        } else if let Some(value) = arg.strip_prefix("--dense=") {
            dense = value != "false";
        }
    }
    dense
}

/// The data file to use when the arguments name none (`$env`, else `<workspace>/../<rel>`);
/// it must exist.
fn default_file(var: &str, rel: &str) -> Result<PathBuf> {
    let (path, from) = match env::var_os(var) {
        Some(path) if !path.is_empty() => (PathBuf::from(path), format!("${var}")),
        _ => {
            let root = util::workspace_root()?;
            let path = root
                .parent()
                .map_or_else(|| root.join("..").join(rel), |parent| parent.join(rel));
            (path, "the default location".to_owned())
        }
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "benchmark data not found: looked for {} ({from}); set {var}=/path/to/{} or pass \
             --data PATH",
            path.display(),
            rel.rsplit('/').next().unwrap_or(rel)
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn finds_data_argument() {
        assert!(has_data_arg(&strings(&["--data", "x.jsonl"])));
        assert!(has_data_arg(&strings(&["--n", "100", "--data=x.jsonl"])));
        assert!(!has_data_arg(&strings(&["--n", "100"])));
        assert!(!has_data_arg(&strings(&["--", "--data"])));
        assert!(!has_data_arg(&strings(&["--database", "pg"])));
    }

    #[test]
    fn dense_unless_turned_off() {
        assert!(wants_dense(&strings(&["quality"])));
        assert!(!wants_dense(&strings(&["quality", "--dense", "false"])));
        assert!(!wants_dense(&strings(&["quality", "--dense=false"])));
        assert!(wants_dense(&strings(&["quality", "--dense", "true"])));
        assert!(wants_dense(&strings(&[
            "quality", "--dense", "false", "--dense", "true"
        ])));
        assert!(wants_dense(&strings(&["quality", "--split", "tuned"])));
    }
}
