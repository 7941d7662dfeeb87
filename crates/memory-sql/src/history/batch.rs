//! Batch statements cut into chunks: how many items one statement carries, and whether it is
//! prepared once per connection.

/// On SQLite, batches of at most this many messages use statements prepared once per
/// connection (a turn appends one or two, so those shapes repeat); larger ones are not cached.
/// MySQL caches every batch statement (see [`batch_chunk`]).
const CACHED_BATCH: usize = 8;

/// The length of the next chunk of a batch statement built with one placeholder group per
/// item, at most `available` items and `max` per statement, and whether to cache it.
///
/// On MySQL/MariaDB every chunk is a power of two long and cached, so at most a dozen texts
/// per statement kind exist per connection and none is ever closed: sqlx closes an uncached
/// prepared statement with a `COM_STMT_CLOSE` the server never answers, and without
/// `TCP_NODELAY` the next statement then waits for the server's delayed ACK (~40 ms). On
/// SQLite (in-process) and PostgreSQL (fixed statements) a batch goes in one chunk, cached
/// only when small.
pub(super) fn batch_chunk(mysql: bool, available: usize, max: usize) -> (usize, bool) {
    let n = available.min(max).max(1);
    if mysql {
        (1 << n.ilog2(), true)
    } else {
        (n, n <= CACHED_BATCH)
    }
}
