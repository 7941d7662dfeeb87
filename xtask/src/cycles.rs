//! `cargo xtask cycles` (and a step of `cargo xtask ci`): no import circles between the modules
//! of a crate.
//!
//! For every crate of the workspace (each root file: `src/lib.rs`, `src/main.rs`,
//! `src/bin/*.rs`), the module tree is read from the `mod` declarations, and every `use` path
//! and every `crate::…` / `super::…` / `self::…` path in code is resolved to the module it
//! names (following re-exports such as `crate::Scope`). A reference from `a::x::…` to
//! `a::y::…` makes `x` depend on `y`, two children of `a`; at each level (the crate's top-level
//! modules, and the children of each module) the check fails on any cycle, listing every
//! dependency in it with its file and line.
//!
//! What it does not see, on purpose: `#[cfg(test)]` items (a test module may use anything),
//! doc links, and `$crate::…` paths in macros. It reads the source as text with a small lexer
//! (no compiler), so it needs no build and takes well under a second.

mod graph;
mod lexer;
mod parse;
mod resolve;
mod tree;

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use crate::util::{self, Result};

/// Reads files from the disk.
struct Disk;

impl tree::Source for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        fs::read_to_string(path).ok()
    }
}

/// Runs the check on the workspace: fails listing every cycle.
pub(crate) fn run() -> Result {
    let root = util::workspace_root()?;
    let manifest = fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|err| format!("could not read the workspace's Cargo.toml: {err}"))?;
    let mut report = String::new();
    let mut crates = 0usize;
    let mut tangles = 0usize;
    for member in members(&manifest) {
        for crate_root in crate_roots(&root.join(&member)) {
            crates = crates.saturating_add(1);
            let tree = tree::load(&Disk, &crate_root);
            for missing in &tree.missing {
                println!("note: {member}: module file not found: {missing}");
            }
            let found = graph::tangles(&resolve::edges(&tree));
            if found.is_empty() {
                continue;
            }
            tangles = tangles.saturating_add(found.len());
            let shown_root = crate_root.strip_prefix(&root).unwrap_or(&crate_root);
            report.push_str(&describe(&shown_root.display().to_string(), &found, &root));
        }
    }
    if tangles == 0 {
        println!("no module cycles in {crates} crate roots");
        return Ok(());
    }
    print!("{report}");
    Err(format!(
        "{tangles} group(s) of modules depend on each other in a circle (listed above); break \
         each by moving what they share into a module both can use"
    )
    .into())
}

/// The report of one crate root's tangles: each cycle, then every dependency in it.
fn describe(crate_root: &str, tangles: &[graph::Tangle], workspace: &Path) -> String {
    let mut out = String::new();
    for tangle in tangles {
        let prefix = if tangle.parent.is_empty() {
            String::new()
        } else {
            format!("{}::", tangle.parent.join("::"))
        };
        let level = if tangle.parent.is_empty() {
            "top-level modules".to_owned()
        } else {
            format!("children of crate::{}", tangle.parent.join("::"))
        };
        let _ = writeln!(out, "\n{crate_root}: cycle among the {level}:");
        for cycle in &tangle.cycles {
            let named: Vec<String> = cycle.iter().map(|m| format!("{prefix}{m}")).collect();
            let _ = writeln!(out, "  {}", named.join(" -> "));
        }
        if tangle.more {
            let _ = writeln!(out, "  … and more cycles");
        }
        let _ = writeln!(out, "  through:");
        for (edge, locations) in &tangle.edges {
            let at: Vec<String> = locations
                .iter()
                .map(|l| {
                    let file = l.file.strip_prefix(workspace).unwrap_or(&l.file);
                    format!("{}:{}", file.display(), l.line)
                })
                .collect();
            let _ = writeln!(
                out,
                "    {prefix}{} -> {prefix}{}: {}",
                edge.from,
                edge.to,
                at.join(", ")
            );
        }
    }
    out
}

/// The member directories listed in the workspace manifest's `members = [ … ]`.
fn members(manifest: &str) -> Vec<String> {
    let mut offset = 0usize;
    let mut start = None;
    for line in manifest.split_inclusive('\n') {
        if line
            .trim_start()
            .strip_prefix("members")
            .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            start = Some(offset);
            break;
        }
        offset = offset.saturating_add(line.len());
    }
    let Some(start) = start else {
        return Vec::new();
    };
    let rest = manifest.get(start..).unwrap_or_default();
    let Some(open) = rest.find('[') else {
        return Vec::new();
    };
    let Some(close) = rest.find(']') else {
        return Vec::new();
    };
    let list = rest.get(open.saturating_add(1)..close).unwrap_or_default();
    list.lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"').to_owned())
        .filter(|item| !item.is_empty())
        .collect()
}

/// A crate's root files: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`.
fn crate_roots(dir: &Path) -> Vec<PathBuf> {
    let src = dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|file| src.join(file))
        .filter(|path| path.is_file())
        .collect();
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter_map(|path| {
                if path.is_dir() {
                    Some(path.join("main.rs")).filter(|main| main.is_file())
                } else {
                    Some(path).filter(|p| p.extension().is_some_and(|e| e == "rs"))
                }
            })
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::{tree::fixture::Files, *};

    /// The cycles `describe` reports for a crate of `files` (rooted at `src/lib.rs`).
    fn cycles_of(files: &[(&str, &str)]) -> Vec<String> {
        let tree = tree::load(&Files::new(files), Path::new("src/lib.rs"));
        graph::tangles(&resolve::edges(&tree))
            .iter()
            .flat_map(|t| {
                let prefix = t
                    .parent
                    .iter()
                    .map(|p| format!("{p}::"))
                    .collect::<String>();
                t.cycles.iter().map(move |c| {
                    c.iter()
                        .map(|m| format!("{prefix}{m}"))
                        .collect::<Vec<_>>()
                        .join(" -> ")
                })
            })
            .collect()
    }

    #[test]
    fn a_two_cycle_through_a_re_export_is_found() {
        let cycles = cycles_of(&[
            (
                "src/lib.rs",
                "pub mod forget;\npub mod lexical;\npub use forget::ForgetFilter;",
            ),
            (
                "src/forget.rs",
                "use crate::lexical::TextIndex;\npub struct ForgetFilter;",
            ),
            (
                "src/lexical.rs",
                "pub trait TextIndex { fn f(&self, x: &crate::ForgetFilter); }",
            ),
        ]);
        assert_eq!(cycles, ["forget -> lexical -> forget"]);
    }

    #[test]
    fn a_three_cycle_is_found() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;"),
            ("src/a.rs", "use crate::b::B;"),
            ("src/b.rs", "pub struct B(crate::c::C);"),
            ("src/c.rs", "use crate::{a};\npub struct C;"),
        ]);
        assert_eq!(cycles, ["a -> b -> c -> a"]);
    }

    #[test]
    fn a_cycle_between_submodules_of_one_module_is_found() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod memory;"),
            ("src/memory.rs", "mod blocks;\nmod state;"),
            (
                "src/memory/blocks.rs",
                "use super::state::State;\npub struct Block;",
            ),
            (
                "src/memory/state.rs",
                "pub struct State(super::blocks::Block);",
            ),
        ]);
        assert_eq!(
            cycles,
            ["memory::blocks -> memory::state -> memory::blocks"]
        );
    }

    #[test]
    fn a_child_using_its_parent_is_not_a_cycle() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod memory;\nmod scope;"),
            (
                "src/memory.rs",
                "mod state;\nuse state::State;\npub struct Memory;",
            ),
            (
                "src/memory/state.rs",
                "use super::Memory;\nuse crate::scope::Scope;\npub struct State;",
            ),
            ("src/scope.rs", "pub struct Scope;"),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn test_modules_may_use_anything() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod a;\nmod b;"),
            ("src/a.rs", "use crate::b::B;\npub struct A;"),
            (
                "src/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n\
                 #[cfg(test)]\nmod more;\n#[cfg(test)]\nfn helper() -> crate::a::A { crate::a::A }",
            ),
            ("src/b/more.rs", "use crate::a::A;"),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn comments_and_strings_do_not_make_cycles() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod a;\nmod b;"),
            ("src/a.rs", "use crate::b::B;"),
            (
                "src/b.rs",
                "// use crate::a::A;\n/// See [`A`](crate::a::A).\npub struct B;\n\
                 const S: &str = \"crate::a::A\";\nconst R: &str = r#\"use crate::a;\"#;",
            ),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn the_report_names_every_edge_with_file_and_line() {
        let tree = tree::load(
            &Files::new(&[
                ("src/lib.rs", "mod a;\nmod b;"),
                ("src/a.rs", "use crate::b::B;\n\nfn f() { crate::b::g(); }"),
                ("src/b.rs", "pub struct B;\nuse crate::a;"),
            ]),
            Path::new("src/lib.rs"),
        );
        let report = describe(
            "crates/x/src/lib.rs",
            &graph::tangles(&resolve::edges(&tree)),
            Path::new("/nowhere"),
        );
        assert_eq!(
            report,
            "\ncrates/x/src/lib.rs: cycle among the top-level modules:\n  a -> b -> a\n  \
             through:\n    a -> b: src/a.rs:1, src/a.rs:3\n    b -> a: src/b.rs:2\n"
        );
    }

    #[test]
    fn members_are_read_from_the_manifest() {
        let manifest = "[workspace]\ndefault-members = [\"crates/b\"]\nmembers = [\n    \"crates/a\", # note\n    \
                        \"xtask\",\n]\n";
        assert_eq!(members(manifest), ["crates/a", "xtask"]);
    }
}
