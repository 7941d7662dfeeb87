//! How the server's memory is searched: dense (an embedder and a vector store), lexical (a
//! text index) or hybrid (both, fused), from the `[memory]` table's `retrieval`, `text_index`
//! and `[memory.fusion]` keys.
//!
//! ```toml
//! [memory]
//! retrieval = "hybrid"        # "dense" | "lexical" | "hybrid"; default with an embedder:
//!                             # "hybrid" on a SQL store (its own text index), "dense" on
//!                             # another; without one, none (searches answer 501)
//! text_index = "store"        # "store" | "memory" | "directory"; default: "store" when the
//!                             # store has one (SQL URLs), else "memory"
//! # text_index_dir = "/var/lib/agent-memory/text"   # with text_index = "directory" only
//! index_on_append = true      # index each put at once (default), not only at a flush
//! # vector_store = "qdrant"   # or "qdrant-edge" (a build with the `qdrant` feature):
//! # qdrant_url = "http://127.0.0.1:6334"   # default QDRANT_URL; qdrant_collection,
//! #                                         # qdrant_api_key_env (the variable, never the key)
//! # qdrant_dir = "/var/lib/agent-memory/qdrant"   # qdrant-edge
//!
//! [memory.fusion]             # hybrid only
//! method = "score"            # "score" (weighted min-max scores, default) | "rrf"
//! dense_weight = 0.5          # default: 0.5 for "score", 1 for "rrf"
//! lexical_weight = 1.0        # default: 1
//! # rrf_k = 60.0              # "rrf" only; default 60
//! candidates = 50             # each side's candidates; default 50
//! ```
//!
//! - `store`: the SQL store's own full-text index (SQLite FTS5, PostgreSQL `tsvector`,
//!   MySQL/MariaDB `FULLTEXT`) in the same database: it survives restarts. Redis and `memory:`
//!   have none, so naming it there is a configuration error.
//! - `memory`: tantivy in the server's memory (lost on restart).
//! - `directory`: tantivy in `text_index_dir` (survives restarts; one server per directory).
//!
//! The defaults search as well as the store allows: an embedder on a store with a text index of
//! its own (SQL URLs) gives hybrid search (on LoCoMo, turn-level recall@10 72.9 against 52.4 for
//! dense alone, docs/quality.md), an embedder on another store dense search, no embedder none.
//! Lexical search, and hybrid over tantivy, are asked for by name.
//!
//! Overrides: `AGENT_MEMORY_SERVER_RETRIEVAL`, `AGENT_MEMORY_SERVER_TEXT_INDEX`,
//! `AGENT_MEMORY_SERVER_TEXT_INDEX_DIR`, `AGENT_MEMORY_SERVER_INDEX_ON_APPEND`,
//! `AGENT_MEMORY_SERVER_QDRANT_URL`, `..._QDRANT_COLLECTION`, `..._QDRANT_DIR`,
//! `AGENT_MEMORY_SERVER_FUSION` (`method`),
//! `AGENT_MEMORY_SERVER_FUSION_DENSE_WEIGHT`, `..._FUSION_LEXICAL_WEIGHT`,
//! `..._FUSION_RRF_K`, `..._FUSION_CANDIDATES`.

use std::path::PathBuf;
use std::sync::Arc;

use agent_memory::retrieval::{
    DEFAULT_CANDIDATES, DEFAULT_RRF_K, DenseRetriever, Fusion, HybridRetriever, LexicalRetriever,
    Retriever,
};
use agent_memory::text_indexes::TantivyTextIndex;
use agent_memory::{Embedder, Stores, TextIndex, VectorStore};
use serde::Deserialize;

use crate::config_error::{ConfigError, ENV_PREFIX};

/// The most candidates `[memory.fusion] candidates` may ask each side for.
pub const MAX_CANDIDATES: usize = 1_000;

/// The largest fusion weight or `rrf_k` accepted: larger values add nothing a smaller ratio
/// cannot say, and near `f32::MAX` fused scores overflow to infinity (ties, and a JSON score of
/// `null`).
pub const MAX_FUSION_PARAMETER: f32 = 1_000_000.0;

/// Where the vector memory keeps its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VectorStoreKind {
    /// The store's own vector store, in the same database as the history (SQL URLs): it
    /// survives restarts, and every replica on the database shares it. The default where the
    /// store has one.
    Store,
    /// In the server's memory: lost on restart, and each replica has its own. The default
    /// where the store has no vector store.
    Memory,
    /// A Qdrant server at `qdrant_url` (gRPC), in `qdrant_collection` (a build with the
    /// `qdrant` feature): shared by the replicas, for collections larger than an exact scan
    /// serves.
    Qdrant,
    /// Qdrant's embedded engine in the directory `qdrant_dir` (a build with the `qdrant`
    /// feature): durable, one server per directory.
    QdrantEdge,
}

impl VectorStoreKind {
    fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim() {
            "store" => Ok(Self::Store),
            "memory" => Ok(Self::Memory),
            "qdrant" => Ok(Self::Qdrant),
            "qdrant-edge" => Ok(Self::QdrantEdge),
            other => Err(ConfigError(format!(
                "the vector store `{other}` is not one of store, memory, qdrant, qdrant-edge"
            ))),
        }
    }
}

/// The `[memory]` table: the blocks of the server's `Memory`, and how it is searched
/// ([`crate::retrieval`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// The vector store of the vector block (used when an embedder is configured; `None`:
    /// the store's own when it has one, else in memory).
    pub vector_store: Option<VectorStoreKind>,
    /// How memory is searched (`None`: with an embedder, hybrid on a store with a text index of
    /// its own and dense on another; without, not at all).
    pub retrieval: Option<RetrievalKind>,
    /// Where the lexical side's text index lives (`None`: the store's own when it has one,
    /// else tantivy in memory).
    pub text_index: Option<TextIndexKind>,
    /// The directory of `text_index = "directory"`.
    pub text_index_dir: Option<PathBuf>,
    /// The gRPC URL of `vector_store = "qdrant"` (default `QDRANT_URL`).
    pub qdrant_url: Option<String>,
    /// The collection of `vector_store = "qdrant"` (default memory-vector's).
    pub qdrant_collection: Option<String>,
    /// The environment variable holding the Qdrant API key, if it needs one (never the key).
    pub qdrant_api_key_env: Option<String>,
    /// The directory of `vector_store = "qdrant-edge"`.
    pub qdrant_dir: Option<PathBuf>,
    /// Whether the memory block indexes messages as soon as they are put (`None`: yes), so a
    /// search finds what was said a moment ago, or only when a `Memory` flush moves them out
    /// of the short-term window (`false`: a put costs no embedding until a flush).
    pub index_on_append: Option<bool>,
    /// How a hybrid search fuses its rankings (`[memory.fusion]`).
    pub fusion: FusionConfig,
}

/// How memory is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetrievalKind {
    /// By meaning: the embedder and the vector store.
    Dense,
    /// By words: the text index.
    Lexical,
    /// Both, their rankings fused (`[memory.fusion]`).
    Hybrid,
}

impl RetrievalKind {
    /// The name used in the configuration (and MCP's `search_memory` answer, where dense
    /// is `vector`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Dense => "dense",
            Self::Lexical => "lexical",
            Self::Hybrid => "hybrid",
        }
    }

    fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim() {
            "dense" => Ok(Self::Dense),
            "lexical" => Ok(Self::Lexical),
            "hybrid" => Ok(Self::Hybrid),
            other => Err(ConfigError(format!(
                "the retrieval `{other}` is not one of dense, lexical, hybrid"
            ))),
        }
    }
}

/// Where the lexical side keeps its text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TextIndexKind {
    /// The store's own index (SQL URLs): in the database, survives restarts.
    Store,
    /// tantivy in the server's memory: lost on restart.
    Memory,
    /// tantivy in `text_index_dir`: survives restarts.
    Directory,
}

impl TextIndexKind {
    fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim() {
            "store" => Ok(Self::Store),
            "memory" => Ok(Self::Memory),
            "directory" => Ok(Self::Directory),
            other => Err(ConfigError(format!(
                "the text index `{other}` is not one of store, memory, directory"
            ))),
        }
    }
}

/// How a hybrid search fuses its two rankings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FusionMethod {
    /// Weighted sum of min-max normalised scores ([`Fusion::WeightedScore`], the default).
    #[default]
    Score,
    /// Reciprocal rank fusion ([`Fusion::ReciprocalRank`]).
    Rrf,
}

/// The `[memory.fusion]` table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FusionConfig {
    /// The method.
    pub method: FusionMethod,
    /// The dense ranking's weight (default: [`Fusion::default`]'s 0.5 for `score`, 1 for `rrf`).
    pub dense_weight: Option<f32>,
    /// The lexical ranking's weight (default 1).
    pub lexical_weight: Option<f32>,
    /// Reciprocal rank fusion's `k` (default [`DEFAULT_RRF_K`]).
    pub rrf_k: Option<f32>,
    /// How many candidates each side returns (default [`DEFAULT_CANDIDATES`]).
    pub candidates: Option<usize>,
}

impl FusionConfig {
    /// The fusion these settings describe.
    ///
    /// # Errors
    /// A [`ConfigError`] for a weight or `k` that is not a number between 0 and
    /// [`MAX_FUSION_PARAMETER`], both weights 0, or `rrf_k` with the `score` method.
    pub fn fusion(&self) -> Result<Fusion, ConfigError> {
        for (name, value) in [
            ("dense_weight", self.dense_weight),
            ("lexical_weight", self.lexical_weight),
            ("rrf_k", self.rrf_k),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && (0.0..=MAX_FUSION_PARAMETER).contains(&v))
            {
                return Err(ConfigError(format!(
                    "memory.fusion.{name} must be a number between 0 and {MAX_FUSION_PARAMETER}"
                )));
            }
        }
        let fusion = match self.method {
            FusionMethod::Score => {
                if self.rrf_k.is_some() {
                    return Err(ConfigError(
                        "memory.fusion.rrf_k applies to method = \"rrf\" only".to_owned(),
                    ));
                }
                Fusion::default()
            }
            FusionMethod::Rrf => Fusion::reciprocal_rank(self.rrf_k.unwrap_or(DEFAULT_RRF_K)),
        };
        let (dense, lexical) = match fusion {
            Fusion::ReciprocalRank {
                dense_weight,
                lexical_weight,
                ..
            }
            | Fusion::WeightedScore {
                dense_weight,
                lexical_weight,
            } => (dense_weight, lexical_weight),
            _ => (1.0, 1.0),
        };
        let dense = self.dense_weight.unwrap_or(dense);
        let lexical = self.lexical_weight.unwrap_or(lexical);
        if dense == 0.0 && lexical == 0.0 {
            return Err(ConfigError(
                "memory.fusion's dense_weight and lexical_weight cannot both be 0".to_owned(),
            ));
        }
        Ok(fusion.with_weights(dense, lexical))
    }

    /// How many candidates each side returns.
    ///
    /// # Errors
    /// A [`ConfigError`] for 0 or more than [`MAX_CANDIDATES`].
    pub fn candidates(&self) -> Result<usize, ConfigError> {
        match self.candidates {
            None => Ok(DEFAULT_CANDIDATES),
            Some(c) if (1..=MAX_CANDIDATES).contains(&c) => Ok(c),
            Some(_) => Err(ConfigError(format!(
                "memory.fusion.candidates must be between 1 and {MAX_CANDIDATES}"
            ))),
        }
    }

    /// Applies the `AGENT_MEMORY_SERVER_FUSION*` overrides `var` returns (by suffix).
    ///
    /// # Errors
    /// A [`ConfigError`] for an unknown method or a value that is not a number.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(method) = var("FUSION") {
            self.method = match method.trim() {
                "score" => FusionMethod::Score,
                "rrf" => FusionMethod::Rrf,
                other => {
                    return Err(ConfigError(format!(
                        "the fusion method `{other}` is not one of score, rrf"
                    )));
                }
            };
        }
        let float = |suffix: &str| -> Result<Option<f32>, ConfigError> {
            var(suffix)
                .map(|v| {
                    v.trim()
                        .parse::<f32>()
                        .map_err(|_| ConfigError(format!("{ENV_PREFIX}{suffix} must be a number")))
                })
                .transpose()
        };
        if let Some(v) = float("FUSION_DENSE_WEIGHT")? {
            self.dense_weight = Some(v);
        }
        if let Some(v) = float("FUSION_LEXICAL_WEIGHT")? {
            self.lexical_weight = Some(v);
        }
        if let Some(v) = float("FUSION_RRF_K")? {
            self.rrf_k = Some(v);
        }
        if let Some(v) = var("FUSION_CANDIDATES") {
            self.candidates = Some(v.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "{ENV_PREFIX}FUSION_CANDIDATES must be a whole number"
                ))
            })?);
        }
        Ok(())
    }
}

/// The retriever the server's memory block indexes and searches through, and the stores that
/// `forget` must reach besides the [`Stores`]' own.
#[derive(Debug, Clone)]
pub struct BuiltRetriever {
    /// Which retrieval it is.
    pub kind: RetrievalKind,
    /// The retriever.
    pub retriever: Arc<dyn Retriever>,
    /// The vector store of a dense or hybrid retriever.
    pub vectors: Option<Arc<dyn VectorStore>>,
    /// A text index of the server's own (tantivy), not the store's (which the [`Stores`]'
    /// forgetter already reaches).
    pub own_text_index: Option<Arc<dyn TextIndex>>,
}

impl MemoryConfig {
    /// The retrieval in effect: the configured one; else, with an embedder, hybrid when the
    /// store has a text index of its own (SQL URLs: durable, and on LoCoMo 20 points of
    /// recall@10 above dense alone) and dense otherwise; else none.
    pub fn effective(
        &self,
        has_embedder: bool,
        store_has_text_index: bool,
    ) -> Option<RetrievalKind> {
        self.retrieval
            .or(match (has_embedder, store_has_text_index) {
                (true, true) => Some(RetrievalKind::Hybrid),
                (true, false) => Some(RetrievalKind::Dense),
                (false, _) => None,
            })
    }

    /// Checks what can be checked before the store is open.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the setting that is wrong.
    pub fn validate(&self, has_embedder: bool) -> Result<(), ConfigError> {
        let kind = self.effective(has_embedder, false);
        if matches!(kind, Some(RetrievalKind::Dense | RetrievalKind::Hybrid)) && !has_embedder {
            return Err(ConfigError(format!(
                "memory.retrieval = \"{}\" needs an embedder: set [embedder] kind (hashing or openai), or use retrieval = \"lexical\"",
                kind.map_or("", RetrievalKind::name)
            )));
        }
        match (self.text_index, &self.text_index_dir) {
            (Some(TextIndexKind::Directory), None) => {
                return Err(ConfigError(
                    "memory.text_index = \"directory\" needs memory.text_index_dir".to_owned(),
                ));
            }
            (Some(TextIndexKind::Store | TextIndexKind::Memory), Some(_)) => {
                return Err(ConfigError(
                    "memory.text_index_dir applies to text_index = \"directory\" only".to_owned(),
                ));
            }
            (None, Some(_)) => {
                return Err(ConfigError(
                    "memory.text_index_dir is set: also set memory.text_index = \"directory\""
                        .to_owned(),
                ));
            }
            _ => {}
        }
        if !matches!(kind, Some(RetrievalKind::Lexical | RetrievalKind::Hybrid))
            && (self.text_index.is_some() || self.text_index_dir.is_some())
        {
            return Err(ConfigError(
                "memory.text_index applies to lexical or hybrid search: also set memory.retrieval = \"lexical\" or \"hybrid\"".to_owned(),
            ));
        }
        // Checked whatever the retrieval, so that a wrong value is never silently ignored.
        self.fusion.fusion()?;
        self.fusion.candidates()?;
        Ok(())
    }

    /// The retriever over `embedder`, `vectors` and the configured text index (`stores`' own,
    /// or tantivy), or `None` when memory is not searched.
    ///
    /// # Errors
    /// As [`validate`](Self::validate); a [`ConfigError`] for `text_index = "store"` on a
    /// store without a text index, or a directory tantivy cannot open.
    pub async fn build(
        &self,
        embedder: Option<Arc<dyn Embedder>>,
        vectors: impl FnOnce() -> Arc<dyn VectorStore>,
        stores: &Stores,
    ) -> Result<Option<BuiltRetriever>, ConfigError> {
        self.validate(embedder.is_some())?;
        let Some(kind) = self.effective(embedder.is_some(), stores.text_index().is_some()) else {
            return Ok(None);
        };
        let dense = match (&embedder, kind) {
            (Some(e), RetrievalKind::Dense | RetrievalKind::Hybrid) => {
                let store = vectors();
                Some((
                    Arc::new(DenseRetriever::new(Arc::clone(e), Arc::clone(&store)))
                        as Arc<dyn Retriever>,
                    store,
                ))
            }
            _ => None,
        };
        let lexical = match kind {
            RetrievalKind::Dense => None,
            RetrievalKind::Lexical | RetrievalKind::Hybrid => Some(self.text_index(stores).await?),
        };
        let (retriever, vectors, own): (Arc<dyn Retriever>, _, _) = match (dense, lexical) {
            (Some((dense, store)), None) => (dense, Some(store), None),
            (None, Some((index, own))) => (
                Arc::new(LexicalRetriever::new(index)) as Arc<dyn Retriever>,
                None,
                own,
            ),
            (Some((dense, store)), Some((index, own))) => (
                Arc::new(
                    HybridRetriever::new(dense, Arc::new(LexicalRetriever::new(index)))
                        .with_fusion(self.fusion.fusion()?)
                        .with_candidates(self.fusion.candidates()?),
                ) as Arc<dyn Retriever>,
                Some(store),
                own,
            ),
            (None, None) => return Ok(None),
        };
        Ok(Some(BuiltRetriever {
            kind,
            retriever,
            vectors,
            own_text_index: own,
        }))
    }

    /// The text index and, when it is the server's own, the same again (for `forget`).
    async fn text_index(
        &self,
        stores: &Stores,
    ) -> Result<(Arc<dyn TextIndex>, Option<Arc<dyn TextIndex>>), ConfigError> {
        let kind = self.text_index.unwrap_or(if stores.text_index().is_some() {
            TextIndexKind::Store
        } else {
            TextIndexKind::Memory
        });
        let tantivy = |e: agent_memory::Error| {
            ConfigError(format!("the tantivy text index cannot be opened: {e}"))
        };
        let own: Arc<dyn TextIndex> = match kind {
            TextIndexKind::Store => {
                let index = stores.text_index().ok_or_else(|| {
                    ConfigError(
                        "memory.text_index = \"store\" needs a store with a text index (a SQL \
                         URL: sqlite, postgres, mysql); this store (Redis or memory:) has none: \
                         use text_index = \"memory\" or \"directory\""
                            .to_owned(),
                    )
                })?;
                return Ok((index, None));
            }
            TextIndexKind::Memory => Arc::new(TantivyTextIndex::in_memory().map_err(tantivy)?),
            TextIndexKind::Directory => {
                let dir = self.text_index_dir.as_ref().ok_or_else(|| {
                    ConfigError(
                        "memory.text_index = \"directory\" needs memory.text_index_dir".to_owned(),
                    )
                })?;
                Arc::new(TantivyTextIndex::open_async(dir).await.map_err(tantivy)?)
            }
        };
        Ok((Arc::clone(&own), Some(own)))
    }

    /// Applies the retrieval overrides `var` returns (by suffix).
    ///
    /// # Errors
    /// A [`ConfigError`] for an unknown retrieval, text index or fusion value.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = var("RETRIEVAL") {
            self.retrieval = Some(RetrievalKind::parse(&v)?);
        }
        if let Some(v) = var("TEXT_INDEX") {
            self.text_index = Some(TextIndexKind::parse(&v)?);
        }
        if let Some(v) = var("VECTOR_STORE") {
            self.vector_store = Some(VectorStoreKind::parse(&v)?);
        }
        if let Some(v) = var("TEXT_INDEX_DIR") {
            self.text_index_dir = Some(PathBuf::from(v.trim()));
        }
        if let Some(v) = var("QDRANT_URL") {
            self.qdrant_url = Some(v.trim().to_owned());
        }
        if let Some(v) = var("QDRANT_COLLECTION") {
            self.qdrant_collection = Some(v.trim().to_owned());
        }
        if let Some(v) = var("QDRANT_DIR") {
            self.qdrant_dir = Some(PathBuf::from(v.trim()));
        }
        if let Some(v) = var("INDEX_ON_APPEND") {
            self.index_on_append = Some(match v.trim() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(ConfigError(format!(
                        "{ENV_PREFIX}INDEX_ON_APPEND must be true or false"
                    )));
                }
            });
        }
        self.fusion.apply_env(var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashing() -> Option<Arc<dyn Embedder>> {
        Some(Arc::new(memory_vector::HashingEmbedder::new(64)))
    }

    #[test]
    fn the_whole_table_parses() {
        let memory: MemoryConfig = toml::from_str(
            "retrieval = \"hybrid\"\ntext_index = \"directory\"\ntext_index_dir = \"/tmp/x\"\n\
             [fusion]\nmethod = \"rrf\"\ndense_weight = 2.0\nlexical_weight = 0.5\nrrf_k = 10.0\ncandidates = 20\n",
        )
        .unwrap();
        assert_eq!(memory.retrieval, Some(RetrievalKind::Hybrid));
        assert_eq!(memory.text_index, Some(TextIndexKind::Directory));
        assert_eq!(memory.text_index_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(
            memory.fusion.fusion().unwrap(),
            Fusion::ReciprocalRank {
                k: 10.0,
                dense_weight: 2.0,
                lexical_weight: 0.5
            }
        );
        assert_eq!(memory.fusion.candidates().unwrap(), 20);
        memory.validate(true).unwrap();
        assert!(toml::from_str::<MemoryConfig>("retrieval = \"sparse\"").is_err());
        assert!(toml::from_str::<MemoryConfig>("[fusion]\nalpha = 1").is_err());
    }

    #[test]
    fn defaults_search_as_well_as_the_store_allows() {
        let memory = MemoryConfig::default();
        assert_eq!(memory.effective(true, true), Some(RetrievalKind::Hybrid));
        assert_eq!(memory.effective(true, false), Some(RetrievalKind::Dense));
        assert_eq!(memory.effective(false, true), None);
        assert_eq!(memory.effective(false, false), None);
        memory.validate(false).unwrap();
        assert_eq!(memory.fusion.fusion().unwrap(), Fusion::default());
        assert_eq!(memory.fusion.candidates().unwrap(), DEFAULT_CANDIDATES);
        let rrf = FusionConfig {
            method: FusionMethod::Rrf,
            ..FusionConfig::default()
        };
        assert_eq!(
            rrf.fusion().unwrap(),
            Fusion::reciprocal_rank(DEFAULT_RRF_K)
        );
    }

    #[test]
    fn unusable_settings_are_sentences() {
        let needs_embedder = |kind| {
            let memory = MemoryConfig {
                retrieval: Some(kind),
                ..MemoryConfig::default()
            };
            memory.validate(false).unwrap_err().0
        };
        assert!(needs_embedder(RetrievalKind::Hybrid).contains("needs an embedder"));
        assert!(needs_embedder(RetrievalKind::Dense).contains("needs an embedder"));
        let lexical = MemoryConfig {
            retrieval: Some(RetrievalKind::Lexical),
            ..MemoryConfig::default()
        };
        lexical.validate(false).unwrap();
        let no_dir = MemoryConfig {
            text_index: Some(TextIndexKind::Directory),
            ..lexical.clone()
        };
        assert!(
            no_dir
                .validate(false)
                .unwrap_err()
                .0
                .contains("text_index_dir")
        );
        let stray_dir = MemoryConfig {
            text_index_dir: Some(PathBuf::from("/tmp/y")),
            ..lexical.clone()
        };
        assert!(
            stray_dir
                .validate(false)
                .unwrap_err()
                .0
                .contains("directory")
        );
        let hybrid = |fusion| MemoryConfig {
            retrieval: Some(RetrievalKind::Hybrid),
            fusion,
            ..MemoryConfig::default()
        };
        for (fusion, words) in [
            (
                FusionConfig {
                    dense_weight: Some(-1.0),
                    ..FusionConfig::default()
                },
                "between 0 and",
            ),
            (
                FusionConfig {
                    lexical_weight: Some(f32::NAN),
                    ..FusionConfig::default()
                },
                "between 0 and",
            ),
            (
                // Near f32::MAX the fused scores would overflow to infinity.
                FusionConfig {
                    dense_weight: Some(3e38),
                    lexical_weight: Some(3e38),
                    ..FusionConfig::default()
                },
                "between 0 and",
            ),
            (
                FusionConfig {
                    dense_weight: Some(0.0),
                    lexical_weight: Some(0.0),
                    ..FusionConfig::default()
                },
                "both be 0",
            ),
            (
                FusionConfig {
                    rrf_k: Some(5.0),
                    ..FusionConfig::default()
                },
                "rrf",
            ),
            (
                FusionConfig {
                    candidates: Some(0),
                    ..FusionConfig::default()
                },
                "candidates",
            ),
        ] {
            let error = hybrid(fusion).validate(true).unwrap_err().0;
            assert!(error.contains(words), "{error}");
            assert!(error.ends_with(|c: char| c.is_alphanumeric() || c == '"' || c == ')'));
            // Never silently ignored, whatever the retrieval.
            let lexical = MemoryConfig {
                retrieval: Some(RetrievalKind::Lexical),
                fusion,
                ..MemoryConfig::default()
            };
            let error = lexical.validate(false).unwrap_err().0;
            assert!(error.contains(words), "{error}");
        }
        // A text index set for a search that uses none is pointed out.
        for retrieval in [None, Some(RetrievalKind::Dense)] {
            let memory = MemoryConfig {
                retrieval,
                text_index: Some(TextIndexKind::Store),
                ..MemoryConfig::default()
            };
            let error = memory.validate(true).unwrap_err().0;
            assert!(error.contains("lexical or hybrid"), "{error}");
        }
    }

    #[test]
    fn environment_overrides() {
        // `MemoryConfig::apply_env` is given the names after `AGENT_MEMORY_SERVER_`.
        let mut memory = MemoryConfig::default();
        memory
            .apply_env(|name| {
                let value = match name {
                    "RETRIEVAL" => "lexical",
                    "TEXT_INDEX" => "memory",
                    "FUSION" => "rrf",
                    "FUSION_DENSE_WEIGHT" => "0.25",
                    "FUSION_LEXICAL_WEIGHT" => "3",
                    "FUSION_RRF_K" => "20",
                    "FUSION_CANDIDATES" => "7",
                    _ => return None,
                };
                Some(value.to_owned())
            })
            .unwrap();
        assert_eq!(memory.retrieval, Some(RetrievalKind::Lexical));
        assert_eq!(memory.text_index, Some(TextIndexKind::Memory));
        assert_eq!(
            memory.fusion.fusion().unwrap(),
            Fusion::ReciprocalRank {
                k: 20.0,
                dense_weight: 0.25,
                lexical_weight: 3.0
            }
        );
        assert_eq!(memory.fusion.candidates().unwrap(), 7);
        for (name, value) in [
            ("RETRIEVAL", "bm25"),
            ("TEXT_INDEX", "elastic"),
            ("FUSION", "max"),
            ("FUSION_RRF_K", "many"),
            ("FUSION_CANDIDATES", "1.5"),
        ] {
            let mut memory = MemoryConfig::default();
            let error = memory
                .apply_env(|n| (n == name).then(|| value.to_owned()))
                .unwrap_err();
            assert!(!error.0.is_empty(), "{name}");
        }
    }

    #[tokio::test]
    async fn a_store_text_index_needs_a_store_that_has_one() {
        let store = MemoryConfig {
            retrieval: Some(RetrievalKind::Lexical),
            text_index: Some(TextIndexKind::Store),
            ..MemoryConfig::default()
        };
        let memory_url = agent_memory::open("memory:").await.unwrap();
        let error = store.memory(None, &memory_url).await.unwrap_err();
        assert!(error.0.contains("has none"), "{error}");
        // The default there is tantivy in memory, the server's own (so forget reaches it).
        let lexical = MemoryConfig {
            text_index: None,
            ..store.clone()
        };
        let built = lexical.memory(None, &memory_url).await.unwrap().unwrap();
        assert_eq!(built.retrieval, RetrievalKind::Lexical);
        assert!(built.text_index.is_some() && built.store.is_none());
        // A SQL store's own index: the store's forgetter reaches it, not the server's.
        let sqlite = agent_memory::open("sqlite::memory:").await.unwrap();
        let built = store.memory(None, &sqlite).await.unwrap().unwrap();
        assert!(built.text_index.is_none() && built.store.is_none());
        let hybrid = MemoryConfig {
            retrieval: Some(RetrievalKind::Hybrid),
            text_index: Some(TextIndexKind::Memory),
            ..MemoryConfig::default()
        };
        let built = hybrid.memory(hashing(), &sqlite).await.unwrap().unwrap();
        assert_eq!(built.retrieval, RetrievalKind::Hybrid);
        // The vectors default to the store's own (its forgetter reaches them)...
        assert!(built.text_index.is_some() && built.store.is_none());
        // ... and `vector_store = "memory"` keeps them in the server, its own to forget.
        let in_process = MemoryConfig {
            vector_store: Some(VectorStoreKind::Memory),
            ..hybrid.clone()
        };
        let built = in_process
            .memory(hashing(), &sqlite)
            .await
            .unwrap()
            .unwrap();
        assert!(built.store.is_some());
        // A store without a vector store: in memory by default; "store" is an error.
        let bare = Stores::new(
            Arc::new(agent_memory::InMemoryHistoryStore::new()),
            Arc::new(agent_memory::InMemorySessionStore::new()),
        );
        let dense = MemoryConfig::default();
        let built = dense.memory(hashing(), &bare).await.unwrap().unwrap();
        assert!(built.store.is_some());
        let store_kind = MemoryConfig {
            vector_store: Some(VectorStoreKind::Store),
            ..MemoryConfig::default()
        };
        let error = store_kind.memory(hashing(), &bare).await.unwrap_err();
        assert!(error.0.contains("vector_store = \"memory\""), "{error}");
        // No embedder and no retrieval asked for: nothing to search.
        assert!(
            MemoryConfig::default()
                .memory(None, &sqlite)
                .await
                .unwrap()
                .is_none()
        );
    }
}
