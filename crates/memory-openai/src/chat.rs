//! [`OpenAiChatModel`]: [`ChatModel`] over the chat-completions endpoint.
//!
//! The request and response follow "Create chat completion" (`POST /chat/completions`) of
//! OpenAI's API reference: `model`, `messages` in OpenAI's message form (converted by
//! [`ChatMessage::to_openai`]), `tools` as `{"type": "function", "function": {...}}`, and the
//! answer's `choices[0].message` and `usage`.

use std::fmt;

use async_trait::async_trait;
use memory_core::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, Error, OpenAiMessage, Result,
    ToolDefinition, Usage,
};
use serde::{Deserialize, Serialize};

use crate::config::OpenAiConfig;
use crate::http::{CHAT_COMPLETIONS, HttpClient};

/// A [`ChatModel`] that calls `POST {base_url}/chat/completions` of OpenAI or any
/// OpenAI-compatible server.
///
/// Cheap to clone: clones share one HTTP client and its connection pool.
///
/// ```
/// use memory_openai::{OpenAiChatModel, OpenAiConfig};
///
/// let model = OpenAiChatModel::builder(OpenAiConfig::new("gpt-4o-mini").with_api_key("sk-..."))
///     .temperature(0.2)
///     .max_completion_tokens(512)
///     .build()?;
/// assert_eq!(model.model(), "gpt-4o-mini");
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Clone)]
pub struct OpenAiChatModel {
    http: HttpClient,
    model: String,
    temperature: Option<f64>,
    max_completion_tokens: Option<u32>,
}

impl fmt::Debug for OpenAiChatModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChatModel")
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("max_completion_tokens", &self.max_completion_tokens)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiChatModel {
    /// A chat model with `config` and the default options.
    ///
    /// # Errors
    /// As [`OpenAiChatModelBuilder::build`].
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Self::builder(config).build()
    }

    /// A chat model configured from the environment ([`OpenAiConfig::from_env`]).
    ///
    /// # Errors
    /// As [`OpenAiChatModelBuilder::build`].
    pub fn from_env() -> Result<Self> {
        Self::new(OpenAiConfig::from_env())
    }

    /// A builder for the options beyond `config`.
    pub fn builder(config: OpenAiConfig) -> OpenAiChatModelBuilder {
        OpenAiChatModelBuilder {
            config,
            temperature: None,
            max_completion_tokens: None,
            client: None,
        }
    }

    /// The model it calls.
    pub fn model(&self) -> &str {
        &self.model
    }
}

/// Builds an [`OpenAiChatModel`]; from [`OpenAiChatModel::builder`].
#[derive(Debug)]
#[must_use]
pub struct OpenAiChatModelBuilder {
    config: OpenAiConfig,
    temperature: Option<f64>,
    max_completion_tokens: Option<u32>,
    client: Option<reqwest::Client>,
}

impl OpenAiChatModelBuilder {
    /// The sampling temperature (`temperature`, 0 to 2); the server's default when not set.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The most tokens the answer may have (`max_completion_tokens`, reasoning tokens
    /// included); the server's default when not set.
    pub fn max_completion_tokens(mut self, max_completion_tokens: u32) -> Self {
        self.max_completion_tokens = Some(max_completion_tokens);
        self
    }

    /// Sends requests with `client` instead of a client of its own, to share an application's
    /// connection pool; build it from [`http_client_builder`](crate::http_client_builder). Its
    /// own connect timeout, proxy and TLS settings apply; the configured per-request timeout
    /// applies as well.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Builds the model.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for an invalid
    /// configuration (see [`OpenAiConfig::validate`]) or a temperature outside 0 to 2;
    /// [`ErrorKind::Backend`](memory_core::ErrorKind::Backend) if the HTTP client cannot be
    /// built (no root certificates).
    pub fn build(self) -> Result<OpenAiChatModel> {
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(Error::invalid_input(format!(
                "the temperature must be between 0 and 2, not {t}"
            )));
        }
        Ok(OpenAiChatModel {
            http: HttpClient::new(&self.config, self.client)?,
            model: self.config.model,
            temperature: self.temperature,
            max_completion_tokens: self.max_completion_tokens,
        })
    }
}

/// The request body of "Create chat completion".
#[derive(Serialize)]
struct CompletionRequest<'a> {
    model: &'a str,
    messages: Vec<OpenAiMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolSpec<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

/// One entry of `tools`.
#[derive(Serialize)]
struct ToolSpec<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolDefinition,
}

/// The parts of the chat completion object this crate reads.
#[derive(Deserialize)]
pub(crate) struct CompletionResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct Choice {
    message: OpenAiMessage,
}

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[async_trait]
impl ChatModel for OpenAiChatModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        if request.conversation_id.is_some() {
            return Err(Error::unsupported(
                "OpenAI chat completions do not keep conversations on the server; send the \
                 whole history in `messages` and leave `conversation_id` unset",
            ));
        }
        if request.messages.is_empty() {
            return Err(Error::invalid_input(
                "a chat completion request needs at least one message",
            ));
        }
        let mut messages = Vec::with_capacity(request.messages.len());
        for message in &request.messages {
            messages.extend(message.to_openai()?);
        }
        let body = CompletionRequest {
            model: &self.model,
            messages,
            tools: request
                .tools
                .iter()
                .map(|function| ToolSpec {
                    kind: "function",
                    function,
                })
                .collect(),
            temperature: self.temperature,
            max_completion_tokens: self.max_completion_tokens,
        };
        let response: CompletionResponse = self
            .http
            .post_json(CHAT_COMPLETIONS, &self.model, &body)
            .await?;
        read_completion(response)
    }
}

/// The reply a chat completion object holds: its first choice's message and the usage.
pub(crate) fn read_completion(response: CompletionResponse) -> Result<ChatResponse> {
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| Error::serialization("the chat completion response has no choices"))?;
    let message = ChatMessage::from_openai(choice.message).map_err(|err| {
        Error::serialization(format!(
            "the chat completion response holds a message this library cannot read: {}",
            err.message()
        ))
        .with_source(err)
    })?;
    Ok(ChatResponse {
        messages: vec![message],
        conversation_id: None,
        usage: response.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_body_omits_empty_tools_and_unset_options() {
        let body = CompletionRequest {
            model: "m",
            messages: ChatMessage::user("hi").to_openai().unwrap(),
            tools: Vec::new(),
            temperature: None,
            max_completion_tokens: None,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn bad_temperature_is_invalid_input() {
        let err = OpenAiChatModel::builder(OpenAiConfig::default())
            .temperature(3.0)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput);
    }
}
