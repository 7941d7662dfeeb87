//! The `memory` suite, its checks grouped by topic (one file each below `memory/`): the features
//! built on the stores — [`Memory`](memory_core::Memory) and its blocks, the exactly-once flush
//! watermark, the reducers, [`TeamSession`](memory_core::chat::TeamSession),
//! [`AgentChat`](memory_core::chat::AgentChat) and the [`Agent`](memory_core::Agent)'s tool loop —
//! run against a real [`HistoryStore`] and [`SessionStore`].
//!
//! Each check is an async function taking the two stores (often one store implementing both); it
//! works under its own random tenant (see [`random_scope`](crate::fixtures::random_scope)), so
//! checks can run in parallel against one shared server, and one pair of stores can run them all
//! ([`run_all_memory_checks`]). A check panics, with a message saying what was expected, when the
//! feature breaks its contract on these stores.
//!
//! # What "exactly once" is measured by
//! A [`MemoryBlock`](memory_core::memory::MemoryBlock) keeps what it was given in its durable
//! state; a `put` whose state write is lost is redone (see its contract). So the checks record what
//! each block got in its state (a [`RecordingBlock`]) and read it back through
//! [`Memory::get`](memory_core::Memory::get): each archived message must be there once, whatever
//! crashed in between.
//!
//! # Assumptions
//! The history store supports `archive` (a `Memory` flush and an `AfterMessageAdded` reducer
//! archive), counts tokens so that a message of about 40 words costs between 20 and 200
//! tokens, and gives back each message's id and parts as they were appended.

mod blocks;
mod exactly_once;
mod reducers;
mod resume;
pub(crate) mod support;
mod tool_loop;

pub use blocks::{
    memory_block_state_lives_as_long_as_its_thread, memory_flushes_into_every_block,
    memory_get_truncates_by_priority, memory_reset_forgets_every_block,
};
pub use exactly_once::{
    memory_concurrent_flushes_deliver_once,
    memory_concurrent_flushes_leave_one_vector_point_per_message,
    memory_crash_before_archive_delivers_once, memory_crash_before_watermark_save_delivers_once,
    memory_recreated_thread_is_delivered_from_its_start,
};
pub use reducers::{
    reducers_after_message_added_archive_on_the_store,
    reducers_before_retrieval_leave_the_store_untouched,
};
pub use resume::{
    agent_chat_resumes_like_an_uninterrupted_run, team_session_resumes_like_an_uninterrupted_run,
};
pub use support::{conversation, word_counted_memory};
pub(crate) use support::{memory_over, recorders};
pub use tool_loop::{
    agent_reducer_between_iterations_keeps_groups, agent_tool_loop_stores_whole_groups,
    agent_tool_loop_with_memory_flushes_groups_whole,
};
// The doubles the checks use, where they were before they moved to `crate::doubles`.
pub use crate::doubles::{
    CountingHistoryStore, FaultyHistoryStore, FaultySessionStore, RecordingBlock, WordHashEmbedder,
};

use std::sync::Arc;

use memory_core::{HistoryStore, SessionStore};

/// Runs every check of the suite, one after the other, on `history` and `sessions`.
pub async fn run_all_memory_checks(
    history: Arc<dyn HistoryStore>,
    sessions: Arc<dyn SessionStore>,
) {
    crate::__memory_checks!(run_all(history, sessions));
}
