//! The text index suite run on the naive reference index
//! ([`memory_testkit::text_reference::ReferenceTextIndex`]: every word counts, scored by
//! inverse document frequency within the scope): it shows that the suite can pass, and that it
//! fails an index that breaks the contract (a case-sensitive one, one searching every scope).

use memory_testkit::text_reference::{Flaw, ReferenceTextIndex};

memory_testkit::text_index_tests!(mod reference, async { ReferenceTextIndex::new() });

memory_testkit::text_index_tests!(mod reference_without_deletes_matching, async {
    ReferenceTextIndex::new().without_deletes_matching()
});

#[test]
#[should_panic(expected = "finds both documents")]
fn a_case_sensitive_index_fails_the_suite() {
    memory_testkit::__private::block_on(async {
        let index = ReferenceTextIndex::new().with_flaw(Flaw::CaseSensitive);
        memory_testkit::lexical::search_folds_case(&index).await;
    });
}

#[test]
// The shared id comes back once per scope: the first thing the check sees is the same id twice.
#[should_panic(expected = "ties by ascending id")]
fn an_index_searching_every_scope_fails_the_suite() {
    memory_testkit::__private::block_on(async {
        let index = ReferenceTextIndex::new().with_flaw(Flaw::SearchesEveryScope);
        memory_testkit::lexical::scopes_are_isolated(&index).await;
    });
}

#[test]
fn one_index_runs_the_whole_suite() {
    memory_testkit::__private::block_on(async {
        memory_testkit::run_all_text_index_checks(std::sync::Arc::new(ReferenceTextIndex::new()))
            .await;
    });
}
