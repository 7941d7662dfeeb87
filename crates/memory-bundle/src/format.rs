//! The bundle's JSON Lines format: its records, a streaming [`BundleWriter`] and a streaming,
//! hostile-input-safe [`BundleReader`]. docs/bundle.md is the schema document.
//!
//! A bundle is UTF-8 text, one JSON object per line (`\n`-terminated), each with a `type`:
//!
//! 1. one `header` ([`Header`]): [`FORMAT`], [`VERSION`], `created_at`, `producer`;
//! 2. per thread, a `thread` record ([`ThreadRecord`]) followed by its `message` records
//!    ([`MessageRecord`]) in increasing `seq` order;
//! 3. `session` and `blocks` records ([`SessionRecord`]): session states, and the states of a
//!    `Memory`'s blocks (sessions whose source is
//!    [`BLOCK_STATE_SOURCE`](memory_core::memory::BLOCK_STATE_SOURCE));
//! 4. one `end` record ([`EndRecord`]) with the totals, so a truncated bundle is detected.
//!
//! Both sides stream: the writer holds nothing but its totals, the reader one line (at most
//! [`MAX_LINE_BYTES`]) at a time.

use std::fmt;
use std::io::{BufRead, Write};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use memory_core::memory::BLOCK_STATE_SOURCE;
use memory_core::session::MAX_STATE_DEPTH;
use memory_core::{ChatMessage, Error, ErrorKind, MAX_MESSAGE_BYTES, Scope};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `format` of every bundle's header.
pub const FORMAT: &str = "agent-memory/bundle";

/// The version of the format this crate writes and reads.
pub const VERSION: u32 = 1;

/// The longest line a reader accepts, in bytes without its `\n`: the largest message
/// ([`MAX_MESSAGE_BYTES`]) or session state (the same 8 MiB) plus 64 KiB for the record
/// around it.
pub const MAX_LINE_BYTES: usize = MAX_MESSAGE_BYTES.saturating_add(64 * 1024);

/// The deepest nesting of arrays and objects a reader accepts in a line: a session state's
/// limit ([`MAX_STATE_DEPTH`]) plus the record around it (a message's limit is lower).
pub const MAX_LINE_DEPTH: usize = MAX_STATE_DEPTH.saturating_add(2);

/// What this crate writes as the header's `producer`.
pub const PRODUCER: &str = concat!("memory-bundle ", env!("CARGO_PKG_VERSION"));

/// The first line of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// The format version ([`VERSION`]).
    pub version: u32,
    /// When the bundle was written (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// The program that wrote it (informational).
    pub producer: String,
}

impl Header {
    /// A header of this crate's format and version, created now.
    pub fn now() -> Self {
        Self {
            format: FORMAT.to_owned(),
            version: VERSION,
            created_at: Utc::now(),
            producer: PRODUCER.to_owned(),
        }
    }
}

/// A thread, before its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// The thread's scope.
    pub scope: Scope,
    /// Messages (active and archived) the source held when the export read the thread's
    /// counts (informational: a progress total; the `message` records that follow are the
    /// data).
    pub messages: u64,
    /// Of those, archived ones (informational).
    pub archived: u64,
    /// The source's last sequence number when the export started the thread: messages
    /// appended after it are not in the bundle.
    pub last_seq: u64,
}

/// One message of the thread whose record came last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    /// Its sequence number in the source thread (increasing within the thread; an importer
    /// appends in this order, and the target assigns its own numbers 1, 2, …).
    pub seq: u64,
    /// Its token count in the source (informational: the target counts again on append).
    pub tokens: u32,
    /// Whether it was archived out of the active window.
    pub archived: bool,
    /// The message in its own versioned JSON form (docs/format.md).
    #[serde(with = "arc_message")]
    pub message: Arc<ChatMessage>,
}

/// Serde for a shared message (serde's `rc` feature is not on in the workspace).
mod arc_message {
    use std::sync::Arc;

    use memory_core::ChatMessage;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        message: &Arc<ChatMessage>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        message.as_ref().serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<ChatMessage>, D::Error> {
        ChatMessage::deserialize(deserializer).map(Arc::new)
    }
}

/// A session state (a `session` record) or a `Memory`'s block states (a `blocks` record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's scope.
    pub scope: Scope,
    /// Its version in the source (informational: the target assigns its own).
    pub version: u64,
    /// The state, as saved.
    pub state: Value,
}

impl SessionRecord {
    /// Whether this is a `Memory`'s block states (its source is
    /// [`BLOCK_STATE_SOURCE`]).
    pub fn is_blocks(&self) -> bool {
        self.scope.source().as_str() == BLOCK_STATE_SOURCE
    }
}

/// The last line: totals of the records before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EndRecord {
    /// `thread` records.
    pub threads: u64,
    /// `message` records.
    pub messages: u64,
    /// `message` records flagged archived.
    pub archived: u64,
    /// `session` records.
    pub sessions: u64,
    /// `blocks` records.
    pub block_states: u64,
}

/// One line of a bundle. Non-exhaustive: a later format version may add record types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// The first line.
    Header(Header),
    /// A thread; its messages follow.
    Thread(ThreadRecord),
    /// A message of the last thread.
    Message(MessageRecord),
    /// A session state.
    Session(SessionRecord),
    /// A `Memory`'s block states (a session under [`BLOCK_STATE_SOURCE`]).
    Blocks(SessionRecord),
    /// The totals; the last line.
    End(EndRecord),
}

/// What is wrong with a bundle a [`BundleReader`] reads. Every variant names the line
/// (1-based).
#[derive(Debug)]
#[non_exhaustive]
pub enum FormatError {
    /// Reading the input failed.
    Io(std::io::Error),
    /// A line is longer than [`MAX_LINE_BYTES`].
    LineTooLong {
        /// The line.
        line: u64,
    },
    /// A line nests arrays and objects deeper than [`MAX_LINE_DEPTH`].
    TooDeep {
        /// The line.
        line: u64,
    },
    /// A line is not UTF-8, not JSON, or not a record of this format.
    BadRecord {
        /// The line.
        line: u64,
        /// What the JSON decoder said.
        reason: String,
    },
    /// The input is empty or its first line is not a header.
    MissingHeader,
    /// The header's `format` is not [`FORMAT`].
    WrongFormat {
        /// The format found.
        found: String,
    },
    /// The header's `version` is not one this reader knows.
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A record that may only come first (a header) came later.
    UnexpectedHeader {
        /// The line.
        line: u64,
    },
    /// A `message` record came before any `thread` record, or after a session.
    MessageOutsideThread {
        /// The line.
        line: u64,
    },
    /// A `message` record's `seq` is not above the previous message's of its thread.
    SeqOutOfOrder {
        /// The line.
        line: u64,
        /// The previous seq of the thread.
        previous: u64,
        /// The seq found.
        found: u64,
    },
    /// The `end` record's totals differ from the records read.
    TotalsMismatch {
        /// The line.
        line: u64,
        /// The totals the `end` record states.
        stated: EndRecord,
        /// The totals of the records read.
        read: EndRecord,
    },
    /// A line follows the `end` record.
    AfterEnd {
        /// The line.
        line: u64,
    },
    /// The input ended without an `end` record: the bundle is truncated.
    MissingEnd {
        /// The number of lines read.
        lines: u64,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "reading the bundle failed: {e}"),
            Self::LineTooLong { line } => write!(
                f,
                "line {line} of the bundle is longer than the limit of {MAX_LINE_BYTES} bytes"
            ),
            Self::TooDeep { line } => write!(
                f,
                "line {line} of the bundle nests JSON deeper than {MAX_LINE_DEPTH} levels"
            ),
            Self::BadRecord { line, reason } => {
                write!(
                    f,
                    "line {line} of the bundle is not a valid record: {reason}"
                )
            }
            Self::MissingHeader => write!(
                f,
                "the input is not an agent-memory bundle: its first line is not a header \
                 record"
            ),
            Self::WrongFormat { found } => write!(
                f,
                "the input is not an agent-memory bundle: its header names the format \
                 {found:?}, not {FORMAT:?}"
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "the bundle is of format version {found}; this reader knows version {VERSION}"
            ),
            Self::UnexpectedHeader { line } => {
                write!(f, "line {line} of the bundle is a second header record")
            }
            Self::MessageOutsideThread { line } => write!(
                f,
                "line {line} of the bundle is a message record that follows no thread record"
            ),
            Self::SeqOutOfOrder {
                line,
                previous,
                found,
            } => write!(
                f,
                "line {line} of the bundle is message seq {found}, not above the thread's \
                 previous seq {previous}"
            ),
            Self::TotalsMismatch { line, stated, read } => write!(
                f,
                "the end record on line {line} states {stated}, but the bundle holds {read}: \
                 it was damaged"
            ),
            Self::AfterEnd { line } => {
                write!(f, "line {line} of the bundle follows its end record")
            }
            Self::MissingEnd { lines } => write!(
                f,
                "the bundle ends after {lines} lines without its end record: it is truncated"
            ),
        }
    }
}

impl fmt::Display for EndRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} threads, {} messages ({} archived), {} sessions and {} block states",
            self.threads, self.messages, self.archived, self.sessions, self.block_states
        )
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl FormatError {
    /// The [`ErrorKind`] this error has as a [`memory_core::Error`]: `LimitExceeded` for a
    /// line too long or too deep, `Unavailable` for a failed read, `Serialization` otherwise.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::LineTooLong { .. } | Self::TooDeep { .. } => ErrorKind::LimitExceeded,
            Self::Io(_) => ErrorKind::Unavailable,
            _ => ErrorKind::Serialization,
        }
    }
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        let kind = e.kind();
        let message = e.to_string();
        Error::new(kind, message).with_source(e)
    }
}

fn write_error(e: impl fmt::Display) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("writing the bundle failed: {e}"),
    )
}

impl EndRecord {
    fn add(&mut self, record: &Record) {
        match record {
            Record::Thread(_) => self.threads = self.threads.saturating_add(1),
            Record::Message(m) => {
                self.messages = self.messages.saturating_add(1);
                if m.archived {
                    self.archived = self.archived.saturating_add(1);
                }
            }
            Record::Session(_) => self.sessions = self.sessions.saturating_add(1),
            Record::Blocks(_) => self.block_states = self.block_states.saturating_add(1),
            Record::Header(_) | Record::End(_) => {}
        }
    }
}

/// Writes a bundle, one record per line, holding nothing but the totals.
///
/// [`new`](Self::new) writes the header; [`write`](Self::write) each record;
/// [`finish`](Self::finish) the `end` record. A bundle that was not finished is detected as
/// truncated by every reader.
#[derive(Debug)]
pub struct BundleWriter<W: Write> {
    out: W,
    totals: EndRecord,
    line: Vec<u8>,
}

impl<W: Write> BundleWriter<W> {
    /// Starts a bundle on `out` with [`Header::now`].
    ///
    /// # Errors
    /// `Unavailable` if writing fails.
    pub fn new(out: W) -> memory_core::Result<Self> {
        Self::with_header(out, &Header::now())
    }

    /// Starts a bundle on `out` with the given header.
    ///
    /// # Errors
    /// `Unavailable` if writing fails.
    pub fn with_header(out: W, header: &Header) -> memory_core::Result<Self> {
        let mut writer = Self {
            out,
            totals: EndRecord::default(),
            line: Vec::new(),
        };
        writer.put(&Record::Header(header.clone()))?;
        Ok(writer)
    }

    /// Writes one `thread`, `message`, `session` or `blocks` record. A session record whose
    /// scope's source is [`BLOCK_STATE_SOURCE`] is written as `blocks`, and a `blocks` record
    /// of another source as `session`, so the type always says what the state is.
    ///
    /// # Errors
    /// `InvalidInput` for a header or end record (the writer writes those itself);
    /// `Serialization` if the record cannot be encoded; `Unavailable` if writing fails.
    pub fn write(&mut self, record: Record) -> memory_core::Result<()> {
        let record = match record {
            Record::Header(_) | Record::End(_) => {
                return Err(Error::invalid_input(
                    "a bundle writer writes the header and end records itself",
                ));
            }
            Record::Session(s) | Record::Blocks(s) if s.is_blocks() => Record::Blocks(s),
            Record::Session(s) | Record::Blocks(s) => Record::Session(s),
            other => other,
        };
        self.totals.add(&record);
        self.put(&record)
    }

    fn put(&mut self, record: &Record) -> memory_core::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line).map_err(write_error)
    }

    /// The totals of the records written so far.
    pub fn totals(&self) -> EndRecord {
        self.totals
    }

    /// Writes the `end` record, flushes, and returns the output and the totals.
    ///
    /// # Errors
    /// `Unavailable` if writing fails.
    pub fn finish(mut self) -> memory_core::Result<(W, EndRecord)> {
        let totals = self.totals;
        self.put(&Record::End(totals))?;
        self.out.flush().map_err(write_error)?;
        Ok((self.out, totals))
    }
}

/// Reads a bundle one line at a time and checks its structure: the header first (format and
/// version), messages only inside a thread and in increasing `seq` order, the `end` record
/// last with totals equal to the records read. Every problem is a [`FormatError`] naming the
/// line; nothing in the input can make it panic or hold more than one line
/// ([`MAX_LINE_BYTES`]) in memory.
#[derive(Debug)]
pub struct BundleReader<R: BufRead> {
    input: R,
    line: u64,
    buf: Vec<u8>,
    header: Option<Header>,
    last_seq: Option<u64>,
    totals: EndRecord,
    ended: bool,
}

impl<R: BufRead> BundleReader<R> {
    /// Reads the header of `input`.
    ///
    /// # Errors
    /// [`FormatError::MissingHeader`], [`FormatError::WrongFormat`],
    /// [`FormatError::UnsupportedVersion`], or any error of a line.
    pub fn new(input: R) -> Result<Self, FormatError> {
        let mut reader = Self {
            input,
            line: 0,
            buf: Vec::new(),
            header: None,
            last_seq: None,
            totals: EndRecord::default(),
            ended: false,
        };
        if !reader.read_line()? {
            return Err(FormatError::MissingHeader);
        }
        // The header is checked field by field first, so another format or version is named
        // as such rather than as an unknown record.
        let value: Value = reader.parse()?;
        let format = value.get("format").and_then(Value::as_str);
        if value.get("type").and_then(Value::as_str) != Some("header") || format.is_none() {
            return Err(FormatError::MissingHeader);
        }
        if let Some(found) = format.filter(|f| *f != FORMAT) {
            return Err(FormatError::WrongFormat {
                found: found.chars().take(100).collect(),
            });
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(VERSION) => {}
            Some(v) => {
                return Err(FormatError::UnsupportedVersion {
                    found: u32::try_from(v).unwrap_or(u32::MAX),
                });
            }
            None => {
                return Err(FormatError::BadRecord {
                    line: 1,
                    reason: "the header has no numeric version".to_owned(),
                });
            }
        }
        match serde_json::from_value::<Record>(value) {
            Ok(Record::Header(h)) => reader.header = Some(h),
            Ok(_) => return Err(FormatError::MissingHeader),
            Err(e) => {
                return Err(FormatError::BadRecord {
                    line: 1,
                    reason: e.to_string(),
                });
            }
        }
        Ok(reader)
    }

    /// The bundle's header.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The next record after the header, or `None` after the `end` record (which is returned
    /// as [`Record::End`] first, once its totals were checked).
    ///
    /// # Errors
    /// Any [`FormatError`]; after an error the reader should not be used again.
    pub fn next_record(&mut self) -> Result<Option<Record>, FormatError> {
        if self.ended {
            // Only blank lines may follow the end record.
            while self.read_line()? {
                if !self.buf.iter().all(u8::is_ascii_whitespace) {
                    return Err(FormatError::AfterEnd { line: self.line });
                }
            }
            return Ok(None);
        }
        loop {
            if !self.read_line()? {
                return Err(FormatError::MissingEnd { lines: self.line });
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        let record: Record = self.parse()?;
        let line = self.line;
        match &record {
            Record::Header(_) => return Err(FormatError::UnexpectedHeader { line }),
            Record::Thread(_) => self.last_seq = Some(0),
            Record::Message(m) => match self.last_seq {
                None => return Err(FormatError::MessageOutsideThread { line }),
                Some(previous) if m.seq <= previous => {
                    return Err(FormatError::SeqOutOfOrder {
                        line,
                        previous,
                        found: m.seq,
                    });
                }
                Some(_) => self.last_seq = Some(m.seq),
            },
            Record::Session(_) | Record::Blocks(_) => self.last_seq = None,
            Record::End(stated) => {
                if *stated != self.totals {
                    return Err(FormatError::TotalsMismatch {
                        line,
                        stated: *stated,
                        read: self.totals,
                    });
                }
                self.ended = true;
            }
        }
        self.totals.add(&record);
        Ok(Some(record))
    }

    /// Reads the next line into `buf` (without its `\n`, and a `\r` before it); `false` at the
    /// end of the input. Never holds more than [`MAX_LINE_BYTES`].
    fn read_line(&mut self) -> Result<bool, FormatError> {
        self.buf.clear();
        let mut any = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FormatError::Io(e)),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.buf.len());
            if take > room {
                self.line = self.line.saturating_add(1);
                return Err(FormatError::LineTooLong { line: self.line });
            }
            self.buf
                .extend_from_slice(chunk.get(..take).unwrap_or_default());
            let consumed = if done { take.saturating_add(1) } else { take };
            self.input.consume(consumed);
            if done {
                break;
            }
        }
        if !any {
            return Ok(false);
        }
        self.line = self.line.saturating_add(1);
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(true)
    }

    fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, FormatError> {
        let line = self.line;
        if json_depth(&self.buf) > MAX_LINE_DEPTH {
            return Err(FormatError::TooDeep { line });
        }
        serde_json::from_slice(&self.buf).map_err(|e| FormatError::BadRecord {
            line,
            reason: e.to_string(),
        })
    }
}

/// The deepest nesting of arrays and objects in JSON text (brackets inside strings do not
/// count), without parsing it.
fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth = depth.saturating_add(1);
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth(br#"{"a":"[[[{{\"[["}"#), 1);
        assert_eq!(json_depth(br#"[[1],[[2]]]"#), 3);
    }
}
