//! Validated identifiers: every id that becomes part of a storage key is checked once, when it is
//! built, so no backend ever sees an empty, oversized or key-breaking id.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The characters of [`ID_CHARACTERS`], for the constants built from it.
macro_rules! id_characters {
    () => {
        "A-Z a-z 0-9 - _ . : @ / + ="
    };
}

/// The characters an id may hold, as every description of ids quotes them: ASCII letters and
/// digits and `- _ . : @ / + =` (exactly [`is_id_char`]).
pub const ID_CHARACTERS: &str = id_characters!();

/// The whole id rule in one line, as every description of ids (the server's tool and API
/// schemas, its docs, this crate's errors) quotes it: the length, [`ID_CHARACTERS`], and the
/// path steps refused.
pub const ID_RULE: &str = concat!(
    "1-128 characters from ",
    id_characters!(),
    ", and neither `.` nor `..` alone or between slashes"
);

/// Whether `c` may appear in an id: ASCII letters and digits and `- _ . : @ / + =`
/// ([`ID_CHARACTERS`]).
///
/// The set leaves out whitespace, quotes, `|`, `{ }` (Redis hash tags), `* ? [ ]` (SCAN
/// patterns) and `~` (our marker for an absent scope field), so an id can be placed into a key of
/// any backend verbatim.
///
/// It keeps `/ + =`: ids written in standard base64 (`+ / =`) and keys of other systems that
/// hold slashes (`user:42/chat`) are stored as they are, with no mapping to undo. An id is an
/// opaque token, never a path: whoever turns ids into file names or URL path segments must
/// encode them (percent-encode `/`, as a `thread://` URI does, or hash them). What a careless
/// join would read as a step out of a directory is refused by [`ID_RULE`] itself: an id that
/// is `.` or `..`, or holds one between slashes (`../etc/passwd`, `a/./b`), is invalid, so no
/// id can climb out of the directory it is joined to. Base64 never holds a `.`, so this
/// refuses no base64 id.
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '/' | '+' | '=')
}

/// Whether `value` holds a path step, `.` or `..`, alone or between slashes.
fn has_dot_step(value: &str) -> bool {
    value.split('/').any(|part| part == "." || part == "..")
}

/// Checks `value` against the id rules ([`ID_RULE`]), naming `what` in the error.
pub(crate) fn validate_id(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid_input(format!(
            "{what} must not be empty; ids are {ID_RULE}"
        )));
    }
    if value.len() > MAX_ID_LEN {
        return Err(Error::invalid_input(format!(
            "{what} is {} bytes long; ids are {ID_RULE}",
            value.len()
        )));
    }
    if let Some(bad) = value.chars().find(|c| !is_id_char(*c)) {
        return Err(Error::invalid_input(format!(
            "{what} contains {bad:?}; ids are {ID_RULE}"
        )));
    }
    if has_dot_step(value) {
        return Err(Error::invalid_input(format!(
            "{what} {value:?} holds a path step (`.` or `..`); ids are {ID_RULE}"
        )));
    }
    Ok(())
}

macro_rules! define_id {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        // Written as its string, borrowed (no copy per id written).
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl $name {
            /// Validates `value` and wraps it.
            ///
            /// # Errors
            /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) when the value is
            /// empty, longer than [`MAX_ID_LEN`] bytes, holds a character outside
            /// [`is_id_char`], or is or holds a path step ([`ID_RULE`]).
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                validate_id($what, &value)?;
                Ok(Self(value))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(value: &str) -> Result<Self> {
                Self::new(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = Error;
            fn from_str(value: &str) -> Result<Self> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

define_id!(
    /// The tenant or application that owns the data; the outermost part of every key.
    TenantId,
    "tenant id"
);
define_id!(
    /// The end user a conversation belongs to.
    UserId,
    "user id"
);
define_id!(
    /// The agent a conversation or a per-agent history belongs to.
    AgentId,
    "agent id"
);
define_id!(
    /// One conversation (Agent Framework's session, LlamaIndex's `session_id`).
    SessionId,
    "session id"
);
define_id!(
    /// The component that owns a piece of state: a history provider or a context provider.
    /// Two providers with different source ids never share a thread.
    SourceId,
    "source id"
);
define_id!(
    /// A message's unique id. Generated ids are UUIDv7, so they sort by creation time.
    MessageId,
    "message id"
);

impl MessageId {
    /// A new time-ordered id (UUIDv7).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

impl SessionId {
    /// A new random session id (UUIDv7).
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn accepts_usual_ids() {
        for ok in [
            "a",
            "user-42",
            "User:42/chat",
            "x@example.com",
            "abc+def=",
            "a.b_c",
            // Standard base64, slashes included, and dots that are not a whole step.
            "/+8=",
            "a//b",
            "...",
            ".hidden",
            "a/.b/c..",
        ] {
            assert!(UserId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_bad_ids() {
        let long = "a".repeat(MAX_ID_LEN + 1);
        for bad in [
            "",
            " ",
            "a b",
            "a|b",
            "{tag}",
            "a*",
            "~",
            "é",
            "a\nb",
            ".",
            "..",
            "../etc/passwd",
            "a/../b",
            "a/./b",
            "a/..",
            long.as_str(),
        ] {
            let err = SessionId::new(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(SessionId::new("a".repeat(MAX_ID_LEN)).is_ok());
    }

    #[test]
    fn the_documented_characters_are_exactly_the_accepted_ones() {
        // `ID_CHARACTERS` read back: ranges `X-Y` and single characters.
        let mut documented = std::collections::BTreeSet::new();
        for item in ID_CHARACTERS.split(' ') {
            let chars: Vec<char> = item.chars().collect();
            match chars.as_slice() {
                [from, '-', to] => documented.extend(*from..=*to),
                [one] => {
                    documented.insert(*one);
                }
                _ => panic!("{item:?} is neither a range nor a character"),
            }
        }
        let accepted: std::collections::BTreeSet<char> = (0u8..=127)
            .map(char::from)
            .filter(|c| is_id_char(*c))
            .collect();
        assert_eq!(documented, accepted);
        assert!(ID_RULE.contains(ID_CHARACTERS));
        assert!(ID_RULE.starts_with(&format!("1-{MAX_ID_LEN} ")));
        let error = SessionId::new("../etc/passwd").unwrap_err();
        assert!(error.to_string().contains(ID_RULE), "{error}");
        assert!(error.to_string().contains("path step"), "{error}");
    }

    #[test]
    fn deserialization_validates() {
        let err = serde_json::from_str::<TenantId>("\"a b\"").unwrap_err();
        assert!(err.to_string().contains("tenant id"));
        let ok: TenantId = serde_json::from_str("\"acme\"").unwrap();
        assert_eq!(ok.as_str(), "acme");
    }

    #[test]
    fn generated_ids_are_valid_and_ordered() {
        let a = MessageId::generate();
        let b = MessageId::generate();
        assert!(MessageId::new(a.as_str()).is_ok());
        assert!(a < b);
    }
}
