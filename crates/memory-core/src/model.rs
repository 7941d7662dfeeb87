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
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug + 'static {
    /// Completes `request`. The request is borrowed: a model that retries resends the same one.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse>;
}

#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for Arc<T> {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        (**self).complete(request).await
    }
}

/// Turns texts into vectors.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug + 'static {
    /// The length of every vector it returns.
    fn dimensions(&self) -> usize;

    /// Embeds each text; the result has one vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}

#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    fn dimensions(&self) -> usize {
        (**self).dimensions()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        (**self).embed(texts).await
    }
}
