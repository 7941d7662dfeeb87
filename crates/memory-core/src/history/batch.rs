//! The checks and encoding every backend applies to a batch before it writes it.

use std::collections::HashMap;

use crate::error::{Error, ErrorKind, Result};
use crate::message::ChatMessage;
use crate::tokens::TokenCounter;

/// The largest message a store accepts, in bytes of its JSON form (8 MiB).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most messages one append accepts.
pub const MAX_BATCH_MESSAGES: usize = 10_000;
/// The most bytes (of the messages' JSON forms) one append accepts (64 MiB): below what every
/// backend takes in one request (Redis's 1 GiB query buffer, MariaDB's packets are split by the
/// store).
pub const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;

/// One distinct message of a batch, encoded and counted once.
#[derive(Debug, Clone)]
pub struct PreparedMessage<'a> {
    /// The message.
    pub message: &'a ChatMessage,
    /// Its versioned JSON form (docs/format.md).
    pub json: String,
    /// Its token count.
    pub tokens: u32,
}

/// A batch ready to write: the distinct messages (first occurrence of each id, in order) and,
/// for every given message, the index of its distinct message.
#[derive(Debug, Clone)]
pub struct PreparedBatch<'a> {
    /// Distinct messages in the order given.
    pub unique: Vec<PreparedMessage<'a>>,
    /// For each given message, its index in `unique`.
    pub positions: Vec<usize>,
}

impl<'a> PreparedBatch<'a> {
    /// Validates, encodes and counts `messages`.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] for a batch over [`MAX_BATCH_MESSAGES`] or
    /// [`MAX_BATCH_BYTES`], or a message over [`MAX_MESSAGE_BYTES`]; [`ErrorKind::Serialization`] if a message cannot be encoded.
    pub fn new(counter: &dyn TokenCounter, messages: &'a [ChatMessage]) -> Result<Self> {
        if messages.len() > MAX_BATCH_MESSAGES {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "a batch of {} messages is over the limit of {MAX_BATCH_MESSAGES}",
                    messages.len()
                ),
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(messages.len());
        let mut batch_bytes = 0usize;
        let mut unique = Vec::with_capacity(messages.len());
        let mut positions = Vec::with_capacity(messages.len());
        for message in messages {
            if let Some(&at) = seen.get(message.id.as_str()) {
                positions.push(at);
                continue;
            }
            let json = message.to_json()?;
            if json.len() > MAX_MESSAGE_BYTES {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "message {} is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
                        message.id,
                        json.len()
                    ),
                ));
            }
            batch_bytes += json.len();
            if batch_bytes > MAX_BATCH_BYTES {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!("the batch is over {MAX_BATCH_BYTES} bytes; append it in parts"),
                ));
            }
            let tokens = counter.count_message(message);
            seen.insert(message.id.as_str(), unique.len());
            positions.push(unique.len());
            unique.push(PreparedMessage {
                message,
                json,
                tokens,
            });
        }
        Ok(Self { unique, positions })
    }

    /// Maps the sequence numbers of the distinct messages to one per given message.
    pub fn seqs_for_input(&self, unique_seqs: &[u64]) -> Vec<u64> {
        self.positions
            .iter()
            .map(|&i| unique_seqs.get(i).copied().unwrap_or_default())
            .collect()
    }
}
