//! The command's errors: a sentence saying what was being done, and the error that stopped it,
//! printed as `error: …` and one `caused by: …` line per cause.

use std::error::Error as StdError;
use std::fmt;

/// An error of the command: what it was doing, and why that failed.
#[derive(Debug)]
pub(crate) struct Failed {
    doing: String,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl Failed {
    /// An error with no cause below it.
    pub(crate) fn msg(text: impl Into<String>) -> Self {
        Self {
            doing: text.into(),
            source: None,
        }
    }

    /// An error saying what was being done, caused by `source`.
    pub(crate) fn with(
        doing: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self {
            doing: doing.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.doing)
    }
}

impl StdError for Failed {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// The command's result.
pub(crate) type CliResult<T> = Result<T, Failed>;

/// Adds what was being done to a library error.
pub(crate) trait Doing<T> {
    /// The error, if any, wrapped in a [`Failed`] whose sentence `doing` gives.
    fn doing(self, doing: impl FnOnce() -> String) -> CliResult<T>;
}

impl<T, E> Doing<T> for Result<T, E>
where
    E: Into<Box<dyn StdError + Send + Sync + 'static>>,
{
    fn doing(self, doing: impl FnOnce() -> String) -> CliResult<T> {
        self.map_err(|source| Failed::with(doing(), source))
    }
}

/// The error and its causes as a person reads them: `error: …`, then one `caused by: …` line
/// per source (the library's own, which applications share).
pub(crate) use agent_memory::error_lines;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_listed_once_each() {
        let inner = agent_memory::Error::invalid_input("the port is closed");
        let err = Failed::with("could not open the store at sqlite://x.db", inner);
        assert_eq!(
            error_lines(&err),
            vec![
                "error: could not open the store at sqlite://x.db".to_owned(),
                "caused by: invalid_input: the port is closed".to_owned()
            ]
        );
        assert_eq!(error_lines(&Failed::msg("plain")), vec!["error: plain"]);
    }
}
