//! What the command prints: tables and sentences for people, JSON for scripts (on stdout), and
//! progress bars (on stderr, only on a terminal).

use std::io::{IsTerminal, Write};

use comfy_table::{Table, presets};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::error::{CliResult, Failed};

/// Writes `text` and a newline to stdout. A closed pipe (`agent-memory threads | head`) is not
/// an error: the reader has what it wanted.
pub(crate) fn print(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(Failed::with("could not write to standard output", err)),
    }
}

/// Prints `value` as one JSON document.
pub(crate) fn print_json(value: &Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|err| Failed::with("could not write the JSON output", err))?;
    print(&text)
}

/// A table with `header`, in the command's style.
pub(crate) fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN);
    table.set_header(header.iter().copied());
    table
}

/// A progress bar of `len` steps (or a spinner without a length) on stderr; hidden when stderr
/// is not a terminal or the output is JSON.
pub(crate) fn progress(len: Option<u64>, json: bool, unit: &str) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match len {
        Some(len) => ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = match len {
        Some(_) => format!(
            "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit} ({{per_sec}}, {{eta}} left) {{msg}}"
        ),
        None => format!("{{spinner}} [{{elapsed_precise}}] {{pos}} {unit} ({{per_sec}}) {{msg}}"),
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// `text` on one line of at most `max` characters, for a table cell.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_one_short_line() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("héllo", 5), "héllo");
    }
}
