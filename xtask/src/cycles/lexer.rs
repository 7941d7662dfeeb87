//! A small Rust lexer for the cycle check: the words and punctuation of a source file, with
//! comments, string, character and number literals and lifetimes left out.
//!
//! It knows just enough of Rust's lexical grammar not to mistake text for code: line and
//! (nested) block comments, doc comments, `"…"` strings with escapes, raw strings (`r#"…"#`),
//! byte and C strings, character literals (`'x'`, `'\''`, `'\u{1F600}'`) against lifetimes
//! (`'a`), and raw identifiers (`r#type`).

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An identifier or keyword (a raw identifier without its `r#`).
    Word(String),
    /// `::`.
    PathSep,
    /// A string literal's text, escapes left as written (for `#[path = "…"]`).
    Str(String),
    /// Any other punctuation character.
    Punct(char),
}

/// One token and the line (1-based) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// What it is.
    pub(crate) kind: Kind,
    /// The line it starts on.
    pub(crate) line: usize,
}

impl Token {
    /// Whether this is the word `word`.
    pub(crate) fn is_word(&self, word: &str) -> bool {
        matches!(&self.kind, Kind::Word(w) if w == word)
    }

    /// Whether this is the punctuation `c`.
    pub(crate) fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct(c)
    }

    /// The word, if this is one.
    pub(crate) fn word(&self) -> Option<&str> {
        match &self.kind {
            Kind::Word(w) => Some(w),
            _ => None,
        }
    }
}

/// Splits `source` into tokens.
pub(crate) fn tokenize(source: &str) -> Vec<Token> {
    Lexer {
        chars: source.chars().collect(),
        pos: 0,
        line: 1,
        tokens: Vec::new(),
    }
    .run()
}

/// The lexer's state: the characters, where it is, the current line and the tokens so far.
struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    tokens: Vec<Token>,
}

impl Lexer {
    /// The character `ahead` places after the current one.
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos.saturating_add(ahead)).copied()
    }

    /// Moves past one character, counting lines.
    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line = self.line.saturating_add(1);
        }
        self.pos = self.pos.saturating_add(1);
    }

    /// Moves past `n` characters.
    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn run(mut self) -> Vec<Token> {
        while let Some(c) = self.peek(0) {
            let line = self.line;
            match c {
                '/' if self.peek(1) == Some('/') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => {
                    let text = self.quoted('"');
                    self.push(Kind::Str(text), line);
                }
                '\'' => self.quote_or_lifetime(),
                ':' if self.peek(1) == Some(':') => {
                    self.bump_n(2);
                    self.push(Kind::PathSep, line);
                }
                c if c.is_ascii_digit() => self.number(),
                c if c == '_' || c.is_alphabetic() => self.word_or_prefixed_literal(),
                c if c.is_whitespace() => self.bump(),
                c => {
                    self.bump();
                    self.push(Kind::Punct(c), line);
                }
            }
        }
        self.tokens
    }

    fn push(&mut self, kind: Kind, line: usize) {
        self.tokens.push(Token { kind, line });
    }

    fn line_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }

    fn block_comment(&mut self) {
        self.bump_n(2);
        let mut depth = 1usize;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (None, _) => break,
                (Some('/'), Some('*')) => {
                    self.bump_n(2);
                    depth = depth.saturating_add(1);
                }
                (Some('*'), Some('/')) => {
                    self.bump_n(2);
                    depth = depth.saturating_sub(1);
                }
                _ => self.bump(),
            }
        }
    }

    /// A `"…"` string (or a byte string after its `b`, or a character literal), from its
    /// opening quote: its text, escapes as written.
    fn quoted(&mut self, quote: char) -> String {
        let mut text = String::new();
        self.bump();
        while let Some(c) = self.peek(0) {
            if c == '\\' {
                text.push(c);
                text.extend(self.peek(1));
                self.bump_n(2);
            } else if c == quote {
                self.bump();
                break;
            } else {
                text.push(c);
                self.bump();
            }
        }
        text
    }

    /// A raw string from its `#`s or opening quote (`#…#"…"#…#`): its text.
    fn raw_string(&mut self) -> String {
        let mut text = String::new();
        let mut hashes = 0usize;
        while self.peek(0) == Some('#') {
            hashes = hashes.saturating_add(1);
            self.bump();
        }
        if self.peek(0) != Some('"') {
            return text;
        }
        self.bump();
        while let Some(c) = self.peek(0) {
            self.bump();
            if c == '"' && (0..hashes).all(|i| self.peek(i) == Some('#')) {
                self.bump_n(hashes);
                break;
            }
            text.push(c);
        }
        text
    }

    /// A character literal or a lifetime / label, from the `'`.
    fn quote_or_lifetime(&mut self) {
        let is_char = matches!(
            (self.peek(1), self.peek(2)),
            (Some('\\'), _) | (Some(_), Some('\''))
        );
        if is_char {
            let _ = self.quoted('\'');
        } else {
            // A lifetime or label: the quote and its name.
            self.bump();
            while self
                .peek(0)
                .is_some_and(|c| c == '_' || c.is_alphanumeric())
            {
                self.bump();
            }
        }
    }

    /// A number literal, suffix included (`1_000u64`, `0x1F`, `1e9`; the `.` of `1.5` is
    /// punctuation, which does no harm here).
    fn number(&mut self) {
        while self
            .peek(0)
            .is_some_and(|c| c == '_' || c.is_alphanumeric())
        {
            self.bump();
        }
    }

    /// A word, or a literal that starts like one: `b"…"`, `b'x'`, `c"…"`, `r"…"`, `r#"…"#`,
    /// `br"…"`, `cr#"…"#`, and raw identifiers `r#name`.
    fn word_or_prefixed_literal(&mut self) {
        let line = self.line;
        let first = self.peek(0);
        let second = self.peek(1);
        let third = self.peek(2);
        match (first, second, third) {
            (Some('b' | 'c'), Some('"'), _) => {
                self.bump();
                let text = self.quoted('"');
                self.push(Kind::Str(text), line);
                return;
            }
            (Some('b'), Some('\''), _) => {
                self.bump();
                let _ = self.quoted('\'');
                return;
            }
            (Some('r'), Some('"'), _) | (Some('r'), Some('#'), Some('"' | '#')) => {
                self.bump();
                let text = self.raw_string();
                self.push(Kind::Str(text), line);
                return;
            }
            (Some('b' | 'c'), Some('r'), Some('"' | '#')) => {
                self.bump_n(2);
                let text = self.raw_string();
                self.push(Kind::Str(text), line);
                return;
            }
            (Some('r'), Some('#'), Some(c)) if c == '_' || c.is_alphabetic() => {
                // A raw identifier: the word without `r#`.
                self.bump_n(2);
            }
            _ => {}
        }
        let mut word = String::new();
        while let Some(c) = self.peek(0) {
            if c == '_' || c.is_alphanumeric() {
                word.push(c);
                self.bump();
            } else {
                break;
            }
        }
        self.push(Kind::Word(word), line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(source: &str) -> Vec<String> {
        tokenize(source)
            .into_iter()
            .map(|t| match t.kind {
                Kind::Word(w) => w,
                Kind::PathSep => "::".to_owned(),
                Kind::Str(_) => "\"…\"".to_owned(),
                Kind::Punct(c) => c.to_string(),
            })
            .collect()
    }

    #[test]
    fn comments_strings_and_chars_are_left_out() {
        let source = r####"
            // use crate::a;
            /* use crate::b; /* nested crate::c */ still comment crate::d */
            /// [link](crate::e)
            let s = "crate::f \" crate::g";
            let r = r#"crate::h "quoted" "#;
            let rr = r##"crate::i "# still"##;
            let b = b"crate::j";
            let c = '"';
            let d = '\'';
            let e = b'\\';
            let u = '\u{1F600}';
            fn f<'a>(x: &'a str) -> crate::k::K { 'label: loop {} }
        "####;
        let joined = words(source).join(" ");
        for hidden in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"] {
            assert!(
                !joined.contains(&format!(":: {hidden} ")),
                "crate::{hidden} leaked into {joined}"
            );
        }
        assert!(joined.contains("crate :: k :: K"), "{joined}");
        assert!(!joined.contains("label"), "{joined}");
    }

    #[test]
    fn lines_are_counted_across_comments_and_strings() {
        let tokens = tokenize("/* one\ntwo */\n\"three\nfour\"\nword");
        assert_eq!(tokens.len(), 2);
        assert_eq!(
            tokens[0],
            Token {
                kind: Kind::Str("three\nfour".to_owned()),
                line: 3
            }
        );
        assert_eq!(tokens[1].line, 5);
        assert!(tokens[1].is_word("word"));
    }

    #[test]
    fn raw_identifiers_lose_their_prefix() {
        assert_eq!(words("r#type :: x"), ["type", "::", "x"]);
    }
}
