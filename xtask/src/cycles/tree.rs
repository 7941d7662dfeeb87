//! A crate's module tree: from its root file, every `mod name;` followed to its file
//! (`name.rs` or `name/mod.rs` beside the parent's directory, or a `#[path]`), parsed.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use super::{
    lexer,
    parse::{self, FileItems},
};

/// A module's path from the crate root: `[]` is the root, `["memory", "blocks"]` is
/// `crate::memory::blocks`.
pub(crate) type ModPath = Vec<String>;

/// Where source files come from: the disk, or a test's map.
pub(crate) trait Source {
    /// The text of `path`, or `None` if there is no such file.
    fn read(&self, path: &Path) -> Option<String>;
}

/// One file of the tree: where it is, which module it holds, what it says.
#[derive(Debug)]
pub(crate) struct File {
    /// Its path, as the source names it.
    pub(crate) path: PathBuf,
    /// The module its top level is.
    pub(crate) module: ModPath,
    /// Its modules, uses and paths.
    pub(crate) items: FileItems,
}

/// A crate's modules and files.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// Every module, the root (`[]`) included.
    pub(crate) modules: BTreeSet<ModPath>,
    /// Every file reached from the root.
    pub(crate) files: Vec<File>,
    /// `mod` declarations whose file was not found (`crate::a::b`, and where it was looked
    /// for).
    pub(crate) missing: Vec<String>,
}

/// Reads the tree of the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`, …).
pub(crate) fn load(source: &dyn Source, root: &Path) -> Tree {
    let mut tree = Tree::default();
    tree.modules.insert(Vec::new());
    // A root file is like a `mod.rs`: its children are beside it.
    let root_dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut queue: Vec<(PathBuf, ModPath, PathBuf)> =
        vec![(root.to_path_buf(), Vec::new(), root_dir)];
    while let Some((path, module, child_dir)) = queue.pop() {
        let Some(text) = source.read(&path) else {
            continue;
        };
        let items = parse::parse(&lexer::tokenize(&text));
        for inline in &items.inline_mods {
            tree.modules.insert(joined(&module, inline));
        }
        for decl in &items.mods {
            let mut child = joined(&module, &decl.within);
            child.push(decl.name.clone());
            let mut dir = child_dir.clone();
            dir.extend(&decl.within);
            let candidates: Vec<(PathBuf, PathBuf)> = match &decl.path_attr {
                Some(file) => {
                    let base = if decl.within.is_empty() {
                        path.parent().map(Path::to_path_buf).unwrap_or_default()
                    } else {
                        dir.clone()
                    };
                    let file = base.join(file);
                    let file_dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
                    vec![(file, file_dir)]
                }
                None => {
                    let own_dir = dir.join(&decl.name);
                    vec![
                        (dir.join(format!("{}.rs", decl.name)), own_dir.clone()),
                        (own_dir.join("mod.rs"), own_dir),
                    ]
                }
            };
            match candidates
                .iter()
                .find(|(file, _)| source.read(file).is_some())
            {
                Some((file, file_dir)) => {
                    tree.modules.insert(child.clone());
                    queue.push((file.clone(), child, file_dir.clone()));
                }
                None => {
                    let looked: Vec<String> = candidates
                        .iter()
                        .map(|(file, _)| file.display().to_string())
                        .collect();
                    tree.missing.push(format!(
                        "crate::{} (looked for {})",
                        child.join("::"),
                        looked.join(", ")
                    ));
                }
            }
        }
        tree.files.push(File {
            path,
            module,
            items,
        });
    }
    tree.files.sort_by(|a, b| a.path.cmp(&b.path));
    tree
}

/// `base` followed by `more`.
pub(crate) fn joined(base: &[String], more: &[String]) -> ModPath {
    base.iter().chain(more).cloned().collect()
}

#[cfg(test)]
pub(crate) mod fixture {
    //! An in-memory source for the tests of the cycle check.

    use std::{
        collections::BTreeMap,
        path::{Path, PathBuf},
    };

    use super::Source;

    /// Files by path.
    pub(crate) struct Files(pub(crate) BTreeMap<PathBuf, String>);

    impl Files {
        /// A source holding `files` (path, text).
        pub(crate) fn new(files: &[(&str, &str)]) -> Self {
            Self(
                files
                    .iter()
                    .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
                    .collect(),
            )
        }
    }

    impl Source for Files {
        fn read(&self, path: &Path) -> Option<String> {
            self.0.get(path).cloned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fixture::Files, *};

    fn paths(tree: &Tree) -> Vec<String> {
        tree.modules.iter().map(|m| m.join("::")).collect()
    }

    #[test]
    fn both_module_file_layouts_and_inline_modules_are_followed() {
        let files = Files::new(&[
            (
                "src/lib.rs",
                "pub mod a;\nmod b;\nmod c { mod d; }\n#[cfg(test)]\nmod tests;",
            ),
            ("src/a.rs", "mod x;"),
            ("src/a/x.rs", ""),
            ("src/b/mod.rs", "mod y;"),
            ("src/b/y.rs", ""),
            ("src/c/d.rs", ""),
            ("src/tests.rs", "use crate::a;"),
        ]);
        let tree = load(&files, Path::new("src/lib.rs"));
        assert_eq!(paths(&tree), ["", "a", "a::x", "b", "b::y", "c", "c::d"]);
        assert_eq!(tree.files.len(), 6, "the test module's file is not read");
        assert!(tree.missing.is_empty(), "{:?}", tree.missing);
    }

    #[test]
    fn path_attributes_and_missing_files() {
        let files = Files::new(&[
            (
                "src/main.rs",
                "#[path = \"other/place.rs\"]\npub(crate) mod moved;\nmod gone;",
            ),
            ("src/other/place.rs", ""),
        ]);
        let tree = load(&files, Path::new("src/main.rs"));
        assert_eq!(paths(&tree), ["", "moved"]);
        assert_eq!(tree.missing.len(), 1);
        assert!(tree.missing.iter().all(|m| m.starts_with("crate::gone")));
    }
}
