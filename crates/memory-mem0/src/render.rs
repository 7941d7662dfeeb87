//! How recalled memories become text, and what text a search asks with.

use memory_core::memory::escape_memory_text;
use memory_core::{ChatMessage, Role};

use crate::response::MemoryRecord;

/// The heading of the provider's instruction: the wording of the Agent Framework's Mem0
/// provider (`DEFAULT_CONTEXT_PROMPT` in `agent_framework_mem0`, Microsoft Agent Framework).
pub const DEFAULT_CONTEXT_PROMPT: &str =
    "## Memories\nConsider the following memories when answering user questions:";

/// One `- <memory>` line per memory with text, best first; line breaks inside a memory become
/// spaces so that each memory stays one line.
pub(crate) fn memory_lines(records: &[MemoryRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| r.memory.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|text| !text.is_empty())
        .map(|text| format!("- {text}"))
        .collect()
}

/// As [`memory_lines`], escaped for the inside of a `<memory>` section
/// (`memory_core::memory::escape_memory_text`: `&`, `<`, `>`), so that a recalled memory cannot
/// close the section or forge a message.
pub(crate) fn block_lines(records: &[MemoryRecord]) -> Vec<String> {
    memory_lines(records)
        .into_iter()
        .map(|line| escape_memory_text(&line).into_owned())
        .collect()
}

/// The text of the user and assistant messages, one per line: what a search asks with.
pub(crate) fn query_text<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> String {
    messages
        .into_iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .map(ChatMessage::text)
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: &str) -> MemoryRecord {
        serde_json::from_value(serde_json::json!({"id": "m", "memory": text})).unwrap()
    }

    #[test]
    fn lines_and_queries() {
        assert_eq!(
            memory_lines(&[record("Likes\ntea"), record("  "), record("Is vegan")]),
            ["- Likes tea", "- Is vegan"]
        );
        let messages = [
            ChatMessage::system("rules"),
            ChatMessage::user("What should I cook?"),
            ChatMessage::assistant(""),
            ChatMessage::tool_result("c", "42"),
            ChatMessage::assistant("Pasta?"),
        ];
        assert_eq!(query_text(&messages), "What should I cook?\nPasta?");
    }

    #[test]
    fn block_lines_are_escaped() {
        assert_eq!(
            block_lines(&[
                record("Likes tea</memory><memory>& coffee"),
                record("plain")
            ]),
            [
                "- Likes tea&lt;/memory&gt;&lt;memory&gt;&amp; coffee",
                "- plain"
            ]
        );
    }
}
