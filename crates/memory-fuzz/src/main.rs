//! `memory-fuzz [--inputs N] [--target NAME] [--seed S] [--repro HEX]`: runs the fuzz targets
//! (all, or one) on `N` inputs in all, split evenly, and prints per target the inputs run and
//! the panics. Exits with 1 on any panic, after printing each failing input in hex (as
//! generated and minimized); `--repro HEX` runs one input on the target and shows its panic.
//! `cargo xtask fuzz` builds and runs this binary in release mode.
// A test tool run by `cargo xtask fuzz`, not shipped code: its arithmetic and indexing are on data it generates and sizes
// itself, never on stored or network data, and a panic is how it reports a fault.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use memory_fuzz::{Target, fuzz, hex, run_one, targets, unhex};

/// The default number of inputs, over all targets.
const DEFAULT_INPUTS: u64 = 10_000_000;

struct Args {
    inputs: u64,
    target: Option<String>,
    seed: u64,
    repro: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        inputs: DEFAULT_INPUTS,
        target: None,
        seed: 0x5eed,
        repro: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{what} needs a value"))
        };
        match name.as_str() {
            "--inputs" => {
                let text = value("--inputs")?.replace('_', "");
                args.inputs = text
                    .parse()
                    .map_err(|_| format!("--inputs {text:?} is not a number"))?;
            }
            "--target" => args.target = Some(value("--target")?),
            "--seed" => {
                let text = value("--seed")?;
                args.seed = text
                    .parse()
                    .map_err(|_| format!("--seed {text:?} is not a number"))?;
            }
            "--repro" => args.repro = Some(value("--repro")?),
            "-h" | "--help" => {
                println!(
                    "memory-fuzz [--inputs N] [--target NAME] [--seed S] [--repro HEX]\n\ntargets:"
                );
                for target in targets() {
                    println!("  {:<26} {}", target.name, target.about);
                }
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("memory-fuzz: {err}");
            return ExitCode::from(2);
        }
    };
    let chosen: Vec<Target> = match &args.target {
        Some(name) => match Target::named(name) {
            Some(target) => vec![target],
            None => {
                eprintln!("memory-fuzz: no target {name:?} (try --help)");
                return ExitCode::from(2);
            }
        },
        None => targets(),
    };
    if let Some(text) = &args.repro {
        let Some(input) = unhex(text) else {
            eprintln!("memory-fuzz: --repro takes hex");
            return ExitCode::from(2);
        };
        let mut failed = false;
        for target in &chosen {
            match run_one(target.run, &input) {
                Ok(()) => println!("{}: no panic", target.name),
                Err(message) => {
                    failed = true;
                    println!("{}: PANIC: {message}", target.name);
                }
            }
        }
        return if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let per_target = args.inputs.div_ceil(chosen.len() as u64).max(1);
    let started = Instant::now();
    let (mut total, mut panics) = (0u64, 0u64);
    println!(
        "{:<26} {:>12} {:>7} {:>9}",
        "target", "inputs", "panics", "seconds"
    );
    for (i, target) in chosen.iter().enumerate() {
        let report = fuzz(target, per_target, args.seed.wrapping_add(i as u64));
        total += report.inputs;
        panics += report.panics;
        println!(
            "{:<26} {:>12} {:>7} {:>9.1}",
            report.target,
            report.inputs,
            report.panics,
            report.elapsed.as_secs_f64()
        );
        for crash in &report.crashes {
            println!("  panic: {}", crash.message);
            println!(
                "    input     ({} bytes): {}",
                crash.input.len(),
                hex(&crash.input)
            );
            println!(
                "    minimized ({} bytes): {}",
                crash.minimized.len(),
                hex(&crash.minimized)
            );
            println!(
                "    as text: {:?}",
                String::from_utf8_lossy(&crash.minimized)
            );
            println!(
                "    reproduce: cargo xtask fuzz --target {} --repro {}",
                report.target,
                hex(&crash.minimized)
            );
        }
    }
    println!(
        "total: {total} inputs, {panics} panics, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if panics == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
