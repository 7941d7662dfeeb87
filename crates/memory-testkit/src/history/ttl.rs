//! The checks of [`set_ttl`](memory_core::HistoryStore::set_ttl) and
//! [`purge_expired`](memory_core::HistoryStore::purge_expired) (optional:
//! `HistoryCapabilities::ttl`): the shared TTL checks of [`crate::ttl`] over a history
//! store's threads.

use std::time::Duration;

use memory_core::{
    AppendOutcome, ChatMessage, HistoryStore, Result, Scope, TenantId, ThreadCount, Window,
};

use super::support::{append_new, count, list_all, read, ttl_supported};
use crate::fixtures::{ExpectOk, numbered_messages, tenant_filter};
use crate::ttl::{self, ExpiringRecords};

/// How many messages a thread the TTL checks create holds.
const CREATED: u64 = 2;

/// A history store's threads, as the TTL checks see them: a thread is created with
/// [`CREATED`] messages and written again with one more.
struct Threads<'a>(&'a dyn HistoryStore);

impl ExpiringRecords for Threads<'_> {
    type Written = Vec<ChatMessage>;
    const RECORD: &'static str = "thread";
    const WRITE: &'static str = "an append";

    async fn ttl_supported(&self) -> bool {
        ttl_supported(self.0).await
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.0.set_ttl(scope, ttl).await
    }

    async fn purge_expired(&self) -> Result<u64> {
        self.0.purge_expired().await
    }

    fn counts_purged(&self) -> bool {
        self.0.capabilities().counts_purged
    }

    async fn listed(&self, tenant: &TenantId) -> Vec<Scope> {
        list_all(self.0, &tenant_filter(tenant), 10).await
    }

    async fn create(&self, scope: &Scope) -> Vec<ChatMessage> {
        let messages = numbered_messages("m", CREATED as usize);
        append_new(self.0, scope, &messages).await;
        messages
    }

    async fn assert_created(&self, scope: &Scope, why: &str) {
        assert_eq!(count(self.0, scope).await.active, CREATED, "{why}");
    }

    async fn write_again(&self, scope: &Scope, what: &str) {
        let out = self
            .0
            .append(scope, &numbered_messages("n", 1))
            .await
            .expect_ok(what);
        assert_eq!(out.inserted, 1, "{what} inserts its new message");
    }

    async fn assert_written_again(&self, scope: &Scope, why: &str) {
        assert_eq!(count(self.0, scope).await.active, CREATED + 1, "{why}");
    }

    async fn assert_gone(&self, scope: &Scope, what: &str) {
        for window in [Window::All, Window::Everything, Window::Last(10)] {
            assert!(
                read(self.0, scope, window).await.is_empty(),
                "{what} reads empty with {window:?}"
            );
        }
        assert_eq!(
            count(self.0, scope).await,
            ThreadCount::default(),
            "{what} counts zero"
        );
    }

    /// An append after expiry starts a new thread at seq 1, where the old ids are new.
    async fn assert_written_anew(&self, scope: &Scope, written: Vec<ChatMessage>) {
        let out = self
            .0
            .append(scope, &written[..1])
            .await
            .expect_ok("append after expiry");
        assert_eq!(
            out,
            AppendOutcome {
                seqs: vec![1],
                inserted: 1
            },
            "an append after expiry starts a new thread at seq 1, where the old id is new"
        );
        assert_eq!(
            count(self.0, scope).await.active,
            1,
            "the new thread holds only the new append"
        );
    }
}

/// Contract: TTL. `set_ttl` makes a thread expire; an expired thread reads as empty, counts
/// zero, is not listed, and is gone for appends (they start a new thread at seq 1, where its
/// old ids are new). Stores without TTL answer `Unsupported`.
pub async fn ttl_expires_a_thread(store: &dyn HistoryStore) {
    ttl::ttl_expires_a_record(&Threads(store)).await;
}

/// Contract: `set_ttl(None)` removes the expiry.
pub async fn ttl_none_removes_the_expiry(store: &dyn HistoryStore) {
    ttl::ttl_none_removes_the_expiry(&Threads(store)).await;
}

/// Contract: a thread expires `ttl` after its last append: each append restarts the clock.
pub async fn ttl_is_refreshed_by_append(store: &dyn HistoryStore) {
    ttl::ttl_is_refreshed_by_a_write(&Threads(store)).await;
}

/// Contract: `set_ttl` on a thread that does not exist is `NotFound`.
pub async fn ttl_on_unknown_thread_is_not_found(store: &dyn HistoryStore) {
    ttl::ttl_on_unknown_record_is_not_found(&Threads(store)).await;
}

/// Contract: a TTL under 1 ms or over `MAX_TTL` is `InvalidInput`, and the thread keeps the
/// expiry it had.
pub async fn ttl_out_of_range_is_refused(store: &dyn HistoryStore) {
    ttl::ttl_out_of_range_is_refused(&Threads(store)).await;
}

/// Contract: `purge_expired` deletes expired threads' data now and returns how many threads it
/// removed; threads that did not expire stay.
///
/// On a store shared with other running checks, other expired threads may be purged too, so the
/// check asserts at least the two threads it let expire. Without `counts_purged` the number is
/// not checked; the rest is.
pub async fn purge_expired_removes_expired_threads(store: &dyn HistoryStore) {
    ttl::purge_expired_removes_expired_records(&Threads(store)).await;
}
