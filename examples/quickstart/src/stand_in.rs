//! [`OfflineStandInModel`]: a stand-in for a real chat model, for running offline.

use agent_memory::{ChatMessage, ChatModel, ChatRequest, ChatResponse, Result, Role, async_trait};

/// Not a language model: a few fixed rules that answer from the messages it is sent, so the
/// quickstart runs with no network and no key, and shows what memory gives a model.
///
/// It answers "what is my name" and "which service paged me" from the history it was sent (and
/// says so when that part of the conversation is no longer in its window); anything else is
/// acknowledged.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OfflineStandInModel;

#[async_trait]
impl ChatModel for OfflineStandInModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let question = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(ChatMessage::text)
            .unwrap_or_default()
            .to_lowercase();
        let history: Vec<String> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(ChatMessage::text)
            .collect();
        let reply = if question.contains("what is my name") {
            match history.iter().find_map(|t| word_after(t, "my name is ")) {
                Some(name) => format!("Your name is {name}."),
                None => {
                    "I don't know your name: it is no longer in the messages I was sent.".to_owned()
                }
            }
        } else if question.contains("which service paged") {
            let page = history.iter().find(|t| t.contains("paged me"));
            match page.and_then(|t| word_after(t, "the ")) {
                Some(service) => format!("The {service} service paged you."),
                None => {
                    "I can't tell: the page is no longer in the messages I was sent.".to_owned()
                }
            }
        } else {
            format!(
                "Noted. (I was sent {} messages this turn.)",
                request.messages.len()
            )
        };
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(reply)],
            ..ChatResponse::default()
        })
    }
}

/// The word that follows `marker` in `text` (case-insensitive), without punctuation.
fn word_after(text: &str, marker: &str) -> Option<String> {
    let at = text.to_lowercase().find(marker)? + marker.len();
    let word: String = text
        .get(at..)?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '-')
        .collect();
    (!word.is_empty()).then_some(word)
}
