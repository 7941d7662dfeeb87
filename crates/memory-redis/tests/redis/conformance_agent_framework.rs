//! The memory-testkit history suite against `AfRedisHistory` (Agent Framework's Redis list
//! layout), on the machine's Redis (or `AGENT_MEMORY_REDIS_URL`) and on the Redis Cluster that
//! the test tooling starts. Lists are written under a key prefix of this process with a TTL.
//!
//! Agent Framework's provider is configured for one tenant, agent and source, and an
//! `AfRedisHistory` serves one scope template (it refuses other scopes). The suite writes every
//! check under a random tenant, so it runs against [`PerTemplate`]: what an application serving
//! many tenants does, one `AfRedisHistory` per (tenant, user, agent, source), all on one
//! `RedisStore`'s connection (`RedisStore::agent_framework`). Each call goes to the store of its
//! scope unchanged; only `list_threads` merges the listings of the stores its filter selects.
//!
//! The whole suite runs on each deployment, selected by `AfRedisHistory`'s capabilities: no
//! `archive`, and three guarantees off by design of the layout and of Agent Framework's rules
//! (each documented on `AfRedisHistory`), whose checks assert the weaker behaviour the trait
//! promises instead: `dedupes_ids` (Agent Framework deduplicates against the list's tail only,
//! and stores a repeated id again, as Python does: a retry of the tail stores nothing, and every
//! append reports truly what it stored), `counts_purged` (the layout keeps no expiry record:
//! `purge_expired` returns 0, and expired lists are gone all the same) and `lists_every_thread`
//! (a session id whose key segment is over 180 characters becomes a digest and cannot be
//! listed; no other scope is listed in its place).

// Test code: a failed unwrap or panic is how a test reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::{
    AppendOutcome, ChatMessage, HistoryCapabilities, HistoryStore, Page, PageRequest, Result,
    Scope, ScopeFilter, StoredMessage, ThreadCount, Window,
};
use memory_redis::{AfKeyFormat, AfRedisHistory, RedisStore};

use crate::support;

/// One `AfRedisHistory` per scope template, created on first use.
#[derive(Debug)]
struct PerTemplate {
    store: RedisStore,
    histories: Mutex<BTreeMap<String, AfRedisHistory>>,
    /// What every `AfRedisHistory` can do (the capabilities of one of them).
    capabilities: HistoryCapabilities,
}

impl PerTemplate {
    async fn new(store: RedisStore) -> Self {
        let mut per_template = Self {
            store,
            histories: Mutex::new(BTreeMap::new()),
            capabilities: HistoryCapabilities::none(),
        };
        let any = per_template
            .history(&Scope::session("any").unwrap())
            .await
            .unwrap();
        per_template.capabilities = any.capabilities();
        per_template
    }

    /// The template of `scope` (all of it but the session), as a map key.
    fn template_key(scope: &Scope) -> String {
        format!(
            "{}|{}|{}|{}",
            scope.tenant(),
            scope.user().map_or("", |u| u.as_str()),
            scope.agent().map_or("", |a| a.as_str()),
            scope.source()
        )
    }

    /// The history serving `scope`: the provider configuration of its tenant, agent and source
    /// (the user, which Agent Framework's key lacks, goes into the application id).
    async fn history(&self, scope: &Scope) -> Result<AfRedisHistory> {
        let key = Self::template_key(scope);
        if let Some(history) = self.histories.lock().unwrap().get(&key) {
            return Ok(history.clone());
        }
        let application = match scope.user() {
            Some(user) => format!("conformance-user-{user}"),
            None => "conformance".to_owned(),
        };
        let mut format = AfKeyFormat::scoped(application)
            .with_key_prefix(format!("{}-af", support::prefix()))
            .with_tenant(scope.tenant().as_str())
            .with_source(scope.source().as_str());
        if let Some(agent) = scope.agent() {
            format = format.with_agent(agent.as_str());
        }
        let history = self
            .store
            .agent_framework(format)
            .scope_template(scope)
            .default_ttl(support::TEST_DATA_TTL)
            .connect()
            .await?;
        Ok(self
            .histories
            .lock()
            .unwrap()
            .entry(key)
            .or_insert(history)
            .clone())
    }
}

#[async_trait]
impl HistoryStore for PerTemplate {
    fn capabilities(&self) -> HistoryCapabilities {
        self.capabilities
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        self.history(scope).await?.append(scope, messages).await
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        self.history(scope).await?.read(scope, window).await
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        self.history(scope).await?.count(scope).await
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.history(scope).await?.archive(scope, seqs).await
    }

    async fn read_since(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<memory_core::ThreadCursor>,
    ) -> Result<memory_core::CursorRead> {
        self.history(scope)
            .await?
            .read_since(scope, window, since)
            .await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.history(scope).await?.clear(scope).await
    }

    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        self.history(scope)
            .await?
            .read_page(scope, after, limit)
            .await
    }

    /// Every page of each history whose template `filter` selects, merged in scope-key order.
    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        let histories: Vec<AfRedisHistory> =
            self.histories.lock().unwrap().values().cloned().collect();
        let mut all = BTreeMap::new();
        for history in histories {
            let mut request = PageRequest::first(100);
            loop {
                let listed = history.list_threads(filter, request).await?;
                all.extend(listed.items.into_iter().map(|s| (s.key(), s)));
                match listed.next_cursor {
                    Some(cursor) => request = PageRequest::after(100, cursor),
                    None => break,
                }
            }
        }
        let limit = page.limit.max(1);
        let mut after: Vec<(String, Scope)> = all
            .into_iter()
            .filter(|(key, _)| page.cursor.as_ref().is_none_or(|c| key > c))
            .collect();
        let more = after.len() > limit;
        after.truncate(limit);
        Ok(Page {
            next_cursor: if more {
                after.last().map(|(k, _)| k.clone())
            } else {
                None
            },
            items: after.into_iter().map(|(_, s)| s).collect(),
        })
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        self.history(scope).await?.set_ttl(scope, ttl).await
    }

    async fn purge_expired(&self) -> Result<u64> {
        let histories: Vec<AfRedisHistory> =
            self.histories.lock().unwrap().values().cloned().collect();
        let mut purged = 0;
        for history in histories {
            purged += history.purge_expired().await?;
        }
        Ok(purged)
    }
}

memory_testkit::history_store_tests!(mod af_redis_history_on_redis, async {
    PerTemplate::new(support::standalone_store().await).await
});
memory_testkit::history_store_tests!(mod af_redis_history_on_redis_cluster, async {
    PerTemplate::new(support::cluster_store().await).await
});

/// Overwrites elements of Agent Framework lists (position `seq` is list index `seq - 1`).
#[derive(Debug)]
struct AfRaw {
    histories: std::sync::Arc<PerTemplate>,
    conn: support::RawConn,
}

#[async_trait]
impl memory_testkit::hostile::RawWriter for AfRaw {
    async fn overwrite(&self, scope: &Scope, seq: u64, body: &[u8]) -> Result<bool> {
        let key = self.histories.history(scope).await?.key_for(scope)?;
        let mut cmd = redis::cmd("LSET");
        cmd.arg(&key).arg(seq - 1).arg(body);
        self.conn
            .run(&cmd)
            .await
            .unwrap_or_else(|e| panic!("LSET {key}: {e}"));
        Ok(true)
    }
}

memory_testkit::hostile_input_tests!(
    mod af_redis_history_on_redis_hostile,
    history: async { PerTemplate::new(support::standalone_store().await).await },
    raw: async {
        let histories =
            std::sync::Arc::new(PerTemplate::new(support::standalone_store().await).await);
        let conn = support::RawConn::standalone().await;
        (histories.clone(), AfRaw { histories, conn })
    },
);
memory_testkit::hostile_input_tests!(
    mod af_redis_history_on_redis_cluster_hostile,
    history: async { PerTemplate::new(support::cluster_store().await).await },
    raw: async {
        let histories =
            std::sync::Arc::new(PerTemplate::new(support::cluster_store().await).await);
        let conn = support::RawConn::cluster().await;
        (histories.clone(), AfRaw { histories, conn })
    },
);
