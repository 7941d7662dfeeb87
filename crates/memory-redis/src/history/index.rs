//! The thread indexes: per tenant, a sorted set of the tenant's scope keys (`list_threads` in
//! `O(page)`); and one expiry index of the threads with a TTL, scored by when they may have
//! expired (`purge_expired` looks only at those due).

use std::collections::BTreeSet;

use memory_core::{Page, PageRequest, Result, Scope, ScopeFilter};
use redis::Value;

use crate::conn::integer;
use crate::error::bad_reply;
use crate::keys::{self, Listed, ThreadKeys};
use crate::store::RedisStore;

/// How many index members a `list_threads` page looks at, at most, per item it may return
/// (plus [`LIST_EXAMINED_BASE`]): a page that meets only stale members (threads cleared or
/// expired since they were indexed, each removed as it is met) ends short, with a cursor.
const LIST_EXAMINED_PER_ITEM: usize = 10;
/// See [`LIST_EXAMINED_PER_ITEM`].
const LIST_EXAMINED_BASE: usize = 1_000;
/// How many due threads `purge_expired` takes from the expiry index at a time.
const PURGE_INDEX_BATCH: usize = 500;
/// How many scope keys one `ZADD` of the one-time index scan carries.
const INDEX_CHUNK: usize = 500;

/// Unix time in milliseconds (0 before 1970).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl RedisStore {
    /// Adds the thread of `scope` to the expiry index, due now: the next `purge_expired` reads
    /// its real deadline (`PTTL`) and scores it with that.
    pub(super) async fn index_expiring(&self, scope: &Scope) -> Result<()> {
        let mut add = redis::cmd("ZADD");
        add.arg(keys::expiry_index(self.prefix()))
            .arg(now_ms())
            .arg(scope.key());
        self.query(&format!("add thread {scope} to the expiry index"), &add)
            .await?;
        Ok(())
    }

    /// Makes sure the expiry index holds every expiry record written before it existed: a purge
    /// that finds no completion mark scans the records (`SCAN`, on every master), adds them
    /// due now, and sets the mark for 24 hours.
    async fn ensure_expiry_index(&self) -> Result<String> {
        let index = keys::expiry_index(self.prefix());
        let complete = keys::expiry_index_complete(self.prefix());
        let what = "check the expiry index";
        let mut exists = redis::cmd("EXISTS");
        exists.arg(&complete);
        if integer(&self.query(what, &exists).await?).unwrap_or(0) > 0 {
            return Ok(index);
        }
        let what = "build the expiry index";
        let pattern = keys::scan_all_pattern(self.prefix(), Listed::ThreadExpiries);
        let found: BTreeSet<String> = self
            .scan_keys(what, &pattern)
            .await?
            .iter()
            .filter_map(|key| keys::scope_of(self.prefix(), key, Listed::ThreadExpiries))
            .map(|scope| scope.key())
            .collect();
        let found: Vec<String> = found.into_iter().collect();
        let now = now_ms();
        for chunk in found.chunks(INDEX_CHUNK) {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in chunk {
                add.arg(now).arg(key);
            }
            self.query(what, &add).await?;
        }
        // The mark lapses with the expiry records' grace: at most once a day, a purge scans
        // again and catches records an older writer or a failed `ZADD` left out.
        let mut mark = redis::cmd("SET");
        mark.arg(&complete)
            .arg(1)
            .arg("PX")
            .arg(crate::store::EXPIRY_RECORD_GRACE.as_millis().to_string());
        self.query(what, &mark).await?;
        tracing::info!(records = found.len(), "history.expiry_index_built");
        Ok(index)
    }

    /// `purge_expired` from the expiry index: only the threads due (scored at or before now)
    /// are looked at, in batches. A thread still alive is scored again with its deadline
    /// (`PTTL`), or leaves the index when it has no TTL any more; the expiry record of a thread
    /// that is gone is deleted by the purge script (which checks again), the thread leaves both
    /// indexes, and each deleted record counts one.
    pub(super) async fn purge_indexed(&self) -> Result<u64> {
        let index = self.ensure_expiry_index().await?;
        let what = "purge expired threads";
        let mut purged = 0u64;
        loop {
            let now = now_ms();
            let mut due = redis::cmd("ZRANGEBYSCORE");
            due.arg(&index)
                .arg("-inf")
                .arg(now)
                .arg("LIMIT")
                .arg(0)
                .arg(PURGE_INDEX_BATCH);
            let Value::Array(members) = self.query(what, &due).await? else {
                return Err(bad_reply(what, "ZRANGEBYSCORE did not return an array"));
            };
            let members: Vec<String> = members.iter().filter_map(crate::conn::text).collect();
            if members.is_empty() {
                return Ok(purged);
            }
            let mut drop: Vec<String> = Vec::new();
            let mut rescore: Vec<(u64, String)> = Vec::new();
            let mut scopes = Vec::new();
            for member in &members {
                match keys::scope_from_key(member) {
                    Some(scope) => scopes.push(scope),
                    None => drop.push(member.clone()),
                }
            }
            let metas: Vec<String> = scopes
                .iter()
                .map(|s| ThreadKeys::new(self.prefix(), s).meta)
                .collect();
            let ttls = self.each(what, "PTTL", &metas).await?;
            let mut gone = Vec::new();
            for (scope, ttl) in scopes.into_iter().zip(ttls) {
                match integer(&ttl) {
                    Some(ms) if ms > 0 => {
                        rescore.push((now.saturating_add(ms.unsigned_abs()), scope.key()));
                    }
                    // Alive without a TTL: no longer expiring.
                    Some(-1) => drop.push(scope.key()),
                    _ => gone.push(scope),
                }
            }
            purged = purged.saturating_add(self.purge_gone(what, &gone).await?);
            drop.extend(gone.iter().map(Scope::key));
            if !rescore.is_empty() {
                let mut add = redis::cmd("ZADD");
                add.arg(&index);
                for (score, key) in &rescore {
                    add.arg(*score).arg(key);
                }
                self.query(what, &add).await?;
            }
            if !drop.is_empty() {
                let mut rem = redis::cmd("ZREM");
                rem.arg(&index).arg(&drop);
                self.query(what, &rem).await?;
            }
            let mut by_tenant: std::collections::BTreeMap<String, Vec<Scope>> = Default::default();
            for scope in gone {
                by_tenant
                    .entry(scope.tenant().as_str().to_owned())
                    .or_default()
                    .push(scope);
            }
            for (tenant, scopes) in by_tenant {
                self.unindex_threads(&tenant, &scopes).await?;
            }
            if members.len() < PURGE_INDEX_BATCH {
                return Ok(purged);
            }
        }
    }

    /// Runs the purge script (delete the expiry record if the thread is gone) for each scope:
    /// one pipeline on a single server, concurrent calls on a cluster. Returns how many
    /// records it deleted.
    async fn purge_gone(&self, what: &str, gone: &[Scope]) -> Result<u64> {
        if gone.is_empty() {
            return Ok(0);
        }
        let script = &crate::scripts::SCRIPTS.purge;
        let keys: Vec<ThreadKeys> = gone
            .iter()
            .map(|s| ThreadKeys::new(self.prefix(), s))
            .collect();
        let replies: Vec<Value> =
            if self.is_cluster() {
                futures::future::try_join_all(keys.iter().map(|k| async move {
                    self.eval(what, script, &[&k.meta, &k.expiry], &[]).await
                }))
                .await?
            } else {
                // Loaded first, so the EVALSHAs after it find the script on a restarted server.
                let mut pipe = redis::pipe();
                pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
                for k in &keys {
                    pipe.cmd("EVALSHA")
                        .arg(&script.sha1)
                        .arg(2)
                        .arg(&k.meta)
                        .arg(&k.expiry);
                }
                self.send_pipeline(what, &pipe)
                    .await?
                    .into_iter()
                    .skip(1)
                    .collect()
            };
        let mut purged = 0u64;
        for reply in replies {
            if crate::conn::pipeline_integer(what, reply)? > 0 {
                purged = purged.saturating_add(1);
            }
        }
        Ok(purged)
    }

    /// Adds the thread of `scope` to its tenant's index, then clears the thread's `unindexed`
    /// mark (an `HDEL` on a thread cleared meanwhile changes nothing).
    pub(super) async fn index_thread(&self, scope: &Scope, meta: &str) -> Result<()> {
        let index = keys::thread_index(self.prefix(), scope.tenant().as_str());
        let what = format!("index thread {scope}");
        let mut add = redis::cmd("ZADD");
        add.arg(&index).arg(0).arg(scope.key());
        self.query(&what, &add).await?;
        let mut done = redis::cmd("HDEL");
        done.arg(meta).arg("unindexed");
        self.query(&what, &done).await?;
        Ok(())
    }

    /// Removes `scopes` (of one tenant) from the tenant's index, then adds back those whose
    /// thread exists again. An append that creates a thread adds it after creating it, so
    /// whatever the order of the two, a thread that exists stays indexed: either this check
    /// sees it, or its append's `ZADD` comes after this `ZREM`.
    pub(super) async fn unindex_threads(&self, tenant: &str, scopes: &[Scope]) -> Result<()> {
        if scopes.is_empty() {
            return Ok(());
        }
        let index = keys::thread_index(self.prefix(), tenant);
        let what = format!(
            "remove {} threads from the index of tenant {tenant}",
            scopes.len()
        );
        let mut rem = redis::cmd("ZREM");
        rem.arg(&index);
        for scope in scopes {
            rem.arg(scope.key());
        }
        self.query(&what, &rem).await?;
        let metas: Vec<String> = scopes
            .iter()
            .map(|s| ThreadKeys::new(self.prefix(), s).meta)
            .collect();
        let alive = self.exist(&what, &metas).await?;
        let back: Vec<String> = scopes
            .iter()
            .zip(alive)
            .filter(|(_, alive)| *alive)
            .map(|(s, _)| s.key())
            .collect();
        if !back.is_empty() {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in &back {
                add.arg(0).arg(key);
            }
            self.query(&what, &add).await?;
        }
        Ok(())
    }

    /// Makes sure the tenant's index holds every thread written before the index existed: the
    /// first listing of a tenant scans its thread keys once (`SCAN`, on every master) and adds
    /// them, then marks the index complete ([`keys::INDEX_COMPLETE`]).
    async fn ensure_index(&self, tenant: &str) -> Result<String> {
        let index = keys::thread_index(self.prefix(), tenant);
        let what = format!("check the thread index of tenant {tenant}");
        let mut score = redis::cmd("ZSCORE");
        score.arg(&index).arg(keys::INDEX_COMPLETE);
        if !matches!(self.query(&what, &score).await?, Value::Nil) {
            return Ok(index);
        }
        let what = format!("build the thread index of tenant {tenant}");
        let filter = ScopeFilter::tenant(
            memory_core::TenantId::new(tenant)
                .map_err(|e| bad_reply(&what, format!("the tenant is not valid: {e}")))?,
        );
        let pattern = keys::scan_pattern(self.prefix(), &filter, Listed::Threads);
        let found = self.scan_keys(&what, &pattern).await?;
        let scope_keys: BTreeSet<String> = found
            .iter()
            .filter_map(|key| keys::scope_of(self.prefix(), key, Listed::Threads))
            .map(|scope| scope.key())
            .collect();
        let scope_keys: Vec<String> = scope_keys.into_iter().collect();
        for chunk in scope_keys.chunks(INDEX_CHUNK) {
            let mut add = redis::cmd("ZADD");
            add.arg(&index);
            for key in chunk {
                add.arg(0).arg(key);
            }
            self.query(&what, &add).await?;
        }
        let mut mark = redis::cmd("ZADD");
        mark.arg(&index).arg(0).arg(keys::INDEX_COMPLETE);
        self.query(&what, &mark).await?;
        tracing::info!(tenant, threads = scope_keys.len(), "history.index_built");
        Ok(index)
    }

    /// A page of `list_threads` from the tenant's index: `O(page)` work, not `O(keyspace)`.
    /// Members whose thread no longer exists (cleared, expired) are removed as they are met.
    pub(super) async fn list_indexed_threads(
        &self,
        filter: &ScopeFilter,
        page: &PageRequest,
    ) -> Result<Page<Scope>> {
        let tenant = filter.tenant.as_str();
        let index = self.ensure_index(tenant).await?;
        let what = format!("list the threads of tenant {tenant}");
        let limit = page.limit.max(1);
        let budget = limit
            .saturating_mul(LIST_EXAMINED_PER_ITEM)
            .saturating_add(LIST_EXAMINED_BASE);
        let (mut min, max) = keys::index_range(filter, page.cursor.as_deref());
        let mut live: Vec<Scope> = Vec::new();
        let mut examined = 0usize;
        let fetch = limit.saturating_add(1).min(LIST_EXAMINED_BASE);
        loop {
            let mut range = redis::cmd("ZRANGEBYLEX");
            range
                .arg(&index)
                .arg(&min)
                .arg(&max)
                .arg("LIMIT")
                .arg(0)
                .arg(fetch);
            let Value::Array(members) = self.query(&what, &range).await? else {
                return Err(bad_reply(&what, "ZRANGEBYLEX did not return an array"));
            };
            let members: Vec<String> = members.iter().filter_map(crate::conn::text).collect();
            let Some(last) = members.last().cloned() else {
                return Ok(Page {
                    items: live,
                    next_cursor: None,
                });
            };
            let candidates: Vec<Scope> = members
                .iter()
                .filter_map(|m| keys::scope_from_key(m))
                .filter(|s| filter.matches(s))
                .collect();
            let metas: Vec<String> = candidates
                .iter()
                .map(|s| ThreadKeys::new(self.prefix(), s).meta)
                .collect();
            let alive = self.exist(&what, &metas).await?;
            let mut stale = Vec::new();
            for (scope, alive) in candidates.into_iter().zip(alive) {
                if !alive {
                    stale.push(scope);
                } else if live.len() < limit {
                    live.push(scope);
                } else {
                    // One more than a page: the page ends at its last item, with a cursor.
                    self.unindex_threads(tenant, &stale).await?;
                    let next_cursor = live.last().map(Scope::key);
                    return Ok(Page {
                        items: live,
                        next_cursor,
                    });
                }
            }
            self.unindex_threads(tenant, &stale).await?;
            examined = examined.saturating_add(members.len());
            let exhausted = members.len() < fetch;
            min = format!("({last}");
            if exhausted {
                return Ok(Page {
                    items: live,
                    next_cursor: None,
                });
            }
            if examined >= budget {
                // Mostly stale members: end the page short; the next one goes on after them.
                return Ok(Page {
                    items: live,
                    next_cursor: Some(last),
                });
            }
        }
    }
}
