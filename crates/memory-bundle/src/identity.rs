//! When a message a target store holds is the input's message: the same id, or a row that a
//! LlamaIndex table names after itself.

use memory_core::ChatMessage;
use memory_interop::llamaindex::is_row_id;

/// Whether `target` (a message the target holds) is `input` (the bundle's or the source's
/// message at the same position): the same id, or [`renamed_row`].
pub(crate) fn same_message(target: &ChatMessage, input: &ChatMessage) -> bool {
    target.id == input.id || renamed_row(target, input)
}

/// Whether `target` is `input` under another name: both ids are LlamaIndex row ids
/// (`llamaindex:<table>:<row>`) and the messages are equal apart from their ids and creation
/// times. A LlamaIndex table gives a row Python wrote (which records no id) its own table's
/// and row's name and the row's insert time, and writes such a message it is given with the
/// row's bytes: a copy of it in another table (or another database) reads there under that
/// table's name and with the time of the copy.
pub(crate) fn renamed_row(target: &ChatMessage, input: &ChatMessage) -> bool {
    is_row_id(target.id.as_str())
        && is_row_id(input.id.as_str())
        && target.role == input.role
        && target.author_name == input.author_name
        && target.parts == input.parts
        && target.metadata == input.metadata
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::MessageId;

    #[test]
    fn only_row_ids_of_equal_messages_are_renamed() {
        let row =
            |id: &str, text: &str| ChatMessage::user(text).with_id(MessageId::new(id).unwrap());
        let source = row("llamaindex:llama_index_memory:2", "ok");
        let mut copy = row("llamaindex:copy:7", "ok");
        copy.created_at = chrono::Utc::now();
        assert!(same_message(&copy, &source));
        assert!(!same_message(&row("llamaindex:copy:7", "no"), &source));
        assert!(!same_message(&row("m-1", "ok"), &source));
        assert!(!same_message(
            &row("llamaindex:copy:7", "ok"),
            &row("m-2", "ok")
        ));
        assert!(same_message(&source, &source.clone()));
    }
}
