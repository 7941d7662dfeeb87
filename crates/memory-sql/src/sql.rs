//! The fixed SQL text of the history and session stores and of cursor reads, rendered once per dialect and
//! prefix when a store opens.

use std::sync::Arc;

use memory_core::MAX_TTL;

use crate::dialect::Dialect;
use crate::prefix::TablePrefix;
use crate::rows::{MAX_TTL_MS, to_i64};

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
    /// A page of [`read_page`](memory_core::HistoryStore::read_page): the thread's messages,
    /// active and archived, after a sequence number, `LIMIT` of them, if the thread is live.
    pub(crate) read_page: Arc<str>,
    /// A page of the tenants holding a live thread with messages, after a cursor tenant.
    pub(crate) list_tenants: Arc<str>,
    /// PostgreSQL: the known ids of a batch, given as one array.
    pub(crate) known_ids_pg: Arc<str>,
    /// PostgreSQL: a batch inserted from one array per column.
    pub(crate) insert_messages_pg: Arc<str>,
    /// PostgreSQL: a whole append in one statement (see [`APPEND_PG`]).
    pub(crate) append_pg: Arc<str>,
    pub(crate) count: Arc<str>,
    pub(crate) lock_live: Arc<str>,
    pub(crate) archive_counters: Arc<str>,
    pub(crate) archive_messages: Arc<str>,
    pub(crate) set_ttl: Arc<str>,
    pub(crate) purge_select: Arc<str>,
}

/// PostgreSQL: a whole append as one statement, run between `BEGIN` and `COMMIT` (see
/// `append_once` for why not alone, in autocommit). Parameters: `$1` the thread key, `$2..=$6` the scope columns, `$7` the default
/// TTL and `$13` the same bounded to the longest TTL, `$8..=$12` the batch (ids, roles, token
/// counts, creation times, bodies; one array per column, in order, ids distinct). Returns one
/// row per id of the batch, `(message_id, seq, 1)` for a message it inserted and
/// `(message_id, seq, 0)` for one the thread already held, or no row at all when it changed
/// nothing: the transaction, which holds the thread row's lock then, goes on statement by
/// statement.
///
/// The upsert of the thread row (`locked`) locks it, so writers of one thread queue there. The
/// trap: a statement reads the messages (`known`, the deduplication) in the snapshot taken
/// when it *started*, while the upsert acts on the row's newest version, after waiting for the
/// writer before it. So `snap` reads the row's version (`xmin`) in the snapshot, and the
/// `DO UPDATE` applies only when the locked row is that very version: nobody changed the thread
/// since the snapshot (every writer of a thread's messages also writes its row, under that
/// lock), so what the snapshot says of its messages is still true. Otherwise (a writer went
/// first, the thread expired, a counter is corrupt or would overflow), it changes nothing and
/// returns no row. When there was no row to lock (`xmax = 0`: created), the thread held no
/// message at that moment whatever the snapshot says (a clear or purge deletes both), so every
/// message of the batch is new, at `1..=n`.
const APPEND_PG: &str = "WITH input AS (\
  SELECT i, r, tk, c, b, o FROM UNNEST($8::text[], $9::text[], $10::bigint[], $11::bigint[], \
    $12::text[]) WITH ORDINALITY AS u(i, r, tk, c, b, o)), \
snap AS (SELECT xmin AS v FROM {prefix}threads WHERE thread_key = $1), \
known AS (SELECT m.message_id, m.seq FROM {prefix}messages m \
  WHERE m.thread_key = $1 AND m.message_id = ANY($8::text[]) AND EXISTS (SELECT 1 FROM snap)), \
fresh AS (SELECT i, r, tk, c, b, ROW_NUMBER() OVER (ORDER BY o) AS k FROM input \
  WHERE i NOT IN (SELECT message_id FROM known)), \
added AS (SELECT COUNT(*) AS n, COALESCE(SUM(tk), 0)::bigint AS tokens FROM fresh), \
totals AS (SELECT COUNT(*) AS n, COALESCE(SUM(tk), 0)::bigint AS tokens FROM input), \
locked AS (INSERT INTO {prefix}threads AS t (thread_key, tenant, user_id, agent_id, source, \
    session_id, ttl_ms, last_seq, active_count, active_tokens, expires_at) \
  SELECT $1, $2, $3, $4, $5, $6, $7, a.n, a.n, a.tokens, {now} + $13 FROM totals a \
  ON CONFLICT (thread_key) DO UPDATE SET \
    last_seq = t.last_seq + (SELECT n FROM added), \
    active_count = t.active_count + (SELECT n FROM added), \
    active_tokens = t.active_tokens + (SELECT tokens FROM added), \
    expires_at = {now} + CASE WHEN t.ttl_ms > {max_ttl} THEN {max_ttl} ELSE t.ttl_ms END \
  WHERE t.xmin = (SELECT v FROM snap) \
    AND (t.expires_at IS NULL OR t.expires_at > {now}) \
    AND t.last_seq >= 0 AND t.active_count >= 0 AND t.active_tokens >= 0 \
    AND t.last_seq <= 9223372036854775807 - (SELECT n FROM added) \
    AND t.active_count <= 9223372036854775807 - (SELECT n FROM added) \
    AND t.active_tokens <= 9223372036854775807 - (SELECT tokens FROM added) \
  RETURNING t.last_seq, t.xmax = 0 AS created), \
ins AS (INSERT INTO {prefix}messages \
    (thread_key, seq, message_id, role, tokens, archived, created_at, body) \
  SELECT $1, l.last_seq - a.n + f.k, f.i, f.r, f.tk, 0, f.c, f.b \
    FROM fresh f, locked l, added a WHERE NOT l.created \
  UNION ALL \
  SELECT $1, f.o, f.i, f.r, f.tk, 0, f.c, f.b FROM input f, locked l WHERE l.created \
  RETURNING message_id, seq) \
SELECT message_id, seq, 1::bigint FROM ins \
UNION ALL \
SELECT message_id, seq, 0::bigint FROM known \
  WHERE EXISTS (SELECT 1 FROM locked WHERE NOT created)";

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

/// One page of the distinct tenants of `table` (`threads` or `sessions`) whose rows are live
/// now (by the database's clock) and meet `extra` (a condition followed by `AND`, or empty),
/// after a cursor tenant (`?`, `''` for the first page), `LIMIT ?` of them, in byte order (the
/// tenant columns sort bytewise: `COLLATE "C"` on PostgreSQL, `ascii_bin` on MySQL, SQLite's
/// `BINARY`). The `(tenant, key)` index gives the order and the keyset: the server walks it from
/// the cursor on and stops after the page, reading the rows of the page's tenants only.
fn list_tenants(table: &str, extra: &str) -> String {
    format!(
        "SELECT DISTINCT tenant FROM {{prefix}}{table} WHERE tenant > ? AND {extra}\
         (expires_at IS NULL OR expires_at > {{now}}) ORDER BY tenant LIMIT ?"
    )
}

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
            // The primary key `(thread_key, seq)` from `after` on, `LIMIT` rows at most.
            read_page: r(&format!(
                "{select_msgs} WHERE thread_key = ? AND seq > ? AND {LIVE} \
                 ORDER BY seq LIMIT ?"
            )),
            list_tenants: r(&list_tenants("threads", "last_seq > 0 AND ")),
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
            append_pg: r(&APPEND_PG.replace("{max_ttl}", &MAX_TTL_MS.to_string())),
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
    /// A page of the tenants holding a live session, after a cursor tenant.
    pub(crate) list_tenants: Arc<str>,
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
            // Tombstones (`expires_at` 0) are in the past: never listed.
            list_tenants: r(&list_tenants("sessions", "")),
        }
    }
}

/// The statements of cursor reads (`cursor.rs`), rendered for one dialect and prefix at open.
pub(crate) struct CursorSql {
    pub(crate) all: Arc<str>,
    pub(crate) after: Arc<str>,
    pub(crate) last: Arc<str>,
    pub(crate) everything: Arc<str>,
    pub(crate) budget: Arc<str>,
    /// The live thread row alone (for the paged fallback's snapshot).
    pub(crate) head: Arc<str>,
}

/// Scalar subquery: the lower bound (exclusive) of a cursor read, from the live thread row
/// (`?` = the cursor's epoch, the cursor's seq, the key): the cursor's seq when the thread is
/// still at the cursor's epoch, else 0. `NULL` when the thread is not live.
const SINCE: &str = "(SELECT CASE WHEN b.epoch = ? THEN ? ELSE 0 END FROM {prefix}threads b \
                     WHERE b.thread_key = ? AND (b.expires_at IS NULL OR b.expires_at > {now}))";

/// Scalar subquery: the lower bound (exclusive) of a token-budget cursor read (`?` = the
/// cursor's epoch, the cursor's seq, `WHOLE_BUDGET_SPAN` (in `cursor.rs`), the key): the cursor's seq when the
/// thread is still at the cursor's epoch, else the span below the thread's last seq.
const BUDGET_SINCE: &str = "(SELECT CASE WHEN b.epoch = ? THEN ? ELSE b.last_seq - ? END \
                            FROM {prefix}threads b WHERE b.thread_key = ?)";

/// The thread row's columns as `HEAD_COLS` (in `cursor.rs`) reads them (alias `th`).
const HEAD: &str = "th.epoch, th.last_seq, th.active_count, th.active_tokens, th.first_active";

impl CursorSql {
    pub(crate) fn new(dialect: Dialect, prefix: &TablePrefix) -> Self {
        let r = |t: &str| -> Arc<str> { dialect.render(prefix, t).into() };
        // The live thread row, joined to the window `w` (`?` after the window's: the key).
        let around = |window: &str| {
            r(&format!(
                "SELECT w.seq, w.tokens, w.archived, w.body, {HEAD} \
                 FROM {{prefix}}threads th LEFT JOIN ({window}) w ON 1 = 1 \
                 WHERE th.thread_key = ? \
                 AND (th.expires_at IS NULL OR th.expires_at > {{now}}) \
                 ORDER BY w.seq"
            ))
        };
        let select = "SELECT seq, tokens, archived, body FROM {prefix}messages";
        // `?` = key, key (ACTIVE_FROM), then SINCE's.
        let active = format!(
            "{select} WHERE thread_key = ? AND archived = 0 \
             AND seq >= {ACTIVE_FROM} AND seq > {SINCE}"
        );
        Self {
            all: around(&active),
            // `?` = key, the window's seq, key (ACTIVE_FROM), then SINCE's.
            after: around(&format!(
                "{select} WHERE thread_key = ? AND archived = 0 AND seq > ? \
                 AND seq >= {ACTIVE_FROM} AND seq > {SINCE}"
            )),
            // The newest `LIMIT` active messages above the bound: the same as the newest
            // `LIMIT` of the window, then those above the bound.
            last: around(&format!("{active} ORDER BY seq DESC LIMIT ?")),
            // `?` = key, then SINCE's (which checks that the thread is live).
            everything: around(&format!("{select} WHERE thread_key = ? AND seq > {SINCE}")),
            // Newest first, the running token total of the active messages above the bound;
            // those within the budget come back with their bodies, and the first one past it
            // (if any) without: it says the walk ended on the budget. `?` = budget, key, key
            // (ACTIVE_FROM), BUDGET_SINCE's, key, budget.
            budget: around(&format!(
                "SELECT m.seq, m.tokens, m.archived, \
                   CASE WHEN n.running <= ? THEN m.body END AS body FROM (\
                   SELECT seq, tokens, SUM(tokens) OVER (ORDER BY seq DESC \
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running \
                   FROM {{prefix}}messages WHERE thread_key = ? AND archived = 0 \
                   AND seq >= {ACTIVE_FROM} AND seq > {BUDGET_SINCE}\
                 ) n JOIN {{prefix}}messages m ON m.thread_key = ? AND m.seq = n.seq \
                 WHERE n.running - n.tokens <= ?"
            )),
            head: r(&format!(
                "SELECT {HEAD} FROM {{prefix}}threads th WHERE th.thread_key = ? \
                 AND (th.expires_at IS NULL OR th.expires_at > {{now}})"
            )),
        }
    }
}
