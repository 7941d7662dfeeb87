//! The `text_index` workload: what a memory flush and the next recall cost on a lexical
//! [`TextIndex`] (memory-lexical's [`TantivyTextIndex`]), in memory and in a directory.
//!
//! A case preloads the first N message texts of the data set as documents of one scope
//! (untimed, [`PRELOAD_BATCH`] per upsert), then times four operations, one line each (field
//! `op`):
//!
//! - `upsert_one`: upsert one new document, back to back with no read between (a flush that
//!   nothing reads yet);
//! - `search_after_upsert`: a top-[`TOP_K`] search right after an upsert of one document (the
//!   recall of the next turn: it sees the document just written);
//! - `upsert_and_search`: the two together, as one operation;
//! - `five_upserts_and_search`: [`RUN`] upserts of one document each, then a search, as one
//!   operation (writes coalescing before a read);
//! - `search`: a top-[`TOP_K`] search with no write before it.
//!
//! Queries are the first [`QUERY_WORDS`] words of later messages of the data set; the upserted
//! documents are later messages too, each with a fresh id, so the index grows by one document
//! per upsert.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memory_core::{Scope, TextDocument, TextIndex, TextQuery};
use memory_lexical::{CommitPolicy, TantivyTextIndex};

use crate::BenchResult;
use crate::harness::{Ctx, Recorder, Report, fresh_scope, peak_rss_mb};

/// The documents a case preloads when `--n` is not given: about a long conversation's memories.
pub(crate) const TEXT_NS: [usize; 1] = [600];
/// Documents per (untimed) preload upsert.
const PRELOAD_BATCH: usize = 100;
/// The `top_k` of every search.
const TOP_K: usize = 10;
/// The words of a query.
const QUERY_WORDS: usize = 12;
/// The upserts of one `five_upserts_and_search` operation.
const RUN: usize = 5;

/// The text index backends: name and description.
pub(crate) const TEXT_BACKENDS: [(&str, &str); 3] = [
    (
        "tantivy-memory",
        "TantivyTextIndex (memory-lexical) in memory, English analyzer",
    ),
    (
        "tantivy-dir",
        "TantivyTextIndex (memory-lexical) in a fresh temporary directory (fsync on commit), \
         removed afterwards; CommitPolicy::BeforeRead (the default in memory; a directory's default \
         is EveryWrite)",
    ),
    (
        "tantivy-dir-every-write",
        "tantivy-dir with CommitPolicy::EveryWrite: every write committed (durable) before it \
         returns",
    ),
];

/// A temporary directory, removed (with everything in it) when dropped.
#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // A directory that was never created is not an error.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens the text index backend called `name`; the directory guard, if any, outlives it.
async fn open(name: &str) -> BenchResult<(Arc<TantivyTextIndex>, Option<TempDir>)> {
    match name {
        "tantivy-memory" => Ok((Arc::new(TantivyTextIndex::in_memory()?), None)),
        "tantivy-dir" | "tantivy-dir-every-write" => {
            let dir = std::env::temp_dir().join(format!("bench-tantivy-{}", uuid::Uuid::new_v4()));
            // The guard exists before the directory does: a failed open leaves nothing.
            let guard = TempDir(dir);
            let mut index = TantivyTextIndex::open_async(&guard.0).await?;
            index = index.with_commit_policy(if name == "tantivy-dir-every-write" {
                CommitPolicy::EveryWrite
            } else {
                CommitPolicy::BeforeRead
            });
            Ok((Arc::new(index), Some(guard)))
        }
        other => {
            let known: Vec<&str> = TEXT_BACKENDS.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "unknown text index backend {other:?}; known: {}",
                known.join(", ")
            )
            .into())
        }
    }
}

/// A document of `text` with a fresh id.
fn document(text: &str) -> TextDocument {
    TextDocument {
        id: uuid::Uuid::new_v4(),
        text: text.to_owned(),
        payload: serde_json::Map::new(),
    }
}

/// The query made of the first [`QUERY_WORDS`] words of `text`.
fn query(text: &str) -> TextQuery {
    let words: Vec<&str> = text.split_whitespace().take(QUERY_WORDS).collect();
    TextQuery::new(words.join(" "), TOP_K)
}

/// Checks that the scope holds `expected` documents.
async fn check_count(index: &dyn TextIndex, scope: &Scope, expected: usize) -> BenchResult<()> {
    let count = index.count(scope).await?;
    if count != expected as u64 {
        return Err(format!("the scope holds {count} documents, expected {expected}").into());
    }
    Ok(())
}

/// Runs `text_index` on the case's backend; `start_rss` becomes the peak once the index is
/// open.
pub(crate) async fn run(ctx: &Ctx<'_>, start_rss: &mut Option<f64>) -> BenchResult<Vec<Report>> {
    let (index, guard) = open(ctx.backend)
        .await
        .map_err(|e| format!("cannot open the {} text index: {e}", ctx.backend))?;
    *start_rss = peak_rss_mb();
    let reports = text_index(ctx, index.as_ref()).await;
    // Drop the index (its writer thread joins, a directory's pending writes are committed) on
    // the blocking pool, then remove the directory.
    tokio::task::spawn_blocking(move || drop(index)).await?;
    drop(guard);
    reports
}

async fn text_index(ctx: &Ctx<'_>, index: &TantivyTextIndex) -> BenchResult<Vec<Report>> {
    let ops = ctx.ops.unwrap_or(200).max(1);
    let warmup = 10;
    let scope = fresh_scope()?;
    let preload_started = Instant::now();
    for chunk in ctx.thread().chunks(PRELOAD_BATCH) {
        let batch: Vec<TextDocument> = chunk.iter().map(|m| document(&m.text)).collect();
        index.upsert(&scope, &batch).await?;
    }
    let preload = preload_started.elapsed();
    check_count(index, &scope, ctx.n).await?;
    let mut next = 0usize;
    let mut later = |ctx: &Ctx<'_>| {
        next += 1;
        ctx.later(next).text.clone()
    };
    let mut written = ctx.n;

    // Warm-up: writes and reads, untimed.
    for _ in 0..warmup {
        index.upsert(&scope, &[document(&later(ctx))]).await?;
        black_box(index.search(&scope, &query(&later(ctx))).await?);
        written += 1;
    }

    // upsert_one: back to back.
    let mut upserts = Recorder::new(ops);
    for _ in 0..ops {
        let doc = document(&later(ctx));
        let started = Instant::now();
        index.upsert(&scope, &[doc]).await?;
        upserts.push(started.elapsed());
        written += 1;
    }
    check_count(index, &scope, written).await?;

    // search_after_upsert and upsert_and_search: each search right after an upsert.
    let mut after = Recorder::new(ops);
    let mut pairs = Recorder::new(ops);
    let mut hits = 0usize;
    for _ in 0..ops {
        let doc = document(&later(ctx));
        let question = query(&later(ctx));
        let started = Instant::now();
        index.upsert(&scope, &[doc]).await?;
        let searching = Instant::now();
        let found = index.search(&scope, &question).await?;
        let done = Instant::now();
        after.push(done - searching);
        pairs.push(done - started);
        hits += found.len();
        written += 1;
    }
    check_count(index, &scope, written).await?;

    // five_upserts_and_search: a flush of several messages upserted one by one (as several
    // agents or blocks write), then the next recall; one op.
    let mut runs = Recorder::new(ops);
    for _ in 0..ops {
        let docs: Vec<TextDocument> = (0..RUN).map(|_| document(&later(ctx))).collect();
        let question = query(&later(ctx));
        let started = Instant::now();
        for doc in docs {
            index.upsert(&scope, &[doc]).await?;
        }
        let found = index.search(&scope, &question).await?;
        runs.push(started.elapsed());
        hits += found.len();
        written += RUN;
    }
    check_count(index, &scope, written).await?;

    // search: no write before it.
    let mut searches = Recorder::new(ops);
    for _ in 0..ops {
        let question = query(&later(ctx));
        let started = Instant::now();
        let found = index.search(&scope, &question).await?;
        searches.push(started.elapsed());
        hits += found.len();
    }
    if hits == 0 {
        return Err("no search found anything: the queries or the index are wrong".into());
    }
    index.clear(&scope).await?;

    let preload_ms = crate::harness::round(preload.as_secs_f64() * 1e3, 1);
    let line = |op: &str, recorder: Recorder| {
        ctx.report(&recorder.finish())
            .field("op", op.to_owned())
            .field("top_k", TOP_K)
            .field("preload_ms", preload_ms)
            .field("documents_at_end", written)
            .field("commit_policy", format!("{:?}", index.commit_policy()))
    };
    Ok(vec![
        line("upsert_one", upserts),
        line("search_after_upsert", after),
        line("upsert_and_search", pairs),
        line("five_upserts_and_search", runs),
        line("search", searches),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_the_first_words() {
        let q = query("one two three four five six seven eight nine ten eleven twelve thirteen");
        assert_eq!(q.text.split(' ').count(), QUERY_WORDS);
        assert_eq!(q.top_k, TOP_K);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_directory_is_removed_after_the_case() {
        let (index, guard) = open("tantivy-dir").await.unwrap();
        let dir = guard.as_ref().unwrap().0.clone();
        let scope = fresh_scope().unwrap();
        index
            .upsert(&scope, &[document("the walrus keeps a lantern")])
            .await
            .unwrap();
        assert_eq!(
            index.search(&scope, &query("walrus")).await.unwrap().len(),
            1
        );
        assert!(dir.exists());
        tokio::task::spawn_blocking(move || drop(index))
            .await
            .unwrap();
        drop(guard);
        assert!(!dir.exists());
        assert!(open("nope").await.is_err());
    }
}
