//! The benchmark data set: `{"i", "role", "text"}` JSON lines.

use std::path::Path;

use memory_core::ChatMessage;
use serde::Deserialize;

use crate::BenchResult;

/// Who wrote a data set message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DataRole {
    /// A user message.
    User,
    /// An assistant message.
    Assistant,
}

/// One message of the data set.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct DataMessage {
    /// Its position in the data set, from 0.
    pub(crate) i: usize,
    /// Who wrote it.
    pub(crate) role: DataRole,
    /// Its text.
    pub(crate) text: String,
}

impl DataMessage {
    /// A new [`ChatMessage`] (with a fresh id) of this role and text.
    pub(crate) fn to_chat(&self) -> ChatMessage {
        match self.role {
            DataRole::User => ChatMessage::user(self.text.clone()),
            DataRole::Assistant => ChatMessage::assistant(self.text.clone()),
        }
    }
}

/// `len` messages for the tests, user and assistant in turn, the `i`-th saying `text(i)`.
#[cfg(test)]
pub(crate) fn test_messages(len: usize, text: impl Fn(usize) -> String) -> Vec<DataMessage> {
    (0..len)
        .map(|i| DataMessage {
            i,
            role: if i % 2 == 0 {
                DataRole::User
            } else {
                DataRole::Assistant
            },
            text: text(i),
        })
        .collect()
}

/// Reads the data set at `path`.
///
/// # Errors
/// When the file cannot be read, a line is not a message, the positions are not 0, 1, 2, ...
/// or the file holds no message.
pub(crate) fn load(path: &Path) -> BenchResult<Vec<DataMessage>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the data set {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// Parses data set lines (blank lines are skipped).
fn parse(text: &str) -> BenchResult<Vec<DataMessage>> {
    let mut messages = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let message: DataMessage = serde_json::from_str(line)
            .map_err(|e| format!("line {}: not a data set message: {e}", line_no + 1))?;
        if message.i != messages.len() {
            return Err(format!(
                "line {}: expected \"i\": {}, found {}",
                line_no + 1,
                messages.len(),
                message.i
            )
            .into());
        }
        messages.push(message);
    }
    if messages.is_empty() {
        return Err("the data set holds no message".into());
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::Role;

    #[test]
    fn parses_lines_and_roles() {
        let text = "{\"i\": 0, \"role\": \"user\", \"text\": \"hi\"}\n\n{\"i\": 1, \"role\": \"assistant\", \"text\": \"hello\"}\n";
        let messages = parse(text).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].to_chat().role, Role::User);
        assert_eq!(messages[1].to_chat().role, Role::Assistant);
        assert_eq!(messages[1].to_chat().text(), "hello");
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("").is_err());
        assert!(parse("{\"i\": 0, \"role\": \"system\", \"text\": \"x\"}").is_err());
        assert!(parse("{\"i\": 1, \"role\": \"user\", \"text\": \"x\"}").is_err());
        assert!(parse("not json").is_err());
    }
}
