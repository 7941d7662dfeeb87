//! Writer processes that append to a [`HistoryStore`], are killed with SIGKILL or race each
//! other, and the checks of what the threads hold afterwards.
//!
//! The test binary is its own writer: a backend's test file holds one child test that does
//! nothing unless [`JOB_ENV`] is set, and otherwise opens the store the job's `target` names and
//! runs [`run_writer_job`]. The parent test starts children with [`WriterProcess::spawn`] (the
//! binary re-executed with `--exact <child test>`), reads every acknowledged append from their
//! stdout as it happens, and at the end reads the threads back and checks them with
//! [`verify_threads`]:
//!
//! - every acknowledged message is stored exactly once, at the sequence number its append
//!   returned;
//! - no message id is stored twice;
//! - a batch is all or nothing, and its messages are contiguous;
//! - sequence numbers are `1..=n` without a gap;
//! - each writer's messages appear in the order it wrote them (the thread has one order);
//! - once every writer finished, every planned message is there.
//!
//! A writer's message ids are deterministic (`fw<writer>-<index>`), and a failed append is
//! retried with the same ids until it is acknowledged, as an application should. A writer that
//! is killed is continued by a fresh process from its first unacknowledged batch, with the
//! same batch boundaries, so a batch that landed just before the kill is retried and must not
//! be stored again.
//!
//! [`kill_and_resume`] and [`racing_processes`] are the two scenarios, ready to call.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memory_core::{
    ChatMessage, ErrorKind, HistoryStore, MessageId, Scope, SessionId, StoredMessage, TenantId,
    Window,
};
use serde_json::{Value, json};

/// The environment variable that carries a child's [`WriterJob`] (as JSON). A child test runs
/// only when it is set.
pub const JOB_ENV: &str = "AGENT_MEMORY_FAULT_WRITER_JOB";

/// The environment variable that asks for the full counts of the issue (16 writers × 1,000
/// appends) instead of the smaller CI counts; `cargo xtask faults` sets it.
pub const FULL_ENV: &str = "AGENT_MEMORY_FAULTS_FULL";

/// The marker of an acknowledgement line on a child's stdout.
const ACK_TAG: &str = "FAULT-ACK";

/// How many times a child retries one batch before it gives up (and fails).
const MAX_ATTEMPTS: u32 = 200;

/// Whether [`FULL_ENV`] asks for the full counts.
pub fn full_counts() -> bool {
    std::env::var(FULL_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The messages one writer appends: indices `start..end`, in batches aligned on multiples of
/// the job's batch size (so a writer continued from a batch boundary cuts the same batches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterRange {
    /// The writer's id, unique in the test.
    pub writer: u32,
    /// The first index to write.
    pub start: u32,
    /// One past the last index to write.
    pub end: u32,
}

/// What a child process does: its writers, run concurrently as tasks, on which threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterJob {
    /// What the child test opens its store on (a URL, a file, a key prefix): the test file
    /// gives it its meaning.
    pub target: String,
    /// The tenant of every thread of the job.
    pub tenant: String,
    /// The session of the shared thread, or the stem of each writer's own thread.
    pub session: String,
    /// Whether each writer writes its own thread (`<session>-w<writer>`) instead of the
    /// shared one.
    pub thread_per_writer: bool,
    /// Messages per append (the last batch of a writer may be shorter).
    pub batch: u32,
    /// The writers, each a task of the child.
    pub writers: Vec<WriterRange>,
    /// The longest pause, in microseconds, between an append's return and its
    /// acknowledgement (each pause is random below it): it widens the window in which a kill
    /// leaves a stored batch unacknowledged, so the retry of such a batch is exercised.
    pub ack_delay_us: u32,
}

impl WriterJob {
    /// The job as the JSON text [`JOB_ENV`] carries.
    pub fn encode(&self) -> String {
        let writers: Vec<Value> = self
            .writers
            .iter()
            .map(|w| json!([w.writer, w.start, w.end]))
            .collect();
        json!({
            "target": self.target,
            "tenant": self.tenant,
            "session": self.session,
            "thread_per_writer": self.thread_per_writer,
            "batch": self.batch,
            "writers": writers,
            "ack_delay_us": self.ack_delay_us,
        })
        .to_string()
    }

    /// Parses what [`encode`](Self::encode) wrote; `None` when it is not such a job.
    pub fn decode(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text).ok()?;
        let number = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
        let writers = value
            .get("writers")?
            .as_array()?
            .iter()
            .map(|w| {
                let w = w.as_array()?;
                Some(WriterRange {
                    writer: number(w.first()?)?,
                    start: number(w.get(1)?)?,
                    end: number(w.get(2)?)?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let batch = number(value.get("batch")?)?;
        if batch == 0 {
            return None;
        }
        Some(Self {
            target: value.get("target")?.as_str()?.to_owned(),
            tenant: value.get("tenant")?.as_str()?.to_owned(),
            session: value.get("session")?.as_str()?.to_owned(),
            thread_per_writer: value.get("thread_per_writer")?.as_bool()?,
            batch,
            writers,
            ack_delay_us: number(value.get("ack_delay_us")?)?,
        })
    }

    /// The thread `writer` writes.
    ///
    /// # Panics
    /// When the job's tenant or session is not a valid id.
    pub fn scope_of(&self, writer: u32) -> Scope {
        let session = if self.thread_per_writer {
            format!("{}-w{writer}", self.session)
        } else {
            self.session.clone()
        };
        Scope::new(
            TenantId::new(self.tenant.clone()).expect("the job's tenant is a valid id"),
            SessionId::new(session).expect("the job's session is a valid id"),
        )
    }

    /// Every thread of the job, each with the writers that write it.
    pub fn threads(&self) -> BTreeMap<String, (Scope, Vec<WriterRange>)> {
        let mut threads: BTreeMap<String, (Scope, Vec<WriterRange>)> = BTreeMap::new();
        for range in &self.writers {
            let scope = self.scope_of(range.writer);
            threads
                .entry(scope.key())
                .or_insert_with(|| (scope, Vec::new()))
                .1
                .push(*range);
        }
        threads
    }
}

/// The job of this process, when it was started as a writer child.
pub fn child_job() -> Option<WriterJob> {
    let text = std::env::var(JOB_ENV).ok()?;
    Some(WriterJob::decode(&text).expect("the writer job in AGENT_MEMORY_FAULT_WRITER_JOB"))
}

/// The id of message `index` of `writer`: `fw<writer>-<index>`.
///
/// # Panics
/// Never: the id is valid by construction.
pub fn message_id(writer: u32, index: u32) -> MessageId {
    MessageId::new(format!("fw{writer}-{index:06}")).expect("fw<n>-<n> is a valid message id")
}

/// The writer and index of a message id [`message_id`] made.
pub fn parse_message_id(id: &str) -> Option<(u32, u32)> {
    let (writer, index) = id.strip_prefix("fw")?.split_once('-')?;
    Some((writer.parse().ok()?, index.parse().ok()?))
}

/// The message `index` of `writer`.
pub fn writer_message(writer: u32, index: u32) -> ChatMessage {
    ChatMessage::user(format!("writer {writer} message {index}")).with_id(message_id(writer, index))
}

/// The child side: runs every writer of `job` as a concurrent task on `store`, printing one
/// `FAULT-ACK` line per acknowledged append (flushed before the next append starts), and
/// panics when a writer fails for good.
pub async fn run_writer_job(store: Arc<dyn HistoryStore>, job: &WriterJob) {
    let mut tasks = Vec::new();
    for range in job.writers.clone() {
        let store = store.clone();
        let scope = job.scope_of(range.writer);
        let (batch, delay) = (job.batch, job.ack_delay_us);
        tasks.push(tokio::spawn(async move {
            write_range(&*store, &scope, range, batch, delay).await
        }));
    }
    let mut failures = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("a writer task panicked: {e}")),
        }
    }
    assert!(failures.is_empty(), "writers failed: {failures:?}");
}

/// Appends `range` in aligned batches, each retried with the same ids until acknowledged.
async fn write_range(
    store: &dyn HistoryStore,
    scope: &Scope,
    range: WriterRange,
    batch: u32,
    ack_delay_us: u32,
) -> Result<(), String> {
    let mut index = range.start;
    while index < range.end {
        let next = ((index / batch + 1) * batch).min(range.end);
        let messages: Vec<ChatMessage> = (index..next)
            .map(|i| writer_message(range.writer, i))
            .collect();
        let mut attempt = 0;
        let outcome = loop {
            attempt += 1;
            match store.append(scope, &messages).await {
                Ok(outcome) => break outcome,
                Err(e) if e.kind() == ErrorKind::InvalidInput => {
                    return Err(format!("writer {}: append refused: {e}", range.writer));
                }
                Err(e) if attempt >= MAX_ATTEMPTS => {
                    return Err(format!(
                        "writer {}: append failed {attempt} times, last: {e}",
                        range.writer
                    ));
                }
                Err(e) => {
                    eprintln!(
                        "writer {} batch at {index}: attempt {attempt} failed, retrying: {e}",
                        range.writer
                    );
                    let wait = u64::from(attempt.min(40)) * 5;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
            }
        };
        if outcome.seqs.len() != messages.len() {
            return Err(format!(
                "writer {}: an append of {} messages returned {} seqs",
                range.writer,
                messages.len(),
                outcome.seqs.len()
            ));
        }
        if ack_delay_us > 0 {
            let pause = random_below(u64::from(ack_delay_us));
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        let seqs: Vec<String> = outcome.seqs.iter().map(u64::to_string).collect();
        let line = format!("{ACK_TAG} {} {index} {}\n", range.writer, seqs.join(","));
        // Straight to fd 1 (not through the test harness's capture), in one write.
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| format!("writer {}: cannot report an ack: {e}", range.writer))?;
        index = next;
    }
    Ok(())
}

/// One acknowledged message: its append returned, and the child said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ack {
    /// The writer.
    pub writer: u32,
    /// The message's index.
    pub index: u32,
    /// The sequence number the append returned for it.
    pub seq: u64,
}

/// Parses one complete stdout line of a child; `None` for any other line. The tag may follow
/// other text on the line (the test harness prints `test <name> ... ` without a newline).
fn parse_ack_line(line: &str) -> Option<Vec<Ack>> {
    let start = line.find(ACK_TAG)? + ACK_TAG.len();
    let mut parts = line.get(start..)?.split_whitespace();
    let writer: u32 = parts.next()?.parse().ok()?;
    let first: u32 = parts.next()?.parse().ok()?;
    let seqs = parts.next()?;
    seqs.split(',')
        .enumerate()
        .map(|(k, seq)| {
            Some(Ack {
                writer,
                index: first + u32::try_from(k).ok()?,
                seq: seq.parse().ok()?,
            })
        })
        .collect()
}

/// How [`WriterProcess::wait_for_acks`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckWait {
    /// The child acknowledged as many appends as asked.
    Reached,
    /// The child ended first (its stdout closed).
    Ended,
    /// The time ran out first.
    TimedOut,
}

/// A running writer child, its acknowledgements read as they come.
#[derive(Debug)]
pub struct WriterProcess {
    child: Child,
    batches: mpsc::Receiver<Vec<Ack>>,
    acks: Vec<Ack>,
    acked_batches: usize,
    stderr: Option<JoinHandle<String>>,
}

impl WriterProcess {
    /// Starts this test binary again as a writer child running the test `child_test` (its
    /// full name, for `--exact`) with `job`.
    ///
    /// # Panics
    /// When the process cannot be started.
    pub fn spawn(child_test: &str, job: &WriterJob) -> Self {
        let exe = std::env::current_exe().expect("the path of the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
            .env(JOB_ENV, job.encode())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a writer child process");
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let mut stderr = child.stderr.take().expect("the child's stderr is piped");
        let (sender, batches) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    // A line cut off by the kill is not an acknowledgement the parent saw.
                    Ok(_) if !line.ends_with('\n') => break,
                    Ok(_) => {
                        if let Some(acks) = parse_ack_line(line.trim_end())
                            && sender.send(acks).is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Self {
            child,
            batches,
            acks: Vec::new(),
            acked_batches: 0,
            stderr: Some(stderr),
        }
    }

    /// Waits until the child acknowledged `batches` appends in all, it closed its stdout (it
    /// ended), or `timeout` passed.
    pub fn wait_for_acks(&mut self, batches: usize, timeout: Duration) -> AckWait {
        let deadline = Instant::now() + timeout;
        while self.acked_batches < batches {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.batches.recv_timeout(left) {
                Ok(acks) => self.take(acks),
                Err(mpsc::RecvTimeoutError::Disconnected) => return AckWait::Ended,
                Err(mpsc::RecvTimeoutError::Timeout) => return AckWait::TimedOut,
            }
        }
        AckWait::Reached
    }

    fn take(&mut self, acks: Vec<Ack>) {
        self.acked_batches += 1;
        self.acks.extend(acks);
    }

    /// Drains every acknowledgement the child wrote before its stdout closed.
    fn drain(&mut self, deadline: Instant) -> bool {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.batches.recv_timeout(left) {
                Ok(acks) => self.take(acks),
                Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Kills the child with SIGKILL and returns everything it acknowledged.
    ///
    /// # Panics
    /// When the child cannot be killed or reaped.
    pub fn kill(mut self) -> Vec<Ack> {
        // `Child::kill` sends SIGKILL on Unix: no destructor, no flush, no goodbye.
        let _ = self.child.kill();
        self.child.wait().expect("reap the killed writer");
        self.drain(Instant::now() + Duration::from_secs(30));
        std::mem::take(&mut self.acks)
    }

    /// Waits for the child to finish (killing it after `timeout`) and returns everything it
    /// acknowledged.
    ///
    /// # Panics
    /// When the child fails or outlives `timeout`; the message holds its stderr.
    pub fn finish(mut self, timeout: Duration) -> Vec<Ack> {
        let deadline = Instant::now() + timeout;
        let drained = self.drain(deadline);
        if !drained {
            let _ = self.child.kill();
        }
        let status = self.child.wait().expect("reap the writer");
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        assert!(
            drained && status.success(),
            "the writer child {} ({status}); its stderr:\n{stderr}",
            if drained { "failed" } else { "timed out" }
        );
        std::mem::take(&mut self.acks)
    }
}

impl Drop for WriterProcess {
    fn drop(&mut self) {
        // A test that panics never leaves a writer running.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A violation of what the threads must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What one thread held, when it passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadSummary {
    /// Messages stored.
    pub stored: usize,
    /// Acknowledged messages (all of them found).
    pub acknowledged: usize,
    /// Batches stored whose acknowledgement the parent never saw (the writer was killed after
    /// the commit and before its report): the retry found them and stored nothing again.
    pub stored_unacknowledged_batches: usize,
}

/// Checks one thread's messages (`stored`, as [`Window::Everything`] reads them) against the
/// acknowledgements of its writers and their plan (`plan`: every writer of the thread, with
/// the whole range it was to write). With `complete`, every planned message must be there.
pub fn check_thread(
    stored: &[StoredMessage],
    acks: &[Ack],
    plan: &[WriterRange],
    batch: u32,
    complete: bool,
) -> Result<ThreadSummary, Vec<Violation>> {
    let mut violations = Vec::new();
    let mut fail = |text: String| violations.push(Violation(text));
    let planned: HashMap<u32, WriterRange> = plan.iter().map(|r| (r.writer, *r)).collect();

    // Seqs 1..=n, in order, without a gap.
    for (position, message) in stored.iter().enumerate() {
        let expected = position as u64 + 1;
        if message.seq != expected {
            fail(format!(
                "the message at position {position} has seq {} instead of {expected} (a gap, a \
                 repeat or a disorder)",
                message.seq
            ));
            break;
        }
    }

    // Every message is a planned one, stored once.
    let mut found: HashMap<(u32, u32), u64> = HashMap::new();
    for message in stored {
        let id = message.message.id.as_str();
        let Some((writer, index)) = parse_message_id(id) else {
            fail(format!(
                "seq {} holds a message no writer wrote: {id}",
                message.seq
            ));
            continue;
        };
        let in_plan = planned
            .get(&writer)
            .is_some_and(|r| index < r.end && index >= r.start);
        if !in_plan {
            fail(format!(
                "seq {} holds {id}, which no writer of this thread planned",
                message.seq
            ));
        }
        if let Some(first) = found.insert((writer, index), message.seq) {
            fail(format!(
                "{id} is stored twice: at seq {first} and {}",
                message.seq
            ));
        }
    }

    // Every acknowledged message is there, once, where its append said.
    let mut acked: HashSet<(u32, u32)> = HashSet::new();
    for ack in acks {
        acked.insert((ack.writer, ack.index));
        match found.get(&(ack.writer, ack.index)) {
            None => fail(format!(
                "{} was acknowledged at seq {} and is lost",
                message_id(ack.writer, ack.index),
                ack.seq
            )),
            Some(&seq) if seq != ack.seq => fail(format!(
                "{} was acknowledged at seq {} and is stored at seq {seq}",
                message_id(ack.writer, ack.index),
                ack.seq
            )),
            Some(_) => {}
        }
    }

    // Each writer's messages in its own order; each batch whole and contiguous, or absent.
    let mut stored_unacknowledged_batches = 0;
    for range in plan {
        let mut last: Option<(u32, u64)> = None;
        let mut mine: Vec<(u64, u32)> = found
            .iter()
            .filter(|((w, _), _)| *w == range.writer)
            .map(|(&(_, i), &seq)| (seq, i))
            .collect();
        mine.sort_unstable();
        for &(seq, index) in &mine {
            if let Some((previous, previous_seq)) = last
                && index < previous
            {
                fail(format!(
                    "writer {}: message {index} (seq {seq}) comes after message {previous} \
                     (seq {previous_seq}), against the order it was written in",
                    range.writer
                ));
            }
            last = Some((index, seq));
        }
        let mut first_batch = range.start / batch * batch;
        while first_batch < range.end {
            let end = (first_batch + batch).min(range.end);
            let indices = first_batch.max(range.start)..end;
            let seqs: Vec<Option<u64>> = indices
                .clone()
                .map(|i| found.get(&(range.writer, i)).copied())
                .collect();
            let present = seqs.iter().filter(|s| s.is_some()).count();
            if present != 0 && present != seqs.len() {
                fail(format!(
                    "writer {}: the batch {indices:?} is partly stored ({present} of {})",
                    range.writer,
                    seqs.len()
                ));
            } else if present != 0 {
                let seqs: Vec<u64> = seqs.into_iter().flatten().collect();
                if seqs.windows(2).any(|w| w[1] != w[0] + 1) {
                    fail(format!(
                        "writer {}: the batch {indices:?} is not contiguous: seqs {seqs:?}",
                        range.writer
                    ));
                }
                if !acked.contains(&(range.writer, indices.start)) {
                    stored_unacknowledged_batches += 1;
                }
            } else if complete {
                fail(format!(
                    "writer {}: the batch {indices:?} is missing after every writer finished",
                    range.writer
                ));
            }
            first_batch = end;
        }
    }

    if violations.is_empty() {
        Ok(ThreadSummary {
            stored: stored.len(),
            acknowledged: acked.len(),
            stored_unacknowledged_batches,
        })
    } else {
        Err(violations)
    }
}

/// Reads every thread of `plan` (a job holding each writer's whole range) with
/// [`Window::Everything`] and checks it with [`check_thread`]; panics listing the first
/// violations. Returns the summaries added up.
pub async fn verify_threads(
    store: &dyn HistoryStore,
    plan: &WriterJob,
    acks: &[Ack],
    complete: bool,
) -> ThreadSummary {
    let mut total = ThreadSummary::default();
    for (key, (scope, writers)) in plan.threads() {
        let stored = store
            .read(&scope, Window::Everything)
            .await
            .unwrap_or_else(|e| panic!("read the thread {key}: {e}"));
        let mine: HashSet<u32> = writers.iter().map(|w| w.writer).collect();
        let thread_acks: Vec<Ack> = acks
            .iter()
            .filter(|a| mine.contains(&a.writer))
            .copied()
            .collect();
        match check_thread(&stored, &thread_acks, &writers, plan.batch, complete) {
            Ok(summary) => {
                total.stored += summary.stored;
                total.acknowledged += summary.acknowledged;
                total.stored_unacknowledged_batches += summary.stored_unacknowledged_batches;
            }
            Err(violations) => {
                let shown: Vec<String> = violations.iter().take(20).map(|v| v.0.clone()).collect();
                panic!(
                    "the thread {key} broke {} rule(s), first ones:\n{}",
                    violations.len(),
                    shown.join("\n")
                );
            }
        }
    }
    total
}

/// Clears every thread of `job` (the tests' cleanup).
pub async fn clear_threads(store: &dyn HistoryStore, job: &WriterJob) {
    for (key, (scope, _)) in job.threads() {
        store
            .clear(&scope)
            .await
            .unwrap_or_else(|e| panic!("clear the thread {key}: {e}"));
    }
}

/// A random number (from a v4 UUID: the crate has no other randomness).
fn random_below(bound: u64) -> u64 {
    let value = uuid::Uuid::new_v4().as_u128() as u64;
    if bound == 0 { 0 } else { value % bound }
}

/// A fresh job with `writers` writers `first_writer..` each planned for `0..count`.
fn fresh_job(
    target: &str,
    first_writer: u32,
    writers: u32,
    count: u32,
    batch: u32,
    thread_per_writer: bool,
) -> WriterJob {
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    WriterJob {
        target: target.to_owned(),
        tenant: format!("tk-fault-{}", &uuid[..16]),
        session: format!("s-fault-{}", &uuid[16..]),
        thread_per_writer,
        batch,
        ack_delay_us: 0,
        writers: (first_writer..first_writer + writers)
            .map(|writer| WriterRange {
                writer,
                start: 0,
                end: count,
            })
            .collect(),
    }
}

/// The kill scenario's shape.
#[derive(Debug, Clone, Copy)]
pub struct KillOptions {
    /// Writer tasks in each process.
    pub writers: u32,
    /// Messages each writer writes in all.
    pub count: u32,
    /// Messages per append.
    pub batch: u32,
    /// How many processes are killed before a last one finishes the job.
    pub kills: u32,
    /// The child's [`WriterJob::ack_delay_us`].
    pub ack_delay_us: u32,
}

impl KillOptions {
    /// The shape every backend's kill test uses: 4 writers of 60 messages (250 under
    /// [`FULL_ENV`]) in batches of 5, 4 kills (10 under [`FULL_ENV`]), acknowledgements 3 ms
    /// apart.
    pub fn standard() -> Self {
        let full = full_counts();
        Self {
            writers: 4,
            count: if full { 250 } else { 60 },
            batch: 5,
            kills: if full { 10 } else { 4 },
            ack_delay_us: 3000,
        }
    }
}

/// What the kill scenario saw.
#[derive(Debug, Clone)]
pub struct KillReport {
    /// The thread's summary after the last writer finished.
    pub summary: ThreadSummary,
    /// After how many acknowledged appends of its own each killed process was killed.
    pub killed_after: Vec<usize>,
    /// For each kill, how many batches were stored without an acknowledgement (the kill
    /// came between the commit and the report); the next process retried them, and the
    /// final check proved they were not stored again.
    pub stored_unacknowledged_at_kill: Vec<usize>,
    /// How long the whole scenario took.
    pub elapsed: Duration,
}

/// Kills writer processes with SIGKILL at random moments while their writers append to one
/// thread, continuing each time with a fresh process from every writer's first
/// unacknowledged batch; checks the thread after each kill and at the end (see the module
/// documentation for the rules). `child_test` is the test that runs the child side on the
/// store `target` names; `store` is the parent's own handle on the same store. The thread is
/// cleared at the end.
pub async fn kill_and_resume(
    store: Arc<dyn HistoryStore>,
    child_test: &str,
    target: &str,
    options: KillOptions,
) -> KillReport {
    let started = Instant::now();
    let mut plan = fresh_job(
        target,
        1,
        options.writers,
        options.count,
        options.batch,
        false,
    );
    plan.ack_delay_us = options.ack_delay_us;
    let batches_per_writer = options.count.div_ceil(options.batch) as usize;
    let total_batches = batches_per_writer * options.writers as usize;
    let mut acks: Vec<Ack> = Vec::new();
    let mut killed_after = Vec::new();
    let mut stored_unacknowledged_at_kill = Vec::new();
    let mut job = plan.clone();
    for _kill in 0..options.kills {
        // Kill somewhere in the next share of the work, then a random moment later.
        // Never more than half of what is left, so most kills land mid-run.
        let remaining: usize = job
            .writers
            .iter()
            .map(|r| (r.end - r.start).div_ceil(options.batch) as usize)
            .sum();
        let share = (total_batches / (options.kills as usize + 1))
            .min(remaining / 2)
            .max(1);
        let after = 1 + random_below(share as u64) as usize;
        let mut child = WriterProcess::spawn(child_test, &job);
        let got = match child.wait_for_acks(after, Duration::from_secs(120)) {
            AckWait::Reached => {
                std::thread::sleep(Duration::from_micros(random_below(3000)));
                child.kill()
            }
            // It finished its work before the kill: it must have succeeded.
            AckWait::Ended => child.finish(Duration::from_secs(60)),
            AckWait::TimedOut => {
                let got = child.kill();
                panic!(
                    "the writer child stalled before {after} acknowledged appends ({} \
                     acknowledged messages)",
                    got.len()
                );
            }
        };
        killed_after.push(got.len().div_ceil(options.batch as usize));
        acks.extend(got);
        let summary = verify_threads(&*store, &plan, &acks, false).await;
        assert!(
            summary.acknowledged == acks.len(),
            "acks were counted twice"
        );
        stored_unacknowledged_at_kill.push(summary.stored_unacknowledged_batches);
        job = continue_job(&plan, &acks);
        if job.writers.is_empty() {
            break;
        }
    }
    if !job.writers.is_empty() {
        acks.extend(WriterProcess::spawn(child_test, &job).finish(Duration::from_secs(600)));
    }
    let summary = verify_threads(&*store, &plan, &acks, true).await;
    clear_threads(&*store, &plan).await;
    KillReport {
        summary,
        killed_after,
        stored_unacknowledged_at_kill,
        elapsed: started.elapsed(),
    }
}

/// The job that continues `plan` after `acks`: each writer from the batch after its last
/// acknowledged one (writers that are done are left out).
pub fn continue_job(plan: &WriterJob, acks: &[Ack]) -> WriterJob {
    let mut next: HashMap<u32, u32> = HashMap::new();
    for ack in acks {
        let entry = next.entry(ack.writer).or_insert(0);
        *entry = (*entry).max(ack.index + 1);
    }
    let mut job = plan.clone();
    job.writers = plan
        .writers
        .iter()
        .filter_map(|range| {
            let start = next.get(&range.writer).copied().unwrap_or(range.start);
            // Acks of a writer come in order and cover whole batches, so `start` is a batch
            // boundary (or the end).
            (start < range.end).then_some(WriterRange { start, ..*range })
        })
        .collect();
    job
}

/// The race scenario's shape.
#[derive(Debug, Clone, Copy)]
pub struct RaceOptions {
    /// Child processes, started together.
    pub processes: u32,
    /// Writer tasks in each process.
    pub writers_per_process: u32,
    /// Messages each writer writes.
    pub count: u32,
    /// Messages per append.
    pub batch: u32,
    /// Whether each writer has its own thread (else all share one).
    pub thread_per_writer: bool,
}

impl RaceOptions {
    /// The shape every backend's race test uses: 2 processes of 8 writers, one message per
    /// append, 150 messages each on one shared thread or 50 each on a thread per writer (1000
    /// under [`FULL_ENV`]).
    pub fn standard(thread_per_writer: bool) -> Self {
        Self {
            processes: 2,
            writers_per_process: 8,
            count: match (full_counts(), thread_per_writer) {
                (true, _) => 1000,
                (false, false) => 150,
                (false, true) => 50,
            },
            batch: 1,
            thread_per_writer,
        }
    }
}

/// What the race scenario saw.
#[derive(Debug, Clone)]
pub struct RaceReport {
    /// The threads' summary.
    pub summary: ThreadSummary,
    /// The wall time from the first start to the last child's end (not the check).
    pub writing: Duration,
}

/// Runs `processes` children at once, each with its writers appending concurrently, and checks
/// the threads when all finished: nothing lost, nothing doubled, seqs gap-free, each writer's
/// order kept. The threads are cleared at the end.
pub async fn racing_processes(
    store: Arc<dyn HistoryStore>,
    child_test: &str,
    target: &str,
    options: RaceOptions,
) -> RaceReport {
    let plan = fresh_job(
        target,
        1,
        options.processes * options.writers_per_process,
        options.count,
        options.batch,
        options.thread_per_writer,
    );
    let started = Instant::now();
    let children: Vec<WriterProcess> = plan
        .writers
        .chunks(options.writers_per_process as usize)
        .map(|writers| {
            let mut job = plan.clone();
            job.writers = writers.to_vec();
            WriterProcess::spawn(child_test, &job)
        })
        .collect();
    let mut acks = Vec::new();
    for child in children {
        acks.extend(child.finish(Duration::from_secs(900)));
    }
    let writing = started.elapsed();
    let summary = verify_threads(&*store, &plan, &acks, true).await;
    let expected = (options.processes * options.writers_per_process * options.count) as usize;
    assert_eq!(
        (summary.stored, summary.acknowledged),
        (expected, expected),
        "every planned message is stored and acknowledged once"
    );
    clear_threads(&*store, &plan).await;
    RaceReport { summary, writing }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(ids: &[(u32, u32)]) -> Vec<StoredMessage> {
        ids.iter()
            .enumerate()
            .map(|(k, &(w, i))| StoredMessage {
                seq: k as u64 + 1,
                tokens: 1,
                archived: false,
                message: writer_message(w, i).into(),
            })
            .collect()
    }

    fn plan(writers: &[u32], end: u32) -> Vec<WriterRange> {
        writers
            .iter()
            .map(|&writer| WriterRange {
                writer,
                start: 0,
                end,
            })
            .collect()
    }

    fn ack(writer: u32, index: u32, seq: u64) -> Ack {
        Ack { writer, index, seq }
    }

    #[test]
    fn a_job_survives_its_encoding() {
        let job = fresh_job("postgres://x/y?z=1", 3, 2, 10, 4, true);
        assert_eq!(WriterJob::decode(&job.encode()), Some(job));
        assert_eq!(WriterJob::decode("{}"), None);
    }

    #[test]
    fn ack_lines_parse_and_other_lines_do_not() {
        assert_eq!(
            parse_ack_line("FAULT-ACK 3 8 11,12"),
            Some(vec![ack(3, 8, 11), ack(3, 9, 12)])
        );
        assert_eq!(
            parse_ack_line("test fault_writer_child ... FAULT-ACK 1 0 1"),
            Some(vec![ack(1, 0, 1)])
        );
        assert_eq!(parse_ack_line("running 1 test"), None);
        assert_eq!(parse_ack_line("FAULT-ACK 3 8 11,x"), None);
        assert_eq!(parse_message_id("fw12-000034"), Some((12, 34)));
    }

    #[test]
    fn an_interleaved_complete_thread_passes() {
        let thread = stored(&[
            (1, 0),
            (1, 1),
            (2, 0),
            (2, 1),
            (1, 2),
            (1, 3),
            (2, 2),
            (2, 3),
        ]);
        let acks = [ack(1, 0, 1), ack(1, 1, 2), ack(2, 2, 7), ack(2, 3, 8)];
        let summary = check_thread(&thread, &acks, &plan(&[1, 2], 4), 2, true).unwrap();
        assert_eq!(summary.stored, 8);
        assert_eq!(summary.acknowledged, 4);
        assert_eq!(summary.stored_unacknowledged_batches, 2);
    }

    #[test]
    fn each_broken_rule_is_caught() {
        let p = plan(&[1], 4);
        // A duplicate.
        let thread = stored(&[(1, 0), (1, 1), (1, 0), (1, 1)]);
        assert!(check_thread(&thread, &[], &p, 2, false).is_err());
        // A lost acknowledged message.
        let thread = stored(&[(1, 0), (1, 1)]);
        assert!(check_thread(&thread, &[ack(1, 2, 3)], &p, 2, false).is_err());
        // An acknowledged message at another seq.
        assert!(check_thread(&thread, &[ack(1, 1, 5)], &p, 2, false).is_err());
        // A half batch.
        let thread = stored(&[(1, 0), (1, 1), (1, 2)]);
        assert!(check_thread(&thread, &[], &p, 2, false).is_err());
        // A writer's order reversed.
        let thread = stored(&[(1, 2), (1, 3), (1, 0), (1, 1)]);
        assert!(check_thread(&thread, &[], &p, 2, false).is_err());
        // A gap in the seqs.
        let mut thread = stored(&[(1, 0), (1, 1)]);
        thread[1].seq = 3;
        assert!(check_thread(&thread, &[], &p, 2, false).is_err());
        // A batch missing at the end.
        let thread = stored(&[(1, 0), (1, 1)]);
        assert!(check_thread(&thread, &[], &p, 2, false).is_ok());
        assert!(check_thread(&thread, &[], &p, 2, true).is_err());
    }

    #[test]
    fn a_continued_job_starts_after_the_last_acknowledged_batch() {
        let job = fresh_job("t", 1, 2, 6, 2, false);
        let next = continue_job(&job, &[ack(1, 0, 1), ack(1, 1, 2)]);
        assert_eq!(
            next.writers,
            vec![
                WriterRange {
                    writer: 1,
                    start: 2,
                    end: 6
                },
                WriterRange {
                    writer: 2,
                    start: 0,
                    end: 6
                }
            ]
        );
    }
}
