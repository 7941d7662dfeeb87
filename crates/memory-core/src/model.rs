//! The two model traits the library needs: [`ChatModel`] and [`Embedder`].

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::message::ChatMessage;

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its parameters, as a JSON Schema object.
    pub parameters: serde_json::Value,
}

/// What an agent sends a chat model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The messages, oldest first: instructions, context, history, new input.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// The service-held conversation to continue, if the service keeps the history.
    pub conversation_id: Option<String>,
}

/// Token usage a model reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// What a chat model answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    /// The new messages (usually one assistant message).
    pub messages: Vec<ChatMessage>,
    /// Set when the service keeps the conversation's history itself; the session then keeps
    /// only this id.
    pub conversation_id: Option<String>,
    /// Token usage, if reported.
    pub usage: Option<Usage>,
}

/// A chat model: messages in, messages out.
///
/// # Behavior
/// - [`complete`](ChatModel::complete) answers one request with the model's new messages
///   (usually one assistant message, possibly with tool calls), in order. It sends the request
///   as given: it does not reorder, drop or store its messages, and it changes nothing the
///   caller holds (the request is borrowed; a model that retries resends the same request).
///   Storing the request and the answer is the caller's work.
/// - [`ChatResponse::conversation_id`] is `Some` only when the service keeps the
///   conversation's history itself; the caller then keeps only that id and sends it back in
///   [`ChatRequest::conversation_id`]. A model whose service keeps no history answers a request
///   carrying a `conversation_id` with [`Unsupported`](crate::ErrorKind::Unsupported).
/// - Errors carry an [`ErrorKind`](crate::ErrorKind) a caller can act on: an unreachable or
///   overloaded service is temporary ([`Unavailable`](crate::ErrorKind::Unavailable),
///   [`Timeout`](crate::ErrorKind::Timeout)), a rate limit is
///   [`LimitExceeded`](crate::ErrorKind::LimitExceeded), a request the model cannot take (no
///   message, a part it cannot send) is [`InvalidInput`](crate::ErrorKind::InvalidInput) or
///   `Unsupported`. No error message holds a key or a secret. After an error nothing was
///   produced: the agent stores nothing of a failed run.
/// - One model object may serve concurrent calls of different conversations: everything a
///   call needs is in its request.
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug + 'static {
    /// Completes `request`. The request is borrowed: a model that retries resends the same one.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse>;
}

/// Forwards [`ChatModel`] through smart pointers, so `Arc<dyn ChatModel>` and
/// `Box<dyn ChatModel>` are models too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): a method added to the trait must be forwarded here, or a default body would silently
/// replace the pointee's own implementation.
macro_rules! forward_chat_model {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: ChatModel + ?Sized> ChatModel for $pointer<T> {
            async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
                (**self).complete(request).await
            }
        }
    )*};
}

forward_chat_model!(Arc, Box);

/// Turns texts into vectors.
///
/// # Behavior
/// - [`dimensions`](Embedder::dimensions) is constant for an embedder object: the length of
///   every vector [`embed`](Embedder::embed) returns.
/// - [`embed`](Embedder::embed) returns exactly one vector per text, in the order given, each
///   of [`dimensions`](Embedder::dimensions) finite values; no texts give no vectors. The same
///   text gives the same vector (up to the model's numeric noise), whatever batch it is in, so a
///   query embedded alone can be compared with texts embedded in batches. A vector that does not
///   meet this (a wrong length, a missing index in a server's answer) is an error, never passed
///   on: [`Serialization`](crate::ErrorKind::Serialization) or
///   [`Backend`](crate::ErrorKind::Backend).
/// - Errors follow [`ChatModel`]'s: temporary kinds for an unreachable or slow service,
///   [`LimitExceeded`](crate::ErrorKind::LimitExceeded) for rate limits, no secret in any
///   message.
/// - One embedder object serves concurrent calls.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug + 'static {
    /// The length of every vector it returns.
    fn dimensions(&self) -> usize;

    /// Embeds each text; the result has one vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}

/// Forwards [`Embedder`] through smart pointers, so `Arc<dyn Embedder>` and `Box<dyn Embedder>`
/// are embedders too. `clippy::missing_trait_methods` guards them as for [`ChatModel`].
macro_rules! forward_embedder {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        #[async_trait]
        impl<T: Embedder + ?Sized> Embedder for $pointer<T> {
            fn dimensions(&self) -> usize {
                (**self).dimensions()
            }
            async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
                (**self).embed(texts).await
            }
        }
    )*};
}

forward_embedder!(Arc, Box);
