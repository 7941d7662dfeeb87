//! [`TablePrefix`]: the validated prefix of every table name.

use std::fmt;

use memory_core::{Error, Result};

/// The longest table prefix, in characters.
pub const MAX_TABLE_PREFIX_LEN: usize = 32;

/// A validated table prefix: 1 to 32 characters of `[a-z0-9_]`, starting with a letter. It is
/// the only text of a statement that does not come from this crate's constants, and it cannot
/// carry a quote, a space or a semicolon, so nothing can be injected through it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct TablePrefix(String);

impl TablePrefix {
    pub(crate) fn new(prefix: &str) -> Result<Self> {
        let ok_len = !prefix.is_empty() && prefix.len() <= MAX_TABLE_PREFIX_LEN;
        let starts_with_letter = prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase());
        let ok_chars = prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok_len && starts_with_letter && ok_chars {
            Ok(Self(prefix.to_owned()))
        } else {
            Err(Error::invalid_input(format!(
                "table prefix {prefix:?} is invalid: it must be 1 to {MAX_TABLE_PREFIX_LEN} \
                 characters of a-z, 0-9 and _, starting with a letter"
            )))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TablePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    #[test]
    fn prefixes() {
        for ok in ["a", "agent_memory_", "t1_", "abc_def_2", &"a".repeat(32)] {
            assert!(TablePrefix::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a'b",
            "a;drop table x",
            "A",
            "Ab",
            "1a",
            "_a",
            "a-b",
            "a b",
            "a\"b",
            "é",
            &"a".repeat(33),
        ] {
            let err = TablePrefix::new(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
    }
}
