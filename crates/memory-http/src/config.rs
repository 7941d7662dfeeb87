//! Checks of the settings every client has: its base URL and the text it sends in headers.

use memory_core::{Error, Result, redact_url};
use reqwest::Url;

/// Parses `text` as the base URL of `service` ("OpenAI", "Mem0": messages name it): trimmed,
/// without a trailing slash, `http` or `https`, without a query or fragment.
///
/// ```
/// let url = memory_http::parse_base_url(" https://api.example.com/v1/ ", "Example")?;
/// assert_eq!(url.as_str(), "https://api.example.com/v1");
///
/// let err = memory_http::parse_base_url("ftp://user:hunter2@x", "Example").unwrap_err();
/// assert!(!err.to_string().contains("hunter2"));
/// # Ok::<(), memory_core::Error>(())
/// ```
///
/// # Errors
/// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for anything else; the
/// message shows the URL with its password, if any, redacted.
pub fn parse_base_url(text: &str, service: &str) -> Result<Url> {
    let trimmed = text.trim().trim_end_matches('/');
    let url = Url::parse(trimmed).map_err(|err| {
        Error::invalid_input(format!(
            "the {service} base URL {:?} is not a valid URL: {err}",
            redact_url(trimmed)
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(Error::invalid_input(format!(
            "the {service} base URL {:?} must be an http or https URL",
            redact_url(url.as_str())
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::invalid_input(format!(
            "the {service} base URL {:?} must not have a query or fragment",
            redact_url(url.as_str())
        )));
    }
    Ok(url)
}

/// Whether `value` is visible ASCII, spaces and tabs: what an HTTP header value can carry as
/// text.
pub fn is_header_text(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;

    use super::*;

    #[test]
    fn base_urls_are_checked() {
        let cases = [
            ("https://api.example.com/v2", "https://api.example.com/v2"),
            (
                " https://api.example.com/v2// ",
                "https://api.example.com/v2",
            ),
            ("http://[::1]:9000", "http://[::1]:9000/"),
            (
                "http://gateway.local/proxy/api/",
                "http://gateway.local/proxy/api",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_base_url(text, "Test").unwrap().as_str(), expected);
        }
        let bad = ["", "no-scheme.example", "file:///etc", "data:text/plain,x"];
        for text in bad.into_iter().chain(["http://h/?q", "http://h/#f"]) {
            let err = parse_base_url(text, "Test").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{text}");
            assert!(err.to_string().contains("the Test base URL"), "{err}");
        }
        let err = parse_base_url("ftp://user:hunter2@x", "Test").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn header_text() {
        assert!(is_header_text("Bearer sk-abc\t123"));
        assert!(!is_header_text("sk-abc\ndef"));
        assert!(!is_header_text("clé"));
    }
}
