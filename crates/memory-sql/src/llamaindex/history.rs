//! The [`HistoryStore`] contract over LlamaIndex's table.

use std::ops::RangeInclusive;

use async_trait::async_trait;
use memory_core::scope::{DEFAULT_SOURCE, DEFAULT_TENANT};
use memory_core::{
    AppendOutcome, ChatMessage, Error, HistoryCapabilities, HistoryStore, Page, PageRequest,
    Result, Scope, ScopeFilter, StoredMessage, TenantId, ThreadCount, Window,
};

use super::config::{KeyMapping, parse_scope_key};
use super::store::LlamaIndexHistoryStore;
use crate::rows::to_i64;

#[async_trait]
impl HistoryStore for LlamaIndexHistoryStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_multi_process(!self.inner.private_memory)
            .with_dedupes_ids(true)
            // Under `SessionIdOnly`, a thread written through a scope other than
            // `Scope::session`'s is not listed under that scope's tenant.
            .with_lists_every_thread(self.inner.key_mapping == KeyMapping::Strict)
            // No epochs in a table Python writes too (see the type's docs).
            .with_cursor_reads(false)
            .with_paged_reads(true)
            // Only under `Strict` does every key name its tenant (the default one); see the
            // type's docs.
            .with_lists_tenants(self.inner.key_mapping == KeyMapping::Strict)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let key = self.key_for(scope)?;
        if messages.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let (batch, positions) = self.prepare(messages)?;
        let (unique_seqs, inserted) = self
            .bounded(
                "append",
                "append to a LlamaIndex session",
                self.append_tx(&key, &batch),
            )
            .await?;
        let seqs = positions
            .iter()
            .map(|&i| unique_seqs.get(i).copied().unwrap_or_default())
            .collect();
        Ok(AppendOutcome { seqs, inserted })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        self.bounded(
            "read",
            "read a LlamaIndex session",
            self.read_rows(&key, window),
        )
        .await
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let key = self.key_for(scope)?;
        self.bounded("count", "count a LlamaIndex session", self.count_tx(&key))
            .await
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        let key = self.key_for(scope)?;
        let first = to_i64((*seqs.start()).max(1));
        let last = to_i64(*seqs.end());
        if first > last {
            return Ok(0);
        }
        self.bounded(
            "archive",
            "archive messages of a LlamaIndex session",
            self.archive_tx(&key, first, last),
        )
        .await
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        let key = self.key_for(scope)?;
        self.bounded("clear", "clear a LlamaIndex session", self.clear_tx(&key))
            .await
    }

    async fn read_page(
        &self,
        scope: &Scope,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let key = self.key_for(scope)?;
        self.bounded(
            "read_page",
            "read a page of a LlamaIndex session",
            self.read_page_rows(&key, after, limit),
        )
        .await
    }

    async fn list_tenants(&self, page: PageRequest) -> Result<Page<TenantId>> {
        if self.inner.key_mapping != KeyMapping::Strict {
            return Err(Error::unsupported(
                "the LlamaIndex store lists tenants only with KeyMapping::Strict: under \
                 SessionIdOnly a key does not say which tenant wrote it, and under ScopeKey \
                 the tenants could only be found by reading every key of the table",
            ));
        }
        // Every thread is a `Scope::session` one: the default tenant holds them all, and it
        // holds one when the table has a key that is a session id.
        let done = Page {
            items: Vec::new(),
            next_cursor: None,
        };
        if page.cursor.as_deref().is_some_and(|c| c >= DEFAULT_TENANT) {
            return Ok(done);
        }
        let any = self
            .bounded(
                "list_tenants",
                "list the tenants of LlamaIndex sessions",
                self.list_keys(PageRequest::first(1), None, |key| Scope::session(key).ok()),
            )
            .await?;
        if any.items.is_empty() {
            return Ok(done);
        }
        Ok(Page {
            items: vec![TenantId::new(DEFAULT_TENANT)?],
            next_cursor: None,
        })
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        if self.inner.key_mapping == KeyMapping::ScopeKey {
            let prefix = format!("{}|", filter.tenant);
            let scope_of = |key: &str| parse_scope_key(key).filter(|s| filter.matches(s));
            return self
                .bounded(
                    "list_threads",
                    "list LlamaIndex sessions",
                    self.list_keys(page, Some(&prefix), scope_of),
                )
                .await;
        }
        // Listed scopes are those of `Scope::session`: the default tenant and source.
        let listed = filter.tenant.as_str() == DEFAULT_TENANT
            && filter.user.is_none()
            && filter.agent.is_none()
            && filter
                .source
                .as_ref()
                .is_none_or(|s| s.as_str() == DEFAULT_SOURCE);
        if !listed {
            return Ok(Page {
                items: Vec::new(),
                next_cursor: None,
            });
        }
        let scope_of = |key: &str| Scope::session(key).ok().filter(|s| filter.matches(s));
        self.bounded(
            "list_threads",
            "list LlamaIndex sessions",
            self.list_keys(page, None, scope_of),
        )
        .await
    }
}
