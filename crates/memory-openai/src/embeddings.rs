//! [`OpenAiEmbedder`]: [`Embedder`] over the embeddings endpoint.
//!
//! The request and response follow "Create embeddings" (`POST /embeddings`) of OpenAI's API
//! reference: `model`, `input` as an array of strings, `encoding_format: "float"` and the
//! optional `dimensions`; the answer's `data[]` holds one `{"index", "embedding"}` per input.

use std::fmt;

use async_trait::async_trait;
use memory_core::{Embedder, Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use crate::config::OpenAiConfig;
use crate::http::{EMBEDDINGS, HttpClient};

/// The most inputs OpenAI accepts in one embeddings request.
pub const MAX_EMBEDDING_BATCH: usize = 2048;

/// The vector length of the OpenAI embedding models this crate knows, at full size.
///
/// ```
/// assert_eq!(memory_openai::known_dimensions("text-embedding-3-large"), Some(3072));
/// assert_eq!(memory_openai::known_dimensions("nomic-embed-text"), None);
/// ```
pub fn known_dimensions(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        "text-embedding-ada-002" => Some(1536),
        _ => None,
    }
}

/// An [`Embedder`] that calls `POST {base_url}/embeddings` of OpenAI or any OpenAI-compatible
/// server.
///
/// Inputs are sent in batches of at most [`MAX_EMBEDDING_BATCH`] (configurable lower with
/// [`OpenAiEmbedderBuilder::batch_size`]); the vectors come back in input order whatever order
/// the server lists them in.
///
/// ```
/// use memory_core::Embedder;
/// use memory_openai::{OpenAiConfig, OpenAiEmbedder};
///
/// // A known OpenAI model: the dimension is known.
/// let openai = OpenAiEmbedder::new(OpenAiConfig::new("text-embedding-3-small"))?;
/// assert_eq!(openai.dimensions(), 1536);
///
/// // Shortened vectors, which text-embedding-3 models support.
/// let short = OpenAiEmbedder::builder(OpenAiConfig::new("text-embedding-3-large"))
///     .dimensions(256)
///     .build()?;
/// assert_eq!(short.dimensions(), 256);
///
/// // Any other model on an OpenAI-compatible server: say how long its vectors are.
/// let local = OpenAiEmbedder::builder(
///     OpenAiConfig::new("nomic-embed-text").with_base_url("http://localhost:11434/v1"),
/// )
/// .model_dimensions(768)
/// .build()?;
/// assert_eq!(local.dimensions(), 768);
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Clone)]
pub struct OpenAiEmbedder {
    http: HttpClient,
    model: String,
    dimensions: usize,
    request_dimensions: Option<usize>,
    batch_size: usize,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("request_dimensions", &self.request_dimensions)
            .field("batch_size", &self.batch_size)
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiEmbedder {
    /// An embedder with `config` and the default options; the model must be one whose
    /// dimension is known (see [`known_dimensions`]).
    ///
    /// # Errors
    /// As [`OpenAiEmbedderBuilder::build`].
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Self::builder(config).build()
    }

    /// An embedder configured from the environment
    /// ([`OpenAiConfig::from_env_for_embeddings`]).
    ///
    /// # Errors
    /// As [`OpenAiEmbedderBuilder::build`].
    pub fn from_env() -> Result<Self> {
        Self::new(OpenAiConfig::from_env_for_embeddings())
    }

    /// A builder for the options beyond `config`.
    pub fn builder(config: OpenAiConfig) -> OpenAiEmbedderBuilder {
        OpenAiEmbedderBuilder {
            config,
            dimensions: None,
            model_dimensions: None,
            batch_size: MAX_EMBEDDING_BATCH,
            client: None,
        }
    }

    /// The model it calls.
    pub fn model(&self) -> &str {
        &self.model
    }
}

/// Builds an [`OpenAiEmbedder`]; from [`OpenAiEmbedder::builder`].
#[derive(Debug)]
#[must_use]
pub struct OpenAiEmbedderBuilder {
    config: OpenAiConfig,
    dimensions: Option<usize>,
    model_dimensions: Option<usize>,
    batch_size: usize,
    client: Option<reqwest::Client>,
}

impl OpenAiEmbedderBuilder {
    /// Asks the server for vectors of `dimensions` values: sent as the request's `dimensions`
    /// parameter, which `text-embedding-3` models (and some other servers) support.
    pub fn dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// Declares the length of the vectors the model returns, for a model whose dimension this
    /// crate does not know. Nothing is sent to the server.
    pub fn model_dimensions(mut self, dimensions: usize) -> Self {
        self.model_dimensions = Some(dimensions);
        self
    }

    /// The most inputs per request (default and maximum [`MAX_EMBEDDING_BATCH`]). Lower it
    /// for long texts: OpenAI also limits the tokens of one request.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
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

    /// Builds the embedder.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for an invalid configuration (see
    /// [`OpenAiConfig::validate`]), a model of unknown dimension without
    /// [`dimensions`](Self::dimensions) or [`model_dimensions`](Self::model_dimensions), a zero
    /// dimension, or a batch size outside 1 to [`MAX_EMBEDDING_BATCH`];
    /// [`ErrorKind::Backend`] if the HTTP client cannot be built (no root certificates).
    pub fn build(self) -> Result<OpenAiEmbedder> {
        let model = self.config.model.clone();
        let dimensions = self
            .dimensions
            .or(self.model_dimensions)
            .or_else(|| known_dimensions(&model))
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "the dimension of embedding model {model:?} is not known: set it with \
                     `model_dimensions` (or `dimensions` to request shortened vectors)"
                ))
            })?;
        if dimensions == 0 {
            return Err(Error::invalid_input(
                "the embedding dimension must not be 0",
            ));
        }
        if !(1..=MAX_EMBEDDING_BATCH).contains(&self.batch_size) {
            return Err(Error::invalid_input(format!(
                "the embedding batch size must be between 1 and {MAX_EMBEDDING_BATCH}, not {}",
                self.batch_size
            )));
        }
        Ok(OpenAiEmbedder {
            http: HttpClient::new(&self.config, self.client)?,
            model,
            dimensions,
            request_dimensions: self.dimensions,
            batch_size: self.batch_size,
        })
    }
}

/// The request body of "Create embeddings".
#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

/// The parts of the embeddings answer this crate reads.
#[derive(Deserialize)]
pub(crate) struct EmbeddingsResponse {
    pub(crate) data: Vec<EmbeddingWire>,
}

#[derive(Deserialize)]
pub(crate) struct EmbeddingWire {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let body = EmbeddingsRequest {
            model: &self.model,
            input: texts,
            encoding_format: "float",
            dimensions: self.request_dimensions,
        };
        let response: EmbeddingsResponse =
            self.http.post_json(EMBEDDINGS, &self.model, &body).await?;
        order_by_index(response.data, texts.len(), self.dimensions)
    }
}

/// Puts the vectors in input order, checking that every input has exactly one vector of the
/// expected length.
pub(crate) fn order_by_index(
    data: Vec<EmbeddingWire>,
    expected: usize,
    dimensions: usize,
) -> Result<Vec<Vec<f32>>> {
    if data.len() != expected {
        return Err(Error::serialization(format!(
            "the embeddings response holds {} vectors for {expected} inputs",
            data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for item in data {
        let slot = slots.get_mut(item.index).ok_or_else(|| {
            Error::serialization(format!(
                "the embeddings response has index {} for {expected} inputs",
                item.index
            ))
        })?;
        if slot.is_some() {
            return Err(Error::serialization(format!(
                "the embeddings response lists index {} twice",
                item.index
            )));
        }
        if item.embedding.len() != dimensions {
            return Err(Error::new(
                ErrorKind::Backend,
                format!(
                    "the server returned a vector of {} values where {dimensions} were expected; \
                     set the embedder's dimension to the model's",
                    item.embedding.len()
                ),
            ));
        }
        *slot = Some(item.embedding);
    }
    // Every slot is filled: there are `expected` distinct indexes below `expected`.
    Ok(slots.into_iter().flatten().collect())
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(index: usize, value: f32) -> EmbeddingWire {
        EmbeddingWire {
            index,
            embedding: vec![value, value],
        }
    }

    #[test]
    fn vectors_are_put_in_index_order() {
        let out = order_by_index(vec![wire(2, 2.0), wire(0, 0.0), wire(1, 1.0)], 3, 2).unwrap();
        assert_eq!(out, vec![vec![0.0, 0.0], vec![1.0, 1.0], vec![2.0, 2.0]]);
    }

    #[test]
    fn missing_duplicate_or_out_of_range_indexes_are_errors() {
        for data in [
            vec![wire(0, 0.0)],
            vec![wire(0, 0.0), wire(0, 1.0)],
            vec![wire(0, 0.0), wire(5, 1.0)],
        ] {
            let err = order_by_index(data, 2, 2).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Serialization);
        }
        let err = order_by_index(vec![wire(0, 0.0)], 1, 3).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Backend);
    }

    #[test]
    fn known_models_and_builder_checks() {
        let client = crate::http_client_builder().unwrap().build().unwrap();
        let build =
            |config: OpenAiConfig| OpenAiEmbedder::builder(config).http_client(client.clone());
        assert_eq!(
            build(OpenAiConfig::new("text-embedding-ada-002"))
                .build()
                .unwrap()
                .dimensions(),
            1536
        );
        let err = build(OpenAiConfig::new("my-model")).build().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("model_dimensions"));
        assert!(
            build(OpenAiConfig::new("m"))
                .model_dimensions(0)
                .build()
                .is_err()
        );
        assert!(
            build(OpenAiConfig::new("text-embedding-3-small"))
                .batch_size(0)
                .build()
                .is_err()
        );
        assert!(
            build(OpenAiConfig::new("text-embedding-3-small"))
                .batch_size(4096)
                .build()
                .is_err()
        );
    }
}
