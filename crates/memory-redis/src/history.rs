//! [`HistoryStore`] on Redis: each operation is one script or one command.

use std::ops::RangeInclusive;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::history::skip_undecodable;
use memory_core::{
    AppendOutcome, ChatMessage, Error, HistoryCapabilities, HistoryStore, Page, PageRequest,
    PreparedBatch, Result, Scope, ScopeFilter, StoredMessage, ThreadCount, Window,
};
use redis::Value;

use crate::conn::{integer, unsigned};
use crate::error::{During, bad_reply};
use crate::keys::{Listed, ThreadKeys};
use crate::scripts::SCRIPTS;
use crate::store::{RedisStore, expiry_args, request_nonce};

#[async_trait]
impl HistoryStore for RedisStore {
    fn capabilities(&self) -> HistoryCapabilities {
        HistoryCapabilities::none()
            .with_archive(true)
            .with_ttl(true)
            .with_multi_process(true)
            .with_dedupes_ids(true)
            .with_counts_purged(true)
            .with_lists_every_thread(true)
    }

    async fn append(&self, scope: &Scope, messages: &[ChatMessage]) -> Result<AppendOutcome> {
        let batch = PreparedBatch::new(self.counter(), messages)?;
        if batch.unique.is_empty() {
            return Ok(AppendOutcome {
                seqs: Vec::new(),
                inserted: 0,
            });
        }
        let keys = ThreadKeys::new(self.prefix(), scope);
        let max = self
            .max_messages()
            .map_or_else(|| "0".to_owned(), |n| n.to_string());
        let [ttl, grace] = expiry_args(self.default_ttl())?;
        let tokens: Vec<String> = batch.unique.iter().map(|m| m.tokens.to_string()).collect();
        let mut args: Vec<&[u8]> = Vec::with_capacity(4 + 3 * batch.unique.len());
        args.extend([
            max.as_bytes(),
            self.overflow().as_arg().as_bytes(),
            ttl.as_bytes(),
            grace.as_bytes(),
        ]);
        for (prepared, tokens) in batch.unique.iter().zip(&tokens) {
            args.extend([
                prepared.message.id.as_str().as_bytes(),
                tokens.as_bytes(),
                prepared.json.as_bytes(),
            ]);
        }
        let what = format!("append to thread {scope}");
        let reply = self
            .eval(&what, &SCRIPTS.append, &keys.all(), &args)
            .await
            .during("append")?;
        let Value::Array(items) = reply else {
            return Err(bad_reply(
                &what,
                "the append script did not return an array",
            ));
        };
        let numbers: Option<Vec<u64>> = items.iter().map(unsigned).collect();
        let numbers = numbers.ok_or_else(|| bad_reply(&what, "a seq is not a number"))?;
        let Some((&inserted, unique_seqs)) = numbers.split_first() else {
            return Err(bad_reply(&what, "the append script returned nothing"));
        };
        if unique_seqs.len() != batch.unique.len() {
            return Err(bad_reply(
                &what,
                format!(
                    "{} seqs for {} messages",
                    unique_seqs.len(),
                    batch.unique.len()
                ),
            ));
        }
        let inserted = usize::try_from(inserted).unwrap_or(usize::MAX);
        tracing::debug!(scope = %scope, inserted, given = messages.len(), "history.append");
        Ok(AppendOutcome {
            seqs: batch.seqs_for_input(unique_seqs),
            inserted,
        })
    }

    async fn read(&self, scope: &Scope, window: Window) -> Result<Vec<StoredMessage>> {
        let (mode, arg) = match window {
            Window::All => ("all", String::new()),
            Window::Last(0) => return Ok(Vec::new()),
            Window::Last(n) => ("last", n.min(i64::MAX as usize).to_string()),
            Window::After(seq) => ("after", seq.to_string()),
            Window::TokenBudget(budget) => ("budget", budget.to_string()),
            Window::Everything => ("everything", String::new()),
            other => {
                return Err(Error::unsupported(format!(
                    "the redis store does not know the window {other:?}"
                )));
            }
        };
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("read {window:?} of thread {scope}");
        let reply = self
            .eval(
                &what,
                &SCRIPTS.read,
                &[&keys.meta, &keys.msg, &keys.tok, &keys.active],
                &[mode.as_bytes(), arg.as_bytes()],
            )
            .await
            .during("read")?;
        let messages = decode_messages(&what, reply).during("read")?;
        tracing::debug!(scope = %scope, ?window, returned = messages.len(), "history.read");
        Ok(messages)
    }

    async fn count(&self, scope: &Scope) -> Result<ThreadCount> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("count thread {scope}");
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&keys.meta)
            .arg(&["last_seq", "active", "tokens", "deleted"]);
        let reply = self.query(&what, &cmd).await.during("count")?;
        let Value::Array(fields) = reply else {
            return Err(bad_reply(&what, "HMGET did not return an array"));
        };
        let field = |i: usize| -> Result<u64> {
            match fields.get(i) {
                None | Some(Value::Nil) => Ok(0),
                // Counters go through HINCRBY and never go below 0 unless the data is corrupt.
                Some(v) => integer(v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| bad_reply(&what, "a thread counter is not a count")),
            }
        };
        let (last_seq, active, active_tokens, deleted) =
            (field(0)?, field(1)?, field(2)?, field(3)?);
        Ok(ThreadCount {
            active,
            archived: last_seq.saturating_sub(active).saturating_sub(deleted),
            active_tokens,
            last_seq,
        })
    }

    async fn archive(&self, scope: &Scope, seqs: RangeInclusive<u64>) -> Result<u64> {
        self.archive_once(scope, seqs, &request_nonce())
            .await
            .during("archive")
    }

    async fn clear(&self, scope: &Scope) -> Result<u64> {
        self.clear_once(scope, &request_nonce())
            .await
            .during("clear")
    }

    async fn list_threads(&self, filter: &ScopeFilter, page: PageRequest) -> Result<Page<Scope>> {
        self.list_scopes("list threads", filter, &page, Listed::Threads)
            .await
            .during("list_threads")
    }

    async fn set_ttl(&self, scope: &Scope, ttl: Option<Duration>) -> Result<()> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("set the TTL of thread {scope}");
        let [ttl_arg, grace] = expiry_args(ttl)?;
        let reply = self
            .eval(
                &what,
                &SCRIPTS.set_ttl,
                &keys.all(),
                &[ttl_arg.as_bytes(), grace.as_bytes()],
            )
            .await
            .during("set_ttl")?;
        match unsigned(&reply) {
            Some(1) => {
                tracing::debug!(scope = %scope, ?ttl, "history.set_ttl");
                Ok(())
            }
            Some(0) => Err(Error::not_found(format!("no thread at {scope}"))),
            _ => Err(bad_reply(&what, "not a status")),
        }
    }

    async fn purge_expired(&self) -> Result<u64> {
        let prefix = self.prefix().to_owned();
        let purged = self
            .purge_records("purge expired threads", Listed::ThreadExpiries, |scope| {
                ThreadKeys::new(&prefix, scope).meta
            })
            .await
            .during("purge_expired")?;
        tracing::debug!(purged, "history.purge_expired");
        Ok(purged)
    }
}

impl RedisStore {
    /// [`HistoryStore::archive`] as the request `nonce`: a re-sent request gets the reply of
    /// the applied one (see "Re-sent requests" on [`RedisStore`]).
    pub(crate) async fn archive_once(
        &self,
        scope: &Scope,
        seqs: RangeInclusive<u64>,
        nonce: &str,
    ) -> Result<u64> {
        let (first, last) = (*seqs.start(), *seqs.end());
        if first > last {
            return Ok(0);
        }
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("archive {first}..={last} of thread {scope}");
        let (first_arg, last_arg) = (first.to_string(), last.to_string());
        let reply = self
            .eval(
                &what,
                &SCRIPTS.archive,
                &[&keys.meta, &keys.tok, &keys.active, &keys.ack],
                &[first_arg.as_bytes(), last_arg.as_bytes(), nonce.as_bytes()],
            )
            .await?;
        let moved = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))?;
        tracing::debug!(scope = %scope, moved, first, last, "history.archive");
        Ok(moved)
    }

    /// [`HistoryStore::clear`] as the request `nonce` (see [`archive_once`](Self::archive_once)).
    pub(crate) async fn clear_once(&self, scope: &Scope, nonce: &str) -> Result<u64> {
        let keys = ThreadKeys::new(self.prefix(), scope);
        let what = format!("clear thread {scope}");
        let mut all = keys.all().to_vec();
        all.push(&keys.ack);
        let reply = self
            .eval(&what, &SCRIPTS.clear, &all, &[nonce.as_bytes()])
            .await?;
        let removed = unsigned(&reply).ok_or_else(|| bad_reply(&what, "not a count"))?;
        tracing::debug!(scope = %scope, removed, "history.clear");
        Ok(removed)
    }
}

/// Decodes the read script's reply: `seq, tokens, active, json` per message. A reply of another
/// shape is [`Serialization`](memory_core::ErrorKind::Serialization); a message that does not
/// decode (a token count over `u32`, a body that is not UTF-8 or not a message) is left out
/// with a warning naming the thread and its sequence number.
fn decode_messages(what: &str, reply: Value) -> Result<Vec<StoredMessage>> {
    let Value::Array(items) = reply else {
        return Err(bad_reply(what, "the read script did not return an array"));
    };
    if items.len() % 4 != 0 {
        return Err(bad_reply(
            what,
            "the read script returned a partial message",
        ));
    }
    let mut out = Vec::with_capacity(items.len() / 4);
    for chunk in items.chunks_exact(4) {
        let (Some(seq), Some(tokens), Some(active)) = (
            unsigned(&chunk[0]),
            unsigned(&chunk[1]),
            unsigned(&chunk[2]),
        ) else {
            return Err(bad_reply(
                what,
                "a seq, token count or flag is not a number",
            ));
        };
        let Value::BulkString(body) = &chunk[3] else {
            return Err(bad_reply(what, "a message body is not a string"));
        };
        let decoded = decode_message(seq, tokens, body);
        match decoded {
            Ok((message, tokens)) => out.push(StoredMessage {
                seq,
                tokens,
                archived: active == 0,
                message,
            }),
            // One bad message never makes the thread unreadable (the `HistoryStore` contract).
            Err(err) => skip_undecodable(&what, seq, &err),
        }
    }
    Ok(out)
}

/// One stored message body and token count, decoded.
fn decode_message(seq: u64, tokens: u64, body: &[u8]) -> Result<(ChatMessage, u32)> {
    let json = std::str::from_utf8(body)
        .map_err(|e| Error::serialization(format!("message {seq} is not UTF-8")).with_source(e))?;
    let message = ChatMessage::from_json(json)?;
    let tokens = u32::try_from(tokens).map_err(|_| {
        Error::serialization(format!("message {seq} has an impossible token count"))
    })?;
    Ok((message, tokens))
}
