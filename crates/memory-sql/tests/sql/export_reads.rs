//! The reads exports and migrations use, on every database: `read_page` (every message of a
//! thread, active and archived, a bounded page at a time) and `list_tenants` (history and
//! sessions). Each test runs on a SQLite file, in-memory SQLite, PostgreSQL and MariaDB, in
//! tables of its own (a unique prefix on the servers), so the tenant listings see only the
//! test's tenants.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::{
    ChatMessage, HistoryStore, MAX_READ_PAGE, Page, PageRequest, Scope, SessionStore,
    StoredMessage, TenantId, Window,
};
use memory_sql::SqlStore;

use crate::support;
use crate::support::Raw;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    SqliteFile,
    SqliteMemory,
    Postgres,
    MySql,
}

const TARGETS: [Target; 4] = [
    Target::SqliteFile,
    Target::SqliteMemory,
    Target::Postgres,
    Target::MySql,
];

/// A store on `target` in tables no other test uses, and a plain connection to the same
/// tables (none for in-memory SQLite, which only the store can reach).
struct Db {
    store: SqlStore,
    raw: Option<Raw>,
    prefix: String,
}

async fn open(target: Target) -> Db {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let prefix = format!("amexp_{}_", &id[..12]);
    let (url, raw_url) = match target {
        Target::SqliteFile => {
            let url = support::temp_sqlite_url().0;
            (url.clone(), Some(url))
        }
        Target::SqliteMemory => ("sqlite::memory:".to_owned(), None),
        Target::Postgres => (support::postgres_url(), Some(support::postgres_url())),
        Target::MySql => (support::mysql_url(), Some(support::mysql_url())),
    };
    let store = SqlStore::builder(&url)
        .table_prefix(&prefix)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("open {target:?}: {e}"));
    let raw = match raw_url {
        Some(url) => Some(Raw::connect(&url).await),
        None => None,
    };
    Db { store, raw, prefix }
}

impl Db {
    async fn drop_tables(self) {
        self.store.close().await;
        if let Some(raw) = &self.raw {
            raw.drop_tables(&self.prefix).await;
        }
    }
}

fn scope(tenant: &str, session: &str) -> Scope {
    Scope::session(session)
        .unwrap()
        .with_tenant(tenant)
        .unwrap()
}

fn texts(n: usize) -> Vec<ChatMessage> {
    (1..=n)
        .map(|i| ChatMessage::user(format!("m{i}")))
        .collect()
}

/// What a message read says about it, to compare two reads.
fn seen(m: &StoredMessage) -> (u64, u32, bool, String, String) {
    (
        m.seq,
        m.tokens,
        m.archived,
        m.message.id.as_str().to_owned(),
        m.message.text(),
    )
}

/// Every message of the thread, read with `read_page` in pages of `limit`; checks the size of
/// each page and that the pages follow each other.
async fn page_through(store: &SqlStore, scope: &Scope, limit: usize) -> Vec<StoredMessage> {
    let mut all: Vec<StoredMessage> = Vec::new();
    let mut after = 0;
    for _ in 0..10_000 {
        let page = store.read_page(scope, after, limit).await.unwrap();
        assert!(page.len() <= limit.clamp(1, MAX_READ_PAGE), "limit {limit}");
        let Some(last) = page.last() else {
            return all;
        };
        assert!(page.first().unwrap().seq > after);
        assert!(page.windows(2).all(|w| w[0].seq < w[1].seq));
        after = last.seq;
        all.extend(page);
    }
    panic!("read_page never reached the end of the thread");
}

/// Every tenant of a listing, in pages of `limit`; checks that only the last page has no
/// cursor.
async fn tenants_of<F, Fut>(limit: usize, list: F) -> Vec<String>
where
    F: Fn(PageRequest) -> Fut,
    Fut: std::future::Future<Output = memory_core::Result<Page<TenantId>>>,
{
    let mut out = Vec::new();
    let mut request = PageRequest::first(limit);
    for _ in 0..1_000 {
        let page = list(request.clone()).await.unwrap();
        assert!(page.items.len() <= limit, "limit {limit}");
        out.extend(page.items.iter().map(|t| t.as_str().to_owned()));
        match page.next_cursor {
            Some(cursor) => {
                assert_eq!(page.items.len(), limit, "a page before the last is full");
                request = PageRequest::after(limit, cursor);
            }
            None => return out,
        }
    }
    panic!("the listing never ended");
}

#[tokio::test]
async fn read_page_reads_every_message_once_in_bounded_pages() {
    for target in TARGETS {
        let db = open(target).await;
        let store = &db.store;
        let a = scope("t-a", "paged");
        store.append(&a, &texts(7)).await.unwrap();
        store.archive(&a, 2..=4).await.unwrap();
        let everything = store.read(&a, Window::Everything).await.unwrap();
        assert_eq!(everything.len(), 7);
        let expected: Vec<_> = everything.iter().map(seen).collect();
        for limit in [1, 2, 3, 7, 100] {
            let paged = page_through(store, &a, limit).await;
            let got: Vec<_> = paged.iter().map(seen).collect();
            assert_eq!(got, expected, "{target:?}, limit {limit}");
        }
        // Archived messages are there, flagged.
        let page = store.read_page(&a, 1, 3).await.unwrap();
        let flags: Vec<(u64, bool)> = page.iter().map(|m| (m.seq, m.archived)).collect();
        assert_eq!(flags, [(2, true), (3, true), (4, true)], "{target:?}");
        // A limit of 0 is read as 1.
        let one = store.read_page(&a, 0, 0).await.unwrap();
        assert_eq!(one.iter().map(|m| m.seq).collect::<Vec<_>>(), [1]);
        // At or past the end, and an unknown thread: empty.
        for after in [7, 8, u64::MAX] {
            assert!(store.read_page(&a, after, 10).await.unwrap().is_empty());
        }
        let unknown = scope("t-a", "unknown");
        assert!(store.read_page(&unknown, 0, 10).await.unwrap().is_empty());
        // A thread of the same session id in another tenant is another thread.
        assert!(
            store
                .read_page(&scope("t-b", "paged"), 0, 10)
                .await
                .unwrap()
                .is_empty()
        );

        // A limit over MAX_READ_PAGE is read as MAX_READ_PAGE.
        let long = scope("t-a", "long");
        store
            .append(&long, &texts(MAX_READ_PAGE + 3))
            .await
            .unwrap();
        let first = store.read_page(&long, 0, MAX_READ_PAGE * 5).await.unwrap();
        assert_eq!(first.len(), MAX_READ_PAGE, "{target:?}");
        assert_eq!(first.last().unwrap().seq, MAX_READ_PAGE as u64);
        let rest = store
            .read_page(&long, MAX_READ_PAGE as u64, usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            rest.iter().map(|m| m.seq).collect::<Vec<_>>(),
            (MAX_READ_PAGE as u64 + 1..=MAX_READ_PAGE as u64 + 3).collect::<Vec<_>>()
        );

        // An expired thread reads as empty, as does a cleared one.
        let short = scope("t-a", "short");
        store.append(&short, &texts(2)).await.unwrap();
        assert_eq!(store.read_page(&short, 0, 10).await.unwrap().len(), 2);
        HistoryStore::set_ttl(store, &short, Some(Duration::from_millis(1)))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(store.read_page(&short, 0, 10).await.unwrap().is_empty());
        store.clear(&a).await.unwrap();
        assert!(store.read_page(&a, 0, 10).await.unwrap().is_empty());
        // A thread started again after its clear pages from 1.
        store.append(&a, &texts(2)).await.unwrap();
        let again = store.read_page(&a, 0, 10).await.unwrap();
        assert_eq!(again.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 2]);
        db.drop_tables().await;
    }
}

#[tokio::test]
async fn read_page_skips_undecodable_rows_and_goes_on_after_them() {
    for target in [Target::SqliteFile, Target::Postgres, Target::MySql] {
        let db = open(target).await;
        let store = &db.store;
        let s = scope("t-corrupt", "paged");
        store.append(&s, &texts(7)).await.unwrap();
        db.raw
            .as_ref()
            .unwrap()
            .exec(&format!(
                "UPDATE {}messages SET body = 'not json' WHERE seq BETWEEN 2 AND 4",
                db.prefix
            ))
            .await;
        let seqs = |page: Vec<StoredMessage>| page.iter().map(|m| m.seq).collect::<Vec<_>>();
        // Left out, as `read` leaves them out.
        let everything = store.read(&s, Window::Everything).await.unwrap();
        assert_eq!(seqs(everything), [1, 5, 6, 7], "{target:?}");
        assert_eq!(seqs(store.read_page(&s, 0, 3).await.unwrap()), [1]);
        // A page of undecodable rows only is not the end: the next rows are read.
        assert_eq!(seqs(store.read_page(&s, 1, 3).await.unwrap()), [5, 6, 7]);
        assert_eq!(seqs(store.read_page(&s, 1, 2).await.unwrap()), [5]);
        for limit in [1, 2, 3, 10] {
            let paged = page_through(store, &s, limit).await;
            assert_eq!(seqs(paged), [1, 5, 6, 7], "{target:?}, limit {limit}");
        }
        db.drop_tables().await;
    }
}

#[tokio::test]
async fn history_tenants_are_listed_once_in_byte_order() {
    for target in TARGETS {
        let db = open(target).await;
        let store = &db.store;
        // Byte order: '-' < '.' < digits < upper case < '_' < lower case (a linguistic
        // collation would sort these otherwise).
        let listed = ["B", "Z9", "_c", "a", "a-1", "a.b", "z"];
        for tenant in ["z", "a.b", "_c", "a-1", "B", "Z9", "a"] {
            store.append(&scope(tenant, "s1"), &texts(1)).await.unwrap();
        }
        // Several threads of one tenant: listed once.
        for session in ["s2", "s3"] {
            store.append(&scope("a", session), &texts(2)).await.unwrap();
        }
        // A thread whose messages are all archived still holds messages.
        store.archive(&scope("z", "s1"), 1..=1).await.unwrap();
        // Not listed: a tenant whose only thread expired, one whose thread was cleared, one
        // with a session only.
        let expired = scope("expired", "s1");
        store.append(&expired, &texts(1)).await.unwrap();
        HistoryStore::set_ttl(store, &expired, Some(Duration::from_millis(1)))
            .await
            .unwrap();
        let cleared = scope("cleared", "s1");
        store.append(&cleared, &texts(1)).await.unwrap();
        store.clear(&cleared).await.unwrap();
        store
            .save(&scope("sessions-only", "s1"), &serde_json::json!({}), None)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        for limit in [1, 2, 3, 7, 100] {
            let got = tenants_of(limit, |p| HistoryStore::list_tenants(store, p)).await;
            assert_eq!(got, listed, "{target:?}, limit {limit}");
        }
        // Cursors no listing gives select by byte order too, on every database (MySQL cannot
        // compare non-ASCII text with the tenant column, PostgreSQL's text holds no NUL).
        for (cursor, expected) in [
            ("a\u{e9}", &["z"][..]),
            ("a\0", &["a-1", "a.b", "z"][..]),
            ("Z9\u{7f}", &["_c", "a", "a-1", "a.b", "z"][..]),
            ("", &listed[..]),
        ] {
            let page = HistoryStore::list_tenants(store, PageRequest::after(10, cursor))
                .await
                .unwrap();
            let got: Vec<&str> = page.items.iter().map(|t| t.as_str()).collect();
            assert_eq!(got, expected, "{target:?}, cursor {cursor:?}");
        }
        // A cursor past every tenant, or of bytes no tenant has: an empty last page.
        for cursor in ["zz", "\u{e9}t\u{e9}", "\u{7f}"] {
            let page = HistoryStore::list_tenants(store, PageRequest::after(10, cursor))
                .await
                .unwrap();
            assert_eq!(
                (page.items.len(), page.next_cursor),
                (0, None),
                "{target:?}"
            );
        }
        // The expired thread, appended to again, is live: its tenant is listed again.
        store.append(&expired, &texts(1)).await.unwrap();
        let got = tenants_of(100, |p| HistoryStore::list_tenants(store, p)).await;
        assert_eq!(got, ["B", "Z9", "_c", "a", "a-1", "a.b", "expired", "z"]);
        db.drop_tables().await;
    }
}

#[tokio::test]
async fn session_tenants_are_those_with_a_live_session() {
    for target in TARGETS {
        let db = open(target).await;
        let store = &db.store;
        let state = serde_json::json!({"k": 1});
        for (tenant, session) in [("s-b", "x"), ("s-a", "x"), ("s-a", "y"), ("S", "x")] {
            store
                .save(&scope(tenant, session), &state, None)
                .await
                .unwrap();
        }
        // Not listed: a deleted session (its tombstone stays), an expired one, a purged one,
        // and a tenant with a thread only.
        let deleted = scope("s-deleted", "x");
        store.save(&deleted, &state, None).await.unwrap();
        assert!(SessionStore::delete(store, &deleted).await.unwrap());
        for tenant in ["s-expired", "s-purged"] {
            let s = scope(tenant, "x");
            store.save(&s, &state, None).await.unwrap();
            SessionStore::set_ttl(store, &s, Some(Duration::from_millis(1)))
                .await
                .unwrap();
        }
        store
            .append(&scope("h-only", "x"), &texts(1))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Expired but not yet purged: the row still holds its state.
        let before_purge = tenants_of(100, |p| SessionStore::list_tenants(store, p)).await;
        assert_eq!(before_purge, ["S", "s-a", "s-b"], "{target:?}");
        assert_eq!(SessionStore::purge_expired(store).await.unwrap(), 2);
        for limit in [1, 2, 3, 100] {
            let got = tenants_of(limit, |p| SessionStore::list_tenants(store, p)).await;
            assert_eq!(got, ["S", "s-a", "s-b"], "{target:?}, limit {limit}");
        }
        // A re-created session is live again.
        let v = store.save(&deleted, &state, None).await.unwrap();
        assert_eq!(v, 2);
        let got = tenants_of(100, |p| SessionStore::list_tenants(store, p)).await;
        assert_eq!(got, ["S", "s-a", "s-b", "s-deleted"], "{target:?}");
        db.drop_tables().await;
    }
}

/// A cursor no listing gave (any text) selects by byte order on every database, in every
/// listing: MySQL cannot compare non-ASCII text with the key columns, PostgreSQL's text holds
/// no NUL, and neither may turn such a cursor into a database error.
#[tokio::test]
async fn listings_take_cursors_of_any_text() {
    for target in TARGETS {
        let db = open(target).await;
        let store = &db.store;
        let state = serde_json::json!({});
        for session in ["a", "a-1", "b"] {
            let s = scope("t", session);
            store.append(&s, &texts(1)).await.unwrap();
            store.save(&s, &state, None).await.unwrap();
        }
        let filter = memory_core::ScopeFilter::tenant(TenantId::new("t").unwrap());
        let key = |session: &str| scope("t", session).key();
        for (cursor, expected) in [
            (format!("{}\u{e9}", key("a")), &["b"][..]),
            (format!("{}\0", key("a")), &["a-1", "b"][..]),
            ("\u{e9}".to_owned(), &[][..]),
            (String::new(), &["a", "a-1", "b"][..]),
        ] {
            let threads = store
                .list_threads(&filter, PageRequest::after(10, cursor.clone()))
                .await
                .unwrap_or_else(|e| panic!("{target:?}, cursor {cursor:?}: {e}"));
            let sessions =
                SessionStore::list(store, &filter, PageRequest::after(10, cursor.clone()))
                    .await
                    .unwrap_or_else(|e| panic!("{target:?}, cursor {cursor:?}: {e}"));
            for page in [threads, sessions] {
                let got: Vec<&str> = page.items.iter().map(|s| s.session_id().as_str()).collect();
                assert_eq!(got, expected, "{target:?}, cursor {cursor:?}");
                assert_eq!(page.next_cursor, None);
            }
        }
        db.drop_tables().await;
    }
}

/// A forget leaves no row of an expired thread or session behind: listings never show expired
/// data, so the forget purges it first (the rows would otherwise stay until a purge).
#[tokio::test]
async fn a_forget_leaves_no_rows_of_expired_threads_or_sessions() {
    use memory_core::ScopeFilter;
    use memory_core::forget::{ForgetMode, Forgetter};
    use std::sync::Arc;
    for target in [Target::SqliteFile, Target::Postgres, Target::MySql] {
        let db = open(target).await;
        let store = Arc::new(db.store.clone());
        let s = scope("t-expired", "gone").with_user("dana").unwrap();
        store.append(&s, &texts(3)).await.unwrap();
        SessionStore::save(&*store, &s, &serde_json::json!({"name": "Dana"}), None)
            .await
            .unwrap();
        HistoryStore::set_ttl(&*store, &s, Some(Duration::from_millis(1)))
            .await
            .unwrap();
        SessionStore::set_ttl(&*store, &s, Some(Duration::from_millis(1)))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let raw = db.raw.as_ref().unwrap();
        let messages = format!("SELECT COUNT(*) FROM {}messages", db.prefix);
        let states = format!(
            "SELECT COUNT(*) FROM {}sessions WHERE state <> ''",
            db.prefix
        );
        assert_eq!(
            raw.int(&messages).await,
            3,
            "{target:?}: rows kept until a purge"
        );
        let forgetter = Forgetter::new()
            .history(store.clone())
            .sessions(store.clone());
        let filter = ScopeFilter::tenant(TenantId::new("t-expired").unwrap())
            .with_user(memory_core::UserId::new("dana").unwrap());
        forgetter.forget(&filter, ForgetMode::Delete).await.unwrap();
        assert_eq!(raw.int(&messages).await, 0, "{target:?}: message rows");
        assert_eq!(raw.int(&states).await, 0, "{target:?}: session states");
        db.drop_tables().await;
    }
}
