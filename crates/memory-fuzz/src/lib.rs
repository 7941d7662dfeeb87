//! Property-based fuzzing, on stable Rust, of every decoder of agent-memory that reads bytes
//! from outside the process: message JSON and OpenAI messages, session and chat state, the
//! memory block state document, peer formats (Agent Framework, LlamaIndex, Python JSON),
//! scope keys, URLs, HTTP headers, and Mem0 and OpenAI answers.
//!
//! Each [`Target`] is a `fn(&[u8])` that feeds one input to one decoder (or a family of
//! decoders of the same bytes) and asserts its properties: it does not panic, a failure is a
//! typed [`memory_core::Error`] of the kind the decoder documents, and where a format promises
//! it, decode → encode → decode gives the same value. A failed assertion is a panic too.
//!
//! [`fuzz`] draws inputs from a seed corpus (the documented vectors under `docs/` and examples
//! from the crates' tests), by byte mutation, structural mutation of the seeds parsed as JSON,
//! and generated JSON; it runs each input under [`std::panic::catch_unwind`] and counts the
//! panics. No nightly compiler, no sanitizer: `cargo xtask fuzz` builds this crate in release
//! mode and runs its binary.
// A test tool run by `cargo test` and `cargo xtask fuzz`, not shipped code: its arithmetic and indexing are on data it generates and sizes
// itself, never on stored or network data, and a panic is how it reports a fault.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
#![forbid(unsafe_code)]

mod mutate;
mod seeds;
mod targets;

use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

pub use mutate::Corpus;
pub use targets::targets;

/// One fuzz target: a decoder and the properties its outputs must have.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its name, for `--target`.
    pub name: &'static str,
    /// What it decodes.
    pub about: &'static str,
    /// Feeds one input to the decoder and asserts the properties; panics when one fails.
    pub run: fn(&[u8]),
    /// The seed inputs.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Whether the decoder accepts an input: the seeds it accepts are the ones mutated most.
    pub valid: fn(&[u8]) -> bool,
}

impl Target {
    /// The target called `name`, if there is one.
    pub fn named(name: &str) -> Option<Target> {
        targets().into_iter().find(|t| t.name == name)
    }
}

/// A panic: the input that caused it, smallest first found, and what the panic said.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The input as generated.
    pub input: Vec<u8>,
    /// A smaller input that panics too (the same as `input` when none was found).
    pub minimized: Vec<u8>,
    /// The panic's message.
    pub message: String,
}

/// What one target's run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target's name.
    pub target: &'static str,
    /// How many inputs it ran.
    pub inputs: u64,
    /// How many of them panicked.
    pub panics: u64,
    /// The first few panics (at most [`MAX_CRASHES`]), each with its input.
    pub crashes: Vec<Crash>,
    /// How long the run took.
    pub elapsed: Duration,
}

/// How many panicking inputs a [`Report`] keeps.
pub const MAX_CRASHES: usize = 5;

/// Runs `target` on its seeds, then on generated inputs until `inputs` inputs ran in all, with
/// the random generator seeded by `seed` (the same seed gives the same inputs).
///
/// Installs a silent panic hook for the run (the panics are counted and reported, not
/// printed) and restores the previous one afterwards.
pub fn fuzz(target: &Target, inputs: u64, seed: u64) -> Report {
    let started = Instant::now();
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let corpus = Corpus::new((target.seeds)()).focused(target.valid);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut report = Report {
        target: target.name,
        inputs: 0,
        panics: 0,
        crashes: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let mut seeds = corpus.seeds().iter();
    while report.inputs < inputs {
        let input = match seeds.next() {
            Some(seed) => seed.clone(),
            None => corpus.generate(&mut rng),
        };
        report.inputs += 1;
        if let Err(message) = run_one(target.run, &input) {
            report.panics += 1;
            if report.crashes.len() < MAX_CRASHES {
                let minimized = minimize(target.run, &input);
                report.crashes.push(Crash {
                    input,
                    minimized,
                    message,
                });
            }
        }
    }
    panic::set_hook(previous);
    report.elapsed = started.elapsed();
    report
}

/// Runs `run` on `input`: `Err` with the panic's message when it panicked.
pub fn run_one(run: fn(&[u8]), input: &[u8]) -> Result<(), String> {
    panic::catch_unwind(AssertUnwindSafe(|| run(input))).map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned())
    })
}

/// A smaller input that still panics: removes chunks, halving their size, while the input
/// keeps panicking (at most a few thousand tries).
pub fn minimize(run: fn(&[u8]), input: &[u8]) -> Vec<u8> {
    let mut best = input.to_vec();
    let mut tries = 0;
    let mut chunk = best.len().max(1) / 2;
    while chunk > 0 && tries < 4000 {
        let mut at = 0;
        let mut shrunk = false;
        while at < best.len() && tries < 4000 {
            let end = (at + chunk).min(best.len());
            let mut candidate = best[..at].to_vec();
            candidate.extend_from_slice(&best[end..]);
            tries += 1;
            if run_one(run, &candidate).is_err() {
                best = candidate;
                shrunk = true;
            } else {
                at += chunk;
            }
        }
        if !shrunk {
            chunk /= 2;
        }
    }
    best
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of `text` written as hex (whitespace ignored); `None` for anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(pair, 16).ok()
        })
        .collect()
}
