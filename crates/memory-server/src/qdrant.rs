//! The Qdrant vector stores of `[memory] vector_store = "qdrant"` (a Qdrant server over gRPC)
//! and `"qdrant-edge"` (Qdrant's engine in a directory), in a build with the `qdrant` feature.
//! Both search a user's memory across sessions (`search_matching`) and forget by scope.

use std::sync::Arc;

use agent_memory::VectorStore;

use crate::config_error::ConfigError;
use crate::retrieval::{MemoryConfig, VectorStoreKind};

/// The Qdrant store `kind` names, from `config`; `env` reads `QDRANT_URL` and the API key's
/// variable.
///
/// # Errors
/// A [`ConfigError`] for a missing URL or directory, a variable that is not set, or a store
/// that cannot be opened (the message never holds the key, nor the URL's password).
#[cfg(feature = "qdrant")]
pub(crate) async fn open(
    config: &MemoryConfig,
    kind: VectorStoreKind,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn VectorStore>, ConfigError> {
    use memory_vector::{QdrantEdgeStore, QdrantStore, QdrantStoreConfig};

    let unusable = |what: &str, e: agent_memory::Error| {
        ConfigError(format!("the {what} vector store cannot be opened: {e}"))
    };
    if kind == VectorStoreKind::QdrantEdge {
        let dir = config.qdrant_dir.as_ref().ok_or_else(|| {
            ConfigError("memory.vector_store = \"qdrant-edge\" needs memory.qdrant_dir".to_owned())
        })?;
        let store = QdrantEdgeStore::open(dir)
            .await
            .map_err(|e| unusable("qdrant-edge", e))?;
        return Ok(Arc::new(store));
    }
    let url = config
        .qdrant_url
        .clone()
        .or_else(|| env("QDRANT_URL"))
        .ok_or_else(|| {
            ConfigError(
                "memory.vector_store = \"qdrant\" needs memory.qdrant_url (or QDRANT_URL)"
                    .to_owned(),
            )
        })?;
    let mut store_config = QdrantStoreConfig::from_url(url).map_err(|e| unusable("qdrant", e))?;
    if let Some(collection) = &config.qdrant_collection {
        store_config = store_config.with_collection(collection.as_str());
    }
    if let Some(name) = &config.qdrant_api_key_env {
        store_config = store_config.with_api_key(crate::config_error::secret_from_env(
            &env,
            "memory.qdrant_api_key_env",
            name,
        )?);
    }
    let store = QdrantStore::connect(store_config).map_err(|e| unusable("qdrant", e))?;
    Ok(Arc::new(store))
}

/// A build without the Qdrant clients refuses the Qdrant stores, saying how to get them.
#[cfg(not(feature = "qdrant"))]
pub(crate) async fn open(
    config: &MemoryConfig,
    kind: VectorStoreKind,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn VectorStore>, ConfigError> {
    let _ = (config, env);
    let name = if kind == VectorStoreKind::QdrantEdge {
        "qdrant-edge"
    } else {
        "qdrant"
    };
    Err(ConfigError(format!(
        "memory.vector_store = \"{name}\" needs a server built with the `qdrant` feature \
         (cargo install agent-memory-cli --features qdrant)"
    )))
}
