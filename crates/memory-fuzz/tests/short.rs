//! The short fuzz run CI does: every target on its seeds and a few thousand generated inputs,
//! with a fixed seed. `cargo xtask fuzz` runs the long version.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use memory_fuzz::{fuzz, hex, targets};

/// Inputs per target: enough to cover every seed and then mutate them, a few seconds in all.
const INPUTS: u64 = 3_000;

#[test]
fn every_target_runs_its_short_fuzz_without_a_panic() {
    let mut failures = Vec::new();
    for (i, target) in targets().iter().enumerate() {
        let report = fuzz(target, INPUTS, 42 + i as u64);
        assert_eq!(report.inputs, INPUTS, "{}", target.name);
        for crash in &report.crashes {
            failures.push(format!(
                "{}: {} (minimized input {}: {:?})",
                target.name,
                crash.message,
                hex(&crash.minimized),
                String::from_utf8_lossy(&crash.minimized)
            ));
        }
    }
    assert!(failures.is_empty(), "panics:\n{}", failures.join("\n"));
}

#[test]
fn the_same_seed_gives_the_same_inputs() {
    let corpus = memory_fuzz::Corpus::new(vec![br#"{"a": [1, "x"]}"#.to_vec()]);
    let mut a = fastrand::Rng::with_seed(7);
    let mut b = fastrand::Rng::with_seed(7);
    for _ in 0..100 {
        assert_eq!(corpus.generate(&mut a), corpus.generate(&mut b));
    }
}

fn panics_on_zz(input: &[u8]) {
    assert!(!input.windows(2).any(|w| w == b"zz"), "found zz");
}

fn seeds_with_z() -> Vec<Vec<u8>> {
    vec![b"abc z def".to_vec(), br#"{"k": "z"}"#.to_vec()]
}

#[test]
fn a_panic_is_counted_reported_and_minimized() {
    let target = memory_fuzz::Target {
        name: "test_zz",
        about: "panics on zz",
        run: panics_on_zz,
        seeds: seeds_with_z,
        valid: |_| true,
    };
    let report = fuzz(&target, 20_000, 1);
    assert_eq!(report.inputs, 20_000);
    assert!(report.panics > 0, "the mutator never made \"zz\"");
    let crash = &report.crashes[0];
    assert!(crash.message.contains("found zz"), "{}", crash.message);
    assert_eq!(crash.minimized, b"zz", "minimized to {:?}", crash.minimized);
    assert_eq!(
        memory_fuzz::unhex(&hex(&crash.input)),
        Some(crash.input.clone())
    );
}
