//! The [`HistoryStore`] conformance suite, its checks grouped by the `# Behavior` bullet they
//! test (one file each below `history/`).
//!
//! Each check is an async function taking the store under test; it writes under its own random
//! tenant (see [`random_scope`](crate::fixtures::random_scope)), so checks can run in parallel
//! against one shared server and one store instance can run them all
//! ([`run_all_history_checks`]). A check panics, with a message saying what was expected, when
//! the store breaks the contract.
//!
//! The checks follow the `# Behavior` contract of [`HistoryStore`] line by line, plus what
//! every store must survive: concurrent writers to one thread, retried appends, scopes that
//! differ in one part only, 1 MiB and non-ASCII messages, and ids of every valid shape.
//!
//! # Capabilities
//! The checks select by [`capabilities`](HistoryStore::capabilities), honestly: a check of an
//! optional operation runs in full when the store declares it, and otherwise asserts that the
//! operation answers [`ErrorKind::Unsupported`](memory_core::ErrorKind::Unsupported) and
//! changes nothing, so a store that lies about a capability, either way, fails.
//! - `archive`: the checks of archiving (and the parts of other checks that archive) run when
//!   it is declared; otherwise every `archive` call must be refused, and the thread must read
//!   and count as before, with no archived message.
//! - `ttl`: the TTL and purge checks run when it is declared; otherwise `set_ttl` and
//!   `purge_expired` must be refused and the thread left as it was.
//! - `cursor_reads`: the cursor-read checks (`cursor_*`, with [`assemble`], what a reader does
//!   with an answer) run when it is declared; otherwise every `read_since` must be refused and
//!   the thread left as it was.
//! - `paged_reads`, `lists_tenants`: the checks of `read_page` and `list_tenants` run when they
//!   are declared; otherwise each call must be refused and change nothing.
//!
//! The guarantees a store may keep or not select too: when one is declared its checks run in
//! full; otherwise they assert the weaker behaviour the trait's `# Behavior` list gives for it,
//! so a store that declares a guarantee it does not keep fails.
//! - `dedupes_ids`: the deduplication checks run in full when it is declared; otherwise a
//!   retry of the thread's last batch must still store nothing, and every other append must
//!   report truly what it stored, whatever it stored again.
//! - `counts_purged`: `purge_expired` must count the threads it removed when it is declared;
//!   otherwise only the removal is checked.
//! - `lists_every_thread`: a thread with max-length ids must be listed when it is declared;
//!   otherwise it may be left out, and no other scope may be listed in its place.
//!
//! # Assumptions
//! - The store counts tokens with [`memory_core::default_token_counter`] (every backend's
//!   default): [`token_counts_match_the_counter`] compares the stored counts with it. Build the
//!   store under test with its default counter.
//! - TTL checks sleep for a few hundred milliseconds, so the store's expiry must be precise to
//!   about 100 ms.

mod append;
mod archive;
mod backend_cursor;
mod count_clear;
mod cursor;
mod listing;
mod paging;
mod scopes;
mod support;
mod ttl;
mod windows;

pub use append::{
    append_assigns_consecutive_seqs, concurrent_writers_to_one_thread,
    duplicate_ids_within_a_batch_are_stored_once, empty_batch_is_a_no_op,
    overlapping_batches_insert_only_new_messages, oversized_batch_is_refused,
    oversized_message_is_refused_atomically, retried_append_is_idempotent,
    token_counts_match_the_counter,
};
pub use archive::{
    archive_edge_ranges, archive_moves_a_range_out_of_the_window, archived_ids_still_dedupe,
};
pub use backend_cursor::{CURSOR_WINDOWS, expect_emptied_thread, expect_nothing_new};
pub use count_clear::{
    clear_deletes_the_thread, count_reports_active_archived_tokens_and_last_seq,
};
pub use cursor::{
    assemble, cursor_from_the_future_is_refused, cursor_of_another_scope_is_refused,
    cursor_read_after_archive_is_whole, cursor_read_after_clear_is_whole,
    cursor_read_after_expiry_is_whole, cursor_read_of_unknown_thread_is_whole_and_empty,
    cursor_read_returns_what_was_appended, cursor_read_without_cursor_is_the_whole_window,
    cursor_reads_racing_appends_skip_no_message,
};
pub use listing::{
    list_threads_filters_by_user_agent_source, list_threads_never_crosses_tenants,
    list_threads_pages_each_thread_once,
};
pub(crate) use paging::check_tenant_listings;
pub use paging::{
    list_tenants_pages_each_tenant_once, read_page_pages_every_message_once,
    read_page_racing_appends_reads_a_gap_free_prefix,
};
pub use scopes::{invalid_ids_are_refused, longest_ids_round_trip, scopes_are_isolated};
pub use ttl::{
    purge_expired_removes_expired_threads, ttl_expires_a_thread, ttl_is_refreshed_by_append,
    ttl_none_removes_the_expiry, ttl_on_unknown_thread_is_not_found, ttl_out_of_range_is_refused,
};
pub use windows::{
    large_message_round_trips, large_windows_are_read_whole, non_ascii_messages_round_trip,
    unknown_thread_reads_empty, window_after_returns_later_active,
    window_all_returns_active_messages, window_everything_includes_archived,
    window_last_returns_newest_active, window_token_budget_is_contiguous_from_newest,
};

use std::sync::Arc;

use memory_core::HistoryStore;

use crate::SharedCheck;

/// Every check of the suite that takes `&dyn HistoryStore` (all but the few that spawn tasks
/// on an `Arc`), each with its name, in the order [`run_all_history_checks`] runs them: for
/// tests that pick checks by name and run them on stores of their own.
pub fn every_shared_check() -> Vec<(&'static str, SharedCheck<dyn HistoryStore>)> {
    crate::__history_checks!(named(memory_core::HistoryStore))
}

/// Runs every check of the suite, one after the other, on `store`.
pub async fn run_all_history_checks(store: Arc<dyn HistoryStore>) {
    crate::__history_checks!(run_all(store));
}
