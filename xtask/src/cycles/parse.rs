//! What one source file says about modules: the modules it declares (out of line and inline),
//! its `use` declarations and every `crate::…` / `super::…` / `self::…` path in its code.
//!
//! Items under `#[cfg(test)]` (usually `mod tests`) are skipped whole: a test module may use
//! anything without making a cycle. `$crate::…` paths (inside `macro_rules!`) are skipped too:
//! they resolve where the macro is called.

use super::lexer::{Kind, Token};

/// A path relative to the file's module: the names of the inline modules around it.
pub(crate) type Inline = Vec<String>;

/// `mod name;`: a module whose body is in another file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModDecl {
    /// The inline modules the declaration sits in (empty at the file's top level).
    pub(crate) within: Inline,
    /// The module's name.
    pub(crate) name: String,
    /// The file named by a `#[path = "…"]` attribute, if any.
    pub(crate) path_attr: Option<String>,
}

/// One path of a `use` declaration (a `use` tree gives one per leaf).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UseDecl {
    /// The inline modules the declaration sits in.
    pub(crate) within: Inline,
    /// Whether it sits among the module's items (so it adds a name to the module), rather
    /// than in a function body.
    pub(crate) item_level: bool,
    /// The path as written, `self` leaves folded into their parent (`a::{self}` is `a`).
    pub(crate) path: Vec<String>,
    /// The name it brings in (`as` name, or the path's last segment); `None` for a glob or
    /// `as _`.
    pub(crate) name: Option<String>,
    /// The line of the path's last segment.
    pub(crate) line: usize,
}

/// A `crate::…`, `super::…` or `self::…` path outside `use` declarations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathRef {
    /// The inline modules the path sits in.
    pub(crate) within: Inline,
    /// Its segments, the leading `crate` / `super` / `self` included.
    pub(crate) path: Vec<String>,
    /// The line of its first segment.
    pub(crate) line: usize,
}

/// What a file declares and refers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileItems {
    /// Out-of-line module declarations.
    pub(crate) mods: Vec<ModDecl>,
    /// Inline modules (`mod name { … }`), each as the full inline path.
    pub(crate) inline_mods: Vec<Inline>,
    /// `use` declarations.
    pub(crate) uses: Vec<UseDecl>,
    /// Other module paths.
    pub(crate) refs: Vec<PathRef>,
}

/// An open `{`: an inline module's body or any other block.
#[derive(Debug)]
enum Open {
    /// The body of `mod name { … }`.
    Module,
    /// Any other block.
    Block,
}

/// Parses `tokens` (one file's).
pub(crate) fn parse(tokens: &[Token]) -> FileItems {
    let mut parser = Parser {
        tokens,
        pos: 0,
        within: Vec::new(),
        open: Vec::new(),
        items: FileItems::default(),
    };
    parser.run();
    parser.items
}

/// The attributes met before an item.
#[derive(Debug, Default)]
struct Pending {
    /// `#[cfg(test)]` (or `#[cfg(all(test, …))]`) was among them.
    test: bool,
    /// A `#[path = "…"]` attribute's file.
    path: Option<String>,
}

struct Parser<'t> {
    tokens: &'t [Token],
    pos: usize,
    /// The inline modules the parser is in.
    within: Inline,
    /// The open blocks, innermost last.
    open: Vec<Open>,
    items: FileItems,
}

/// One leaf of a use tree: the path, the name it brings in, the line of its last segment.
struct Leaf {
    path: Vec<String>,
    name: Option<String>,
    line: usize,
}

impl<'t> Parser<'t> {
    fn at(&self, ahead: usize) -> Option<&'t Token> {
        self.tokens.get(self.pos.saturating_add(ahead))
    }

    fn advance(&mut self, n: usize) {
        self.pos = self.pos.saturating_add(n);
    }

    /// Whether the parser is among a module's items (not inside a function, impl, …).
    fn item_level(&self) -> bool {
        matches!(self.open.last(), None | Some(Open::Module))
    }

    fn run(&mut self) {
        let mut pending = Pending::default();
        while let Some(token) = self.at(0) {
            match &token.kind {
                Kind::Punct('#') => {
                    let inner = self.at(1).is_some_and(|t| t.is_punct('!'));
                    let attr = self.attribute();
                    if inner {
                        if attr.test {
                            // `#![cfg(test)]`: the whole module is a test module.
                            self.skip_to_module_end();
                        }
                    } else {
                        pending.test |= attr.test;
                        if attr.path.is_some() {
                            pending.path = attr.path;
                        }
                    }
                    continue;
                }
                _ if pending.test => {
                    self.skip_item();
                    pending = Pending::default();
                    continue;
                }
                Kind::Word(w) if w == "pub" => {
                    // A visibility belongs to the item after it: keep the attributes.
                    self.advance(1);
                    if self.at(0).is_some_and(|t| t.is_punct('(')) {
                        self.skip_balanced();
                    }
                    continue;
                }
                Kind::Word(w) if w == "mod" => {
                    let path_attr = pending.path.take();
                    self.module(path_attr);
                }
                Kind::Word(w) if w == "use" => self.use_decl(),
                Kind::Word(w) if matches!(w.as_str(), "crate" | "super" | "self") => {
                    self.path_ref();
                }
                Kind::Punct('{') => {
                    self.open.push(Open::Block);
                    self.advance(1);
                }
                Kind::Punct('}') => {
                    if let Some(Open::Module) = self.open.pop() {
                        self.within.pop();
                    }
                    self.advance(1);
                }
                _ => self.advance(1),
            }
            pending = Pending::default();
        }
    }

    /// Reads `#[…]` or `#![…]` from the `#`.
    fn attribute(&mut self) -> Pending {
        let mut attr = Pending::default();
        self.advance(1);
        if self.at(0).is_some_and(|t| t.is_punct('!')) {
            self.advance(1);
        }
        if !self.at(0).is_some_and(|t| t.is_punct('[')) {
            return attr;
        }
        let start = self.pos;
        self.skip_balanced();
        let body = self.tokens.get(start..self.pos).unwrap_or_default();
        attr.test = is_cfg_test(body);
        if let [open, name, eq, value, close] = body
            && open.is_punct('[')
            && name.is_word("path")
            && eq.is_punct('=')
            && close.is_punct(']')
            && let Kind::Str(file) = &value.kind
        {
            attr.path = Some(file.clone());
        }
        attr
    }

    /// Moves past a bracketed group (`[…]`, `(…)`, `{…}`) from its opening bracket, or past
    /// one token if it is not at one.
    fn skip_balanced(&mut self) {
        let mut depth = 0usize;
        while let Some(token) = self.at(0) {
            let opens = matches!(token.kind, Kind::Punct('[' | '(' | '{'));
            let closes = matches!(token.kind, Kind::Punct(']' | ')' | '}'));
            self.advance(1);
            if opens {
                depth = depth.saturating_add(1);
            } else if closes {
                depth = depth.saturating_sub(1);
            }
            if depth == 0 {
                break;
            }
        }
    }

    /// Skips one item (after its attributes): up to a `;` outside brackets, or through the
    /// brace group that ends it. Stops before a `}` that closes the enclosing block.
    fn skip_item(&mut self) {
        let mut depth = 0usize;
        while let Some(token) = self.at(0) {
            match token.kind {
                Kind::Punct('[' | '(' | '{') => {
                    depth = depth.saturating_add(1);
                    self.advance(1);
                }
                Kind::Punct(']' | ')' | '}') => {
                    if depth == 0 {
                        return;
                    }
                    depth = depth.saturating_sub(1);
                    let closes_brace = token.is_punct('}');
                    self.advance(1);
                    if depth == 0 && closes_brace {
                        // `fn f() { … }`, `mod m { … }`, `impl … { … }`; a `;` may follow
                        // (`struct S { … };` is not Rust, but `const X: T = T { … };` is).
                        if self.at(0).is_some_and(|t| t.is_punct(';')) {
                            self.advance(1);
                        }
                        return;
                    }
                }
                Kind::Punct(';') if depth == 0 => {
                    self.advance(1);
                    return;
                }
                _ => self.advance(1),
            }
        }
    }

    /// Skips to the end of the module the parser is in: the file's end, or the `}` of the
    /// inline module (which the main loop then reads, closing the module).
    fn skip_to_module_end(&mut self) {
        let mut depth = 0usize;
        while let Some(token) = self.at(0) {
            if token.is_punct('{') {
                depth = depth.saturating_add(1);
            } else if token.is_punct('}') {
                if depth == 0 {
                    // The inline module's own `}`: pop blocks opened since it.
                    while let Some(Open::Block) = self.open.last() {
                        self.open.pop();
                    }
                    return;
                }
                depth = depth.saturating_sub(1);
            }
            self.advance(1);
        }
    }

    /// `mod name;` or `mod name { … }`, from `mod`.
    fn module(&mut self, path_attr: Option<String>) {
        let Some(name) = self.at(1).and_then(Token::word).map(str::to_owned) else {
            self.advance(1);
            return;
        };
        match self.at(2) {
            Some(t) if t.is_punct(';') => {
                self.items.mods.push(ModDecl {
                    within: self.within.clone(),
                    name,
                    path_attr,
                });
                self.advance(3);
            }
            Some(t) if t.is_punct('{') => {
                self.within.push(name);
                self.items.inline_mods.push(self.within.clone());
                self.open.push(Open::Module);
                self.advance(3);
            }
            _ => self.advance(2),
        }
    }

    /// A `use` declaration, from `use`.
    fn use_decl(&mut self) {
        let item_level = self.item_level();
        self.advance(1);
        let mut leaves = Vec::new();
        self.use_tree(&mut Vec::new(), &mut leaves);
        for Leaf { path, name, line } in leaves {
            self.items.uses.push(UseDecl {
                within: self.within.clone(),
                item_level,
                path,
                name,
                line,
            });
        }
        // Past the `;` (or whatever stopped the tree).
        if self.at(0).is_some_and(|t| t.is_punct(';')) {
            self.advance(1);
        }
    }

    /// One use tree: `a::b::c`, `a::b::{…}`, `a::*`, `a as b`; leaves get the full path.
    fn use_tree(&mut self, prefix: &mut Vec<String>, leaves: &mut Vec<Leaf>) {
        let depth = prefix.len();
        let mut line = self.at(0).map_or(0, |t| t.line);
        // A leading `::` (2015 style) adds nothing.
        if self.at(0).is_some_and(|t| t.kind == Kind::PathSep) {
            self.advance(1);
        }
        while let Some(token) = self.at(0) {
            match &token.kind {
                Kind::Word(w) if w == "as" => {
                    let alias = self.at(1).and_then(Token::word).map(str::to_owned);
                    self.advance(2);
                    leaves.push(Leaf {
                        path: fold_self(prefix),
                        name: alias.filter(|a| a != "_"),
                        line,
                    });
                    break;
                }
                Kind::Word(w) => {
                    line = token.line;
                    prefix.push(w.clone());
                    self.advance(1);
                    if self.at(0).is_some_and(|t| t.kind == Kind::PathSep) {
                        self.advance(1);
                        continue;
                    }
                    if self.at(0).is_some_and(|t| t.is_word("as")) {
                        continue;
                    }
                    let path = fold_self(prefix);
                    let name = path.last().cloned();
                    leaves.push(Leaf { path, name, line });
                    break;
                }
                Kind::Punct('*') => {
                    self.advance(1);
                    leaves.push(Leaf {
                        path: prefix.clone(),
                        name: None,
                        line: token.line,
                    });
                    break;
                }
                Kind::Punct('{') => {
                    self.advance(1);
                    loop {
                        match self.at(0) {
                            None => break,
                            Some(t) if t.is_punct('}') => {
                                self.advance(1);
                                break;
                            }
                            Some(t) if t.is_punct(',') => self.advance(1),
                            Some(_) => {
                                let before = self.pos;
                                self.use_tree(prefix, leaves);
                                if self.pos == before {
                                    // Not a use tree: skip the token rather than loop.
                                    self.advance(1);
                                }
                            }
                        }
                    }
                    break;
                }
                _ => break,
            }
        }
        prefix.truncate(depth);
    }

    /// A path starting with `crate`, `super` or `self` in code, from that word.
    fn path_ref(&mut self) {
        let line = self.at(0).map_or(0, |t| t.line);
        let after_dollar = self
            .pos
            .checked_sub(1)
            .and_then(|before| self.tokens.get(before))
            .is_some_and(|t| t.is_punct('$'));
        let mut path = Vec::new();
        while let Some(word) = self.at(0).and_then(Token::word) {
            path.push(word.to_owned());
            self.advance(1);
            if self.at(0).is_some_and(|t| t.kind == Kind::PathSep) {
                self.advance(1);
            } else {
                break;
            }
        }
        // `pub(crate)`, `&self`, `self.x`: no `::`, so not a module path.
        if path.len() > 1 && !after_dollar {
            self.items.refs.push(PathRef {
                within: self.within.clone(),
                path,
                line,
            });
        }
    }
}

/// `a::b::self` is `a::b`.
fn fold_self(path: &[String]) -> Vec<String> {
    let mut path = path.to_vec();
    if path.len() > 1 && path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    path
}

/// Whether an attribute's tokens (from `[` to `]`) are `cfg(test)` or `cfg(all(…, test, …))`:
/// compiled only into test builds. `cfg(any(test, …))` is not: it may be compiled in others.
fn is_cfg_test(body: &[Token]) -> bool {
    let words: Vec<&str> = body.iter().filter_map(Token::word).collect();
    match words.as_slice() {
        ["cfg", "test"] => true,
        ["cfg", "all", ..] => {
            // `test` directly inside `all(…)`, not nested in `not(…)` / `any(…)`: after
            // `[ cfg ( all`, the `(` of `all` opens depth 1.
            let mut depth = 0usize;
            for token in body.iter().skip(4) {
                match &token.kind {
                    Kind::Punct('(') => depth = depth.saturating_add(1),
                    Kind::Punct(')') => depth = depth.saturating_sub(1),
                    Kind::Word(w) if w == "test" && depth == 1 => return true,
                    _ => {}
                }
            }
            false
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn items(source: &str) -> FileItems {
        parse(&tokenize(source))
    }

    fn use_paths(items: &FileItems) -> Vec<String> {
        items.uses.iter().map(|u| u.path.join("::")).collect()
    }

    #[test]
    fn use_trees_expand_to_one_path_per_leaf() {
        let items = items(
            "use crate::{a::{self, B}, c::D as E, f::*};\nuse super::g;\npub(crate) use h::I;",
        );
        assert_eq!(
            use_paths(&items),
            [
                "crate::a",
                "crate::a::B",
                "crate::c::D",
                "crate::f",
                "super::g",
                "h::I"
            ]
        );
        let names: Vec<Option<&str>> = items.uses.iter().map(|u| u.name.as_deref()).collect();
        assert_eq!(
            names,
            [Some("a"), Some("B"), Some("E"), None, Some("g"), Some("I")]
        );
        assert_eq!(items.uses.get(4).map(|u| u.line), Some(2));
    }

    #[test]
    fn test_modules_and_test_items_are_skipped() {
        let items = items(
            "mod real;\n#[cfg(test)]\nmod tests { use crate::x; fn f() { crate::y::z(); } }\n\
             #[cfg(test)] mod more_tests;\n#[cfg(all(feature = \"a\", test))] use crate::w;\n\
             #[cfg(any(test, feature = \"b\"))] use crate::v;\nfn g() { crate::u::f(); }",
        );
        assert_eq!(items.mods.len(), 1);
        assert_eq!(use_paths(&items), ["crate::v"]);
        let refs: Vec<String> = items.refs.iter().map(|r| r.path.join("::")).collect();
        assert_eq!(refs, ["crate::u::f"]);
    }

    #[test]
    fn inline_modules_scope_what_is_inside() {
        let items = items("mod outer { mod inner { use super::a; } use crate::b; }\nuse crate::c;");
        let within: Vec<String> = items.uses.iter().map(|u| u.within.join("::")).collect();
        assert_eq!(within, ["outer::inner", "outer", ""]);
        assert_eq!(
            items.inline_mods,
            [
                vec!["outer".to_owned()],
                vec!["outer".to_owned(), "inner".to_owned()]
            ]
        );
    }

    #[test]
    fn function_local_uses_are_not_item_level() {
        let items = items("use crate::a;\nfn f() { use crate::b; }");
        let levels: Vec<bool> = items.uses.iter().map(|u| u.item_level).collect();
        assert_eq!(levels, [true, false]);
    }

    #[test]
    fn visibility_self_and_macro_crate_are_not_paths() {
        let items = items(
            "pub(crate) fn f(&self) { self.x; }\nmacro_rules! m { () => { $crate::a::b() } }\n\
             pub(super) struct S;",
        );
        assert!(items.refs.is_empty(), "{:?}", items.refs);
    }
}
