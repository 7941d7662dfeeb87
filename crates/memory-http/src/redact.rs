//! Keeping API keys out of text a server wrote: the key and words that look like keys are
//! replaced by memory-core's [`REDACTED`] (URLs are masked with memory-core's
//! [`redact_url`](memory_core::redact_url)).

use memory_core::REDACTED;

use crate::secret::ApiKey;

/// Removes `key`, and every space-separated word that starts (after leading punctuation) with
/// `key_prefix`, the way the service's keys start (`"sk-"`, `"m0-"`), from text a server wrote.
/// An empty `key_prefix` removes no words.
///
/// ```
/// use memory_http::{ApiKey, scrub};
///
/// let key = ApiKey::new("sk-abc123");
/// assert_eq!(
///     scrub("bad key sk-abc123, try 'sk-other'", Some(&key), "sk-"),
///     "bad key ***, try ***"
/// );
/// ```
pub fn scrub(text: &str, key: Option<&ApiKey>, key_prefix: &str) -> String {
    let mut out = match key {
        Some(key) if !key.is_empty() => text.replace(key.expose(), REDACTED),
        _ => text.to_owned(),
    };
    if !key_prefix.is_empty() && out.contains(key_prefix) {
        out = out
            .split(' ')
            .map(|word| {
                if word
                    .trim_start_matches(|c: char| !c.is_alphanumeric())
                    .starts_with(key_prefix)
                {
                    REDACTED
                } else {
                    word
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_the_key_and_key_like_words() {
        let key = ApiKey::new("secret-abc-123");
        let text = scrub(
            "Invalid token secret-abc-123; also 'm0-XYZ' and m0-abc. Fine words stay.",
            Some(&key),
            "m0-",
        );
        assert!(!text.contains("secret-abc"), "{text}");
        assert!(!text.contains("m0-"), "{text}");
        assert!(text.ends_with("Fine words stay."), "{text}");
    }

    #[test]
    fn scrub_without_a_key_or_prefix() {
        assert_eq!(scrub("sk-1 m0-2", None, ""), "sk-1 m0-2");
        assert_eq!(scrub("x", Some(&ApiKey::new("")), "sk-"), "x");
        assert_eq!(scrub("a sk-1 b", None, "sk-"), "a *** b");
    }
}
