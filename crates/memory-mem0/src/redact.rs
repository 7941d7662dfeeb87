//! Keeping secrets out of text: URL passwords and API keys are replaced by `<redacted>`.

use memory_openai::ApiKey;
use reqwest::Url;

/// What every `Debug` and message prints instead of a secret.
pub(crate) const REDACTED: &str = "<redacted>";

/// The URL with a password it may carry replaced by `<redacted>`.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        // Cannot fail for a URL that already has a password.
        let _ = url.set_password(Some(REDACTED));
    }
    url.to_string()
}

/// As [`redact_url`], for text that may not parse as a URL.
pub(crate) fn redact_url_text(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => redact_url(&url),
        Err(_) if text.contains('@') => REDACTED.to_owned(),
        Err(_) => text.to_owned(),
    }
}

/// Removes `key`, and any word that looks like a Mem0 key (`m0-…`), from text a server wrote.
pub(crate) fn scrub(text: &str, key: Option<&ApiKey>) -> String {
    let mut out = match key {
        Some(key) if !key.expose().is_empty() => text.replace(key.expose(), REDACTED),
        _ => text.to_owned(),
    };
    if out.contains("m0-") {
        out = out
            .split(' ')
            .map(|word| {
                if word
                    .trim_start_matches(|c: char| !c.is_alphanumeric())
                    .starts_with("m0-")
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
        );
        assert!(!text.contains("secret-abc"), "{text}");
        assert!(!text.contains("m0-"), "{text}");
        assert!(text.ends_with("Fine words stay."), "{text}");
    }

    #[test]
    fn url_passwords_are_redacted() {
        let redacted = redact_url_text("https://u:pw@h.example/x");
        assert!(!redacted.contains("pw"), "{redacted}");
        assert!(redacted.contains("redacted"), "{redacted}");
        assert_eq!(redact_url_text("not a url@"), REDACTED);
        assert_eq!(redact_url_text("plain"), "plain");
    }
}
