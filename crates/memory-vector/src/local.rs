//! [`BertEmbedder`]: a sentence-transformers BERT model run locally with candle.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use memory_core::{Embedder, Error, ErrorKind, Result};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::join;

/// The environment variable naming the model directory (see
/// [`from_env`](BertEmbedder::from_env)).
pub const MODEL_DIR_ENV: &str = "AGENT_MEMORY_MODEL_DIR";

/// How many texts one forward pass embeds at most.
const BATCH: usize = 32;

/// A sentence-transformers BERT model (such as all-MiniLM-L6-v2, 384 dimensions) run on the
/// CPU with candle: the texts are tokenized with the model's `tokenizer.json`, the last hidden
/// states are mean-pooled over the attention mask and the vectors normalised to unit length,
/// as the sentence-transformers pipeline of those models does.
///
/// The model directory holds `config.json`, `tokenizer.json` and `model.safetensors`
/// (`cargo xtask fetch-model` downloads all-MiniLM-L6-v2 and prints its directory). Inference
/// runs on Tokio's blocking thread pool, never on the async executor's threads.
#[derive(Clone)]
pub struct BertEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    dimensions: usize,
}

impl fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BertEmbedder")
            .field("dir", &self.inner.dir)
            .field("dimensions", &self.inner.dimensions)
            .finish_non_exhaustive()
    }
}

fn model_error(action: &str, dir: &Path, err: impl fmt::Display) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!("{action} in the model directory {}: {err}", dir.display()),
    )
}

fn inference_error(err: impl fmt::Display) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("embedding with the local model: {err}"),
    )
}

impl BertEmbedder {
    /// Loads the model in `dir` (`config.json`, `tokenizer.json`, `model.safetensors`, and
    /// `sentence_bert_config.json` for the truncation length when present).
    ///
    /// Loading reads the whole model (90 MB for all-MiniLM-L6-v2): call it from a blocking
    /// context, or through [`load_async`](Self::load_async).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when a file is missing or malformed.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| model_error("reading config.json", &dir, e))?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| model_error("parsing config.json", &dir, e))?;
        let hidden: serde_json::Value = serde_json::from_str(&config_text)
            .map_err(|e| model_error("parsing config.json", &dir, e))?;
        let dimensions = hidden
            .get("hidden_size")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| model_error("reading hidden_size", &dir, "missing"))?
            as usize;
        // sentence-transformers truncates at `max_seq_length` (256 for all-MiniLM-L6-v2),
        // else at the model's position limit.
        let st_max = std::fs::read_to_string(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("max_seq_length").and_then(serde_json::Value::as_u64));
        let max_len = st_max
            .or_else(|| {
                hidden
                    .get("max_position_embeddings")
                    .and_then(serde_json::Value::as_u64)
            })
            .unwrap_or(512) as usize;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| model_error("loading tokenizer.json", &dir, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len.min(512),
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error("configuring truncation", &dir, e))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &device)
            .map_err(|e| model_error("loading model.safetensors", &dir, e))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model = BertModel::load(vb, &config)
            .map_err(|e| model_error("building the BERT model", &dir, e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                model,
                tokenizer,
                dimensions,
            }),
        })
    }

    /// [`load`](Self::load) on Tokio's blocking thread pool.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub async fn load_async(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || Self::load(dir))
            .await
            .map_err(|e| join("loading the local model", e))?
    }

    /// Loads the model from the directory in `AGENT_MEMORY_MODEL_DIR`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the variable is unset, or as [`load`](Self::load).
    pub async fn from_env() -> Result<Self> {
        let dir = std::env::var(MODEL_DIR_ENV).map_err(|_| {
            Error::invalid_input(format!(
                "{MODEL_DIR_ENV} is not set (run `cargo xtask fetch-model` and export the \
                 directory it prints)"
            ))
        })?;
        Self::load_async(dir).await
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Embeds `texts` synchronously (the work [`Embedder::embed`] runs on the blocking pool).
    ///
    /// # Errors
    /// [`ErrorKind::Backend`] when tokenization or inference fails.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk).map_err(inference_error)?);
        }
        Ok(out)
    }

    fn embed_batch(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, String> {
        let inner = &*self.inner;
        let encodings = inner
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| e.to_string())?;
        let device = Device::Cpu;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| {
            let rows: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(f(e).as_slice(), &device))
                .collect::<candle_core::Result<_>>()?;
            Tensor::stack(&rows, 0)
        };
        let step = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = rows(&|e| e.get_ids().to_vec())?;
            let type_ids = rows(&|e| e.get_type_ids().to_vec())?;
            let mask = rows(&|e| e.get_attention_mask().to_vec())?;
            let hidden = inner.model.forward(&ids, &type_ids, Some(&mask))?;
            // Mean over the real tokens: (batch, tokens, hidden) * mask, summed over tokens.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        step().map_err(|e| e.to_string())
    }
}

#[async_trait]
impl Embedder for BertEmbedder {
    fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| join("embedding with the local model", e))?
    }
}
