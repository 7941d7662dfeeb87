//! The macros that turn each check of a suite into its own test.
//!
//! Each list of checks below is the one place a suite's checks are named: it feeds both the
//! test-generating macros and the `run_all_*_checks` functions, so the two cannot drift apart.

/// Generates one test per [`HistoryStore`](memory_core::HistoryStore) check.
///
/// The argument is an expression (usually an `async` block) that evaluates to a future of the
/// store under test: any type implementing `HistoryStore`, including `Arc<dyn HistoryStore>`.
/// Every test awaits it to build a fresh store, then runs one check of
/// [`history`](crate::history) on a multi-thread Tokio runtime with 4 workers (what
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 4)]` sets up).
///
/// Name the module after the store and its engine with
/// `history_store_tests!(mod name, async { ... })`, so that test output says what ran
/// (`sql_store_on_postgres_history::append_assigns_consecutive_seqs ... ok`) and a file can run
/// the suite on several stores; without a name the module is `history_store`. The module
/// imports `super::*`, so the expression may call helpers of the enclosing module.
///
/// ```
/// memory_testkit::history_store_tests!(async { memory_core::InMemoryHistoryStore::new() });
///
/// // The same suite again, in a module named after the store, with a store built by a helper
/// // of this file.
/// fn build_store() -> memory_core::InMemoryHistoryStore {
///     memory_core::InMemoryHistoryStore::new()
/// }
/// memory_testkit::history_store_tests!(mod in_memory_history_store, async { build_store() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! history_store_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__history_checks!(tests($crate::__private::history_store, $make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::history_store_tests!(mod history_store, $make);
    };
}

/// Generates one test per check of the [`hostile`](crate::hostile) input suite.
///
/// `history:` is an expression (usually an `async` block) that evaluates to a future of the
/// [`HistoryStore`](memory_core::HistoryStore) under test; the optional `raw:` gives a future
/// of a pair `(store, writer)`: a store of the same kind and a
/// [`RawWriter`](crate::hostile::RawWriter) that writes its stored form directly (it adds the
/// checks of undecodable rows), and the optional `sessions:` a future of a
/// [`SessionStore`](memory_core::SessionStore) (it adds the checks of hostile session states
/// and of hostile memory block states).
/// Every test runs on a multi-thread Tokio runtime with 4 workers, in the module named first;
/// the module imports `super::*`.
///
/// ```
/// memory_testkit::hostile_input_tests!(
///     mod in_memory_hostile,
///     history: async { memory_core::InMemoryHistoryStore::new() },
///     sessions: async { memory_core::InMemorySessionStore::new() },
/// );
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! hostile_input_tests {
    (
        mod $module:ident,
        history: $make:expr
        $(, raw: $raw:expr)?
        $(, sessions: $sessions:expr)?
        $(,)?
    ) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__hostile_history_tests!(
                $make;
                oversized_message_is_refused_whole,
                oversized_batch_is_refused_whole,
                deep_json_is_refused_past_the_limit,
                nul_bytes_are_stored_exactly_or_refused,
                ids_at_the_length_limit_work_and_one_past_is_refused,
                huge_windows_are_answered,
                huge_and_tiny_ttls_are_refused_or_kept,
            );
            $(
                #[test]
                fn undecodable_rows_are_skipped() {
                    $crate::__private::block_on(async {
                        let (store, raw) = $raw.await;
                        let store = $crate::__private::history_store(store);
                        let raw: ::std::sync::Arc<dyn $crate::hostile::RawWriter> =
                            ::std::sync::Arc::new(raw);
                        $crate::hostile::undecodable_rows_are_skipped(store, raw).await;
                    });
                }
            )?
            $(
                #[test]
                fn hostile_session_states_are_typed_errors() {
                    $crate::__private::block_on(async {
                        let store = $crate::__private::session_store($sessions.await);
                        $crate::hostile::hostile_session_states_are_typed_errors(store).await;
                    });
                }

                #[test]
                fn hostile_block_states_are_typed_errors() {
                    $crate::__private::block_on(async {
                        let store = $crate::__private::session_store($sessions.await);
                        $crate::hostile::hostile_block_states_are_typed_errors(store).await;
                    });
                }
            )?
        }
    };
}

/// One test per history check of the hostile suite.
#[doc(hidden)]
#[macro_export]
macro_rules! __hostile_history_tests {
    ($make:expr; $($check:ident),* $(,)?) => {$(
        #[test]
        fn $check() {
            $crate::__private::block_on(async {
                let store = $crate::__private::history_store($make.await);
                $crate::hostile::$check(store).await;
            });
        }
    )*};
}

/// Generates one test per [`SessionStore`](memory_core::SessionStore) check.
///
/// As [`history_store_tests!`], with a future of any type implementing `SessionStore`; the
/// default module is `session_store`.
///
/// ```
/// memory_testkit::session_store_tests!(async { memory_core::InMemorySessionStore::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! session_store_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__session_checks!(tests($crate::__private::session_store, $make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::session_store_tests!(mod session_store, $make);
    };
}

/// Generates one test per [`VectorStore`](memory_core::VectorStore) check.
///
/// As [`history_store_tests!`], with a future of any type implementing `VectorStore`; the
/// default module is `vector_store`. Every check writes vectors of
/// [`VECTOR_DIM`](crate::fixtures::VECTOR_DIM) dimensions.
///
/// ```
/// memory_testkit::vector_store_tests!(async { memory_core::InMemoryVectorStore::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! vector_store_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__vector_checks!(tests($crate::__private::vector_store, $make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::vector_store_tests!(mod vector_store, $make);
    };
}

/// Generates one test per [`TextIndex`](memory_core::TextIndex) check.
///
/// As [`history_store_tests!`], with a future of any type implementing `TextIndex`; the
/// default module is `text_index`. The optional check of `delete_matching` and
/// `count_matching` follows the index's [`capabilities`](memory_core::TextIndex::capabilities):
/// without `deletes_matching` it checks that both are refused with `Unsupported` and change
/// nothing.
///
/// ```ignore
/// memory_testkit::text_index_tests!(mod tantivy_in_memory, async {
///     memory_lexical::TantivyTextIndex::in_memory().unwrap()
/// });
/// ```
#[macro_export]
macro_rules! text_index_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__text_index_checks!(tests($crate::__private::text_index, $make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::text_index_tests!(mod text_index, $make);
    };
}

/// Generates one test per [`Retriever`](memory_core::retrieval::Retriever) check (the
/// [`retrieval`](crate::retrieval) suite).
///
/// As [`history_store_tests!`], with a future of any type implementing `Retriever` (a dense, a
/// lexical or a hybrid retriever over the engine under test); the default module is
/// `retriever`. Every engine offering lexical or hybrid retrieval runs it.
///
/// ```
/// use std::sync::Arc;
/// memory_testkit::retriever_tests!(mod dense_in_memory, async {
///     memory_core::retrieval::DenseRetriever::new(
///         Arc::new(memory_testkit::memory::WordHashEmbedder),
///         Arc::new(memory_core::InMemoryVectorStore::new()),
///     )
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! retriever_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__retriever_checks!(tests($crate::__private::retriever, $make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::retriever_tests!(mod retriever, $make);
    };
}

/// Generates one test per check of the [`memory`](crate::memory) suite: [`Memory`](memory_core::Memory)
/// and its blocks, the exactly-once flush watermark, the reducers, `TeamSession`, `AgentChat`
/// and the agent's tool loop, on a [`HistoryStore`](memory_core::HistoryStore) and a
/// [`SessionStore`](memory_core::SessionStore).
///
/// The argument is an expression (usually an `async` block) that evaluates to a future of a
/// pair `(history_store, session_store)`: any types implementing the two traits, including
/// `Arc<dyn …>` and `Arc<S>` of one store implementing both. Every test awaits it for fresh
/// stores, then runs one check on a multi-thread Tokio runtime with 4 workers. Name the module
/// after the store and its engine (`sql_store_on_postgres_memory`); without a name it is
/// `memory_suite`. The module imports `super::*`.
///
/// ```
/// memory_testkit::memory_suite_tests!(mod in_memory_memory, async {
///     (memory_core::InMemoryHistoryStore::new(), memory_core::InMemorySessionStore::new())
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! memory_suite_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__memory_checks!(tests($make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::memory_suite_tests!(mod memory_suite, $make);
    };
}

/// Generates one test per check of the [`forget`](crate::forget) suite: a
/// [`Forgetter`](memory_core::Forgetter) over one engine's stores, with every kind of filter,
/// checked against every read API.
///
/// The argument is an expression (usually an `async` block) that evaluates to a future of a
/// pair `(history_store, session_store)` or a triple `(history_store, session_store,
/// vector_store)`: any types implementing the traits, including `Arc<dyn …>` and `Arc<S>` of
/// one store implementing both. Every test awaits it for fresh stores, then runs one check on
/// a multi-thread Tokio runtime with 4 workers. Name the module after the stores and their
/// engine (`sql_store_on_postgres_forget`); without a name it is `forget_suite`. The module
/// imports `super::*`.
///
/// ```
/// memory_testkit::forget_tests!(mod in_memory_forget, async {
///     (
///         memory_core::InMemoryHistoryStore::new(),
///         memory_core::InMemorySessionStore::new(),
///         memory_core::InMemoryVectorStore::new(),
///     )
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! forget_tests {
    (mod $module:ident, $make:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__forget_checks!(tests($make));
        }
    };
    ($make:expr $(,)?) => {
        $crate::forget_tests!(mod forget_suite, $make);
    };
}

/// The forget checks: each takes a [`ForgetStores`](crate::forget::ForgetStores).
#[doc(hidden)]
#[macro_export]
macro_rules! __forget_checks {
    ($($mode:tt)*) => {
        $crate::__forget_suite! {
            mode [$($mode)*]
            checks [
                forget_a_tenant,
                forget_a_user,
                forget_an_agent,
                forget_a_session,
                forget_a_users_session,
                forget_a_source,
                forget_stopped_half_way_is_finished_by_a_rerun,
            ]
        }
    };
}

/// Expands the forget checks either into tests or into sequential calls.
#[doc(hidden)]
#[macro_export]
macro_rules! __forget_suite {
    (mode [tests($make:expr)] checks [$($check:ident),* $(,)?]) => {
        $(
            #[test]
            fn $check() {
                $crate::__private::block_on(async {
                    let stores = $crate::__private::forget_stores($make.await);
                    $crate::forget::$check(stores).await;
                });
            }
        )*
    };
    (mode [run_all($stores:ident)] checks [$($check:ident),* $(,)?]) => {
        $( $crate::forget::$check($stores.clone()).await; )*
    };
}

/// The memory checks: each takes `(Arc<dyn HistoryStore>, Arc<dyn SessionStore>)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __memory_checks {
    ($($mode:tt)*) => {
        $crate::__memory_suite! {
            mode [$($mode)*]
            checks [
                memory_flushes_into_every_block,
                memory_get_truncates_by_priority,
                memory_crash_before_watermark_save_delivers_once,
                memory_crash_before_archive_delivers_once,
                memory_concurrent_flushes_deliver_once,
                memory_recreated_thread_is_delivered_from_its_start,
                memory_reset_forgets_every_block,
                memory_block_state_lives_as_long_as_its_thread,
                memory_concurrent_flushes_leave_one_vector_point_per_message,
                reducers_after_message_added_archive_on_the_store,
                reducers_before_retrieval_leave_the_store_untouched,
                team_session_resumes_like_an_uninterrupted_run,
                agent_chat_resumes_like_an_uninterrupted_run,
                agent_tool_loop_stores_whole_groups,
                agent_tool_loop_with_memory_flushes_groups_whole,
                agent_reducer_between_iterations_keeps_groups,
            ]
        }
    };
}

/// Expands the memory checks either into tests or into sequential calls.
#[doc(hidden)]
#[macro_export]
macro_rules! __memory_suite {
    (mode [tests($make:expr)] checks [$($check:ident),* $(,)?]) => {
        $(
            #[test]
            fn $check() {
                $crate::__private::block_on(async {
                    let (history, sessions) = $crate::__private::memory_stores($make.await);
                    $crate::memory::$check(history, sessions).await;
                });
            }
        )*
    };
    (mode [run_all($history:ident, $sessions:ident)] checks [$($check:ident),* $(,)?]) => {
        $( $crate::memory::$check($history.clone(), $sessions.clone()).await; )*
    };
}

/// The history checks: `shared` take `&dyn HistoryStore`, `owned` take `Arc<dyn HistoryStore>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __history_checks {
    ($($mode:tt)*) => {
        $crate::__checks! {
            mode [$($mode)*]
            suite history
            shared [
                append_assigns_consecutive_seqs,
                unknown_thread_reads_empty,
                empty_batch_is_a_no_op,
                window_all_returns_active_messages,
                window_last_returns_newest_active,
                window_after_returns_later_active,
                window_token_budget_is_contiguous_from_newest,
                window_everything_includes_archived,
                large_windows_are_read_whole,
                count_reports_active_archived_tokens_and_last_seq,
                archive_moves_a_range_out_of_the_window,
                archive_edge_ranges,
                archived_ids_still_dedupe,
                clear_deletes_the_thread,
                list_threads_pages_each_thread_once,
                list_threads_filters_by_user_agent_source,
                list_threads_never_crosses_tenants,
                retried_append_is_idempotent,
                overlapping_batches_insert_only_new_messages,
                duplicate_ids_within_a_batch_are_stored_once,
                scopes_are_isolated,
                longest_ids_round_trip,
                invalid_ids_are_refused,
                ttl_expires_a_thread,
                ttl_none_removes_the_expiry,
                ttl_is_refreshed_by_append,
                ttl_on_unknown_thread_is_not_found,
                ttl_out_of_range_is_refused,
                purge_expired_removes_expired_threads,
                large_message_round_trips,
                non_ascii_messages_round_trip,
                oversized_message_is_refused_atomically,
                oversized_batch_is_refused,
                token_counts_match_the_counter,
                cursor_read_without_cursor_is_the_whole_window,
                cursor_read_returns_what_was_appended,
                cursor_read_after_archive_is_whole,
                cursor_read_after_clear_is_whole,
                cursor_read_after_expiry_is_whole,
                cursor_of_another_scope_is_refused,
                cursor_from_the_future_is_refused,
                cursor_read_of_unknown_thread_is_whole_and_empty,
                read_page_pages_every_message_once,
                list_tenants_pages_each_tenant_once,
            ]
            owned [
                concurrent_writers_to_one_thread,
                cursor_reads_racing_appends_skip_no_message,
                read_page_racing_appends_reads_a_gap_free_prefix,
            ]
        }
    };
}

/// The session checks: `shared` take `&dyn SessionStore`, `owned` take `Arc<dyn SessionStore>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __session_checks {
    ($($mode:tt)*) => {
        $crate::__checks! {
            mode [$($mode)*]
            suite session
            shared [
                create_then_load_is_exact,
                agent_session_state_round_trips,
                large_state_round_trips,
                save_with_expected_version_increments,
                stale_save_conflicts_and_changes_nothing,
                create_existing_conflicts,
                save_with_version_on_missing_session_conflicts,
                load_unknown_is_none,
                delete_returns_whether_it_existed,
                recreated_session_never_repeats_a_version,
                oversized_state_is_refused,
                list_pages_each_session_once,
                list_filters_by_user_agent_source_and_tenant,
                scopes_are_isolated,
                a_state_copied_to_another_scope_is_refused,
                ttl_expires_a_session,
                ttl_none_removes_the_expiry,
                ttl_is_refreshed_by_save,
                ttl_on_unknown_session_is_not_found,
                ttl_out_of_range_is_refused,
                purge_expired_removes_expired_sessions,
                expired_session_never_repeats_a_version,
                list_tenants_pages_each_tenant_once,
            ]
            owned [
                concurrent_load_modify_save_loses_no_update,
            ]
        }
    };
}

/// The vector checks (all take `&dyn VectorStore`).
#[doc(hidden)]
#[macro_export]
macro_rules! __vector_checks {
    ($($mode:tt)*) => {
        $crate::__checks! {
            mode [$($mode)*]
            suite vector
            shared [
                upsert_then_get_returns_points,
                unknown_scope_is_empty,
                search_orders_by_cosine_similarity,
                search_breaks_ties_by_id,
                search_top_k_larger_than_count,
                search_min_score_drops_lower_scores,
                search_ranks_exactly_beyond_a_few_candidates,
                filter_eq_matches_field_values,
                filter_and_requires_every_condition,
                filter_or_accepts_any_condition,
                filter_not_negates,
                scope_is_enforced_whatever_the_filter,
                same_point_id_in_two_scopes,
                reupsert_is_idempotent,
                reupsert_replaces_payload_and_vector,
                invalid_vectors_are_refused_atomically,
                delete_returns_how_many_existed,
                count_counts_the_scope_points,
                clear_removes_the_scope_points,
                delete_matching_removes_the_selected_scopes,
                search_matching_finds_exactly_the_selected_scopes,
            ]
            owned []
        }
    };
}

/// The text index checks (all take `&dyn TextIndex`).
#[doc(hidden)]
#[macro_export]
macro_rules! __text_index_checks {
    ($($mode:tt)*) => {
        $crate::__checks! {
            mode [$($mode)*]
            suite lexical
            shared [
                upsert_then_get_returns_documents,
                unknown_scope_is_empty,
                scopes_are_isolated,
                upsert_replaces_text_and_payload,
                retried_upsert_is_idempotent,
                empty_batch_is_a_no_op,
                invalid_documents_are_refused_atomically,
                empty_text_is_allowed,
                search_ranks_by_shared_words,
                search_breaks_ties_by_id,
                many_ties_and_a_selective_filter,
                search_folds_case,
                query_syntax_is_never_interpreted,
                query_without_words_is_empty,
                too_long_query_is_refused,
                filter_eq_matches_field_values,
                filter_combinations,
                delete_returns_how_many_existed,
                count_and_clear,
                writes_are_visible_to_the_next_read,
                unicode_words_match,
                delete_matching_removes_the_selected_scopes,
                search_matching_finds_exactly_the_selected_scopes,
            ]
            owned []
        }
    };
}

/// The retriever checks (all take `&dyn Retriever`).
#[doc(hidden)]
#[macro_export]
macro_rules! __retriever_checks {
    ($($mode:tt)*) => {
        $crate::__checks! {
            mode [$($mode)*]
            suite retrieval
            shared [
                scopes_are_isolated,
                the_matching_item_ranks_first,
                context_is_indexed_not_returned,
                top_k_and_filter_are_honoured,
                index_replaces_by_id,
                delete_and_clear_count,
                scopes_differing_in_one_part_are_isolated,
                payload_filters_combine,
                hostile_payload_keys_are_plain_keys,
                hostile_text_is_words_within_the_scope,
            ]
            owned []
        }
    };
}

/// Expands a list of checks into tests, into sequential calls, or into the list of the checks
/// that take `&dyn $store`, each with its name (a `Vec<(&str, SharedCheck<dyn $store>)>`).
#[doc(hidden)]
#[macro_export]
macro_rules! __checks {
    (
        mode [named($store:path)]
        suite $suite:ident
        shared [$($shared:ident),* $(,)?]
        owned [$($owned:ident),* $(,)?]
    ) => {{
        $(
            fn $shared(
                store: &dyn $store,
            ) -> ::std::pin::Pin<::std::boxed::Box<dyn ::std::future::Future<Output = ()> + '_>> {
                ::std::boxed::Box::pin($crate::$suite::$shared(store))
            }
        )*
        ::std::vec![$((
            ::std::stringify!($shared),
            $shared as $crate::SharedCheck<dyn $store>,
        )),*]
    }};
    (
        mode [tests($into_arc:path, $make:expr)]
        suite $suite:ident
        shared [$($shared:ident),* $(,)?]
        owned [$($owned:ident),* $(,)?]
    ) => {
        $(
            #[test]
            fn $shared() {
                $crate::__private::block_on(async {
                    let store = $into_arc($make.await);
                    $crate::$suite::$shared(&*store).await;
                });
            }
        )*
        $(
            #[test]
            fn $owned() {
                $crate::__private::block_on(async {
                    let store = $into_arc($make.await);
                    $crate::$suite::$owned(store).await;
                });
            }
        )*
    };
    (
        mode [run_all($store:ident)]
        suite $suite:ident
        shared [$($shared:ident),* $(,)?]
        owned [$($owned:ident),* $(,)?]
    ) => {
        $( $crate::$suite::$shared(&*$store).await; )*
        $( $crate::$suite::$owned($store.clone()).await; )*
    };
}
