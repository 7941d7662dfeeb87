//! Every text an error shows, for tests that check what it must not show (a password, a URL).

/// The error's `Display` and `Debug`, and each of its sources' `Display` and `Debug`, joined
/// with spaces.
pub fn error_text(err: &memory_core::Error) -> String {
    let mut text = format!("{err} {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&format!(" {s} {s:?}"));
        source = s.source();
    }
    text
}
