//! [`ScriptedChatModel`]: a [`ChatModel`] test double that plays back a script.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use memory_core::{ChatMessage, ChatModel, ChatRequest, ChatResponse, Error, ErrorKind, Result};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum ScriptedReply {
    /// Answer with this response.
    Response(ChatResponse),
    /// Fail with an error of this kind and message.
    Error(ErrorKind, String),
}

/// A [`ChatModel`] that answers each request with the next reply of a script, in order, and
/// records every [`ChatRequest`] it receives.
///
/// Build the script with the `reply_*` methods (or [`push`](Self::push) while a test runs);
/// read what the code under test sent with [`requests`](Self::requests). When the script runs
/// out, [`complete`](ChatModel::complete) fails with [`ErrorKind::InvalidInput`] saying so, so a
/// test that calls the model more often than it planned fails loudly instead of hanging or
/// getting a made-up answer.
///
/// ```
/// use memory_core::{ChatMessage, ChatModel, ChatRequest, ErrorKind};
/// use memory_testkit::ScriptedChatModel;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let model = ScriptedChatModel::new()
///     .reply_tool_call("call-1", "weather", r#"{"city":"Lisbon"}"#)
///     .reply_text("Sunny, 18 °C.");
/// let request = ChatRequest { messages: vec![ChatMessage::user("Weather?")], ..Default::default() };
///
/// let first = model.complete(&request).await?;
/// assert!(first.messages[0].has_tool_calls());
/// let second = model.complete(&request).await?;
/// assert_eq!(second.messages[0].text(), "Sunny, 18 °C.");
/// assert_eq!(model.complete(&request).await.unwrap_err().kind(), ErrorKind::InvalidInput);
/// assert_eq!(model.requests().len(), 3);
/// # Ok::<(), memory_core::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct ScriptedChatModel {
    script: Mutex<VecDeque<ScriptedReply>>,
    requests: Mutex<Vec<ChatRequest>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide the script from the others.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ScriptedChatModel {
    /// A model with an empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a reply at the end of the script.
    pub fn push(&self, reply: ScriptedReply) {
        lock(&self.script).push_back(reply);
    }

    /// Then answers with `response`, as given.
    pub fn reply(self, response: ChatResponse) -> Self {
        self.push(ScriptedReply::Response(response));
        self
    }

    /// Then answers with one assistant text message.
    pub fn reply_text(self, text: impl Into<String>) -> Self {
        self.reply(response(ChatMessage::assistant(text), None))
    }

    /// Then answers with one assistant message calling tool `name` with `arguments` (JSON
    /// text), under call id `call_id`.
    pub fn reply_tool_call(
        self,
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.reply(response(
            ChatMessage::tool_call(call_id, name, arguments),
            None,
        ))
    }

    /// Then answers with one assistant text message and the id of a conversation the service
    /// keeps (as a service-stored history does).
    pub fn reply_with_conversation_id(
        self,
        text: impl Into<String>,
        conversation_id: impl Into<String>,
    ) -> Self {
        self.reply(response(
            ChatMessage::assistant(text),
            Some(conversation_id.into()),
        ))
    }

    /// Then fails with an error of `kind`.
    pub fn reply_error(self, kind: ErrorKind, message: impl Into<String>) -> Self {
        self.push(ScriptedReply::Error(kind, message.into()));
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// The last request received, if any.
    pub fn last_request(&self) -> Option<ChatRequest> {
        lock(&self.requests).last().cloned()
    }

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

fn response(message: ChatMessage, conversation_id: Option<String>) -> ChatResponse {
    ChatResponse {
        messages: vec![message],
        conversation_id,
        usage: None,
    }
}

#[async_trait]
impl ChatModel for ScriptedChatModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let call = {
            let mut requests = lock(&self.requests);
            requests.push(request.clone());
            requests.len()
        };
        match lock(&self.script).pop_front() {
            Some(ScriptedReply::Response(response)) => Ok(response),
            Some(ScriptedReply::Error(kind, message)) => Err(Error::new(kind, message)),
            None => Err(Error::invalid_input(format!(
                "ScriptedChatModel: the script ran out; call {call} has no scripted reply"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::user(text)],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn plays_the_script_in_order_and_records_requests() {
        let model = ScriptedChatModel::new()
            .reply_text("one")
            .reply_error(ErrorKind::Timeout, "slow")
            .reply_with_conversation_id("two", "conv-1")
            .reply_tool_call("c1", "search", "{}");
        assert_eq!(model.remaining(), 4);
        let r = model.complete(&request("a")).await.unwrap();
        assert_eq!(r.messages[0].text(), "one");
        let e = model.complete(&request("b")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert_eq!(e.message(), "slow");
        let r = model.complete(&request("c")).await.unwrap();
        assert_eq!(r.conversation_id.as_deref(), Some("conv-1"));
        let r = model.complete(&request("d")).await.unwrap();
        assert_eq!(r.messages[0].tool_call_ids().collect::<Vec<_>>(), ["c1"]);
        let e = model.complete(&request("e")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.message().contains("ran out"), "{e}");
        let texts: Vec<String> = model
            .requests()
            .iter()
            .map(|r| r.messages[0].text())
            .collect();
        assert_eq!(texts, ["a", "b", "c", "d", "e"]);
        assert_eq!(model.last_request().unwrap().messages[0].text(), "e");
    }
}
