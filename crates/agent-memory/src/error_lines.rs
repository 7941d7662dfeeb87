//! An error and its causes as a person reads them: what an application prints when it stops.

use std::error::Error as StdError;

/// The error and its causes as a person reads them: `error: …`, then one `caused by: …` line
/// per source. A cause whose text the line above already holds is left out (many errors repeat
/// their source's text in their own).
///
/// ```
/// use agent_memory::{Error, ErrorKind, error_lines};
///
/// let refused = std::io::Error::other("connection refused");
/// let error = Error::new(ErrorKind::Unavailable, "cannot reach Redis").with_source(refused);
/// assert_eq!(
///     error_lines(&error),
///     ["error: unavailable: cannot reach Redis", "caused by: connection refused"]
/// );
/// ```
pub fn error_lines(error: &(dyn StdError + 'static)) -> Vec<String> {
    let mut lines = vec![format!("error: {error}")];
    let mut above = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !above.contains(&text) {
            lines.push(format!("caused by: {text}"));
        }
        above = text;
        source = cause.source();
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, ErrorKind};

    #[test]
    fn a_cause_is_left_out_only_where_the_line_above_holds_its_text() {
        let disk = std::io::Error::other("no space left");
        let write = Error::new(ErrorKind::Backend, "writing the WAL").with_source(disk);
        let outer =
            Error::new(ErrorKind::Backend, "append failed: no space left").with_source(write);
        assert_eq!(
            error_lines(&outer),
            [
                "error: backend: append failed: no space left",
                "caused by: backend: writing the WAL",
                "caused by: no space left"
            ]
        );
        assert_eq!(
            error_lines(&std::io::Error::other("plain")),
            ["error: plain"]
        );
    }
}
