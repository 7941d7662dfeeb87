//! The workloads: what one operation is, how a case is set up, and what each line reports.
//!
//! Setup (preloading the thread, building the session) is never timed. Each workload warms up
//! with a few untimed operations, then times every operation on its own.
//!
//! Every line on a backend reports `round_trips_per_op`: the store's round trips (SQL
//! statements, `BEGIN` and `COMMIT` included, or Redis requests) made by the timed operations,
//! read from the store's counter before and after each of them, divided by the operations; 0 for
//! the in-memory stores.

use clap::ValueEnum;
use memory_core::Window;

use crate::backends;
use crate::data::DataMessage;
use crate::harness::{Ctx, Report, peak_rss_mb, round};
use crate::{BenchResult, Case, vectors};

mod agents;
mod memory;
mod migrate;
mod server_cost;
mod session;
mod store_calls;
mod store_free;
mod threads;
mod timer;
mod turns;
mod user_search;

/// The context window every workload reads: what the model would get.
const WINDOW: Window = Window::TokenBudget(30_000);
/// The most messages one bulk-import append carries.
const IMPORT_BATCH: usize = 1_000;

/// What the benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum Workload {
    /// Append a user message, read the 30,000-token window, append an assistant message.
    AgentTurn,
    /// `Agent::run` with an offline constant-reply model.
    AgentRun,
    /// `Memory::get` with a static block on a thread of N imported through `put_messages`.
    MemoryGet,
    /// `agent_turn` on a history-store object opened for the op: a process's first turn.
    AgentTurnCold,
    /// `agent_turn` while a second store object appends one message before each turn.
    AgentTurnShared,
    /// `Agent::run` with a `Memory` provider holding a fact-extraction block.
    MemoryTurn,
    /// Append one message.
    AppendOne,
    /// Read the 30,000-token window.
    ReadWindow,
    /// Append N messages to an empty thread, in batches of up to 1,000.
    BulkImport,
    /// Serialize and deserialize a session holding N messages; save and load it in the store.
    SessionRoundtrip,
    /// Count the tokens of N messages with o200k and cl100k.
    CountTokens,
    /// Upsert N points of 384 dimensions into a vector store, 256 per batch.
    VectorUpsert,
    /// Top-10 search over N points of 384 dimensions.
    VectorSearch,
    /// Embed the first N message texts with the local model, 32 per batch.
    Embed,
    /// Decode the stored JSON bodies of N messages (`ChatMessage::from_json`).
    DecodeMessage,
    /// `memory_bundle::migrate` of a tenant of N messages into the backend and back out.
    Migrate,
    /// The memory server's own cost: an HTTP append and context read minus the same `Ops` call.
    #[value(alias = "server-cost")]
    ServerCost,
    /// Upsert one document, search after an upsert, and search, on a text index of N documents.
    #[value(alias = "text-index")]
    TextIndex,
    /// Top-10 search across a user's sessions over N points of 384 dimensions in the backend's
    /// vector store.
    #[value(alias = "user-search")]
    UserSearch,
}

/// What a workload runs on, and so which backends it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackendKind {
    /// The chat history and session stores ([`backends::BACKENDS`]).
    Stores,
    /// A vector store ([`vectors::VECTOR_BACKENDS`]).
    Vector,
    /// The local embedding model ([`vectors::EMBED_BACKEND`]).
    Embedder,
    /// A text index ([`text_index::TEXT_BACKENDS`](crate::text_index::TEXT_BACKENDS)).
    Text,
    /// Nothing: the backend is reported as [`backends::NO_BACKEND`].
    None,
}

impl Workload {
    /// Every workload, in the order they run.
    pub(crate) const ALL: [Workload; 19] = [
        Workload::AgentTurn,
        Workload::AgentRun,
        Workload::MemoryGet,
        Workload::AgentTurnCold,
        Workload::AgentTurnShared,
        Workload::MemoryTurn,
        Workload::AppendOne,
        Workload::ReadWindow,
        Workload::BulkImport,
        Workload::SessionRoundtrip,
        Workload::CountTokens,
        Workload::VectorUpsert,
        Workload::VectorSearch,
        Workload::Embed,
        Workload::DecodeMessage,
        Workload::Migrate,
        Workload::ServerCost,
        Workload::TextIndex,
        Workload::UserSearch,
    ];

    /// The name used on the command line and in the JSON lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::AgentTurn => "agent_turn",
            Workload::AgentRun => "agent_run",
            Workload::MemoryGet => "memory_get",
            Workload::AgentTurnCold => "agent_turn_cold",
            Workload::AgentTurnShared => "agent_turn_shared",
            Workload::MemoryTurn => "memory_turn",
            Workload::AppendOne => "append_one",
            Workload::ReadWindow => "read_window",
            Workload::BulkImport => "bulk_import",
            Workload::SessionRoundtrip => "session_roundtrip",
            Workload::CountTokens => "count_tokens",
            Workload::VectorUpsert => "vector_upsert",
            Workload::VectorSearch => "vector_search",
            Workload::Embed => "embed",
            Workload::DecodeMessage => "decode_message",
            Workload::Migrate => "migrate",
            Workload::ServerCost => "server_cost",
            Workload::TextIndex => "text_index",
            Workload::UserSearch => "user_search",
        }
    }

    /// The workload called `name`.
    pub(crate) fn from_name(name: &str) -> BenchResult<Self> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| format!("unknown workload {name:?}").into())
    }

    /// One line for `--list`: what one operation is.
    pub(crate) fn description(self) -> &'static str {
        match self {
            Workload::AgentTurn => {
                "append a user message, read the 30,000-token window, append an assistant message"
            }
            Workload::AgentRun => "Agent::run with an offline constant-reply model",
            Workload::MemoryGet => {
                "Memory::get with a static block (token_limit 30,000) after put_messages of N"
            }
            Workload::AgentTurnCold => {
                "agent_turn on a store object opened for the op (a process's first turn)"
            }
            Workload::AgentTurnShared => {
                "agent_turn after a second store object appended one message to the thread"
            }
            Workload::MemoryTurn => {
                "Agent::run with a Memory provider holding a fact-extraction block (fixed fact)"
            }
            Workload::AppendOne => "append one message to a thread of N",
            Workload::ReadWindow => "read the 30,000-token window of a thread of N",
            Workload::BulkImport => "append N messages to an empty thread, 1,000 per batch",
            Workload::SessionRoundtrip => {
                "serialize / deserialize / save / load a session holding N messages"
            }
            Workload::CountTokens => "count the tokens of N messages (o200k, cl100k)",
            Workload::VectorUpsert => {
                "upsert N random unit vectors of 384 dimensions, 256 per batch (N = points)"
            }
            Workload::VectorSearch => "top-10 search over N vectors of 384 dimensions",
            Workload::Embed => {
                "embed the first N message texts with the local model (all-MiniLM-L6-v2), 32 per \
                 batch"
            }
            Workload::DecodeMessage => "decode the stored JSON bodies of N messages (from_json)",
            Workload::Migrate => {
                "memory_bundle::migrate of a tenant of N messages (10 threads, 3 % archived, 3 \
                 sessions) from memory into the backend (phase in) and back out (phase out), \
                 verified; N may exceed the data set"
            }
            Workload::ServerCost => {
                "the memory server's own cost on a thread of N: p50 of an HTTP append of one \
                 message and of a context read over loopback, minus p50 of the same Ops call"
            }
            Workload::TextIndex => {
                "on a text index of the first N message texts: upsert one document, search \
                 (top 10) right after an upsert, both, five upserts then a search, and search alone (one line \
                 each, `op`)"
            }
            Workload::UserSearch => {
                "top-10 search across a user's sessions (20 points each) over N points of 384 \
                 dimensions in the backend's own vector store, index throughput beside it \
                 (N = points)"
            }
        }
    }

    /// What the workload runs on.
    pub(crate) fn backend_kind(self) -> BackendKind {
        match self {
            Workload::CountTokens | Workload::DecodeMessage => BackendKind::None,
            Workload::VectorUpsert | Workload::VectorSearch => BackendKind::Vector,
            Workload::Embed => BackendKind::Embedder,
            Workload::TextIndex => BackendKind::Text,
            _ => BackendKind::Stores,
        }
    }

    /// Whether the workload runs on a backend's chat stores.
    pub(crate) fn uses_backend(self) -> bool {
        self.backend_kind() == BackendKind::Stores
    }

    /// Whether N counts messages of the data set (and so may not exceed it); the vector
    /// workloads' N counts generated points, and `migrate` cycles the data set's texts.
    pub(crate) fn n_is_messages(self) -> bool {
        self.backend_kind() != BackendKind::Vector
            && self != Workload::Migrate
            && self != Workload::UserSearch
    }

    /// The sizes measured when `--n` is not given.
    pub(crate) fn default_ns(self) -> &'static [usize] {
        if self == Workload::Migrate {
            return &migrate::MIGRATE_NS;
        }
        if self == Workload::UserSearch {
            return &user_search::USER_SEARCH_NS;
        }
        match self.backend_kind() {
            BackendKind::Vector => &vectors::VECTOR_NS,
            BackendKind::Embedder => &vectors::EMBED_NS,
            BackendKind::Text => &crate::text_index::TEXT_NS,
            BackendKind::Stores | BackendKind::None => &crate::DEFAULT_NS,
        }
    }
}

/// Runs one case and returns its lines, each with the process's peak RSS at the end of the case
/// (`peak_rss_mb`) and before the workload began (`start_rss_mb`: the data set loaded and the
/// stores opened, which for the in-memory store includes the o200k tables of its token
/// counter).
pub(crate) async fn run(
    case: &Case,
    data: &[DataMessage],
    ops: Option<usize>,
) -> BenchResult<Vec<Report>> {
    let ctx = Ctx {
        workload: case.workload.name(),
        backend: &case.backend,
        n: case.n,
        data,
        ops,
    };
    // The peak before the workload: the data set, and the stores once opened.
    let mut start_rss = peak_rss_mb();
    let reports = if case.workload == Workload::DecodeMessage {
        store_free::decode_message(&ctx)?
    } else if case.workload.backend_kind() == BackendKind::None {
        store_free::count_tokens(&ctx)?
    } else if case.workload.backend_kind() == BackendKind::Text {
        crate::text_index::run(&ctx, &mut start_rss).await?
    } else if !case.workload.uses_backend() {
        vectors::run(&ctx, &mut start_rss).await?
    } else {
        let backend = backends::find(&case.backend)?;
        let stores = (backend.connect)()
            .await
            .map_err(|e| format!("cannot open the {} backend: {e}", backend.name))?;
        start_rss = peak_rss_mb();
        let reports = match case.workload {
            Workload::AgentTurn => turns::agent_turn(&ctx, &stores).await?,
            Workload::AgentRun => agents::agent_run(&ctx, &stores).await?,
            Workload::MemoryGet => memory::memory_get(&ctx, &stores).await?,
            Workload::AgentTurnCold => turns::agent_turn_cold(&ctx, &stores).await?,
            Workload::AgentTurnShared => turns::agent_turn_shared(&ctx, &stores).await?,
            Workload::MemoryTurn => memory::memory_turn(&ctx, &stores).await?,
            Workload::AppendOne => store_calls::append_one(&ctx, &stores).await?,
            Workload::ReadWindow => store_calls::read_window(&ctx, &stores).await?,
            Workload::BulkImport => store_calls::bulk_import(&ctx, &stores).await?,
            Workload::SessionRoundtrip => session::session_roundtrip(&ctx, &stores).await?,
            Workload::Migrate => migrate::migrate_workload(&ctx, &stores).await?,
            Workload::ServerCost => server_cost::server_cost(&ctx, &stores).await?,
            Workload::UserSearch => user_search::user_search(&ctx, &stores).await?,
            Workload::CountTokens
            | Workload::VectorUpsert
            | Workload::VectorSearch
            | Workload::Embed
            | Workload::DecodeMessage
            | Workload::TextIndex => {
                return Err(format!("{} runs on no chat store", ctx.workload).into());
            }
        };
        stores.close().await;
        reports
    };
    Ok(reports
        .into_iter()
        .map(|report| match start_rss {
            Some(mb) => report.field("start_rss_mb", round(mb, 1)),
            None => report,
        })
        .map(with_common_fields)
        .map(Report::with_peak_rss)
        .collect())
}

/// The fields every line carries beyond the workload's own: `round_trips_per_op` (0 for the
/// workloads that make no store call: token counting, the vector stores, embedding, decoding)
/// and `base_rss_mb`, the process's resident set when it began, before the data set was read
/// (see [`harness::base_rss_mb`](crate::harness::base_rss_mb)).
fn with_common_fields(mut report: Report) -> Report {
    if !report.extra.contains_key("round_trips_per_op") {
        report = report.field("round_trips_per_op", 0.0);
    }
    match crate::harness::base_rss_mb() {
        Some(mb) => report.field("base_rss_mb", round(mb, 1)),
        None => report,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::test_messages;

    #[test]
    fn workload_names_match_the_command_line() {
        for workload in Workload::ALL {
            let value = workload.to_possible_value().unwrap();
            assert_eq!(value.get_name(), workload.name());
            assert_eq!(Workload::from_name(workload.name()).unwrap(), workload);
        }
        assert!(Workload::from_name("nope").is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn every_workload_runs_on_a_small_thread() {
        let data = test_messages(40, |i| {
            format!("message {i}: the release branch migrated the config file")
        });
        for workload in Workload::ALL {
            let backend = match workload.backend_kind() {
                BackendKind::Stores => "in-memory",
                BackendKind::Vector => "exact",
                // The model is not part of the tests.
                BackendKind::Embedder => continue,
                BackendKind::Text => "tantivy-memory",
                BackendKind::None => backends::NO_BACKEND,
            };
            let case = Case {
                workload,
                backend: backend.to_owned(),
                n: 20,
            };
            let reports = run(&case, &data, Some(5)).await.unwrap();
            let expected = match workload {
                Workload::SessionRoundtrip => 5,
                Workload::CountTokens | Workload::Migrate | Workload::ServerCost => 2,
                Workload::TextIndex => 5,
                _ => 1,
            };
            assert_eq!(reports.len(), expected, "{workload:?}");
            for report in reports {
                assert!(
                    report.extra.contains_key("round_trips_per_op"),
                    "{workload:?} {report:?}"
                );
                if cfg!(target_os = "linux") {
                    assert!(report.extra.contains_key("base_rss_mb"), "{report:?}");
                }
                assert_eq!(report.workload, workload.name());
                assert_eq!(report.n, 20);
                assert!(report.ops > 0 && report.ops_per_s > 0.0, "{report:?}");
                assert!(report.p99_us >= report.p50_us, "{report:?}");
            }
        }
    }
}
