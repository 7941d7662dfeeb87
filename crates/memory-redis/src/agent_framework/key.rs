//! The key names of Agent Framework's `RedisHistoryProvider`: the scoped format
//! `{key_prefix}|v2|{tenant}|{application}|{agent}|{source}|{session}` with every segment derived
//! by Agent Framework's `_storage_key_segment`, and the deprecated legacy format
//! `{key_prefix}:{session}`.

use data_encoding::{BASE32_NOPAD, HEXLOWER};
use memory_core::{Error, Result};
use sha2::{Digest, Sha256};

/// The version marker, the second segment of every scoped key.
const VERSION_SEGMENT: &str = "v2";
/// The segment of an optional boundary (tenant, agent) that was not given.
const ABSENT_SEGMENT: &str = "~none";
/// The per-segment prefixes of encoded values.
const ENCODED_KEY_PREFIX: &str = "~redis-key-prefix-";
const ENCODED_TENANT: &str = "~redis-tenant-";
const ENCODED_APPLICATION: &str = "~redis-application-";
const ENCODED_AGENT: &str = "~redis-agent-";
const ENCODED_SOURCE: &str = "~redis-source-";
const ENCODED_SESSION: &str = "~redis-session-";
/// The longest encoded segment (prefix included); longer ones become a digest.
const MAX_ENCODED_SEGMENT_LEN: usize = 180;
/// The marker of a digest segment, after the encoded prefix.
const DIGEST_MARKER: &str = "sha256-";
/// Windows device names: a value whose stem (before the first `.`), upper-cased, is one of these
/// is not used verbatim. (Agent Framework's list also has the superscript `COM¹`… variants,
/// which are never literal-safe anyway: they are not ASCII.)
const WINDOWS_RESERVED_STEMS: [&str; 22] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

/// How Agent Framework's `RedisHistoryProvider` names the list of a session: its constructor's
/// `key_format` and the arguments that go into the key.
///
/// A Python provider and this store address the same list when these match the provider's
/// arguments exactly (`key_prefix`, `tenant_id`, `application_id`, `agent_id`, `source_id`, and
/// the session id of each call).
///
/// ```
/// use memory_redis::AfKeyFormat;
///
/// let format = AfKeyFormat::scoped("demo-app").with_agent("demo-agent");
/// assert_eq!(
///     format.key("session-1")?,
///     "chat_messages|v2|~none|demo-app|demo-agent|redis_memory|session-1"
/// );
/// let format = AfKeyFormat::scoped("Demo App").with_tenant("tenant-1");
/// assert_eq!(
///     format.key("User:42/chat")?,
///     "chat_messages|v2|tenant-1|~redis-application-irsw23zaifyha|~none|redis_memory|~redis-session-kvzwk4r2gqzc6y3imf2a"
/// );
/// assert_eq!(AfKeyFormat::legacy().key("session-1")?, "chat_messages:session-1");
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfKeyFormat {
    /// `key_format="scoped"` (Agent Framework's default):
    /// `{key_prefix}|v2|{tenant}|{application}|{agent}|{source}|{session}`, each segment
    /// derived by [`AfKeyFormat::storage_key_segment`], an absent tenant or agent written `~none`.
    Scoped {
        /// `key_prefix` (default [`AfKeyFormat::DEFAULT_KEY_PREFIX`], `"chat_messages"`).
        key_prefix: String,
        /// `tenant_id`: `None` when not given; never empty.
        tenant: Option<String>,
        /// `application_id`: required, never empty.
        application: String,
        /// `agent_id`: `None` when not given; never empty.
        agent: Option<String>,
        /// The provider's `source_id` (default [`AfKeyFormat::DEFAULT_SOURCE`], `"redis_memory"`).
        source: String,
    },
    /// `key_format="legacy"` (deprecated in Agent Framework): `{key_prefix}:{session}`, with no
    /// encoding, and `default` for an empty session id.
    Legacy {
        /// `key_prefix` (default [`AfKeyFormat::DEFAULT_KEY_PREFIX`]).
        key_prefix: String,
    },
}

impl AfKeyFormat {
    /// Agent Framework's default `key_prefix`: `chat_messages`.
    pub const DEFAULT_KEY_PREFIX: &str = "chat_messages";
    /// The default `source_id` of Agent Framework's Redis history provider: `redis_memory`.
    pub const DEFAULT_SOURCE: &str = "redis_memory";

    /// The scoped format of `application` with Agent Framework's defaults: key prefix
    /// `chat_messages`, no tenant, no agent, source `redis_memory`.
    pub fn scoped(application: impl Into<String>) -> Self {
        Self::Scoped {
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            tenant: None,
            application: application.into(),
            agent: None,
            source: Self::DEFAULT_SOURCE.to_owned(),
        }
    }

    /// The legacy format with the default key prefix `chat_messages`.
    pub fn legacy() -> Self {
        Self::Legacy {
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
        }
    }

    /// Sets the key prefix (both formats).
    #[must_use]
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        match &mut self {
            Self::Scoped { key_prefix, .. } | Self::Legacy { key_prefix } => {
                *key_prefix = prefix.into();
            }
        }
        self
    }

    /// Sets the tenant of a scoped format. Legacy keys have no tenant: on a legacy format this
    /// changes nothing.
    #[must_use]
    pub fn with_tenant(mut self, tenant_id: impl Into<String>) -> Self {
        if let Self::Scoped { tenant, .. } = &mut self {
            *tenant = Some(tenant_id.into());
        }
        self
    }

    /// Sets the agent of a scoped format. Legacy keys have no agent: on a legacy format this
    /// changes nothing.
    #[must_use]
    pub fn with_agent(mut self, agent_id: impl Into<String>) -> Self {
        if let Self::Scoped { agent, .. } = &mut self {
            *agent = Some(agent_id.into());
        }
        self
    }

    /// Sets the source id of a scoped format. Legacy keys have no source: on a legacy format
    /// this changes nothing.
    #[must_use]
    pub fn with_source(mut self, source_id: impl Into<String>) -> Self {
        if let Self::Scoped { source, .. } = &mut self {
            *source = source_id.into();
        }
        self
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        match self {
            Self::Scoped { key_prefix, .. } | Self::Legacy { key_prefix } => key_prefix,
        }
    }

    /// Checks the arguments as Agent Framework's constructor does.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for a scoped format with an empty
    /// application, or an empty (rather than absent) tenant or agent.
    pub fn validate(&self) -> Result<()> {
        if let Self::Scoped {
            tenant,
            application,
            agent,
            ..
        } = self
        {
            if application.is_empty() {
                return Err(Error::invalid_input(
                    "the application id of a scoped Agent Framework key must not be empty",
                ));
            }
            if tenant.as_deref() == Some("") {
                return Err(Error::invalid_input(
                    "the tenant id of a scoped Agent Framework key must be absent or non-empty",
                ));
            }
            if agent.as_deref() == Some("") {
                return Err(Error::invalid_input(
                    "the agent id of a scoped Agent Framework key must be absent or non-empty",
                ));
            }
        }
        Ok(())
    }

    /// The key of the list of session `session_id`, byte for byte as Agent Framework's
    /// `RedisHistoryProvider._redis_key` builds it.
    ///
    /// # Errors
    /// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) when the format is invalid (see
    /// [`validate`](Self::validate)) or, for the scoped format, the session id is empty.
    pub fn key(&self, session_id: &str) -> Result<String> {
        self.validate()?;
        match self {
            Self::Legacy { key_prefix } => {
                let session = if session_id.is_empty() {
                    "default"
                } else {
                    session_id
                };
                Ok(format!("{key_prefix}:{session}"))
            }
            Self::Scoped { .. } => {
                if session_id.is_empty() {
                    return Err(Error::invalid_input(
                        "the session id of a scoped Agent Framework key must not be empty",
                    ));
                }
                Ok(format!(
                    "{}{}",
                    self.session_key_prefix(),
                    storage_key_segment(session_id, ENCODED_SESSION)
                ))
            }
        }
    }

    /// The session id that `key` is the list of, when `key` is a key of this format and the
    /// session can be recovered from it: a verbatim or base32 segment, not a digest
    /// (`sha256-…`, which only a session whose encoding is over 180 characters gets).
    ///
    /// ```
    /// use memory_redis::AfKeyFormat;
    ///
    /// let format = AfKeyFormat::scoped("Demo App").with_tenant("tenant-1");
    /// let key = format.key("User:42/chat")?;
    /// assert_eq!(format.session_of(&key).as_deref(), Some("User:42/chat"));
    /// assert_eq!(format.session_of("chat_messages:session-1"), None);
    /// # Ok::<(), memory_core::Error>(())
    /// ```
    pub fn session_of(&self, key: &str) -> Option<String> {
        let session = match self {
            Self::Legacy { key_prefix } => key
                .strip_prefix(key_prefix.as_str())?
                .strip_prefix(':')?
                .to_owned(),
            Self::Scoped { .. } => {
                let segment = key.strip_prefix(self.session_key_prefix().as_str())?;
                decode_storage_key_segment(segment, ENCODED_SESSION)?
            }
        };
        // Only a canonical key maps back (a legacy session `default` may also have been
        // written for an empty session id; it is read as the session `default`).
        (self.key(&session).ok()? == key).then_some(session)
    }

    /// Agent Framework's `_storage_key_segment(value, encoded_prefix=…)`: the value itself when it
    /// is literal-safe, else `encoded_prefix` + its UTF-8 in lowercase unpadded base32, or, when
    /// that is over 180 characters (prefix included), `encoded_prefix` + `sha256-` + the hex
    /// SHA-256 of its UTF-8.
    ///
    /// Literal-safe: non-empty; only lowercase ASCII letters, digits, `.`, `_` and `-`; not starting
    /// with `.`, not ending with `.` or a space; and its stem before the first `.` not a Windows
    /// device name (`con`, `prn`, `aux`, `nul`, `com1`–`com9`, `lpt1`–`lpt9`).
    ///
    /// ```
    /// use memory_redis::AfKeyFormat;
    ///
    /// assert_eq!(AfKeyFormat::storage_key_segment("session-1", "~redis-session-"), "session-1");
    /// assert_eq!(AfKeyFormat::storage_key_segment("con.txt", "~redis-session-"), "~redis-session-mnxw4ltupb2a");
    /// assert_eq!(AfKeyFormat::storage_key_segment("Demo App", "~redis-application-"), "~redis-application-irsw23zaifyha");
    /// ```
    pub fn storage_key_segment(value: &str, encoded_prefix: &str) -> String {
        storage_key_segment(value, encoded_prefix)
    }

    /// A `SCAN … MATCH` pattern that matches every key of this format (and possibly others:
    /// check each with [`session_of`](Self::session_of)).
    pub(crate) fn scan_pattern(&self) -> String {
        match self {
            Self::Legacy { key_prefix } => format!("{}:*", escape_glob(key_prefix)),
            Self::Scoped { .. } => format!("{}*", escape_glob(&self.session_key_prefix())),
        }
    }

    /// Everything of a scoped key before the session segment (with its `|`).
    fn session_key_prefix(&self) -> String {
        match self {
            Self::Legacy { key_prefix } => format!("{key_prefix}:"),
            Self::Scoped {
                key_prefix,
                tenant,
                application,
                agent,
                source,
            } => {
                let optional = |value: &Option<String>, prefix: &str| match value {
                    Some(value) => storage_key_segment(value, prefix),
                    None => ABSENT_SEGMENT.to_owned(),
                };
                [
                    storage_key_segment(key_prefix, ENCODED_KEY_PREFIX),
                    VERSION_SEGMENT.to_owned(),
                    optional(tenant, ENCODED_TENANT),
                    storage_key_segment(application, ENCODED_APPLICATION),
                    optional(agent, ENCODED_AGENT),
                    storage_key_segment(source, ENCODED_SOURCE),
                    String::new(),
                ]
                .join("|")
            }
        }
    }
}

/// Agent Framework's `_storage_key_segment` (see [`AfKeyFormat::storage_key_segment`]).
fn storage_key_segment(value: &str, encoded_prefix: &str) -> String {
    if is_literal_safe(value) {
        return value.to_owned();
    }
    let encoded = format!(
        "{encoded_prefix}{}",
        BASE32_NOPAD.encode(value.as_bytes()).to_ascii_lowercase()
    );
    if encoded.chars().count() <= MAX_ENCODED_SEGMENT_LEN {
        return encoded;
    }
    let digest = Sha256::digest(value.as_bytes());
    let hex = HEXLOWER.encode(&digest);
    format!("{encoded_prefix}{DIGEST_MARKER}{hex}")
}

/// The value a segment was derived from, when it can be recovered: a literal-safe segment is
/// the value; `encoded_prefix` + base32 decodes; a digest or anything else gives `None`.
fn decode_storage_key_segment(segment: &str, encoded_prefix: &str) -> Option<String> {
    let value = match segment.strip_prefix(encoded_prefix) {
        Some(encoded) => {
            if encoded.starts_with(DIGEST_MARKER) {
                return None;
            }
            let bytes = BASE32_NOPAD
                .decode(encoded.to_ascii_uppercase().as_bytes())
                .ok()?;
            String::from_utf8(bytes).ok()?
        }
        None => segment.to_owned(),
    };
    (storage_key_segment(&value, encoded_prefix) == segment).then_some(value)
}

/// Agent Framework's `_is_literal_storage_key_segment_safe`.
fn is_literal_safe(value: &str) -> bool {
    if value.is_empty() || value.starts_with('.') || value.ends_with('.') || value.ends_with(' ') {
        return false;
    }
    let stem = value.split('.').next().unwrap_or_default();
    if WINDOWS_RESERVED_STEMS.contains(&stem.to_ascii_uppercase().as_str()) {
        return false;
    }
    value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

/// `text` with the characters special to `SCAN … MATCH` (`* ? [ ] \`) escaped.
fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_safety() {
        for safe in [
            "a",
            "session-1",
            "user_1.b",
            "com0",
            "console",
            "x.con",
            "c-o-n",
        ] {
            assert!(is_literal_safe(safe), "{safe}");
        }
        for unsafe_ in [
            "", ".a", "a.", "a ", "A", "con", "con.txt", "COM1", "lpt9.log", "nul", "a b", "é",
            "~none", "a|b", "a:b", "tab\t",
        ] {
            assert!(!is_literal_safe(unsafe_), "{unsafe_:?}");
        }
    }

    #[test]
    fn segments_decode_back() {
        for value in [
            "session-1",
            "User:42/chat",
            "con.txt",
            "日本語 🎉",
            "",
            &"A".repeat(103),
        ] {
            let segment = storage_key_segment(value, ENCODED_SESSION);
            assert_eq!(
                decode_storage_key_segment(&segment, ENCODED_SESSION).as_deref(),
                Some(value),
                "{segment}"
            );
        }
        let digest = storage_key_segment(&"A".repeat(104), ENCODED_SESSION);
        assert!(digest.starts_with("~redis-session-sha256-"));
        assert_eq!(decode_storage_key_segment(&digest, ENCODED_SESSION), None);
        // A non-canonical encoding of a literal-safe value is not a key of the format.
        let odd = format!(
            "{ENCODED_SESSION}{}",
            BASE32_NOPAD.encode(b"abc").to_lowercase()
        );
        assert_eq!(decode_storage_key_segment(&odd, ENCODED_SESSION), None);
    }

    #[test]
    fn scan_patterns() {
        assert_eq!(
            AfKeyFormat::scoped("demo-app").scan_pattern(),
            "chat_messages|v2|~none|demo-app|~none|redis_memory|*"
        );
        assert_eq!(
            AfKeyFormat::legacy().with_key_prefix("a*b").scan_pattern(),
            "a\\*b:*"
        );
    }
}
