//! Paged reads: the read script (`lua/read.lua`) called page by page, each call at most
//! [`MAX_READ_PAGE`] messages so no call holds the server for long, started again when the
//! thread is cleared and written again between two pages.

use memory_core::{Error, MAX_READ_PAGE, Result, Scope, StoredMessage, Window};

use super::decode::{ScriptPage, script_page};
use crate::error::bad_reply;
use crate::keys::ThreadKeys;
use crate::scripts::SCRIPTS;
use crate::store::RedisStore;

/// How many times a read starts again when the thread is cleared and written again between two
/// of its pages, before it gives up with `Conflict`.
pub(super) const READ_RESTARTS: usize = 3;

/// The error of a read that met its thread cleared and written again between two of its
/// pages, [`READ_RESTARTS`] + 1 times in a row.
pub(super) fn restarted_too_often(what: &str) -> Error {
    Error::conflict(format!(
        "{what}: the thread was cleared and written again while it was read, {} times in a row",
        READ_RESTARTS.saturating_add(1)
    ))
}

/// The keys the read scripts take, in the order of their `KEYS`: meta, msg, tok, active.
pub(super) fn read_keys(keys: &ThreadKeys) -> [&str; 4] {
    [&keys.meta, &keys.msg, &keys.tok, &keys.active]
}

/// How a read walks the thread, page by page (see `lua/read.lua`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Walk {
    /// Active messages after a seq, oldest first (`All`, `After`).
    Forward { after: u64 },
    /// Stored messages, active and archived, oldest first (`Everything`).
    Everything,
    /// Active messages newest first, at most `remaining` of them, or as many as fit `budget`
    /// (`Last`, `TokenBudget`).
    Backward {
        remaining: Option<usize>,
        budget: Option<u64>,
    },
}

impl Walk {
    /// The walk of a window (`Last(0)` walks nothing: callers answer it without one).
    pub(super) fn of(window: Window) -> Result<Self> {
        Ok(match window {
            Window::All => Walk::Forward { after: 0 },
            Window::Last(n) => Walk::Backward {
                remaining: Some(n),
                budget: None,
            },
            Window::After(seq) => Walk::Forward { after: seq },
            Window::TokenBudget(budget) => Walk::Backward {
                remaining: None,
                budget: Some(budget),
            },
            Window::Everything => Walk::Everything,
            other => {
                return Err(Error::unsupported(format!(
                    "the redis store does not know the window {other:?}"
                )));
            }
        })
    }
}

/// Limits of a paged read beyond its window (a cursor read's, see
/// [`cursor_read`](super::cursor_read)); the default has none.
#[derive(Debug, Clone, Default)]
pub(super) struct Bounds {
    /// Only messages with a sequence number above this one.
    pub(super) above: u64,
    /// Only messages with a sequence number up to this one.
    pub(super) upto: Option<u64>,
    /// The thread's `born` mark the pages must all see (else the read starts again).
    pub(super) born: Option<Vec<u8>>,
}

impl RedisStore {
    /// [`HistoryStore::read_page`](memory_core::HistoryStore::read_page)'s calls of the read
    /// script (see there).
    pub(super) async fn read_one_page(
        &self,
        scope: &Scope,
        what: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let script_keys = read_keys(&keys);
        let limit_arg = limit.to_string();
        let mut restarts = 0usize;
        let mut born: Option<Vec<u8>> = None;
        let mut cursor = after;
        loop {
            let cursor_arg = cursor.to_string();
            let ScriptPage {
                born: mark,
                next,
                messages,
            } = self
                .read_script(what, &script_keys, ["page", &cursor_arg, &limit_arg, ""])
                .await?;
            match &born {
                Some(first) if *first != mark => {
                    // Cleared and written again since the first call: read the new life from
                    // `after`, not from where the old one was probed to.
                    if restarts >= READ_RESTARTS {
                        return Err(restarted_too_often(what));
                    }
                    restarts = restarts.saturating_add(1);
                    born = None;
                    cursor = after;
                    continue;
                }
                Some(_) => {}
                None => born = Some(mark),
            }
            if !messages.is_empty() || next.is_empty() {
                return Ok(messages);
            }
            let next = std::str::from_utf8(&next)
                .ok()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| bad_reply(what, "a page cursor is not a number"))?;
            if next <= cursor {
                return Err(bad_reply(what, "the page cursor did not move"));
            }
            cursor = next;
        }
    }

    /// Reads the window `walk` selects, within `bounds`, in pages of at most [`MAX_READ_PAGE`]
    /// messages, each one script call, so no call holds the server for long. `None` when the
    /// thread was cleared and written again between two pages (its `born` mark changed, or is
    /// not `bounds.born`): the caller starts again.
    pub(super) async fn read_pages(
        &self,
        scope: &Scope,
        what: &str,
        walk: Walk,
        bounds: Bounds,
    ) -> Result<Option<Vec<StoredMessage>>> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let script_keys = read_keys(&keys);
        let (mode, mut cursor) = match walk {
            Walk::Forward { after } => ("forward", after.max(bounds.above).to_string()),
            Walk::Everything => ("everything", bounds.above.to_string()),
            // Backward pages read below their cursor.
            Walk::Backward { .. } => (
                "backward",
                bounds
                    .upto
                    .map_or_else(String::new, |upto| upto.saturating_add(1).to_string()),
            ),
        };
        let (mut remaining, mut budget) = match walk {
            Walk::Backward { remaining, budget } => (remaining, budget),
            _ => (None, None),
        };
        let mut born: Option<Vec<u8>> = bounds.born;
        // Backward pages come newest first; each page is in seq order.
        let mut pages: Vec<Vec<StoredMessage>> = Vec::new();
        loop {
            let limit = remaining.map_or(MAX_READ_PAGE, |r| r.min(MAX_READ_PAGE));
            let limit_arg = limit.to_string();
            let budget_arg = budget.map_or_else(String::new, |b| b.to_string());
            let ScriptPage {
                born: mark,
                next,
                messages,
            } = self
                .read_script(what, &script_keys, [mode, &cursor, &limit_arg, &budget_arg])
                .await?;
            match &born {
                None => born = Some(mark),
                Some(first) if *first != mark => return Ok(None),
                Some(_) => {}
            }
            let mut page = messages;
            let next_seq = std::str::from_utf8(&next)
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            // The next page starts past a bound: this one is the last.
            let bounded = match walk {
                Walk::Backward { .. } => {
                    next_seq.is_some_and(|n| n <= bounds.above.saturating_add(1))
                }
                _ => bounds
                    .upto
                    .is_some_and(|upto| next_seq.is_some_and(|n| n >= upto)),
            };
            page.retain(|m| m.seq > bounds.above && bounds.upto.is_none_or(|upto| m.seq <= upto));
            if let Some(r) = remaining.as_mut() {
                *r = r.saturating_sub(page.len());
            }
            if let Some(b) = budget.as_mut() {
                let used: u64 = page.iter().map(|m| u64::from(m.tokens)).sum();
                *b = b.saturating_sub(used);
            }
            pages.push(page);
            if next.is_empty() || remaining == Some(0) || bounded {
                break;
            }
            cursor = std::str::from_utf8(&next)
                .map_err(|_| bad_reply(what, "a page cursor is not text"))?
                .to_owned();
        }
        if matches!(walk, Walk::Backward { .. }) {
            pages.reverse();
        }
        Ok(Some(pages.into_iter().flatten().collect()))
    }

    /// One call of the read script (`lua/read.lua`) with its four arguments (mode, cursor,
    /// limit, budget), its reply decoded.
    async fn read_script(
        &self,
        what: &str,
        keys: &[&str; 4],
        args: [&str; 4],
    ) -> Result<ScriptPage> {
        let args = args.map(str::as_bytes);
        let reply = self.eval(what, &SCRIPTS.read, keys, &args).await?;
        script_page(what, reply)
    }
}
