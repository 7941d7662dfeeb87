//! Writing records into a target endpoint, idempotently and resumably (see the crate's
//! `# Behavior`).

use std::io::Write;
use std::ops::RangeInclusive;
use std::sync::Arc;

use memory_core::{
    ChatMessage, Error, ErrorKind, MAX_BATCH_BYTES, MAX_BATCH_MESSAGES, Result, Scope, Window,
};

use crate::format::{MessageRecord, Record, SessionRecord, ThreadRecord};
use crate::identity::same_message;
use crate::{BundleSummary, Endpoint, Progress, Sink};

/// Messages per append: well within [`MAX_BATCH_MESSAGES`].
const BATCH_MESSAGES: usize = if MAX_BATCH_MESSAGES < 1_000 {
    MAX_BATCH_MESSAGES
} else {
    1_000
};
/// Bytes of message JSON per append: well within [`MAX_BATCH_BYTES`].
const BATCH_BYTES: usize = MAX_BATCH_BYTES / 4;
/// Archive ranges held before they are applied.
const MAX_RUNS: usize = 1_000;
/// Attempts at writing a session that keeps changing in the target.
const SESSION_ATTEMPTS: u32 = 8;

/// What an import wrote.
#[derive(Debug, Default)]
pub(crate) struct ImportStats {
    /// Threads and sessions of the input; messages appended (and archived messages of the
    /// input).
    pub(crate) copied: BundleSummary,
    /// Messages the target already held.
    pub(crate) already_present: u64,
}

/// The thread being imported.
struct ThreadState {
    scope: Scope,
    /// The target's last seq when the thread started: its first `present` messages are the
    /// thread's first `present` messages of the input.
    present: u64,
    /// Messages of the input read so far for this thread (the last one's target seq).
    ordinal: u64,
    batch: Vec<ChatMessage>,
    batch_bytes: usize,
    /// Target seq ranges to archive, once the messages in them are stored — and, for the
    /// messages the target already held, once the target's message at the last of them was
    /// found to have the input's id (never before: the target may hold another thread).
    runs: Vec<RangeInclusive<u64>>,
    /// The input's last message the target already held (at seq `ordinal` while
    /// `ordinal <= present`).
    last_present: Option<Arc<ChatMessage>>,
}

/// Writes records into an endpoint.
pub(crate) struct Importer<'a> {
    to: &'a Endpoint,
    progress: &'a dyn Progress,
    thread: Option<ThreadState>,
    stats: ImportStats,
}

/// Counts the bytes a value's JSON takes, without keeping them.
struct ByteCount(usize);

impl Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> Importer<'a> {
    pub(crate) fn new(to: &'a Endpoint, progress: &'a dyn Progress) -> Self {
        Self {
            to,
            progress,
            thread: None,
            stats: ImportStats::default(),
        }
    }

    /// Applies one record (not a header or end record, which are ignored).
    pub(crate) async fn accept(&mut self, record: Record) -> Result<()> {
        match record {
            Record::Thread(t) => self.start_thread(t).await,
            Record::Message(m) => self.message(m).await,
            Record::Session(s) | Record::Blocks(s) => {
                self.finish_thread().await?;
                self.session(s).await
            }
            Record::Header(_) | Record::End(_) => Ok(()),
        }
    }

    /// Finishes the last thread; returns what was written.
    pub(crate) async fn finish(mut self) -> Result<ImportStats> {
        self.finish_thread().await?;
        Ok(self.stats)
    }

    async fn start_thread(&mut self, record: ThreadRecord) -> Result<()> {
        self.finish_thread().await?;
        let count = self.to.history.count(&record.scope).await?;
        self.progress.thread_started(&record.scope, record.messages);
        self.stats.copied.threads = self.stats.copied.threads.saturating_add(1);
        self.thread = Some(ThreadState {
            scope: record.scope,
            present: count.last_seq,
            ordinal: 0,
            batch: Vec::new(),
            batch_bytes: 0,
            runs: Vec::new(),
            last_present: None,
        });
        Ok(())
    }

    async fn message(&mut self, record: MessageRecord) -> Result<()> {
        let Some(thread) = self.thread.as_mut() else {
            return Err(Error::new(
                ErrorKind::Serialization,
                "a message record follows no thread record",
            ));
        };
        thread.ordinal = thread.ordinal.saturating_add(1);
        let ordinal = thread.ordinal;
        if record.archived {
            if !self.to.history.capabilities().archive {
                return Err(Error::unsupported(format!(
                    "thread {} has archived messages, but the target history store cannot \
                     archive (HistoryCapabilities::archive)",
                    thread.scope
                )));
            }
            self.stats.copied.archived = self.stats.copied.archived.saturating_add(1);
            match thread.runs.last_mut() {
                Some(run) if run.end().checked_add(1) == Some(ordinal) => {
                    *run = *run.start()..=ordinal;
                }
                _ => thread.runs.push(ordinal..=ordinal),
            }
        }
        if ordinal <= thread.present {
            self.stats.already_present = self.stats.already_present.saturating_add(1);
            self.progress.messages_copied(1);
            let runs_full = thread.runs.len() >= MAX_RUNS;
            if ordinal == thread.present || runs_full {
                // The target's message here must be the input's before any archive flag
                // touches the target's messages: a target holding another thread under this
                // scope is refused unchanged. (At the resume point this is the check every
                // resumed thread gets; before it, a check of the current position lets the
                // runs held so far be applied, so they stay bounded.)
                self.check_position(ordinal, &record.message).await?;
                if runs_full {
                    self.flush().await?;
                }
            }
            if let Some(thread) = self.thread.as_mut() {
                thread.last_present = Some(record.message);
            }
            return Ok(());
        }
        let mut size = ByteCount(0);
        serde_json::to_writer(&mut size, record.message.as_ref())?;
        let full = thread.batch.len() >= BATCH_MESSAGES
            || thread.batch_bytes.saturating_add(size.0) > BATCH_BYTES
            || thread.runs.len() >= MAX_RUNS;
        if full && !thread.batch.is_empty() {
            // The flush archives only seqs it stored: this message's run (pushed above) is
            // kept for the next flush.
            self.flush().await?;
        }
        let Some(thread) = self.thread.as_mut() else {
            return Ok(());
        };
        thread.batch_bytes = thread.batch_bytes.saturating_add(size.0);
        thread.batch.push(Arc::unwrap_or_clone(record.message));
        Ok(())
    }

    /// Checks that the target's message at `seq` (one the target already held) is `input`, the
    /// input's message there: it has its id, or it is the same LlamaIndex row under the
    /// target table's name ([`same_message`]).
    async fn check_position(&self, seq: u64, input: &ChatMessage) -> Result<()> {
        let Some(thread) = self.thread.as_ref() else {
            return Ok(());
        };
        let history = &self.to.history;
        let found = if history.capabilities().paged_reads {
            history
                .read_page(&thread.scope, seq.saturating_sub(1), 1)
                .await?
                .into_iter()
                .find(|m| m.seq == seq)
        } else {
            history
                .read(&thread.scope, Window::Everything)
                .await?
                .into_iter()
                .find(|m| m.seq == seq)
        };
        match found {
            Some(m) if same_message(&m.message, input) => Ok(()),
            Some(m) => Err(Error::conflict(format!(
                "thread {} in the target holds message {} at seq {seq}, where the input has \
                 message {}: the target holds another thread under this scope (clear it, or \
                 import elsewhere)",
                thread.scope, m.message.id, input.id
            ))),
            None => Err(Error::conflict(format!(
                "thread {} in the target has no readable message at seq {seq}, where the \
                 input has message {}",
                thread.scope, input.id
            ))),
        }
    }

    /// Appends the batch, checks the seqs the target gave it, then applies the archive runs.
    async fn flush(&mut self) -> Result<()> {
        let Some(thread) = self.thread.as_mut() else {
            return Ok(());
        };
        if !thread.batch.is_empty() {
            let batch = std::mem::take(&mut thread.batch);
            thread.batch_bytes = 0;
            let len = u64::try_from(batch.len()).unwrap_or(u64::MAX);
            // Messages up to `present` are stored; the batch holds the next ones in order.
            let first = thread.present.saturating_add(1);
            let outcome = self.to.history.append(&thread.scope, &batch).await?;
            let expected = (0..len).map(|i| first.saturating_add(i));
            if outcome.inserted != batch.len() || !outcome.seqs.iter().copied().eq(expected) {
                return Err(Error::conflict(format!(
                    "thread {} in the target did not take the input's messages at seqs {first} \
                     and on (it holds other messages, or the input repeats a message id in \
                     the thread)",
                    thread.scope
                )));
            }
            self.stats.copied.messages = self.stats.copied.messages.saturating_add(len);
            thread.present = first.saturating_add(len).saturating_sub(1);
            self.progress.messages_copied(len);
        }
        let present = thread.present;
        let runs = std::mem::take(&mut thread.runs);
        let mut keep = Vec::new();
        for run in runs {
            if *run.start() > present {
                keep.push(run);
                continue;
            }
            let end = (*run.end()).min(present);
            self.to
                .history
                .archive(&thread.scope, *run.start()..=end)
                .await?;
            if *run.end() > present {
                keep.push(present.saturating_add(1)..=*run.end());
            }
        }
        thread.runs = keep;
        Ok(())
    }

    /// Checks the thread against the target, then applies what it holds. A target thread
    /// longer than the input's is refused before anything is applied: none of the input's
    /// messages reached the resume point, so none was checked against the target.
    async fn finish_thread(&mut self) -> Result<()> {
        let Some(thread) = self.thread.as_ref() else {
            return Ok(());
        };
        if thread.present > thread.ordinal {
            if let Some(input) = thread.last_present.as_ref() {
                // A differing message names both ids.
                self.check_position(thread.ordinal, input).await?;
            }
            let Some(thread) = self.thread.take() else {
                return Ok(());
            };
            return Err(Error::conflict(format!(
                "thread {} in the target holds {} messages, more than the input's {}: the \
                 target holds another thread under this scope (clear it, or import elsewhere)",
                thread.scope, thread.present, thread.ordinal
            )));
        }
        self.flush().await?;
        self.thread = None;
        Ok(())
    }

    async fn session(&mut self, record: SessionRecord) -> Result<()> {
        let sessions = &self.to.sessions;
        let mut written = false;
        for _ in 0..SESSION_ATTEMPTS {
            let result = match sessions.load(&record.scope).await? {
                Some(current) if current.state == record.state => Ok(0),
                Some(current) => {
                    sessions
                        .save(&record.scope, &record.state, Some(current.version))
                        .await
                }
                None => sessions.save(&record.scope, &record.state, None).await,
            };
            match result {
                Ok(_) => {
                    written = true;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        if !written {
            return Err(Error::conflict(format!(
                "session {} kept changing in the target while it was imported; stop its \
                 writers and import again",
                record.scope
            )));
        }
        if record.is_blocks() {
            self.stats.copied.block_states = self.stats.copied.block_states.saturating_add(1);
        } else {
            self.stats.copied.sessions = self.stats.copied.sessions.saturating_add(1);
        }
        self.progress.session_copied(&record.scope);
        Ok(())
    }
}

impl Sink for Importer<'_> {
    async fn record(&mut self, record: Record) -> Result<()> {
        self.accept(record).await
    }
}
