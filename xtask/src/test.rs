//! `cargo xtask test`: the services, then every test of the workspace, with a summary.
//!
//! cargo's output is streamed to the terminal line by line as it comes, while the
//! `test result: ...` lines are summed over all test binaries and doctests.

use std::{
    env,
    io::{self, BufRead, BufReader, IsTerminal, Read, Write},
    path::PathBuf,
    process::Stdio,
    thread,
};

use crate::{
    fetch_mem0, fetch_model, fetch_pytools, services,
    util::{self, Result, Shown},
};

/// The environment variable the local-model tests read the model directory from.
const MODEL_DIR_ENV: &str = "AGENT_MEMORY_MODEL_DIR";

/// Passed and failed test counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Tests that passed.
    pub(crate) passed: u64,
    /// Tests that failed.
    pub(crate) failed: u64,
}

/// The tools the tests read from the environment: `(variable, value)` pairs.
type ToolEnv = Vec<(&'static str, PathBuf)>;

/// A tool's `ensure`: fetches it into the cache (or the given directory) once, returns its path.
type Ensure = fn(Option<PathBuf>) -> Result<PathBuf>;

/// Runs `cargo xtask test`, with `extra` appended to the `cargo test` arguments: the services,
/// the local embedding model (see `fetch-model`), the `mem0ai` virtualenv (see `fetch-mem0`),
/// the server's Python test tools (see `fetch-pytools`), then the tests.
///
/// The tools are fetched (on a first run: downloads and two `pip install`s) while the tests
/// compile, by `cargo test --no-run` with the same arguments; the tests run once both are done.
pub(crate) fn run(extra: &[String]) -> Result {
    services::run()?;

    let tools = thread::spawn(fetch_tools);
    // The arguments after a `--` are the test binaries'; the build takes the rest.
    let build_args = extra.iter().take_while(|arg| *arg != "--");
    let mut build = util::cargo(["test", "--workspace", "--all-features", "--no-run"])?;
    build.args(build_args);
    let built = util::run_checked(&mut build);
    let tools = tools
        .join()
        .map_err(|_| "the thread fetching the test tools panicked")?
        .map_err(|err| format!("fetching the tools the tests need: {err}"))?;
    built.map_err(|err| format!("compiling the tests: {err}"))?;

    let mut cmd = util::cargo(["test", "--workspace", "--all-features", "--no-fail-fast"])?;
    cmd.args(extra);
    for (name, value) in tools {
        println!("{name}={}", value.display());
        cmd.env(name, value);
    }
    // cargo sees pipes, not our terminal: keep its colours when we are on one.
    if io::stderr().is_terminal() && env::var_os("CARGO_TERM_COLOR").is_none() {
        cmd.env("CARGO_TERM_COLOR", "always");
    }
    let shown = Shown(&cmd).to_string();
    println!("$ {shown}");
    let mut child = cmd
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("could not start `{shown}`: {err}"))?;

    let stdout = child.stdout.take().ok_or("cargo test: no stdout pipe")?;
    let stderr = child.stderr.take().ok_or("cargo test: no stderr pipe")?;
    // stderr (compiler progress, panics) goes through on its own thread, so neither pipe can
    // fill up and stall cargo while we read the other.
    let stderr_thread = thread::spawn(move || forward(stderr, &mut io::stderr(), |_| {}));
    let mut totals = Totals::default();
    let stdout_result = forward(stdout, &mut io::stdout(), |line| {
        if let Some(found) = parse_result_line(line) {
            totals.passed = totals.passed.saturating_add(found.passed);
            totals.failed = totals.failed.saturating_add(found.failed);
        }
    });
    let stderr_result = stderr_thread
        .join()
        .map_err(|_| "the thread forwarding cargo's stderr panicked")?;
    let status = child
        .wait()
        .map_err(|err| format!("waiting for `{shown}`: {err}"))?;
    stdout_result.map_err(|err| format!("forwarding cargo's stdout: {err}"))?;
    stderr_result.map_err(|err| format!("forwarding cargo's stderr: {err}"))?;

    println!("{} passed, {} failed", totals.passed, totals.failed);
    if !status.success() {
        return Err(format!("`{shown}` failed ({status})").into());
    }
    if totals.failed > 0 {
        return Err(format!("{} test(s) failed", totals.failed).into());
    }
    if totals.passed == 0 {
        return Err("no test passed: a run with zero tests is not a success".into());
    }
    Ok(())
}

/// Fetches what the tests need from outside the repository, each once into a cache (never
/// committed), unless the caller's environment already points at it: the local embedding model
/// the vector tests use, the real Mem0 library memory-mem0's `real_mem0` test serves, and
/// schemathesis and the MCP SDK, which the server's client tests run.
fn fetch_tools() -> std::result::Result<ToolEnv, String> {
    let mut tools = ToolEnv::new();
    let fetchers: [(&'static str, Ensure); 3] = [
        (MODEL_DIR_ENV, fetch_model::ensure),
        (fetch_mem0::PYTHON_ENV, fetch_mem0::ensure),
        (fetch_pytools::PYTHON_ENV, fetch_pytools::ensure),
    ];
    for (name, ensure) in fetchers {
        if env::var_os(name).is_none() {
            tools.push((name, ensure(None).map_err(|err| err.to_string())?));
        }
    }
    Ok(tools)
}

/// Copies `input` to `output` line by line, flushing each line, and shows each line (without
/// ANSI colour codes) to `on_line`.
///
/// Reads `input` to its end even when writing to `output` fails, so the child never blocks on
/// a full pipe; the first write error is returned at the end.
fn forward(
    input: impl Read,
    output: &mut impl Write,
    mut on_line: impl FnMut(&str),
) -> io::Result<()> {
    let mut reader = BufReader::new(input);
    let mut buf = Vec::new();
    let mut write_error = None;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return write_error.map_or(Ok(()), Err);
        }
        if write_error.is_none()
            && let Err(err) = output.write_all(&buf).and_then(|()| output.flush())
        {
            write_error = Some(err);
        }
        on_line(&strip_ansi(&String::from_utf8_lossy(&buf)));
    }
}

/// Removes ANSI escape sequences (`ESC [ ... letter`), as in coloured libtest output.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

/// Parses a libtest summary line such as
/// `test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s`
/// or `test result: FAILED. 3 passed; 2 failed; ...`.
pub(crate) fn parse_result_line(line: &str) -> Option<Totals> {
    let rest = line.trim().strip_prefix("test result:")?;
    let (_, counts) = rest.split_once('.')?;
    let mut totals = Totals::default();
    let mut seen = (false, false);
    for part in counts.split(';') {
        let mut words = part.split_whitespace();
        let (Some(number), Some(label)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<u64>() else {
            continue;
        };
        match label {
            "passed" => {
                totals.passed = number;
                seen.0 = true;
            }
            "failed" => {
                totals.failed = number;
                seen.1 = true;
            }
            _ => {}
        }
    }
    (seen.0 && seen.1).then_some(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ok_line() {
        let line = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; \
                    finished in 0.01s\n";
        assert_eq!(
            parse_result_line(line),
            Some(Totals {
                passed: 12,
                failed: 0
            })
        );
    }

    #[test]
    fn parses_failed_line() {
        let line = "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; \
                    0 filtered out; finished in 1.50s";
        assert_eq!(
            parse_result_line(line),
            Some(Totals {
                passed: 3,
                failed: 2
            })
        );
    }

    #[test]
    fn parses_coloured_line() {
        let line = strip_ansi(
            "test result: \u{1b}[32mok\u{1b}[0m. 7 passed; 0 failed; 0 ignored; 0 measured; \
             0 filtered out; finished in 0.00s",
        );
        assert_eq!(
            parse_result_line(&line),
            Some(Totals {
                passed: 7,
                failed: 0
            })
        );
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test foo::bar ... ok"), None);
        assert_eq!(parse_result_line("test result: garbage"), None);
    }

    #[test]
    fn forwards_every_line_and_sums() {
        let input = "running 1 test\ntest a ... ok\n\ntest result: ok. 1 passed; 0 failed; \
                     0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
                     test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; \
                     0 filtered out; finished in 0.00s";
        let mut output = Vec::new();
        let mut totals = Totals::default();
        forward(input.as_bytes(), &mut output, |line| {
            if let Some(found) = parse_result_line(line) {
                totals.passed += found.passed;
                totals.failed += found.failed;
            }
        })
        .unwrap();
        assert_eq!(output, input.as_bytes());
        assert_eq!(
            totals,
            Totals {
                passed: 3,
                failed: 1
            }
        );
    }
}
