//! From paths to dependencies between sibling modules.
//!
//! Every `use` path and every `crate::…` / `super::…` / `self::…` path is made absolute, then
//! walked down the module tree; a name that is not a module is looked up among the `use`
//! declarations of the module it is in, so `crate::Scope` (re-exported by `lib.rs` from
//! `scope`) leads to `scope`. The module reached is the path's target. A reference from module
//! `a::x::…` to module `a::y::…` is a dependency of `x` on `y`, two children of `a`; references
//! from a module to its own ancestors or descendants are not dependencies between siblings.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use super::tree::{ModPath, Tree, joined};

/// Where a reference is: a file and a line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Location {
    /// The file.
    pub(crate) file: PathBuf,
    /// The line (1-based).
    pub(crate) line: usize,
}

/// A dependency of one child of `parent` on another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    /// The module whose children these are (`[]`: the crate's top-level modules).
    pub(crate) parent: ModPath,
    /// The child that refers.
    pub(crate) from: String,
    /// The child referred to.
    pub(crate) to: String,
}

/// Every sibling dependency of a crate, with where each is made.
pub(crate) type Edges = BTreeMap<Edge, Vec<Location>>;

/// How many `use` hops a path may take before the walk gives up (a re-export loop).
const MAX_HOPS: usize = 32;

/// The sibling dependencies of `tree`.
pub(crate) fn edges(tree: &Tree) -> Edges {
    let resolver = Resolver::new(tree);
    let mut edges = Edges::new();
    for file in &tree.files {
        let uses = file
            .items
            .uses
            .iter()
            .map(|u| (&u.within, &u.path, u.line, true));
        let refs = file
            .items
            .refs
            .iter()
            .map(|r| (&r.within, &r.path, r.line, false));
        for (within, path, line, in_use) in uses.chain(refs) {
            let from = joined(&file.module, within);
            let Some(absolute) = resolver.absolute(&from, path, in_use) else {
                continue;
            };
            let target = resolver.locate(absolute);
            if let Some(edge) = sibling_edge(&from, &target) {
                edges.entry(edge).or_default().push(Location {
                    file: file.path.clone(),
                    line,
                });
            }
        }
    }
    for locations in edges.values_mut() {
        locations.sort();
        locations.dedup();
    }
    edges
}

/// The dependency between siblings that a reference from `from` to `target` makes, if any.
fn sibling_edge(from: &[String], target: &[String]) -> Option<Edge> {
    let common = from.iter().zip(target).take_while(|(a, b)| a == b).count();
    let source = from.get(common)?;
    let dest = target.get(common)?;
    Some(Edge {
        parent: from.get(..common)?.to_vec(),
        from: source.clone(),
        to: dest.clone(),
    })
}

/// The module tree and the names each module's `use` declarations bring in.
struct Resolver<'a> {
    modules: &'a BTreeSet<ModPath>,
    /// (module, name) → the absolute path the name stands for.
    imports: BTreeMap<(ModPath, String), Vec<String>>,
}

impl<'a> Resolver<'a> {
    fn new(tree: &'a Tree) -> Self {
        let mut resolver = Self {
            modules: &tree.modules,
            imports: BTreeMap::new(),
        };
        // Imports may name other imports (`use a::B` where `a` re-exports `B`): absolute paths
        // are enough here, the walk in `locate` follows the rest.
        for file in &tree.files {
            for decl in file.items.uses.iter().filter(|u| u.item_level) {
                let module = joined(&file.module, &decl.within);
                let (Some(name), Some(absolute)) = (
                    decl.name.clone(),
                    resolver.absolute(&module, &decl.path, true),
                ) else {
                    continue;
                };
                resolver.imports.insert((module, name), absolute);
            }
        }
        resolver
    }

    /// `path`, written in module `from`, from the crate root; `None` for a path into another
    /// crate. In a `use` declaration, a path may also start with a child module's name.
    fn absolute(&self, from: &[String], path: &[String], in_use: bool) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => from.to_vec(),
            "super" => {
                let mut base = from.to_vec();
                base.pop()?;
                let mut rest = rest;
                while let Some(("super", more)) = rest.split_first().map(|(s, m)| (s.as_str(), m)) {
                    base.pop()?;
                    rest = more;
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ if in_use
                && self
                    .modules
                    .contains(&joined(from, std::slice::from_ref(first))) =>
            {
                let mut base = from.to_vec();
                base.push(first.clone());
                base
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module an absolute path ends in: the deepest module it walks through, following
    /// imports for names that are not modules.
    fn locate(&self, mut path: Vec<String>) -> ModPath {
        let mut module: ModPath = Vec::new();
        let mut index = 0usize;
        let mut hops = 0usize;
        while let Some(segment) = path.get(index) {
            let mut child = module.clone();
            child.push(segment.clone());
            if self.modules.contains(&child) {
                module = child;
                index = index.saturating_add(1);
                continue;
            }
            let imported = self.imports.get(&(module.clone(), segment.clone()));
            match imported {
                Some(target) if hops < MAX_HOPS => {
                    hops = hops.saturating_add(1);
                    let rest = path.get(index.saturating_add(1)..).unwrap_or_default();
                    path = target.iter().chain(rest).cloned().collect();
                    module = Vec::new();
                    index = 0;
                }
                _ => break,
            }
        }
        module
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::cycles::tree::{fixture::Files, load};

    fn edge_list(files: &[(&str, &str)]) -> Vec<String> {
        let tree = load(&Files::new(files), Path::new("src/lib.rs"));
        edges(&tree)
            .into_iter()
            .map(|(edge, locations)| {
                let at: Vec<String> = locations
                    .iter()
                    .map(|l| format!("{}:{}", l.file.display(), l.line))
                    .collect();
                let mut parent = edge.parent.join("::");
                if !parent.is_empty() {
                    parent.push_str("::");
                }
                format!(
                    "{parent}{} -> {parent}{} @ {}",
                    edge.from,
                    edge.to,
                    at.join(",")
                )
            })
            .collect()
    }

    #[test]
    fn re_exports_are_followed_to_the_defining_module() {
        let edges = edge_list(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\npub use b::{Thing, inner::Deep};",
            ),
            (
                "src/a.rs",
                "use crate::Thing;\nfn f() -> crate::Deep { todo!() }",
            ),
            ("src/b.rs", "pub mod inner;\npub struct Thing;"),
            ("src/b/inner.rs", "pub struct Deep;"),
        ]);
        assert_eq!(edges, ["a -> b @ src/a.rs:1,src/a.rs:2"]);
    }

    #[test]
    fn deep_references_count_at_every_level_they_cross() {
        let edges = edge_list(&[
            ("src/lib.rs", "mod a;\nmod b;"),
            ("src/a.rs", "mod x;\nmod y;"),
            ("src/a/x.rs", "use super::y::Y;\nuse crate::b::c::C;"),
            ("src/a/y.rs", "pub struct Y;"),
            ("src/b.rs", "pub mod c;"),
            ("src/b/c.rs", "pub struct C;"),
        ]);
        assert_eq!(
            edges,
            ["a -> b @ src/a/x.rs:2", "a::x -> a::y @ src/a/x.rs:1"]
        );
    }

    #[test]
    fn parents_and_children_are_not_siblings() {
        let edges = edge_list(&[
            ("src/lib.rs", "mod a;\npub struct Root;"),
            (
                "src/a.rs",
                "mod x;\nuse x::X;\nuse crate::Root;\npub struct A;",
            ),
            (
                "src/a/x.rs",
                "use super::A;\nuse crate::a::A as B;\npub struct X;",
            ),
        ]);
        assert!(edges.is_empty(), "{edges:?}");
    }

    #[test]
    fn other_crates_are_not_followed() {
        let edges = edge_list(&[
            ("src/lib.rs", "mod a;\nmod b;"),
            ("src/a.rs", "use std::b::X;\nuse serde::Serialize;"),
            ("src/b.rs", ""),
        ]);
        assert!(edges.is_empty(), "{edges:?}");
    }

    #[test]
    fn a_re_export_loop_ends() {
        let edges = edge_list(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\npub use self::X as Y;\npub use self::Y as X;",
            ),
            ("src/a.rs", "use crate::X;"),
            ("src/b.rs", ""),
        ]);
        assert!(edges.is_empty(), "{edges:?}");
    }
}
