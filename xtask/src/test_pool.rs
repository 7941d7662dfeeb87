//! Running test jobs (test binaries, the doctests) a few at a time.
//!
//! Most of the tests wait on the database servers, so a second and third binary running beside
//! the first use time one would leave idle. Each job's output (stdout and stderr, in the order
//! written) is kept until it ends and then printed in one piece, so jobs never interleave their
//! lines; its `test result:` lines are summed.

use std::{
    collections::VecDeque,
    io::{self, Read},
    process::Command,
    sync::{Arc, Mutex, PoisonError},
    thread,
    time::{Duration, Instant},
};

use crate::util::{self, Shown};

/// A command to run and how it is named in the output.
pub(crate) struct Job {
    /// What the output calls it: `memory-sql tests/sql/main.rs`.
    pub(crate) name: String,
    /// The command, ready to start (its stdout and stderr are set here).
    pub(crate) command: Command,
}

/// How a job ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The job's name.
    pub(crate) name: String,
    /// Tests passed and failed, summed over its `test result:` lines.
    pub(crate) totals: Totals,
    /// Whether the command exited successfully (false when it could not even start).
    pub(crate) success: bool,
    /// From start to exit.
    pub(crate) elapsed: Duration,
}

/// Passed and failed test counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Tests that passed.
    pub(crate) passed: u64,
    /// Tests that failed.
    pub(crate) failed: u64,
}

impl Totals {
    /// Adds `other`'s counts to these.
    pub(crate) fn add(&mut self, other: Totals) {
        self.passed = self.passed.saturating_add(other.passed);
        self.failed = self.failed.saturating_add(other.failed);
    }
}

/// Runs `jobs`, at most `parallel` at a time, taking them in the order given; returns how each
/// ended, in the order they ended.
pub(crate) fn run(jobs: Vec<Job>, parallel: usize) -> Vec<Finished> {
    let total = jobs.len();
    let queue = Arc::new(Mutex::new(
        jobs.into_iter().enumerate().collect::<VecDeque<_>>(),
    ));
    let finished = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let workers: Vec<_> = (0..parallel.max(1))
        .map(|_| {
            let queue = Arc::clone(&queue);
            let finished = Arc::clone(&finished);
            thread::spawn(move || {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    let Some((index, job)) = next else { break };
                    let ended = run_one(job, index.saturating_add(1), total);
                    finished
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(ended);
                }
            })
        })
        .collect();
    for worker in workers {
        // A worker only panics if printing does; the jobs it ran are recorded already.
        let _ = worker.join();
    }
    Arc::try_unwrap(finished)
        .map(|finished| {
            finished
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
        })
        .unwrap_or_else(|shared| {
            std::mem::take(&mut *shared.lock().unwrap_or_else(PoisonError::into_inner))
        })
}

/// Runs one job to its end and prints its output in one piece.
fn run_one(job: Job, number: usize, total: usize) -> Finished {
    let Job { name, mut command } = job;
    let shown = Shown(&command).to_string();
    println!("--> [{number}/{total}] {name} started");
    let started = Instant::now();
    let (output, success) = match capture(&mut command) {
        Ok((output, success)) => (output, success),
        Err(err) => (format!("could not run `{shown}`: {err}\n"), false),
    };
    drop(command);
    let elapsed = started.elapsed();
    let mut totals = Totals::default();
    for line in output.lines() {
        if let Some(found) = parse_result_line(&strip_ansi(line)) {
            totals.add(found);
        }
    }
    let verdict = if success { "ok" } else { "FAILED" };
    // One `print!` is one write under stdout's lock: jobs ending together never interleave. (And
    // `print!`, unlike writing to `io::stdout()`, is captured in xtask's own unit tests.)
    print!(
        "\n==> {name} ({shown})\n{output}<== {name}: {verdict} in {} ({} passed, {} failed)\n",
        util::secs(elapsed),
        totals.passed,
        totals.failed
    );
    Finished {
        name,
        totals,
        success,
        elapsed,
    }
}

/// Runs `command` with stdout and stderr into one pipe, read to its end; returns what it wrote
/// and whether it exited successfully.
fn capture(command: &mut Command) -> io::Result<(String, bool)> {
    let (mut reader, writer) = io::pipe()?;
    command.stdout(writer.try_clone()?).stderr(writer);
    let mut child = command.spawn()?;
    // The command keeps the pipe's writing ends it was given: replace them, or the read below
    // would never see the end of the output.
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut bytes = Vec::new();
    let read = reader.read_to_end(&mut bytes);
    let status = child.wait()?;
    read?;
    Ok((
        String::from_utf8_lossy(&bytes).into_owned(),
        status.success(),
    ))
}

/// Removes ANSI escape sequences (`ESC [ ... letter`), as in coloured libtest output.
pub(crate) fn strip_ansi(text: &str) -> String {
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
    fn jobs_run_side_by_side_and_each_ones_results_are_summed() {
        let shell = |script: &str| {
            let mut command = Command::new("sh");
            command.args(["-c", script]);
            command
        };
        let jobs = vec![
            Job {
                name: "passing".to_owned(),
                command: shell(
                    "echo 'test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; \
                     0 filtered out; finished in 0.00s'; echo on-stderr >&2",
                ),
            },
            Job {
                name: "failing".to_owned(),
                command: shell(
                    "echo 'test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; \
                     0 filtered out; finished in 0.00s'; exit 101",
                ),
            },
            Job {
                name: "missing".to_owned(),
                command: Command::new("/nonexistent/test-binary"),
            },
        ];
        let mut finished = run(jobs, 2);
        finished.sort_by(|a, b| a.name.cmp(&b.name));
        let summary: Vec<_> = finished
            .iter()
            .map(|job| (job.name.as_str(), job.success, job.totals))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "failing",
                    false,
                    Totals {
                        passed: 1,
                        failed: 1
                    }
                ),
                ("missing", false, Totals::default()),
                (
                    "passing",
                    true,
                    Totals {
                        passed: 2,
                        failed: 0
                    }
                ),
            ]
        );
    }
}
