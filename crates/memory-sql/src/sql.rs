//! The fixed SQL text of the history and session stores, rendered once per dialect and
//! prefix when a store opens.

use std::sync::Arc;

use memory_core::MAX_TTL;

use crate::dialect::Dialect;
use crate::prefix::TablePrefix;
use crate::rows::to_i64;

/// Expired threads removed per purge transaction.
pub(crate) const PURGE_BATCH: usize = 256;

/// The fixed statements of the history store, rendered for one dialect and prefix at open.
pub(crate) struct HistorySql {
    dialect: Dialect,
    prefix: TablePrefix,
    pub(crate) upsert_thread: Arc<str>,
    pub(crate) lock_thread: Arc<str>,
    pub(crate) insert_thread: Arc<str>,
    pub(crate) update_thread: Arc<str>,
    pub(crate) delete_messages: Arc<str>,
    pub(crate) delete_thread: Arc<str>,
    pub(crate) read_last: Arc<str>,
    pub(crate) read_all: Arc<str>,
    pub(crate) read_after: Arc<str>,
    pub(crate) read_everything: Arc<str>,
    pub(crate) read_budget: Arc<str>,
    /// PostgreSQL: the known ids of a batch, given as one array.
    pub(crate) known_ids_pg: Arc<str>,
    /// PostgreSQL: a batch inserted from one array per column.
    pub(crate) insert_messages_pg: Arc<str>,
    pub(crate) count: Arc<str>,
    pub(crate) lock_live: Arc<str>,
    pub(crate) archive_counters: Arc<str>,
    pub(crate) archive_messages: Arc<str>,
    pub(crate) set_ttl: Arc<str>,
    pub(crate) purge_select: Arc<str>,
}

/// `EXISTS` clause: the thread (`?` = key) is live now (by the database's clock).
const LIVE: &str = "EXISTS (SELECT 1 FROM {prefix}threads t WHERE t.thread_key = ? \
                    AND (t.expires_at IS NULL OR t.expires_at > {now}))";

/// Scalar subquery: the thread's (`?` = key) first active sequence number if it is live now
/// (by the database's clock), else `NULL`. `seq >= ACTIVE_FROM` both checks that the thread is live (as
/// [`LIVE`] does) and lets an active-window read scan the primary key `(thread_key, seq)`
/// from the first active message on, past the archived prefix and the index entries archiving
/// left behind.
pub(crate) const ACTIVE_FROM: &str = "(SELECT t.first_active FROM {prefix}threads t \
                           WHERE t.thread_key = ? AND (t.expires_at IS NULL OR t.expires_at > {now}))";

/// The last column of a locked thread row: its expiry if the thread expired (by the database's
/// clock), else `NULL` (of the column's own type on every database).
const EXPIRED: &str = "CASE WHEN expires_at <= {now} THEN expires_at END";

impl HistorySql {
    pub(crate) fn new(dialect: Dialect, prefix: &TablePrefix) -> Self {
        let r = |t: &str| -> Arc<str> { dialect.render(prefix, t).into() };
        let for_update = dialect.for_update();
        let select_msgs = "SELECT seq, tokens, archived, body FROM {prefix}messages";
        Self {
            dialect,
            prefix: prefix.clone(),
            upsert_thread: r(&format!(
                "INSERT INTO {{prefix}}threads \
                 (thread_key, tenant, user_id, agent_id, source, session_id, ttl_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (thread_key) DO UPDATE SET thread_key = excluded.thread_key \
                 RETURNING last_seq, active_count, active_tokens, ttl_ms, {EXPIRED}"
            )),
            lock_thread: r(&format!(
                "SELECT last_seq, active_count, active_tokens, ttl_ms, {EXPIRED} \
                 FROM {{prefix}}threads WHERE thread_key = ?{for_update}"
            )),
            insert_thread: r("INSERT INTO {prefix}threads \
                 (thread_key, tenant, user_id, agent_id, source, session_id, ttl_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"),
            // epoch: the `COALESCE(?, epoch)` sets a fresh epoch when the append restarts an
            // expired thread (`NULL` otherwise: appends keep the epoch).
            update_thread: r(
                "UPDATE {prefix}threads SET last_seq = ?, active_count = ?, \
                 active_tokens = ?, ttl_ms = ?, expires_at = {now} + ?, \
                 first_active = COALESCE(?, first_active), epoch = COALESCE(?, epoch) \
                 WHERE thread_key = ?",
            ),
            delete_messages: r("DELETE FROM {prefix}messages WHERE thread_key = ?"),
            delete_thread: r("DELETE FROM {prefix}threads WHERE thread_key = ?"),
            read_last: r(&format!(
                "SELECT seq, tokens, archived, body FROM (\
                   {select_msgs} WHERE thread_key = ? AND archived = 0 \
                   AND seq >= {ACTIVE_FROM} \
                   ORDER BY seq DESC LIMIT ?\
                 ) newest ORDER BY seq"
            )),
            read_all: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND archived = 0 \
                 AND seq >= {ACTIVE_FROM} ORDER BY seq"
            )),
            read_after: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND archived = 0 AND seq > ? \
                 AND seq >= {ACTIVE_FROM} \
                 ORDER BY seq"
            )),
            read_everything: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND {LIVE} ORDER BY seq"
            )),
            // One page of a budgeted read: the newest `LIMIT` active messages before the
            // cursor, of which only the run whose token total stays within the budget is sent.
            // The page is summed from sequence numbers and token counts alone; bodies are read
            // for the messages sent only.
            read_budget: r(&format!(
                "SELECT m.seq, m.tokens, m.archived, m.body FROM (\
                   SELECT seq, SUM(tokens) OVER (ORDER BY seq DESC \
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running \
                   FROM (SELECT seq, tokens FROM {{prefix}}messages \
                     WHERE thread_key = ? AND archived = 0 AND seq < ? \
                     AND seq >= {ACTIVE_FROM} ORDER BY seq DESC LIMIT ?) newest\
                 ) w JOIN {{prefix}}messages m ON m.thread_key = ? AND m.seq = w.seq \
                 WHERE w.running <= ? ORDER BY m.seq DESC"
            )),
            known_ids_pg: r("SELECT message_id, seq FROM {prefix}messages \
                 WHERE thread_key = ? AND message_id = ANY(?)"),
            insert_messages_pg: r("INSERT INTO {prefix}messages \
                 (thread_key, seq, message_id, role, tokens, archived, created_at, body) \
                 SELECT ?, s, i, r, t, 0, c, b FROM UNNEST(?::bigint[], ?::text[], \
                   ?::text[], ?::bigint[], ?::bigint[], ?::text[]) AS u(s, i, r, t, c, b)"),
            count: r(
                "SELECT last_seq, active_count, active_tokens FROM {prefix}threads \
                 WHERE thread_key = ? AND (expires_at IS NULL OR expires_at > {now})",
            ),
            lock_live: r(&format!(
                "SELECT last_seq FROM {{prefix}}threads WHERE thread_key = ? \
                 AND (expires_at IS NULL OR expires_at > {{now}}){for_update}"
            )),
            archive_counters: r("UPDATE {prefix}threads SET \
                 active_count = active_count - (SELECT COUNT(*) FROM {prefix}messages \
                   WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?), \
                 active_tokens = active_tokens - (SELECT COALESCE(SUM(tokens), 0) \
                   FROM {prefix}messages \
                   WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?), \
                 first_active = CASE WHEN first_active BETWEEN ? AND ? \
                   THEN COALESCE((SELECT MIN(seq) FROM {prefix}messages \
                     WHERE thread_key = ? AND archived = 0 AND seq > ?), last_seq + 1) \
                   ELSE first_active END, \
                 epoch = CASE WHEN EXISTS (SELECT 1 FROM {prefix}messages \
                   WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?) \
                   THEN ? ELSE epoch END \
                 WHERE thread_key = ?"),
            archive_messages: r("UPDATE {prefix}messages SET archived = 1 \
                 WHERE thread_key = ? AND archived = 0 AND seq BETWEEN ? AND ?"),
            set_ttl: r(
                "UPDATE {prefix}threads SET ttl_ms = ?, expires_at = {now} + ? \
                 WHERE thread_key = ? AND last_seq > 0 \
                 AND (expires_at IS NULL OR expires_at > {now})",
            ),
            purge_select: r(&format!(
                "SELECT thread_key FROM {{prefix}}threads \
                 WHERE expires_at IS NOT NULL AND expires_at <= {{now}} \
                 ORDER BY expires_at LIMIT {PURGE_BATCH}{for_update}"
            )),
        }
    }

    /// `template` rendered for this store's dialect and prefix.
    pub(crate) fn render(&self, template: &str) -> String {
        self.dialect.render(&self.prefix, template)
    }
}

/// The fixed statements of the session store, rendered for one dialect and prefix at open.
///
/// A deleted, expired or purged session stays as a tombstone row: `state` `''`, `expires_at`
/// 0 (always in the past, so every query for live sessions skips it) and its last `version`,
/// which a re-creation continues above.
pub(crate) struct SessionSql {
    pub(crate) load: Arc<str>,
    pub(crate) probe: Arc<str>,
    pub(crate) insert: Arc<str>,
    pub(crate) revive: Arc<str>,
    pub(crate) update: Arc<str>,
    pub(crate) delete_live: Arc<str>,
    pub(crate) bury: Arc<str>,
    pub(crate) set_ttl: Arc<str>,
    pub(crate) purge: Arc<str>,
}

impl SessionSql {
    pub(crate) fn new(dialect: Dialect, prefix: &TablePrefix) -> Self {
        let r = |t: &str| -> Arc<str> { dialect.render(prefix, t).into() };
        // A save refreshes the expiry: now (the database's clock) + the stored TTL, which
        // `set_ttl` bounds to `MAX_TTL`; one stored before that bound existed is read as
        // `MAX_TTL`, so the sum cannot overflow.
        let max_ttl = to_i64(MAX_TTL.as_millis());
        Self {
            load: r(
                "SELECT version, state FROM {prefix}sessions WHERE scope_key = ? \
                 AND (expires_at IS NULL OR expires_at > {now})",
            ),
            // The row of a key, live or not: its version, expiry and the nonce of its last
            // save, and the database's clock to judge the expiry by.
            probe: r("SELECT version, expires_at, last_nonce, {now} \
                 FROM {prefix}sessions WHERE scope_key = ?"),
            insert: r(
                "INSERT INTO {prefix}sessions (scope_key, tenant, user_id, agent_id, \
                 source, session_id, version, state, ttl_ms, expires_at, last_nonce) \
                 VALUES (?, ?, ?, ?, ?, ?, 1, ?, NULL, NULL, ?)",
            ),
            // Re-creates a deleted or expired session above its last version.
            revive: r(
                "UPDATE {prefix}sessions SET state = ?, version = version + 1, \
                 ttl_ms = NULL, expires_at = NULL, last_nonce = ? \
                 WHERE scope_key = ? AND version = ? \
                 AND expires_at IS NOT NULL AND expires_at <= {now}",
            ),
            update: r(&format!(
                "UPDATE {{prefix}}sessions SET state = ?, version = version + 1, \
                 expires_at = CASE WHEN ttl_ms IS NULL THEN NULL \
                   WHEN ttl_ms > {max_ttl} THEN {{now}} + {max_ttl} ELSE {{now}} + ttl_ms END, \
                 last_nonce = ? \
                 WHERE scope_key = ? AND version = ? \
                 AND (expires_at IS NULL OR expires_at > {{now}})",
            )),
            delete_live: r("UPDATE {prefix}sessions \
                 SET state = '', ttl_ms = NULL, expires_at = 0, last_nonce = NULL \
                 WHERE scope_key = ? AND (expires_at IS NULL OR expires_at > {now})"),
            // Turns an expired row that still holds its state into a tombstone.
            bury: r("UPDATE {prefix}sessions \
                 SET state = '', ttl_ms = NULL, expires_at = 0, last_nonce = NULL \
                 WHERE scope_key = ? AND expires_at > 0 AND expires_at <= {now}"),
            set_ttl: r(
                "UPDATE {prefix}sessions SET ttl_ms = ?, expires_at = {now} + ? \
                 WHERE scope_key = ? AND (expires_at IS NULL OR expires_at > {now})",
            ),
            purge: r("UPDATE {prefix}sessions \
                 SET state = '', ttl_ms = NULL, expires_at = 0, last_nonce = NULL \
                 WHERE expires_at > 0 AND expires_at <= {now}"),
        }
    }
}
