//! The size limits every store enforces on what it is given to append (re-exported by
//! [`history`](crate::history), where [`HistoryStore::append`](crate::HistoryStore::append)
//! states them), and the checks of a batch against them. A leaf below history and tokens: the
//! tokenizer's off-executor counting asks [`over_limits`] before it counts.

/// The largest message a store accepts, in bytes of its JSON form (8 MiB).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most messages one append accepts.
pub const MAX_BATCH_MESSAGES: usize = 10_000;
/// The most bytes (of the messages' JSON forms) one append accepts (64 MiB): below what every
/// backend takes in one request (Redis's 1 GiB query buffer, MariaDB's packets are split by the
/// store).
pub const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;
/// The deepest nesting of arrays and objects a stored message may have: in its JSON values
/// (metadata, [`Part::Data`](crate::Part::Data)) and in the text a store writes for it (the
/// versioned form, or a peer layout's form). Every decoder that reads messages back reads at
/// least twice as deep (serde_json stops at 128 levels, Python's `json` and Redis's `cjson` at
/// about 1000), so a message that is accepted can always be read back, also inside a session
/// state document that nests it a few levels further.
pub const MAX_JSON_DEPTH: usize = 64;

use std::collections::HashSet;

use crate::error::{Error, ErrorKind, Result};
use crate::message::ChatMessage;

/// Whether [`PreparedBatch::new`](crate::PreparedBatch::new) refuses `messages` for a limit: more than
/// [`MAX_BATCH_MESSAGES`], a message nested deeper than [`MAX_JSON_DEPTH`] or over
/// [`MAX_MESSAGE_BYTES`], or more than [`MAX_BATCH_BYTES`] in all (each distinct id once, in
/// the versioned JSON form, which is measured without being kept), or a message that cannot
/// be encoded. Cheap next to counting tokens: whoever counts ahead of a batch
/// ([`precount`](crate::tokens::precount)) asks first, so a refused batch costs no counting.
pub fn over_limits(messages: &[ChatMessage]) -> bool {
    if messages.len() > MAX_BATCH_MESSAGES {
        return true;
    }
    let mut seen: HashSet<&str> = HashSet::with_capacity(messages.len());
    let mut batch_bytes = 0usize;
    for message in messages {
        if !seen.insert(message.id.as_str()) {
            continue;
        }
        if check_message_depth(message).is_err() {
            return true;
        }
        let mut size = JsonSize::default();
        if serde_json::to_writer(&mut size, message).is_err()
            || size.bytes > MAX_MESSAGE_BYTES
            || size.deepest > MAX_JSON_DEPTH
        {
            return true;
        }
        batch_bytes = batch_bytes.saturating_add(size.bytes);
        if batch_bytes > MAX_BATCH_BYTES {
            return true;
        }
    }
    false
}

/// A writer that keeps nothing: the length of what is written, and its nesting as
/// [`json_depth`] measures it (the written text is JSON, so strings are tracked across
/// writes).
#[derive(Debug, Default)]
struct JsonSize {
    bytes: usize,
    depth: usize,
    deepest: usize,
    in_string: bool,
    escaped: bool,
}

impl std::io::Write for JsonSize {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len());
        for &byte in buf {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth = self.depth.saturating_add(1);
                    self.deepest = self.deepest.max(self.depth);
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The error for a message nested deeper than [`MAX_JSON_DEPTH`].
pub(crate) fn too_deep(message: &ChatMessage) -> Error {
    Error::new(
        ErrorKind::LimitExceeded,
        format!(
            "message {} nests JSON deeper than {MAX_JSON_DEPTH} levels, which a store could not \
             read back",
            message.id
        ),
    )
}

/// Refuses a message whose metadata or data values nest deeper than [`MAX_JSON_DEPTH`]
/// (counting the value itself as one level when it is an array or object).
///
/// # Errors
/// [`ErrorKind::LimitExceeded`] for a message nested too deep.
pub fn check_message_depth(message: &ChatMessage) -> Result<()> {
    // The metadata map is itself an object inside the message object.
    let values = message
        .metadata
        .values()
        .map(|v| (v, 3))
        .chain(message.parts.iter().filter_map(|p| match p {
            // message → parts → part → data
            crate::Part::Data { data, .. } => Some((data, 4)),
            _ => None,
        }));
    for (value, at) in values {
        if value_depth_over(value, at, MAX_JSON_DEPTH) {
            return Err(too_deep(message));
        }
    }
    Ok(())
}

/// Whether `value`, whose outermost level would be level `at` of the document, nests past
/// `limit`. Iterative, so a value of any depth is walked without recursion.
fn value_depth_over(value: &serde_json::Value, at: usize, limit: usize) -> bool {
    use serde_json::Value;
    let mut stack = vec![(value, at)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Array(items) => {
                if level > limit {
                    return true;
                }
                stack.extend(items.iter().map(|v| (v, level.saturating_add(1))));
            }
            Value::Object(map) => {
                if level > limit {
                    return true;
                }
                stack.extend(map.values().map(|v| (v, level.saturating_add(1))));
            }
            _ => {}
        }
    }
    false
}

/// The deepest nesting of arrays and objects in a JSON text (0 for a scalar), ignoring
/// brackets inside strings. Text that is not JSON is scanned all the same.
pub fn json_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth = depth.saturating_add(1);
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
