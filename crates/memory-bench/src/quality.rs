//! `memory-bench quality`: turn-level recall of long-term memory on LoCoMo (docs/quality.md).
//!
//! Each conversation's turns are indexed through the vector memory block (one flushed batch per
//! turn, the block's `put`, as a `Memory` flush calls it, so each turn is indexed with the one
//! before it as context, the block's default) into a tantivy BM25 index and an
//! in-memory vector store embedded by the local all-MiniLM-L6-v2; each question is then asked
//! through the block's `search` with a lexical, a dense and a hybrid retriever over those same
//! indexes, and the results are mapped back to their turns' `dia_id`s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use memory_core::history::StoredMessage;
use memory_core::memory::blocks::{DEFAULT_CONTEXT_MESSAGES, SESSION_KEY, VectorMemoryBlock};
use memory_core::memory::{BlockPutContext, MemoryBlock};
use memory_core::retrieval::{
    DenseRetriever, Fusion, HybridRetriever, LexicalRetriever, Retrieved, Retriever,
};
use memory_core::{
    ChatMessage, Embedder, InMemoryVectorStore, Scope, ScopeFilter, SessionId, TenantId, TextIndex,
    UserId, VectorStore,
};
use memory_lexical::{Analyzer, TantivyTextIndex};
use memory_vector::BertEmbedder;
use serde_json::{Value, json};

use crate::BenchResult;
use crate::quality_server::{self, QualityServer};
use crate::remembered::RememberedEmbedder;

/// The cut-offs of turn-level recall.
const KS: [usize; 4] = [5, 10, 25, 50];
/// The first conversations, the only ones tuned on; the rest are held out.
const TUNED: usize = 6;

/// Arguments of `memory-bench quality`.
#[derive(Debug, Parser)]
#[command(
    name = "memory-bench quality",
    about = "Turn-level recall on LoCoMo; JSON lines on stdout."
)]
struct QualityCli {
    /// The LoCoMo file (locomo10.json).
    #[arg(long, value_name = "PATH")]
    data: PathBuf,
    /// Which conversations: `tuned` (0-5), `held-out` (6-9) or `all`.
    #[arg(long, default_value = "tuned")]
    split: String,
    /// The lexical analyzer: `english` (stemming and stop words), `stem` (stemming only),
    /// `stop` (stop words only) or `plain`.
    #[arg(long, default_value = "english")]
    analyzer: String,
    /// Prefix each turn with its speaker's name (`Caroline: …`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    speaker: bool,
    /// Append an image turn's caption (`[shares a photo: …]`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    captions: bool,
    /// A hybrid fusion to measure (repeatable): `rrf:K:DENSE_WEIGHT:LEXICAL_WEIGHT` or
    /// `score:DENSE_WEIGHT:LEXICAL_WEIGHT`. Default: the library's default.
    #[arg(long = "fusion")]
    fusions: Vec<String>,
    /// Measure the dense and hybrid retrievers too (`false`: lexical only, no model needed).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    dense: bool,
    /// Candidates per retriever for the hybrid search (default: the library's).
    #[arg(long)]
    candidates: Option<usize>,
    /// The lexical index: `tantivy` (BM25 in memory, `--analyzer`) or `sqlite` (the embedded
    /// default store's own text index, SQLite FTS5, through `agent_memory::open`; one
    /// temporary database file for the run, one scope per conversation).
    #[arg(long, default_value = "tantivy")]
    lexical: String,
    /// How many messages before each turn the block indexes with it as context (default: the
    /// block's, `DEFAULT_CONTEXT_MESSAGES`; 0 indexes each turn alone).
    #[arg(long)]
    context: Option<usize>,
    /// How a conversation reaches memory: `one` (all its sessions in one thread, searched in
    /// it) or `per-session` (each LoCoMo session its own thread of the conversation's user,
    /// flushed into the embedded default store's vector store and text index, and each
    /// question asked of the user's memory across sessions, as an agent would; needs
    /// `--lexical sqlite`).
    #[arg(long, default_value = "one")]
    threads: String,
    /// Also ask through `agent-memory serve` over HTTP, searching with this retrieval
    /// (`dense`, `lexical` or `hybrid`; repeatable): a server in process with its defaults,
    /// the local embedder and a SQLite file of its own; each turn one put with the default
    /// token limit, each question one user-level search (needs `--threads per-session`).
    #[arg(long = "server")]
    servers: Vec<String>,
}

/// One turn of a conversation.
struct Turn {
    dia_id: String,
    session: String,
    text: String,
}

/// One question with evidence.
struct Question {
    text: String,
    category: u64,
    evidence: BTreeSet<String>,
}

/// Per-question scores of one retriever.
#[derive(Default, Clone)]
struct Scores {
    recall: [f64; 4],
    ndcg10: f64,
    session_recall10: f64,
}

/// Runs `memory-bench quality ARGS` (`args` without the `quality` word).
pub(crate) fn run(args: Vec<String>) -> BenchResult<()> {
    let cli =
        QualityCli::parse_from(std::iter::once("memory-bench quality".to_owned()).chain(args));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(cli))
}

fn parse_fusion(spec: &str) -> BenchResult<Fusion> {
    let parts: Vec<&str> = spec.split(':').collect();
    let num = |i: usize| -> BenchResult<f32> {
        Ok(parts
            .get(i)
            .ok_or_else(|| format!("fusion {spec:?} lacks a number"))?
            .parse()?)
    };
    match parts.first().copied() {
        Some("rrf") => Ok(Fusion::reciprocal_rank(num(1)?).with_weights(num(2)?, num(3)?)),
        Some("score") => Ok(Fusion::weighted_score(num(1)?, num(2)?)),
        _ => Err(format!("a fusion is rrf:K:WD:WL or score:WD:WL, not {spec:?}").into()),
    }
}

fn analyzer(name: &str) -> BenchResult<Analyzer> {
    Ok(match name {
        "english" => Analyzer::english(),
        "stem" => Analyzer::english().with_stop_words(false),
        "stop" => Analyzer::english().with_stemming(false),
        "plain" => Analyzer::plain(),
        _ => return Err(format!("unknown analyzer {name:?}").into()),
    })
}

fn load(path: &PathBuf) -> BenchResult<Vec<Value>> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "cannot read the LoCoMo file {} ({e}); pass --data PATH or set AGENT_MEMORY_QUALITY_DATA",
            path.display()
        )
    })?;
    let data: Value = serde_json::from_slice(&bytes)?;
    Ok(data
        .as_array()
        .ok_or("the LoCoMo file is not a JSON array")?
        .clone())
}

fn turns_of(sample: &Value, speaker: bool, captions: bool) -> Vec<Turn> {
    let conversation = &sample["conversation"];
    let mut sessions: Vec<(u64, &Vec<Value>)> = conversation
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("session_")?.parse().ok()?;
            Some((n, v.as_array()?))
        })
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    let mut turns = Vec::new();
    for (n, session) in sessions {
        for t in session {
            let (Some(dia_id), Some(text)) = (t["dia_id"].as_str(), t["text"].as_str()) else {
                continue;
            };
            let mut body = if speaker {
                format!("{}: {text}", t["speaker"].as_str().unwrap_or("someone"))
            } else {
                text.to_owned()
            };
            if let Some(caption) = t["blip_caption"].as_str().filter(|_| captions) {
                body.push_str(&format!(" [shares a photo: {caption}]"));
            }
            turns.push(Turn {
                dia_id: dia_id.to_owned(),
                session: format!("D{n}"),
                text: body,
            });
        }
    }
    turns
}

/// The questions with at least one evidence turn (`D(\d+):(\d+)` in each evidence string).
fn questions_of(sample: &Value) -> Vec<Question> {
    sample["qa"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| {
            let evidence: BTreeSet<String> = q["evidence"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .flat_map(parse_evidence)
                .collect();
            (!evidence.is_empty()).then(|| Question {
                text: q["question"].as_str().unwrap_or_default().to_owned(),
                category: q["category"].as_u64().unwrap_or(0),
                evidence,
            })
        })
        .collect()
}

/// Every `D<session>:<turn>` in `s` (the regex `D(\d+):(\d+)`, by hand).
fn parse_evidence(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'D' {
            let a_start = i + 1;
            let mut j = a_start;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j > a_start && j < bytes.len() && bytes[j] == b':' {
                let b_start = j + 1;
                let mut k = b_start;
                while k < bytes.len() && bytes[k].is_ascii_digit() {
                    k += 1;
                }
                if k > b_start {
                    out.push(format!("D{}:{}", &s[a_start..j], &s[b_start..k]));
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

fn score(ranked: &[&str], sessions: &[String], q: &Question) -> Scores {
    let mut s = Scores::default();
    let n = q.evidence.len() as f64;
    for (slot, k) in KS.iter().enumerate() {
        let hits = ranked
            .iter()
            .take(*k)
            .filter(|d| q.evidence.contains(**d))
            .count();
        s.recall[slot] = hits as f64 / n;
    }
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, d)| q.evidence.contains(**d))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..q.evidence.len().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    s.ndcg10 = dcg / ideal;
    let wanted: BTreeSet<&str> = q
        .evidence
        .iter()
        .filter_map(|e| e.split(':').next())
        .collect();
    let got: BTreeSet<&str> = sessions.iter().take(10).map(String::as_str).collect();
    s.session_recall10 =
        wanted.iter().filter(|w| got.contains(*w)).count() as f64 / wanted.len() as f64;
    s
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run_async(cli: QualityCli) -> BenchResult<()> {
    let samples = load(&cli.data)?;
    let range: Vec<usize> = match cli.split.as_str() {
        "tuned" => (0..TUNED.min(samples.len())).collect(),
        "held-out" => (TUNED..samples.len()).collect(),
        "all" => (0..samples.len()).collect(),
        other => return Err(format!("unknown split {other:?} (tuned, held-out, all)").into()),
    };
    let embedder: Option<Arc<dyn Embedder>> = if cli.dense {
        Some(Arc::new(BertEmbedder::from_env().await?))
    } else {
        None
    };
    // The same embedder, answering the questions (embedded once, timed alone) from memory:
    // the dense and hybrid searches through it are timed without the query's embedding.
    let remembered = embedder
        .as_ref()
        .map(|e| Arc::new(RememberedEmbedder::new(e.clone())));
    let sqlite = match cli.lexical.as_str() {
        "tantivy" => None,
        "sqlite" => Some(TempSqlite::open().await?),
        other => return Err(format!("unknown lexical index {other:?} (tantivy, sqlite)").into()),
    };
    let per_session = match cli.threads.as_str() {
        "one" => false,
        "per-session" if sqlite.is_some() => true,
        "per-session" => {
            return Err(
                "--threads per-session searches across threads: add --lexical sqlite".into(),
            );
        }
        other => return Err(format!("unknown --threads {other:?} (one, per-session)").into()),
    };
    let mut servers = Vec::new();
    for name in &cli.servers {
        let retrieval = quality_server::retrieval(name)?;
        let Some(db) = sqlite.as_ref().filter(|_| per_session) else {
            return Err("--server asks at the user's level: add --threads per-session".into());
        };
        let dir = db.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        servers.push((
            format!("server:{name}"),
            QualityServer::start(&dir, retrieval).await?,
        ));
    }
    let mut server_index_seconds: BTreeMap<String, f64> = BTreeMap::new();
    let tenant = TenantId::new("locomo")?;
    let mut fusions: Vec<(String, Fusion)> = Vec::new();
    if cli.fusions.is_empty() {
        fusions.push(("default".to_owned(), Fusion::default()));
    }
    for spec in &cli.fusions {
        fusions.push((spec.clone(), parse_fusion(spec)?));
    }
    // (retriever name) -> (category -> per-question scores); latencies per retriever.
    let mut results: BTreeMap<String, Vec<(u64, Scores)>> = BTreeMap::new();
    let mut latencies: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut turns_indexed, mut index_seconds) = (0usize, 0f64);
    // The questions the remembering embedder has embedded (after each conversation's warm-up).
    let mut embedded = 0usize;
    for &c in &range {
        let sample = &samples[c];
        let turns = turns_of(sample, cli.speaker, cli.captions);
        let questions = questions_of(sample);
        let text_index: Arc<dyn TextIndex> = match &sqlite {
            Some(db) => db.text.clone(),
            None => Arc::new(TantivyTextIndex::in_memory_with(analyzer(&cli.analyzer)?)?),
        };
        // Per session: the vectors in the store too, as the embedded default keeps them.
        let store: Arc<dyn VectorStore> = match (&sqlite, per_session) {
            (Some(db), true) => db.vectors.clone(),
            _ => Arc::new(InMemoryVectorStore::new()),
        };
        let lexical: Arc<dyn Retriever> = Arc::new(LexicalRetriever::new(text_index));
        let mut blocks: Vec<(String, VectorMemoryBlock)> = vec![(
            "lexical".to_owned(),
            VectorMemoryBlock::with_retriever(lexical.clone()),
        )];
        let writer = match (&embedder, &remembered) {
            (Some(embedder), Some(remembered)) => {
                let dense: Arc<dyn Retriever> =
                    Arc::new(DenseRetriever::new(embedder.clone(), store.clone()));
                let dense_only: Arc<dyn Retriever> =
                    Arc::new(DenseRetriever::new(remembered.clone(), store.clone()));
                let hybrid = |dense: &Arc<dyn Retriever>, f: Fusion| {
                    let h = HybridRetriever::new(dense.clone(), lexical.clone()).with_fusion(f);
                    match cli.candidates {
                        Some(n) => h.with_candidates(n),
                        None => h,
                    }
                };
                blocks.push((
                    "dense".to_owned(),
                    VectorMemoryBlock::with_retriever(dense.clone()),
                ));
                for (name, f) in &fusions {
                    blocks.push((
                        format!("hybrid:{name}"),
                        VectorMemoryBlock::with_retriever(Arc::new(hybrid(&dense, *f))),
                    ));
                }
                blocks.push((
                    format!("dense{SEARCH_ONLY}"),
                    VectorMemoryBlock::with_retriever(dense_only.clone()),
                ));
                for (name, f) in &fusions {
                    blocks.push((
                        format!("hybrid:{name}{SEARCH_ONLY}"),
                        VectorMemoryBlock::with_retriever(Arc::new(hybrid(&dense_only, *f))),
                    ));
                }
                VectorMemoryBlock::with_retriever(Arc::new(hybrid(&dense, Fusion::default())))
            }
            _ => VectorMemoryBlock::with_retriever(lexical.clone()),
        };
        let writer = match cli.context {
            Some(n) => writer.with_context_messages(n),
            None => writer,
        };
        let user = UserId::new(format!("conversation-{c}"))?;
        // Where each turn was stored: its thread's session id and seq, and back.
        let mut placed: Vec<(String, u64)> = Vec::with_capacity(turns.len());
        let mut states: BTreeMap<String, Value> = BTreeMap::new();
        let started = Instant::now();
        for turn in &turns {
            let session = if per_session {
                format!("{user}-{}", turn.session)
            } else {
                user.to_string()
            };
            let seq = placed.iter().filter(|(s, _)| *s == session).count() as u64 + 1;
            let scope = Scope::new(tenant.clone(), SessionId::new(session.clone())?)
                .with_user_id(user.clone());
            let message = StoredMessage::new(seq, 0, false, ChatMessage::user(turn.text.clone()));
            writer
                .put(BlockPutContext {
                    scope: &scope,
                    messages: &[message],
                    state: states.entry(session.clone()).or_default(),
                })
                .await?;
            placed.push((session, seq));
        }
        let turn_at: BTreeMap<(String, u64), usize> = placed
            .into_iter()
            .enumerate()
            .map(|(i, place)| (place, i))
            .collect();
        let scope = Scope::new(tenant.clone(), SessionId::new(user.to_string())?)
            .with_user_id(user.clone());
        index_seconds += started.elapsed().as_secs_f64();
        turns_indexed += turns.len();
        if let (Some(embedder), Some(remembered)) = (&embedder, &remembered) {
            for q in &questions {
                let question = std::slice::from_ref(&q.text);
                let started = Instant::now();
                embedder.embed(question).await?;
                latencies
                    .entry("embed (question)".to_owned())
                    .or_default()
                    .push(started.elapsed().as_secs_f64() * 1e3);
                remembered.embed(question).await?;
            }
            embedded = remembered.misses();
        }
        for (name, block) in &blocks {
            for q in &questions {
                let started = Instant::now();
                let found: Vec<Retrieved> = if per_session {
                    let mine = ScopeFilter::tenant(tenant.clone()).with_user(user.clone());
                    block.search_across(mine, &q.text, 50).await?
                } else {
                    block.search(&scope, &q.text, 50).await?
                };
                latencies
                    .entry(name.clone())
                    .or_default()
                    .push(started.elapsed().as_secs_f64() * 1e3);
                let found_turns: Vec<&Turn> = found
                    .iter()
                    .filter_map(|r| {
                        let seq = r.payload.get("first_seq")?.as_u64()?;
                        let session = r.payload.get(SESSION_KEY)?.as_str()?.to_owned();
                        turns.get(*turn_at.get(&(session, seq))?)
                    })
                    .collect();
                let ranked: Vec<&str> = found_turns.iter().map(|t| t.dia_id.as_str()).collect();
                let sessions: Vec<String> = found_turns.iter().map(|t| t.session.clone()).collect();
                if !name.ends_with(SEARCH_ONLY) {
                    results
                        .entry(name.clone())
                        .or_default()
                        .push((q.category, score(&ranked, &sessions, q)));
                }
            }
        }
        for (name, server) in &servers {
            let started = Instant::now();
            for (i, turn) in turns.iter().enumerate() {
                let session = format!("{user}-{}", turn.session);
                server
                    .put(user.as_str(), &session, &format!("t{i}"), &turn.text)
                    .await?;
            }
            *server_index_seconds.entry(name.clone()).or_default() +=
                started.elapsed().as_secs_f64();
            for q in &questions {
                let started = Instant::now();
                let found = server.search(user.as_str(), &q.text, 50).await?;
                latencies
                    .entry(name.clone())
                    .or_default()
                    .push(started.elapsed().as_secs_f64() * 1e3);
                let found_turns: Vec<&Turn> = found
                    .into_iter()
                    .filter_map(|place| turns.get(*turn_at.get(&place)?))
                    .collect();
                let ranked: Vec<&str> = found_turns.iter().map(|t| t.dia_id.as_str()).collect();
                let sessions: Vec<String> = found_turns.iter().map(|t| t.session.clone()).collect();
                results
                    .entry(name.clone())
                    .or_default()
                    .push((q.category, score(&ranked, &sessions, q)));
            }
        }
        if let Some(remembered) = &remembered {
            // Every search-only query was answered from memory.
            if remembered.misses() != embedded {
                return Err(format!(
                    "the search-only retrievers embedded {} questions again",
                    remembered.misses().saturating_sub(embedded)
                )
                .into());
            }
        }
        eprintln!(
            "quality: conversation {c}: {} turns, {} questions",
            turns.len(),
            questions.len()
        );
    }
    for (_, server) in servers {
        server.stop().await;
    }
    if let Some(db) = sqlite {
        db.remove();
    }
    let config = json!({
        "lexical": cli.lexical, "analyzer": cli.analyzer, "speaker": cli.speaker, "captions": cli.captions,
        "candidates": cli.candidates,
        "context": cli.context.unwrap_or(DEFAULT_CONTEXT_MESSAGES),
        "threads": cli.threads, "servers": cli.servers,
    });
    for (name, scored) in &results {
        let mut groups: BTreeMap<String, Vec<&Scores>> = BTreeMap::new();
        for (category, s) in scored {
            groups.entry("all".to_owned()).or_default().push(s);
            groups.entry(category.to_string()).or_default().push(s);
        }
        for (category, group) in groups {
            let n = group.len() as f64;
            let mean =
                |f: &dyn Fn(&Scores) -> f64| 100.0 * group.iter().map(|s| f(s)).sum::<f64>() / n;
            let line = json!({
                "workload": "quality", "split": cli.split, "conversations": range,
                "retriever": name, "category": category, "n": group.len(),
                "r5": round(mean(&|s| s.recall[0])), "r10": round(mean(&|s| s.recall[1])),
                "r25": round(mean(&|s| s.recall[2])), "r50": round(mean(&|s| s.recall[3])),
                "ndcg10": round(mean(&|s| s.ndcg10)),
                "session_r10": round(mean(&|s| s.session_recall10)),
                "config": config,
            });
            println!("{line}");
        }
    }
    for (name, mut l) in latencies {
        l.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "workload": "quality", "split": cli.split, "retriever": name,
                "queries": l.len(), "p50_ms": round(percentile(&l, 0.5)), "p99_ms": round(percentile(&l, 0.99)),
            })
        );
    }
    println!(
        "{}",
        json!({
            "workload": "quality", "split": cli.split, "threads": cli.threads,
            "index": match (cli.dense, cli.lexical.as_str()) {
                (true, "sqlite") if per_session => "hybrid (SQLite FTS5 + SQLite vectors, MiniLM)",
                (true, "sqlite") => "hybrid (SQLite FTS5 + in-memory vectors, MiniLM)",
                (true, _) => "hybrid (tantivy + in-memory vectors, MiniLM)",
                (false, "sqlite") => "lexical (SQLite FTS5)",
                (false, _) => "lexical (tantivy)",
            },
            "turns": turns_indexed, "turns_per_s": round(turns_indexed as f64 / index_seconds.max(1e-9)),
        })
    );
    for (name, seconds) in server_index_seconds {
        println!(
            "{}",
            json!({
                "workload": "quality", "split": cli.split, "threads": cli.threads,
                "index": format!("{name} (HTTP puts into a SQLite store, MiniLM)"),
                "turns": turns_indexed, "turns_per_s": round(turns_indexed as f64 / seconds.max(1e-9)),
            })
        );
    }
    Ok(())
}

/// The suffix of the retrievers timed without the query's embedding (their vectors answered
/// from memory); they are not scored again.
const SEARCH_ONLY: &str = " (search only)";

/// The embedded default store in a temporary directory, for its text index and vector store.
struct TempSqlite {
    dir: PathBuf,
    text: Arc<dyn TextIndex>,
    vectors: Arc<dyn VectorStore>,
}

impl TempSqlite {
    async fn open() -> BenchResult<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "memory-bench-quality-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        let url = format!("sqlite://{}", dir.join("memory.db").display());
        let stores = agent_memory::open(&url).await?;
        let text = stores
            .text_index()
            .ok_or("the SQLite store opened without a text index")?;
        let vectors = stores
            .vector_store()
            .ok_or("the SQLite store opened without a vector store")?;
        Ok(Self { dir, text, vectors })
    }

    fn remove(self) {
        drop(self.text);
        drop(self.vectors);
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("quality: cannot remove {}: {e}", self.dir.display());
        }
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_parsed_like_the_regex() {
        assert_eq!(parse_evidence("D8:6; D9:17"), ["D8:6", "D9:17"]);
        assert_eq!(parse_evidence("D:11:26"), Vec::<String>::new());
        assert_eq!(parse_evidence("D10:3"), ["D10:3"]);
    }

    #[test]
    fn scores_are_hand_computed() {
        let q = Question {
            text: String::new(),
            category: 1,
            evidence: ["D1:1".to_owned(), "D2:2".to_owned()].into(),
        };
        let ranked = ["D1:5", "D1:1", "D3:1"];
        let sessions = ["D1".to_owned(), "D1".to_owned(), "D3".to_owned()];
        let s = score(&ranked, &sessions, &q);
        assert!((s.recall[0] - 0.5).abs() < 1e-9);
        // dcg = 1/log2(3); idcg = 1 + 1/log2(3).
        let expected = (1.0 / 3f64.log2()) / (1.0 + 1.0 / 3f64.log2());
        assert!((s.ndcg10 - expected).abs() < 1e-9);
        assert!((s.session_recall10 - 0.5).abs() < 1e-9);
    }
}
