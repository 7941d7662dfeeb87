//! Reading a source endpoint: the tenants and scopes a selection covers, a thread's messages
//! page by page, the export's records, and the verification after a migration.

use std::collections::{BTreeSet, VecDeque};

use memory_core::{
    Error, ErrorKind, HistoryStore, PageRequest, Result, Scope, StoredMessage, TenantId, Window,
};

use crate::format::{MessageRecord, Record, SessionRecord, ThreadRecord};
use crate::identity::renamed_row;
use crate::listing::Listing;
use memory_core::memory::BLOCK_STATE_SOURCE;

use crate::{BundleSummary, Endpoint, PAGE, Progress, Selection, Sink, Tenants};

/// Tenants listed per page: large, as some stores (Redis) scan their whole keyspace for
/// every page of tenants.
const TENANT_PAGE: usize = 10_000;
/// Messages between two `messages_copied` progress calls of an export.
const PROGRESS_STEP: u64 = 1_000;

/// The tenants a selection covers.
pub(crate) async fn tenants(from: &Endpoint, tenants: &Tenants) -> Result<Vec<TenantId>> {
    if let Tenants::Listed(list) = tenants {
        // Each tenant once, in the order given.
        let mut seen = BTreeSet::new();
        return Ok(list.iter().filter(|t| seen.insert(*t)).cloned().collect());
    }
    let explain = |e: Error| {
        if e.kind() == ErrorKind::Unsupported {
            Error::unsupported(format!(
                "every tenant was selected, but a store cannot list its tenants ({}); name \
                 the tenants instead",
                e.message()
            ))
        } else {
            e
        }
    };
    let mut all = BTreeSet::new();
    let mut page = PageRequest::first(TENANT_PAGE);
    loop {
        let got = from.history.list_tenants(page).await.map_err(explain)?;
        all.extend(got.items);
        match got.next_cursor {
            Some(c) => page = PageRequest::after(TENANT_PAGE, c),
            None => break,
        }
    }
    let mut page = PageRequest::first(TENANT_PAGE);
    loop {
        let got = from.sessions.list_tenants(page).await.map_err(explain)?;
        all.extend(got.items);
        match got.next_cursor {
            Some(c) => page = PageRequest::after(TENANT_PAGE, c),
            None => break,
        }
    }
    Ok(all.into_iter().collect())
}

/// A thread's messages in sequence order, up to a last seq, read a page at a time
/// ([`HistoryStore::read_page`]), or whole with [`Window::Everything`] on a store without
/// paged reads.
pub(crate) struct MessageStream<'a> {
    history: &'a dyn HistoryStore,
    scope: &'a Scope,
    last_seq: u64,
    after: u64,
    paged: bool,
    buffer: VecDeque<StoredMessage>,
    done: bool,
}

impl<'a> MessageStream<'a> {
    pub(crate) fn new(history: &'a dyn HistoryStore, scope: &'a Scope, last_seq: u64) -> Self {
        Self {
            history,
            scope,
            last_seq,
            after: 0,
            paged: history.capabilities().paged_reads,
            buffer: VecDeque::new(),
            done: last_seq == 0,
        }
    }

    pub(crate) async fn next(&mut self) -> Result<Option<StoredMessage>> {
        loop {
            if let Some(m) = self.buffer.pop_front() {
                return Ok(Some(m));
            }
            if self.done {
                return Ok(None);
            }
            let page = if self.paged {
                self.history.read_page(self.scope, self.after, PAGE).await?
            } else {
                self.done = true;
                self.history.read(self.scope, Window::Everything).await?
            };
            match page.last() {
                None => self.done = true,
                Some(last) => {
                    if last.seq >= self.last_seq || last.seq <= self.after {
                        self.done = true;
                    }
                    self.after = last.seq;
                }
            }
            let last_seq = self.last_seq;
            self.buffer
                .extend(page.into_iter().filter(|m| m.seq <= last_seq));
        }
    }
}

/// Sends the records of everything `selection` selects in `from` to `sink`: each thread and
/// its messages, then each session and block state. `tenants` are the selection's tenants
/// ([`tenants`]), listed once by the caller.
pub(crate) async fn export_records<S: Sink>(
    from: &Endpoint,
    tenants: &[TenantId],
    selection: &Selection,
    sink: &mut S,
    progress: &dyn Progress,
) -> Result<()> {
    for tenant in tenants {
        let filter = selection.in_tenant(tenant.clone());
        let mut thread_pages = Listing::threads(from, &filter);
        while let Some(scopes) = thread_pages.next_page().await? {
            for scope in &scopes {
                export_thread(from.history.as_ref(), scope, sink, progress).await?;
            }
        }
    }
    for tenant in tenants {
        let filter = selection.in_tenant(tenant.clone());
        let mut session_pages = Listing::sessions(from, &filter);
        while let Some(scopes) = session_pages.next_page().await? {
            for scope in &scopes {
                let Some(stored) = from.sessions.load(scope).await? else {
                    continue;
                };
                let record = SessionRecord {
                    scope: scope.clone(),
                    version: stored.version,
                    state: stored.state,
                };
                let record = if record.is_blocks() {
                    Record::Blocks(record)
                } else {
                    Record::Session(record)
                };
                sink.record(record).await?;
                progress.session_copied(scope);
            }
        }
    }
    Ok(())
}

async fn export_thread<S: Sink>(
    history: &dyn HistoryStore,
    scope: &Scope,
    sink: &mut S,
    progress: &dyn Progress,
) -> Result<()> {
    let count = history.count(scope).await?;
    if count.last_seq == 0 {
        // Cleared or expired since it was listed.
        return Ok(());
    }
    let messages = count.active.saturating_add(count.archived);
    sink.record(Record::Thread(ThreadRecord {
        scope: scope.clone(),
        messages,
        archived: count.archived,
        last_seq: count.last_seq,
    }))
    .await?;
    progress.thread_started(scope, messages);
    let mut stream = MessageStream::new(history, scope, count.last_seq);
    let mut unreported = 0u64;
    while let Some(m) = stream.next().await? {
        sink.record(Record::Message(MessageRecord {
            seq: m.seq,
            tokens: m.tokens,
            archived: m.archived,
            message: m.message,
        }))
        .await?;
        unreported = unreported.saturating_add(1);
        if unreported >= PROGRESS_STEP {
            progress.messages_copied(unreported);
            unreported = 0;
        }
    }
    if unreported > 0 {
        progress.messages_copied(unreported);
    }
    Ok(())
}

/// Counts what `selection` selects in `from` without reading a message: per thread one
/// `count`, per session scope one listing entry.
pub(crate) async fn survey(from: &Endpoint, selection: &Selection) -> Result<BundleSummary> {
    let mut summary = BundleSummary::default();
    for tenant in &tenants(from, &selection.tenant).await? {
        let filter = selection.in_tenant(tenant.clone());
        let mut thread_pages = Listing::threads(from, &filter);
        while let Some(scopes) = thread_pages.next_page().await? {
            for scope in &scopes {
                let count = from.history.count(scope).await?;
                if count.last_seq == 0 {
                    continue;
                }
                summary.threads = summary.threads.saturating_add(1);
                summary.messages = summary
                    .messages
                    .saturating_add(count.active.saturating_add(count.archived));
                summary.archived = summary.archived.saturating_add(count.archived);
            }
        }
        let mut session_pages = Listing::sessions(from, &filter);
        while let Some(scopes) = session_pages.next_page().await? {
            for scope in &scopes {
                if scope.source().as_str() == BLOCK_STATE_SOURCE {
                    summary.block_states = summary.block_states.saturating_add(1);
                } else {
                    summary.sessions = summary.sessions.saturating_add(1);
                }
            }
        }
    }
    Ok(summary)
}

fn mismatch(what: impl std::fmt::Display) -> Error {
    Error::conflict(format!("the migration's verification failed: {what}"))
}

/// Compares the target with the source for everything `selection` selects: per thread the
/// counts and every message, per session the state, for `tenants` (the selection's, listed
/// once by the caller). Returns the threads and sessions verified.
pub(crate) async fn verify(
    from: &Endpoint,
    to: &Endpoint,
    tenants: &[TenantId],
    selection: &Selection,
) -> Result<(u64, u64)> {
    let (mut threads, mut sessions) = (0u64, 0u64);
    for tenant in tenants {
        let filter = selection.in_tenant(tenant.clone());
        let mut thread_pages = Listing::threads(from, &filter);
        while let Some(scopes) = thread_pages.next_page().await? {
            for scope in &scopes {
                verify_thread(from.history.as_ref(), to.history.as_ref(), scope).await?;
                threads = threads.saturating_add(1);
            }
        }
        let mut session_pages = Listing::sessions(from, &filter);
        while let Some(scopes) = session_pages.next_page().await? {
            for scope in &scopes {
                let Some(source) = from.sessions.load(scope).await? else {
                    continue;
                };
                match to.sessions.load(scope).await? {
                    Some(target) if target.state == source.state => {}
                    Some(_) => {
                        return Err(mismatch(format!(
                            "the state of session {scope} in the target differs from the \
                             source's"
                        )));
                    }
                    None => {
                        return Err(mismatch(format!(
                            "session {scope} is missing in the target"
                        )));
                    }
                }
                sessions = sessions.saturating_add(1);
            }
        }
    }
    Ok((threads, sessions))
}

async fn verify_thread(
    from: &dyn HistoryStore,
    to: &dyn HistoryStore,
    scope: &Scope,
) -> Result<()> {
    let (source, target) = (from.count(scope).await?, to.count(scope).await?);
    if (source.active, source.archived) != (target.active, target.archived) {
        return Err(mismatch(format!(
            "thread {scope} holds {} active and {} archived messages in the source, {} and {} \
             in the target",
            source.active, source.archived, target.active, target.archived
        )));
    }
    let mut src = MessageStream::new(from, scope, source.last_seq);
    let mut tgt = MessageStream::new(to, scope, target.last_seq);
    let mut position = 0u64;
    loop {
        let (s, t) = (src.next().await?, tgt.next().await?);
        position = position.saturating_add(1);
        let (s, t) = match (s, t) {
            (None, None) => return Ok(()),
            (Some(_), None) | (None, Some(_)) => {
                return Err(mismatch(format!(
                    "thread {scope} reads a different number of messages in the source and \
                     the target (they differ from message {position} on)"
                )));
            }
            (Some(s), Some(t)) => (s, t),
        };
        // A LlamaIndex row under the target table's name and time is the source's row.
        let renamed = renamed_row(&t.message, &s.message);
        let problem = if t.seq != position {
            Some(format!(
                "the target's message {position} has seq {}, not {position}",
                t.seq
            ))
        } else if t.message.id != s.message.id && !renamed {
            Some(format!(
                "the target's message {position} has id {}, the source's {}",
                t.message.id, s.message.id
            ))
        } else if !renamed && t.message != s.message {
            Some(format!(
                "the target's message {position} (id {}) has other content than the source's",
                t.message.id
            ))
        } else if t.archived != s.archived {
            Some(format!(
                "the target's message {position} (id {}) is {} in the target and {} in the \
                 source",
                t.message.id,
                if t.archived { "archived" } else { "active" },
                if s.archived { "archived" } else { "active" },
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(mismatch(format!("in thread {scope}, {problem}")));
        }
    }
}
