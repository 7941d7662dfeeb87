//! Token counting: tiktoken encodings by default, any function as a replacement.
//!
//! A message's count is computed once, when a store appends it, and kept with it
//! ([`StoredMessage::tokens`](crate::StoredMessage::tokens)); windows within a token budget are
//! answered from those stored counts.

use std::fmt;
use std::sync::Arc;

use tiktoken_rs::CoreBPE;

use crate::bpe::{self, Bpe};

use crate::message::{ChatMessage, MediaKind, Part};

/// The fixed costs of media parts, which text tokenizers cannot measure. The defaults are
/// LlamaIndex's estimates: 256 tokens for an image, audio or video, 2,048 for a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaTokenCosts {
    /// Tokens per image.
    pub image: u32,
    /// Tokens per audio clip.
    pub audio: u32,
    /// Tokens per video clip.
    pub video: u32,
    /// Tokens per document.
    pub document: u32,
}

impl Default for MediaTokenCosts {
    fn default() -> Self {
        Self {
            image: 256,
            audio: 256,
            video: 256,
            document: 2048,
        }
    }
}

impl MediaTokenCosts {
    /// The cost of one part of `kind`.
    pub fn cost(&self, kind: MediaKind) -> u32 {
        match kind {
            MediaKind::Image => self.image,
            MediaKind::Audio => self.audio,
            MediaKind::Video => self.video,
            MediaKind::Document => self.document,
        }
    }
}

/// Tokens every chat message costs beyond its content (OpenAI's documented count for the chat
/// format: `<|start|>{role/name}\n{content}<|end|>\n`).
pub const TOKENS_PER_MESSAGE: u32 = 3;
/// Extra tokens when a message carries a `name`.
pub const TOKENS_PER_NAME: u32 = 1;
/// Tokens that prime every reply (`<|start|>assistant<|message|>`), counted once per request.
pub const TOKENS_PER_REPLY: u32 = 3;

/// Counts tokens.
///
/// Implement [`count_text`](TokenCounter::count_text); the provided
/// [`count_message`](TokenCounter::count_message) adds OpenAI's per-message overhead (as the
/// "How to count tokens with tiktoken" guide of the OpenAI cookbook documents it: 3 per message,
/// the role, 1 more with a name) and the fixed costs of media parts.
///
/// # Behavior
/// - Every method is a pure, synchronous function of its argument: the same text or message
///   always counts the same, with no I/O and no error. A store counts each message once, when
///   it is appended, and keeps that number; token budgets (windows, reducers, memory limits)
///   add up the kept numbers, so a counter whose answers changed over time would make them
///   disagree with what was stored.
/// - [`count_text`](TokenCounter::count_text) counts `text` as the model's tokenizer would.
/// - [`media_costs`](TokenCounter::media_costs) is constant for a counter object: the tokens
///   of one image, audio clip, video clip or document part, which text tokenizers cannot
///   measure. The default is [`MediaTokenCosts::default`].
/// - [`count_message`](TokenCounter::count_message) is what a message costs in a chat request:
///   [`TOKENS_PER_MESSAGE`], the role, [`TOKENS_PER_NAME`] and the name when there is an
///   author, every text, refusal, tool call (name and arguments), tool result and data part
///   counted with `count_text`, and each media part at its `media_costs` price. An override
///   keeps it a function of the message alone.
/// - One counter object is shared by every store and task at once.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens in `text`.
    fn count_text(&self, text: &str) -> u32;

    /// The costs of media parts.
    fn media_costs(&self) -> MediaTokenCosts {
        MediaTokenCosts::default()
    }

    /// Tokens that `message` costs in a chat request; a sum past `u32::MAX` is `u32::MAX`
    /// (a message no budget can hold).
    fn count_message(&self, message: &ChatMessage) -> u32 {
        let mut total = TOKENS_PER_MESSAGE.saturating_add(self.count_text(message.role.as_str()));
        if let Some(name) = &message.author_name {
            total = total
                .saturating_add(TOKENS_PER_NAME)
                .saturating_add(self.count_text(name));
        }
        for part in &message.parts {
            total = total.saturating_add(match part {
                Part::Text { text } | Part::Refusal { text } => self.count_text(text),
                Part::ToolCall {
                    name, arguments, ..
                } => self
                    .count_text(name)
                    .saturating_add(self.count_text(arguments)),
                Part::ToolResult { content, .. } => self.count_text(content),
                Part::Data { data, .. } => self.count_text(&data.to_string()),
                media => media
                    .as_media()
                    .map_or(0, |(kind, _)| self.media_costs().cost(kind)),
            });
        }
        total
    }
}

/// Forwards [`TokenCounter`] through smart pointers, so `Arc<dyn TokenCounter>` and
/// `Box<dyn TokenCounter>` are counters too.
///
/// `clippy::missing_trait_methods` is denied on these impls (clippy runs with `-D warnings` in
/// CI): every method, the provided ones included, must be forwarded here. Without the lint, a
/// counter that overrides `media_costs` or `count_message` would silently lose its override
/// behind an `Arc`, and stored counts would differ from the counter's own.
macro_rules! forward_token_counter {
    ($($pointer:ident),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        impl<T: TokenCounter + ?Sized> TokenCounter for $pointer<T> {
            fn count_text(&self, text: &str) -> u32 {
                (**self).count_text(text)
            }
            fn media_costs(&self) -> MediaTokenCosts {
                (**self).media_costs()
            }
            fn count_message(&self, message: &ChatMessage) -> u32 {
                (**self).count_message(message)
            }
        }
    )*};
}

forward_token_counter!(Arc, Box);

/// A tiktoken encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `o200k_base` (GPT-4o, o-series).
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5; LlamaIndex's default).
    Cl100kBase,
}

/// A [`TokenCounter`] on a tiktoken encoding: the counts of tiktoken's
/// `encode_ordinary(text).len()`, from compact tables (`bpe.rs`) rather than tiktoken's
/// own (a tenth of their memory). Each encoding's tables are built once per process, on its
/// first count, and shared by every counter.
///
/// ```
/// use memory_core::{TiktokenCounter, TokenCounter};
///
/// let counter = TiktokenCounter::cl100k();
/// assert_eq!(counter.count_text("hello world"), 2);
/// ```
#[derive(Clone, Copy)]
pub struct TiktokenCounter {
    encoding: Encoding,
    media: MediaTokenCosts,
}

impl TiktokenCounter {
    /// A counter on `encoding`.
    ///
    /// The encoding's tables (a few megabytes: about 4 MiB resident for `o200k_base`, 2 MiB
    /// for `cl100k_base`) are built on the first count, once per process and encoding, not
    /// here.
    pub fn new(encoding: Encoding) -> Self {
        Self {
            encoding,
            media: MediaTokenCosts::default(),
        }
    }

    /// The encoding's compact tables (`bpe.rs`), built on the first count of the
    /// encoding; `None` only if they could not be built.
    fn compact(&self) -> Option<&'static Bpe> {
        match self.encoding {
            Encoding::O200kBase => bpe::O200K.as_ref(),
            Encoding::Cl100kBase => bpe::CL100K.as_ref(),
        }
    }

    /// tiktoken-rs's own encoder: the fallback should the compact tables fail to build.
    fn tiktoken(&self) -> &'static CoreBPE {
        match self.encoding {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// A counter on `o200k_base`.
    pub fn o200k() -> Self {
        Self::new(Encoding::O200kBase)
    }

    /// A counter on `cl100k_base`.
    pub fn cl100k() -> Self {
        Self::new(Encoding::Cl100kBase)
    }

    /// Replaces the media costs.
    pub fn with_media_costs(mut self, media: MediaTokenCosts) -> Self {
        self.media = media;
        self
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

impl fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("encoding", &self.encoding)
            .field("media", &self.media)
            .finish()
    }
}

impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> u32 {
        // Special-token text in user content is ordinary text to the API.
        let count = match self.compact() {
            Some(bpe) => bpe.count(text),
            None => self.tiktoken().encode_ordinary(text).len(),
        };
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    fn media_costs(&self) -> MediaTokenCosts {
        self.media
    }
}

/// A [`TokenCounter`] on any function from text to a count.
///
/// ```
/// use memory_core::{FnTokenCounter, TokenCounter};
///
/// let words = FnTokenCounter::new(|text| text.split_whitespace().count() as u32);
/// assert_eq!(words.count_text("one two three"), 3);
/// ```
#[derive(Clone)]
pub struct FnTokenCounter {
    count: Arc<dyn Fn(&str) -> u32 + Send + Sync>,
    media: MediaTokenCosts,
}

impl FnTokenCounter {
    /// A counter calling `count` for every text.
    pub fn new(count: impl Fn(&str) -> u32 + Send + Sync + 'static) -> Self {
        Self {
            count: Arc::new(count),
            media: MediaTokenCosts::default(),
        }
    }

    /// Replaces the media costs.
    pub fn with_media_costs(mut self, media: MediaTokenCosts) -> Self {
        self.media = media;
        self
    }
}

impl fmt::Debug for FnTokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTokenCounter").finish_non_exhaustive()
    }
}

impl TokenCounter for FnTokenCounter {
    fn count_text(&self, text: &str) -> u32 {
        (self.count)(text)
    }

    fn media_costs(&self) -> MediaTokenCosts {
        self.media
    }
}

/// The counter stores use when none is given: tiktoken `o200k_base`, the encoding of current
/// OpenAI models.
pub fn default_token_counter() -> Arc<dyn TokenCounter> {
    Arc::new(TiktokenCounter::o200k())
}

/// Inputs with at most this many bytes of text (summed over their messages' text, tool and
/// data parts) are counted inline by [`precount`]; larger ones are counted on Tokio's blocking
/// thread pool, so that tokenizing up to [`MAX_BATCH_BYTES`](crate::history::MAX_BATCH_BYTES)
/// never stalls the async executor's thread. Tokenizing this much takes well under a
/// millisecond.
pub const INLINE_COUNT_BYTES: usize = 64 * 1024;

/// The token counts of one batch of messages, counted by [`precount`]: a [`TokenCounter`] that
/// answers [`count_message`](TokenCounter::count_message) for those very messages (the same
/// objects, by address) from the counts made ahead, and asks the wrapped counter for anything
/// else. Hand it to [`PreparedBatch::new`](crate::history::PreparedBatch::new) in place of the
/// store's counter.
#[derive(Debug)]
pub struct Precounted<'a> {
    inner: &'a dyn TokenCounter,
    messages: &'a [ChatMessage],
    counts: Option<Vec<u32>>,
}

impl Precounted<'_> {
    /// Whether the counts were made ahead (on the blocking pool), not left to be counted inline.
    pub fn counted_ahead(&self) -> bool {
        self.counts.is_some()
    }

    fn position(&self, message: &ChatMessage) -> Option<usize> {
        let size = std::mem::size_of::<ChatMessage>();
        let offset = std::ptr::from_ref(message)
            .addr()
            .checked_sub(self.messages.as_ptr().addr())?;
        let index = (offset.checked_rem(size)? == 0).then_some(offset.checked_div(size)?)?;
        self.messages
            .get(index)
            .filter(|m| std::ptr::eq(*m, message))
            .map(|_| index)
    }
}

impl TokenCounter for Precounted<'_> {
    fn count_text(&self, text: &str) -> u32 {
        self.inner.count_text(text)
    }

    fn media_costs(&self) -> MediaTokenCosts {
        self.inner.media_costs()
    }

    fn count_message(&self, message: &ChatMessage) -> u32 {
        match (&self.counts, self.position(message)) {
            (Some(counts), Some(index)) => counts
                .get(index)
                .copied()
                .unwrap_or_else(|| self.inner.count_message(message)),
            _ => self.inner.count_message(message),
        }
    }
}

/// The bytes of text `count_message` tokenizes in `messages`, roughly (data parts by an
/// estimate of their JSON size).
fn text_bytes(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|part| match part {
            Part::Text { text } | Part::Refusal { text } => text.len(),
            Part::ToolCall {
                name, arguments, ..
            } => name.len().saturating_add(arguments.len()),
            Part::ToolResult { content, .. } => content.len(),
            Part::Data { data, .. } => json_size_estimate(data),
            _ => 0,
        })
        .fold(0usize, usize::saturating_add)
}

fn json_size_estimate(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(s) => s.len().saturating_add(2),
        serde_json::Value::Array(items) => items
            .iter()
            .map(json_size_estimate)
            .fold(2usize, |a, b| a.saturating_add(b).saturating_add(1)),
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                k.len()
                    .saturating_add(4)
                    .saturating_add(json_size_estimate(v))
            })
            .fold(2usize, usize::saturating_add),
        _ => 8,
    }
}

/// Counts `messages` with `counter` ahead of a store's append: inline (nothing is done here;
/// the batch counts as it goes) when their text is at most [`INLINE_COUNT_BYTES`], outside a
/// Tokio runtime, or when the batch is over a limit
/// ([`over_limits`](crate::history::over_limits): a message over
/// [`MAX_MESSAGE_BYTES`](crate::history::MAX_MESSAGE_BYTES), a batch over
/// [`MAX_BATCH_BYTES`](crate::history::MAX_BATCH_BYTES), ...: the batch is refused before
/// anything is counted); otherwise every message is counted on Tokio's blocking thread pool
/// (`spawn_blocking`, on a copy of the messages), so the async executor's thread goes on
/// running other tasks meanwhile.
///
/// # Errors
/// [`ErrorKind::Backend`](crate::ErrorKind::Backend) when the blocking task did not finish (the
/// counter panicked, or the runtime is shutting down).
pub async fn precount<'a>(
    counter: &'a Arc<dyn TokenCounter>,
    messages: &'a [ChatMessage],
) -> crate::Result<Precounted<'a>> {
    let bytes = text_bytes(messages);
    let inline = Precounted {
        inner: counter.as_ref(),
        messages,
        counts: None,
    };
    if bytes <= INLINE_COUNT_BYTES || bytes > crate::limits::MAX_BATCH_BYTES {
        return Ok(inline);
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Ok(inline);
    };
    let owned: Vec<ChatMessage> = messages.to_vec();
    let shared = Arc::clone(counter);
    let counts = runtime
        .spawn_blocking(move || {
            // Measured here, off the executor: encoding a large batch takes a while too.
            if crate::limits::over_limits(&owned) {
                return None;
            }
            Some(
                owned
                    .iter()
                    .map(|m| shared.count_message(m))
                    .collect::<Vec<u32>>(),
            )
        })
        .await
        .map_err(|err| {
            crate::Error::new(
                crate::ErrorKind::Backend,
                "counting the tokens of a batch: the blocking task did not finish",
            )
            .with_source(err)
        })?;
    Ok(Precounted { counts, ..inline })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Media, Role};

    #[test]
    fn encodings_count_differently_and_correctly() {
        let cl = TiktokenCounter::cl100k();
        let o = TiktokenCounter::o200k();
        assert_eq!(cl.count_text(""), 0);
        assert_eq!(cl.count_text("hello world"), 2);
        assert_eq!(o.count_text("hello world"), 2);
        // Special-token text counts as ordinary text.
        assert!(cl.count_text("<|endoftext|>") > 1);
    }

    #[test]
    fn a_huge_count_saturates_instead_of_overflowing() {
        #[derive(Debug)]
        struct Huge;
        impl TokenCounter for Huge {
            fn count_text(&self, _text: &str) -> u32 {
                u32::MAX
            }
        }
        let msg = ChatMessage::user("hello world").with_author("dana");
        assert_eq!(Huge.count_message(&msg), u32::MAX);
    }

    #[test]
    fn message_overhead_follows_openai_cookbook() {
        let counter = TiktokenCounter::cl100k();
        let msg = ChatMessage::user("hello world");
        // 3 per message + "user" (1) + content (2).
        assert_eq!(counter.count_message(&msg), 3 + 1 + 2);
        let named = msg.clone().with_author("dana");
        assert_eq!(
            counter.count_message(&named),
            3 + 1 + 2 + TOKENS_PER_NAME + counter.count_text("dana")
        );
    }

    #[test]
    fn media_costs_apply_and_are_configurable() {
        let msg = ChatMessage::new(
            Role::User,
            vec![
                Part::Image(Media::url("https://x/a.png")),
                Part::Document(Media::url("https://x/a.pdf")),
            ],
        );
        let words = FnTokenCounter::new(|t| t.split_whitespace().count() as u32);
        assert_eq!(words.count_message(&msg), 3 + 1 + 256 + 2048);
        let cheap = words.with_media_costs(MediaTokenCosts {
            image: 1,
            audio: 1,
            video: 1,
            document: 1,
        });
        assert_eq!(cheap.count_message(&msg), 3 + 1 + 2);
    }
}
