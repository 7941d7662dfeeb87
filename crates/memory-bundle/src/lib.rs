//! The portable bundle of agent-memory: a documented, versioned, streamed JSON Lines format
//! for threads (with seqs, archive flags and token counts), sessions and a `Memory`'s block
//! states ([`format`](mod@format), and docs/bundle.md), and the three operations over it:
//!
//! - [`export`] writes what a [`Selection`] selects in an [`Endpoint`] (a history store and a
//!   session store) as a bundle;
//! - [`import`] writes a bundle into an endpoint;
//! - [`migrate`] copies from one endpoint to another without a file, then verifies the copy.
//!
//! ```
//! # async fn run() -> memory_core::Result<()> {
//! use std::sync::Arc;
//! use memory_bundle::{Endpoint, NoProgress, Selection, Tenants, export, import};
//! use memory_core::{ChatMessage, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, Scope};
//!
//! let from = Endpoint::new(Arc::new(InMemoryHistoryStore::new()), Arc::new(InMemorySessionStore::new()));
//! let scope = Scope::session("chat-1")?;
//! from.history.append(&scope, &[ChatMessage::user("hello")]).await?;
//!
//! let mut bundle = Vec::new();
//! let selection = Selection::new(Tenants::one(scope.tenant().clone()));
//! export(&from, &selection, &mut bundle, &NoProgress).await?;
//!
//! let to = Endpoint::new(Arc::new(InMemoryHistoryStore::new()), Arc::new(InMemorySessionStore::new()));
//! let summary = import(&to, bundle.as_slice(), &NoProgress).await?;
//! assert_eq!(summary.messages, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Behavior
//! - Streaming: export, import and migrate hold one page of [`MAX_READ_PAGE`] messages, one
//!   append batch and one line of the bundle at a time, whatever the size of the data — on
//!   stores with [`HistoryCapabilities::paged_reads`](memory_core::HistoryCapabilities::paged_reads).
//!   A store without it is read one thread at a time with `Window::Everything`, which holds
//!   that whole thread in memory. [`Tenants::All`] holds the list of tenant ids.
//! - Import and migrate are idempotent and resumable: run again after a crash half-way, they
//!   leave every thread and session exactly as one complete run would, with no duplicate and
//!   no loss. A thread is resumed after the target's last sequence number: the target's
//!   message at seq `t` is the thread's `t`-th message in the bundle (the target numbers from
//!   1 whatever the source's seqs were), and the message at that position must have the
//!   bundle's id, else the run stops with `Conflict` naming the thread (the target holds
//!   another thread there). One exception, for every target layout to take a bundle again: a
//!   row Python wrote in a LlamaIndex table reads as `llamaindex:<table>:<row>` with the row's
//!   time, so its copy in another LlamaIndex table has that table's name and time; a target
//!   message with such an id that is equal otherwise to a bundle message with such an id is
//!   that message (in the import's check and in [`migrate`]'s verification); such a target thread (or one longer than the bundle's) is left
//!   unchanged: no archive flag is applied to a message the target already held before its
//!   position was checked. Archive flags are re-applied on every run (archiving is
//!   idempotent).
//! - Token counts are counted again by the target store on append (its counter may differ
//!   from the source's); the bundle's counts are the source's.
//! - Sessions: a state is created in the target, or replaces the target's current state
//!   (load, then save with the loaded version, again on `Conflict`); a state already equal is
//!   left alone. The target assigns its own version: versions never repeat for a scope, so
//!   the source's version (kept in the bundle) cannot be carried over. The bundle's state
//!   wins, however recent the target's: import or migrate again only before applications
//!   switch to the target, or their session changes are rolled back.
//! - What is copied: the threads the source's `list_threads` lists (a store without
//!   `lists_every_thread` leaves some out, as its documentation says) and the sessions its
//!   `list` lists. Time-to-live settings are not part of a bundle: the target's own apply.
//! - Data written to the source while an export or migrate runs may be left out (a thread is
//!   exported up to its last seq when the export reached it); [`migrate`]'s verification then
//!   fails: stop writers first.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

pub mod format;
mod identity;
mod import;
mod listing;
mod read;

use std::fmt;
use std::io::{BufRead, Write};
use std::sync::Arc;

use memory_core::{
    Error, HistoryStore, MAX_READ_PAGE, Result, Scope, ScopeFilter, SessionStore, TenantId,
};

use crate::format::{BundleReader, BundleWriter, Record};
use crate::import::Importer;
use crate::read::{export_records, verify};

/// Counts what `selection` selects in `from`, without reading a message (one `count` per
/// thread, the session listings): the totals an export or migration of it would copy if
/// nothing is written meanwhile (progress bars, `stats`).
///
/// # Errors
/// The stores' errors; `Unsupported` for [`Tenants::All`] on a store that cannot list
/// tenants.
pub async fn survey(from: &Endpoint, selection: &Selection) -> Result<BundleSummary> {
    read::survey(from, selection).await
}

/// The stores an operation reads or writes: conversation threads and session states (block
/// states of a `Memory` are sessions too).
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Where threads live.
    pub history: Arc<dyn HistoryStore>,
    /// Where session and block states live.
    pub sessions: Arc<dyn SessionStore>,
}

impl Endpoint {
    /// An endpoint over the two stores.
    pub fn new(history: Arc<dyn HistoryStore>, sessions: Arc<dyn SessionStore>) -> Self {
        Self { history, sessions }
    }
}

/// Which tenants a [`Selection`] covers: the tenant part of its [`ScopeFilter`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tenants {
    /// These tenants, in this order (a repeated one counts once).
    Listed(Vec<TenantId>),
    /// Every tenant that holds a thread or a session: the union of
    /// [`HistoryStore::list_tenants`] and [`SessionStore::list_tenants`], in sorted order. Both
    /// stores must list tenants (`lists_tenants`); otherwise the operation fails with
    /// `Unsupported`, naming the capability.
    All,
}

impl Tenants {
    /// One tenant.
    pub fn one(tenant: TenantId) -> Self {
        Self::Listed(vec![tenant])
    }

    /// These tenants, in this order.
    pub fn listed(tenants: impl IntoIterator<Item = TenantId>) -> Self {
        Self::Listed(tenants.into_iter().collect())
    }
}

/// `every tenant`, or the listed tenants joined with `, `.
impl fmt::Display for Tenants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("every tenant"),
            Self::Listed(tenants) => {
                let names: Vec<&str> = tenants.iter().map(TenantId::as_str).collect();
                f.write_str(&names.join(", "))
            }
        }
    }
}

/// What an export or a migration covers: the one [`ScopeFilter`] of memory-core over a set
/// of [`Tenants`], so the same narrowing (a user, an agent, a session id of any source: a
/// session's block states go with it, a source) applies in each tenant
/// ([`ScopeFilter::in_tenant`]).
///
/// ```
/// use memory_bundle::{Selection, Tenants};
/// use memory_core::{TenantId, UserId};
///
/// let everything = Selection::new(Tenants::All);
/// let dana = Selection::new(Tenants::one(TenantId::new("acme")?)).with_user(UserId::new("dana")?);
/// assert_eq!(dana.to_string(), "tenant acme, user dana");
/// # Ok::<(), memory_core::Error>(())
/// ```
pub type Selection = ScopeFilter<Tenants>;

/// Called as an operation advances (for progress bars). Every method has an empty default.
pub trait Progress: Send + Sync {
    /// A thread starts; `messages` is how many it holds (active and archived) in the source.
    fn thread_started(&self, _scope: &Scope, _messages: u64) {}
    /// `n` more messages were written (to the bundle, or to the target), or found already
    /// in the target (a resumed import or migration), so the sum of the calls reaches the
    /// sum of the threads' `messages`.
    fn messages_copied(&self, _n: u64) {}
    /// A session (or block state) was written.
    fn session_copied(&self, _scope: &Scope) {}
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// What an export wrote or an import read: the totals of the bundle's records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BundleSummary {
    /// Threads.
    pub threads: u64,
    /// Messages, active and archived.
    pub messages: u64,
    /// Of those, archived ones.
    pub archived: u64,
    /// Session states (block states aside).
    pub sessions: u64,
    /// `Memory` block states.
    pub block_states: u64,
}

impl From<format::EndRecord> for BundleSummary {
    fn from(e: format::EndRecord) -> Self {
        Self {
            threads: e.threads,
            messages: e.messages,
            archived: e.archived,
            sessions: e.sessions,
            block_states: e.block_states,
        }
    }
}

impl fmt::Display for BundleSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} with {} {} ({} archived), {} {} and {} {}",
            self.threads,
            plural(self.threads, "thread", "threads"),
            self.messages,
            plural(self.messages, "message", "messages"),
            self.archived,
            self.sessions,
            plural(self.sessions, "session", "sessions"),
            self.block_states,
            plural(self.block_states, "block state", "block states"),
        )
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// What a [`migrate`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationReport {
    /// What was written to the target: `messages` counts the messages appended by this run;
    /// the threads, archived messages (their flags applied to the target), sessions and block
    /// states counts are those of the selection.
    pub copied: BundleSummary,
    /// Messages the target already held (from an earlier, interrupted run), not appended
    /// again.
    pub already_present: u64,
    /// Threads whose every message was compared with the source after the copy.
    pub verified_threads: u64,
    /// Sessions and block states compared with the source after the copy.
    pub verified_sessions: u64,
}

impl fmt::Display for MigrationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "copied {}; {} {} already present in the target; verified {} {} and {} {}",
            self.copied,
            self.already_present,
            plural(self.already_present, "message was", "messages were"),
            self.verified_threads,
            plural(self.verified_threads, "thread", "threads"),
            self.verified_sessions,
            plural(self.verified_sessions, "session", "sessions"),
        )
    }
}

/// Writes what `selection` selects in `from` to `out` as a bundle (docs/bundle.md): the
/// header, every thread with its messages, every session and block state, and the end
/// record. `out` is written line by line (wrap a file in a `BufWriter`).
///
/// # Errors
/// The stores' errors; `Unsupported` for [`Tenants::All`] on a store that cannot list
/// tenants; `Unavailable` if writing fails. A failed export leaves a bundle without its end
/// record, which every import refuses as truncated.
pub async fn export<W: Write + Send>(
    from: &Endpoint,
    selection: &Selection,
    out: W,
    progress: &dyn Progress,
) -> Result<BundleSummary> {
    let mut writer = BundleWriter::new(out)?;
    let tenants = read::tenants(from, &selection.tenant).await?;
    export_records(
        from,
        &tenants,
        selection,
        &mut WriterSink(&mut writer),
        progress,
    )
    .await?;
    let (_, totals) = writer.finish()?;
    Ok(totals.into())
}

/// Imports a bundle from `input` into `to` (see the crate's `# Behavior`): idempotent and
/// resumable. Returns the bundle's totals.
///
/// # Errors
/// A [`format::FormatError`] (as an [`Error`] whose source it is) for a malformed, truncated
/// or foreign bundle — what came before the bad line is imported; `Conflict` when a target
/// thread holds other messages than the bundle's at the same positions; the stores' errors.
pub async fn import<R: BufRead + Send>(
    to: &Endpoint,
    input: R,
    progress: &dyn Progress,
) -> Result<BundleSummary> {
    let mut reader = BundleReader::new(input)?;
    let mut importer = Importer::new(to, progress);
    let mut end = None;
    while let Some(record) = reader.next_record()? {
        match record {
            Record::End(totals) => end = Some(totals),
            other => importer.accept(other).await?,
        }
    }
    importer.finish().await?;
    end.map(BundleSummary::from)
        .ok_or_else(|| Error::from(format::FormatError::MissingEnd { lines: 0 }))
}

/// Copies what `selection` selects from `from` to `to` (threads, sessions, block states) as
/// an import of an export would, without a file, then verifies the target: per thread the
/// active and archived counts and every message (id, content, archived flag, and its seq:
/// the `n`-th message of the source thread is seq `n` in the target), per session the state.
/// Idempotent and resumable (see the crate's `# Behavior`). Stop writers to `from` first.
///
/// # Errors
/// As [`export`] and [`import`]; `Conflict` naming the thread or session whose copy differs
/// from the source.
pub async fn migrate(
    from: &Endpoint,
    to: &Endpoint,
    selection: &Selection,
    progress: &dyn Progress,
) -> Result<MigrationReport> {
    // Listed once, for the copy and the verification (listing every tenant can scan a
    // whole store).
    let tenants = read::tenants(from, &selection.tenant).await?;
    let mut importer = Importer::new(to, progress);
    export_records(from, &tenants, selection, &mut importer, &NoProgress).await?;
    let stats = importer.finish().await?;
    let (verified_threads, verified_sessions) = verify(from, to, &tenants, selection).await?;
    Ok(MigrationReport {
        copied: stats.copied,
        already_present: stats.already_present,
        verified_threads,
        verified_sessions,
    })
}

/// Where [`export_records`] sends records.
pub(crate) trait Sink: Send {
    /// Takes one record.
    fn record(&mut self, record: Record) -> impl Future<Output = Result<()>> + Send;
}

struct WriterSink<'a, W: Write>(&'a mut BundleWriter<W>);

impl<W: Write + Send> Sink for WriterSink<'_, W> {
    async fn record(&mut self, record: Record) -> Result<()> {
        self.0.write(record)
    }
}

/// Messages read per page.
pub(crate) const PAGE: usize = MAX_READ_PAGE;
