//! The `<memory>` text and where it goes.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::message::{ChatMessage, Part, Role};

/// Where [`Memory::get`](super::Memory::get) puts the memory text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InsertMethod {
    /// Into the leading system message, or a new one at the front (LlamaIndex's default).
    #[default]
    System,
    /// Into the latest user message.
    User,
}

/// Escapes `&`, `<` and `>` in text a memory block shows (`&amp;`, `&lt;`, `&gt;`), so a
/// remembered text cannot close the `<memory>` block or forge a message: the built-in blocks
/// escape what they remember, and a custom block showing stored or user text should too.
/// Text without these characters is returned unchanged (LlamaIndex renders it byte for byte).
///
/// ```
/// use memory_core::memory::escape_memory_text;
///
/// assert_eq!(escape_memory_text("Dana is on call."), "Dana is on call.");
/// assert_eq!(escape_memory_text("</memory> & <x>"), "&lt;/memory&gt; &amp; &lt;x&gt;");
/// ```
pub fn escape_memory_text(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().saturating_add(16));
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Reverses [`escape_memory_text`] (`&lt;`, `&gt;`, then `&amp;`), for text read back from a
/// rendering or from a model that echoed it.
pub(crate) fn unescape_memory_text(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Renders LlamaIndex's form: `<memory>\n<name>\ncontent\n</name>\n…</memory>`.
///
/// `content` is placed as given: a block escapes what it shows with [`escape_memory_text`]
/// (its own markup, such as the fact block's `<fact>` tags, stays).
pub fn render_memory<'a>(sections: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from("<memory>\n");
    for (name, content) in sections {
        out.push_str(&format!("<{name}>\n{content}\n</{name}>\n"));
    }
    out.push_str("</memory>");
    out
}

/// Inserts the memory text (and attachments) into `messages` as `method` says.
pub(crate) fn insert_memory(
    messages: &mut Vec<ChatMessage>,
    text: String,
    attachments: Vec<Part>,
    method: InsertMethod,
) {
    let mut parts = vec![Part::text(text)];
    parts.extend(attachments);
    let target = match method {
        InsertMethod::System => messages
            .first()
            .filter(|m| m.role == Role::System)
            .map(|_| 0),
        InsertMethod::User => messages.iter().rposition(|m| m.role == Role::User),
    };
    match target.and_then(|i| messages.get_mut(i)) {
        Some(message) => {
            parts.append(&mut message.parts);
            message.parts = parts;
        }
        None => messages.insert(0, ChatMessage::new(Role::System, parts)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_llamaindex_shape() {
        assert_eq!(
            render_memory([("core_info", "The user is Dana, an SRE.")]),
            "<memory>\n<core_info>\nThe user is Dana, an SRE.\n</core_info>\n</memory>"
        );
    }

    #[test]
    fn inserts_where_asked() {
        let base = vec![
            ChatMessage::user("a"),
            ChatMessage::assistant("b"),
            ChatMessage::user("c"),
        ];
        let mut sys = base.clone();
        insert_memory(&mut sys, "M".into(), vec![], InsertMethod::System);
        assert_eq!(sys.len(), 4);
        assert_eq!((sys[0].role, sys[0].text()), (Role::System, "M".to_owned()));

        let mut user = base.clone();
        insert_memory(&mut user, "M".into(), vec![], InsertMethod::User);
        assert_eq!(user.len(), 3);
        assert_eq!(user[2].text(), "M\nc");

        let mut existing = vec![ChatMessage::system("S"), ChatMessage::user("u")];
        insert_memory(&mut existing, "M".into(), vec![], InsertMethod::System);
        assert_eq!(existing.len(), 2);
        assert_eq!(existing[0].text(), "M\nS");
    }
}
