//! [`HistoryStore::read_since`](memory_core::HistoryStore::read_since) on Redis: one script
//! call (`lua/read_since.lua`) answers with the thread's epoch, its counts and the messages; an
//! answer larger than [`MAX_READ_PAGE`] messages is read in pages, bounded by that call.

use memory_core::{CursorRead, Delta, Error, MAX_READ_PAGE, Result, Scope, ThreadCursor, Window};
use redis::Value;

use super::decode::{decode_messages, thread_count};
use super::read::{Bounds, READ_RESTARTS, Walk, read_keys, restarted_too_often};
use crate::conn::text;
use crate::error::bad_reply;
use crate::keys::ThreadKeys;
use crate::scripts::SCRIPTS;
use crate::store::RedisStore;

/// The fields of the script's header, before the messages: state, epoch, last_seq, active,
/// tokens, deleted, born.
const HEADER: usize = 7;

/// A value for a thread's meta `epoch` that it has never had: 64 random bits (a UUIDv4's two
/// halves, each with a few fixed bits, XORed), never 0
/// ([`NO_EPOCH`](memory_core::NO_EPOCH)), in decimal (Lua's numbers are doubles: the scripts
/// keep it a string).
pub(super) fn fresh_epoch() -> String {
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    (high ^ low).max(1).to_string()
}

/// What the script selects for a window: its mode and arguments (see `lua/read_since.lua`).
struct Selection {
    mode: &'static str,
    floor: u64,
    count: Option<usize>,
    budget: Option<u64>,
}

impl Selection {
    fn of(window: Window) -> Result<Self> {
        let forward = |floor| Selection {
            mode: "forward",
            floor,
            count: None,
            budget: None,
        };
        let backward = |count, budget| Selection {
            mode: "backward",
            floor: 0,
            count,
            budget,
        };
        Ok(match window {
            Window::All => forward(0),
            Window::After(seq) => forward(seq),
            Window::Last(n) => backward(Some(n), None),
            Window::TokenBudget(budget) => backward(None, Some(budget)),
            Window::Everything => Selection {
                mode: "everything",
                floor: 0,
                count: None,
                budget: None,
            },
            other => {
                return Err(Error::unsupported(format!(
                    "the redis store does not know the window {other:?}"
                )));
            }
        })
    }
}

impl RedisStore {
    /// [`HistoryStore::read_since`](memory_core::HistoryStore::read_since).
    pub(super) async fn cursor_read(
        &self,
        scope: &Scope,
        window: Window,
        since: Option<ThreadCursor>,
    ) -> Result<CursorRead> {
        if let Some(cursor) = since
            && !cursor.is_for(scope)
        {
            // Refused before any call (`check` refuses another scope's cursor whatever the
            // thread's state).
            cursor.check(scope, cursor.epoch(), cursor.seq())?;
        }
        let selection = Selection::of(window)?;
        let keys = ThreadKeys::new(self.prefix(), scope);
        let script_keys = read_keys(&keys);
        let what = format!("read {window:?} of thread {scope} since a cursor");
        let (since_epoch, since_seq) = since.map_or_else(
            || (String::new(), "0".to_owned()),
            |c| (c.epoch().to_string(), c.seq().to_string()),
        );
        let floor = selection.floor.to_string();
        let count = selection.count.map_or_else(String::new, |n| n.to_string());
        let budget = selection.budget.map_or_else(String::new, |b| b.to_string());
        let page = MAX_READ_PAGE.to_string();
        let mut attempt = 0usize;
        loop {
            let epoch_arg = fresh_epoch();
            let reply = self
                .eval(
                    &what,
                    &SCRIPTS.read_since,
                    &script_keys,
                    &[
                        selection.mode.as_bytes(),
                        since_epoch.as_bytes(),
                        since_seq.as_bytes(),
                        floor.as_bytes(),
                        count.as_bytes(),
                        budget.as_bytes(),
                        page.as_bytes(),
                        epoch_arg.as_bytes(),
                    ],
                )
                .await?;
            let Value::Array(mut items) = reply else {
                return Err(bad_reply(
                    &what,
                    "the read_since script did not return an array",
                ));
            };
            if items.len() < HEADER {
                return Err(bad_reply(&what, "the read_since script returned no header"));
            }
            let body = items.split_off(HEADER);
            let state = items.first().and_then(text).unwrap_or_default();
            let epoch = items
                .get(1)
                .and_then(text)
                .and_then(|e| e.parse::<u64>().ok())
                .ok_or_else(|| bad_reply(&what, "the thread's epoch is not a u64"))?;
            let count = thread_count(&what, items.get(2..6).unwrap_or_default())?;
            let current = match since {
                Some(cursor) => cursor.check(scope, epoch, count.last_seq)?,
                None => false,
            };
            let delta = Delta::for_cursor(current);
            let cursor = ThreadCursor::new(scope, epoch, count.last_seq);
            let expected = if current { "appended" } else { "whole" };
            let messages = match state.as_str() {
                "paged" => {
                    let Value::BulkString(born) = items.get(6).cloned().unwrap_or(Value::Nil)
                    else {
                        return Err(bad_reply(&what, "the thread's born mark is not a string"));
                    };
                    let bounds = Bounds {
                        above: if current {
                            since.map_or(0, |c| c.seq())
                        } else {
                            0
                        },
                        upto: Some(count.last_seq),
                        born: Some(born),
                    };
                    match self
                        .read_pages(scope, &what, Walk::of(window)?, bounds)
                        .await?
                    {
                        Some(messages) => messages,
                        None if attempt < READ_RESTARTS => {
                            attempt = attempt.saturating_add(1);
                            continue;
                        }
                        None => return Err(restarted_too_often(&what)),
                    }
                }
                state if state == expected => decode_messages(&what, Value::Array(body))?,
                state => {
                    return Err(bad_reply(
                        &what,
                        format!("the script answered {state:?} where the cursor says {expected}"),
                    ));
                }
            };
            tracing::debug!(
                scope = %scope,
                ?window,
                ?delta,
                returned = messages.len(),
                "history.read_since"
            );
            return Ok(CursorRead::new(delta, messages, cursor, count));
        }
    }
}
