//! The tagged transcript form LlamaIndex uses inside `<memory>`: one
//! `<message role='…'>…</message>` line per message.

use super::ChatMessage;

/// Renders `messages` as `<message role='user'>text</message>` lines, one per message with
/// text; tool calls are written as `name(arguments)` and tool results as their content.
///
/// ```
/// use memory_core::ChatMessage;
/// use memory_core::message::tagged_transcript;
///
/// let text = tagged_transcript([&ChatMessage::user("Hi"), &ChatMessage::assistant("Hello")]);
/// assert_eq!(text, "<message role='user'>Hi</message>\n<message role='assistant'>Hello</message>");
/// ```
pub fn tagged_transcript<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> String {
    let mut lines = Vec::new();
    for message in messages {
        let mut body = message.text();
        for part in &message.parts {
            match part {
                super::Part::ToolCall {
                    name, arguments, ..
                } => push_line(&mut body, &format!("{name}({arguments})")),
                super::Part::ToolResult { content, .. } => push_line(&mut body, content),
                _ => {}
            }
        }
        if !body.is_empty() {
            lines.push(format!(
                "<message role='{}'>{body}</message>",
                message.role.as_str()
            ));
        }
    }
    lines.join("\n")
}

fn push_line(body: &mut String, line: &str) {
    if !body.is_empty() {
        body.push('\n');
    }
    body.push_str(line);
}
