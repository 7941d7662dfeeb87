//! The scripts' replies decoded: a thread's counts from its meta fields, the read scripts'
//! messages (`seq, tokens, active, json` each) and the read script's page header.

use memory_core::history::skip_undecodable;
use memory_core::{ChatMessage, Error, Result, StoredMessage, ThreadCount};
use redis::Value;

use crate::conn::{integer, unsigned};
use crate::error::bad_reply;

/// One reply of the read script (`lua/read.lua`): a header of two strings, then the page.
pub(super) struct ScriptPage {
    /// The thread's `born` mark: it changes when the thread is cleared and written again.
    pub(super) born: Vec<u8>,
    /// Where the next page starts (empty when the walk is over).
    pub(super) next: Vec<u8>,
    /// The page's messages, decoded as [`decode_messages`] does.
    pub(super) messages: Vec<StoredMessage>,
}

/// Decodes a reply of the read script.
pub(super) fn script_page(what: &str, reply: Value) -> Result<ScriptPage> {
    let Value::Array(mut items) = reply else {
        return Err(bad_reply(what, "the read script did not return an array"));
    };
    if items.len() < 2 {
        return Err(bad_reply(what, "the read script returned no page header"));
    }
    let body = items.split_off(2);
    let mut header = items.into_iter();
    let (Some(Value::BulkString(born)), Some(Value::BulkString(next))) =
        (header.next(), header.next())
    else {
        return Err(bad_reply(what, "the page header is not two strings"));
    };
    Ok(ScriptPage {
        born,
        next,
        messages: decode_messages(what, Value::Array(body))?,
    })
}

/// The counts of a thread from its meta fields `last_seq`, `active`, `tokens`, `deleted` (in
/// this order; absent ones count 0).
pub(super) fn thread_count(what: &str, fields: &[Value]) -> Result<ThreadCount> {
    let field = |i: usize| -> Result<u64> {
        match fields.get(i) {
            None | Some(Value::Nil) => Ok(0),
            // Counters go through HINCRBY and never go below 0 unless the data is corrupt.
            Some(v) => integer(v)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad_reply(what, "a thread counter is not a count")),
        }
    };
    let (last_seq, active, active_tokens, deleted) = (field(0)?, field(1)?, field(2)?, field(3)?);
    Ok(ThreadCount {
        active,
        archived: last_seq.saturating_sub(active).saturating_sub(deleted),
        active_tokens,
        last_seq,
    })
}

/// Decodes the read script's reply: `seq, tokens, active, json` per message. A reply of another
/// shape is [`Serialization`](memory_core::ErrorKind::Serialization); a message that does not
/// decode (a token count over `u32`, a body that is not UTF-8 or not a message) is left out
/// with a warning naming the thread and its sequence number.
pub(super) fn decode_messages(what: &str, reply: Value) -> Result<Vec<StoredMessage>> {
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
        let [seq, tokens, active, body] = chunk else {
            return Err(bad_reply(
                what,
                "the read script returned a partial message",
            ));
        };
        let (Some(seq), Some(tokens), Some(active)) =
            (unsigned(seq), unsigned(tokens), unsigned(active))
        else {
            return Err(bad_reply(
                what,
                "a seq, token count or flag is not a number",
            ));
        };
        let Value::BulkString(body) = body else {
            return Err(bad_reply(what, "a message body is not a string"));
        };
        let decoded = decode_message(seq, tokens, body);
        match decoded {
            Ok((message, tokens)) => out.push(StoredMessage {
                seq,
                tokens,
                archived: active == 0,
                message: message.into(),
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
