//! `delete_matching` and `count_matching` across a tenant's users, `clear`'s script, and the
//! per-tenant set of users that makes them possible without a `SCAN`.
//!
//! Each tenant has a set of the user parts (`<user>` or `~`) of its users that may hold points
//! ([`keys::vector_users`]). An upsert adds its user *before* writing the points, so a user with
//! points is always in the set (a member without points is harmless: it costs one `SMEMBERS`).
//! `delete_matching` takes a user out of the set once it holds no point, then checks the user's
//! scope set again and puts it back if an upsert wrote points meanwhile; an upsert that finds
//! its user without points adds it again after writing. So whatever the order of the two, a
//! user holding points stays in the set, unless an upsert is cancelled between its script and
//! that second add while a `delete_matching` of the same user runs (the user's next upsert
//! adds it back).

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use memory_core::{Result, Scope, ScopeFilter};
use redis::Value;

use super::RedisVectorStore;
use super::codec::array;
use crate::conn::{text, unsigned};
use crate::error::bad_reply;
use crate::keys::{self, VectorKeys};
use crate::scripts::SCRIPTS;
use crate::store::request_nonce;

/// How many users `delete_matching`, `count_matching` and `search_matching` work on at a
/// time.
pub(super) const USERS_AT_ONCE: usize = 16;
/// How many members one `SSCAN` step of a tenant's user set asks for.
const SSCAN_COUNT: usize = 1000;

/// What the purge script does with the points of the scopes it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purge {
    /// Counts them.
    Count,
    /// Removes them.
    Delete,
}

impl Purge {
    fn arg(self) -> &'static str {
        match self {
            Purge::Count => "count",
            Purge::Delete => "delete",
        }
    }
}

impl RedisVectorStore {
    /// Adds the user of `scope` to its tenant's set of users.
    pub(super) async fn index_user(&self, what: &str, scope: &Scope) -> Result<()> {
        let mut add = redis::cmd("SADD");
        add.arg(keys::vector_users(self.prefix(), scope.tenant().as_str()))
            .arg(keys::user_part(scope));
        self.store.query(what, &add).await?;
        Ok(())
    }

    /// Runs the purge script on `scopes` (all of one user, whose scope set is `user_scopes`):
    /// returns how many points they held and whether the user holds none now.
    pub(super) async fn purge(
        &self,
        what: &str,
        mode: Purge,
        user_scopes: &str,
        ack: &str,
        scopes: &[&Scope],
    ) -> Result<(u64, bool)> {
        let nonce = request_nonce();
        let scope_keys: Vec<String> = scopes.iter().map(|s| s.key()).collect();
        let scope_hashes: Vec<VectorKeys> = scopes
            .iter()
            .map(|s| VectorKeys::new(self.prefix(), s))
            .collect();
        let mut script_keys: Vec<&str> = vec![user_scopes, ack];
        for k in &scope_hashes {
            script_keys.extend([k.vectors.as_str(), k.payloads.as_str(), k.compact.as_str()]);
        }
        let mut args: Vec<&[u8]> = vec![mode.arg().as_bytes(), nonce.as_bytes()];
        args.extend(scope_keys.iter().map(|k| k.as_bytes()));
        let reply = self
            .store
            .eval(what, &SCRIPTS.vector_purge, &script_keys, &args)
            .await?;
        let items = array(what, reply, "the purge script")?;
        match (
            items.first().and_then(unsigned),
            items.get(1).and_then(unsigned),
        ) {
            (Some(n), Some(emptied)) => Ok((n, emptied == 1)),
            _ => Err(bad_reply(what, "not a count and a flag")),
        }
    }

    /// `delete_matching` (`Purge::Delete`) or `count_matching` (`Purge::Count`): the filter's
    /// user, or every user of the tenant's set, several at a time.
    pub(super) async fn purge_matching(&self, filter: &ScopeFilter, mode: Purge) -> Result<u64> {
        let what = match mode {
            Purge::Count => format!("count the points matching {filter}"),
            Purge::Delete => format!("delete the points matching {filter}"),
        };
        let users = self.users_of(&what, filter).await?;
        futures::stream::iter(users)
            .map(|user| {
                let what = &what;
                async move { self.purge_user(what, filter, &user, mode).await }
            })
            .buffer_unordered(USERS_AT_ONCE)
            .try_fold(0u64, |sum, n| async move {
                Ok::<u64, memory_core::Error>(sum.saturating_add(n))
            })
            .await
    }

    /// The user parts a filter selects: its user, or every user in the tenant's set.
    pub(super) async fn users_of(&self, what: &str, filter: &ScopeFilter) -> Result<Vec<String>> {
        match &filter.user {
            Some(user) => Ok(vec![user.as_str().to_owned()]),
            None => self.tenant_users(what, filter.tenant.as_str()).await,
        }
    }

    /// The scopes of `user` holding points that `filter` selects, and whether the user has
    /// none at all (`SMEMBERS` of the user's scope set). Only scopes whose keys are in this
    /// user's slot count (a member written by another program could name another user's).
    pub(super) async fn selected_scopes(
        &self,
        what: &str,
        filter: &ScopeFilter,
        user: &str,
    ) -> Result<(Vec<Scope>, bool)> {
        let user_scopes = keys::vector_scopes(self.prefix(), filter.tenant.as_str(), user);
        let mut members = redis::cmd("SMEMBERS");
        members.arg(&user_scopes);
        let members = array(what, self.store.query(what, &members).await?, "SMEMBERS")?;
        let selected = members
            .iter()
            .filter_map(text)
            .filter_map(|key| keys::scope_from_key(&key))
            .filter(|scope| {
                filter.matches(scope) && VectorKeys::new(self.prefix(), scope).scopes == user_scopes
            })
            .collect();
        Ok((selected, members.is_empty()))
    }

    /// The user parts in the tenant's set (`SSCAN`, so no step holds the server long).
    async fn tenant_users(&self, what: &str, tenant: &str) -> Result<Vec<String>> {
        let set = keys::vector_users(self.prefix(), tenant);
        let mut users = BTreeSet::new();
        let mut cursor = "0".to_owned();
        loop {
            let mut scan = redis::cmd("SSCAN");
            scan.arg(&set).arg(&cursor).arg("COUNT").arg(SSCAN_COUNT);
            let mut parts = array(what, self.store.query(what, &scan).await?, "SSCAN")?;
            let (Some(Value::Array(members)), Some(next)) = (parts.pop(), parts.pop()) else {
                return Err(bad_reply(what, "SSCAN did not return [cursor, members]"));
            };
            users.extend(members.iter().filter_map(text));
            match text(&next) {
                Some(next) if next == "0" => return Ok(users.into_iter().collect()),
                Some(next) => cursor = next,
                None => return Err(bad_reply(what, "SSCAN returned no cursor")),
            }
        }
    }

    /// Counts or removes the points of the user's scopes that `filter` selects; a delete that
    /// leaves the user without points takes it out of the tenant's set.
    async fn purge_user(
        &self,
        what: &str,
        filter: &ScopeFilter,
        user: &str,
        mode: Purge,
    ) -> Result<u64> {
        let tenant = filter.tenant.as_str();
        let user_scopes = keys::vector_scopes(self.prefix(), tenant, user);
        let (selected, no_scopes) = self.selected_scopes(what, filter, user).await?;
        let (n, emptied) = if selected.is_empty() {
            (0, no_scopes)
        } else {
            let ack = keys::vector_user_ack(self.prefix(), tenant, user);
            let selected: Vec<&Scope> = selected.iter().collect();
            self.purge(what, mode, &user_scopes, &ack, &selected)
                .await?
        };
        if mode == Purge::Delete && emptied {
            self.unindex_user(what, tenant, user, &user_scopes).await?;
        }
        Ok(n)
    }

    /// Takes `user` out of the tenant's set, then puts it back if its scope set exists again
    /// (an upsert wrote points meanwhile): see the module docs.
    async fn unindex_user(
        &self,
        what: &str,
        tenant: &str,
        user: &str,
        user_scopes: &str,
    ) -> Result<()> {
        let set = keys::vector_users(self.prefix(), tenant);
        let mut rem = redis::cmd("SREM");
        rem.arg(&set).arg(user);
        self.store.query(what, &rem).await?;
        let mut exists = redis::cmd("EXISTS");
        exists.arg(user_scopes);
        if unsigned(&self.store.query(what, &exists).await?).unwrap_or(0) > 0 {
            let mut add = redis::cmd("SADD");
            add.arg(&set).arg(user);
            self.store.query(what, &add).await?;
        }
        Ok(())
    }
}
