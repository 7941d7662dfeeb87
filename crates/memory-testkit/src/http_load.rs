//! A bounded concurrent load on the memory server's HTTP API, and its verification: appenders
//! and readers on one conversation thread, then checks that nothing acknowledged was lost,
//! nothing was stored twice, and every client saw one order.
//!
//! The clients are futures of one task ([`run`] joins them), so they are concurrent on one
//! thread of the caller's runtime, each with its own requests on a shared keep-alive
//! [`reqwest::Client`]:
//!
//! - each **appender** posts [`LoadPlan::appends`] batches of [`LoadPlan::batch`] messages with
//!   ids of its own (`load-<appender>-<index>`) to `POST /v1/threads/{session}/messages`; every
//!   [`LoadPlan::retry_every`]-th batch is sent a second time, as a client retrying after a lost
//!   answer would, and must get the same seqs back with nothing inserted; a batch whose request
//!   fails is sent again (the ids make it safe), at most [`MAX_ATTEMPTS`] times;
//! - each **reader**, until every appender is done, alternates a window read of what it has not
//!   seen yet (`GET …/messages?after=<last seq it saw>`) and a context read
//!   (`GET /v1/memory/{session}/context?token_limit=…`), then reads once more.
//!
//! [`LoadRun::verify`] then checks, against one final read of the whole thread:
//!
//! - the final thread holds every message exactly once, seqs 1, 2, 3, … with no gap, each at
//!   the seq its append acknowledged, and `count` agrees;
//! - each appender's messages are in its own order, and every retried batch got its first
//!   seqs back and inserted nothing;
//! - what each reader saw through its window reads is a prefix of the final thread, growing
//!   read after read; each context read is a contiguous run of the final thread that reaches at
//!   least as far as everything the reader had seen before it (monotonic reads).
//!
//! Enabled by the cargo feature `http-load`. The memory server's load test and
//! `cargo xtask load` both run it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How many times one append is sent before the load gives up on it.
pub const MAX_ATTEMPTS: usize = 5;

/// What the load does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadPlan {
    /// Clients that append.
    pub appenders: usize,
    /// Clients that read while the appenders append.
    pub readers: usize,
    /// Append requests per appender (not counting the retried ones).
    pub appends: usize,
    /// Messages per append.
    pub batch: usize,
    /// Every `retry_every`-th append of an appender is sent twice (0: none is).
    pub retry_every: usize,
    /// The `token_limit` of the context reads.
    pub context_token_limit: u64,
    /// The session id of the thread every client addresses.
    pub session: String,
}

impl LoadPlan {
    /// `clients` clients (three quarters appenders, the rest readers, at least one of each)
    /// making `appends` appends of one message each on `session`; every 7th append is
    /// retried; context reads of 2,000 tokens.
    pub fn new(clients: usize, appends: usize, session: impl Into<String>) -> Self {
        let clients = clients.max(2);
        let readers = (clients / 4).max(1);
        Self {
            appenders: clients - readers,
            readers,
            appends,
            batch: 1,
            retry_every: 7,
            context_token_limit: 2_000,
            session: session.into(),
        }
    }

    /// Messages the thread holds when every appender is done.
    pub fn messages(&self) -> usize {
        self.appenders * self.appends * self.batch
    }
}

/// Where the load goes: a running server and a client for it.
#[derive(Debug, Clone)]
pub struct LoadTarget {
    /// The server's base URL, `http://127.0.0.1:PORT`.
    pub base: String,
    /// The bearer token (none for a server without tokens).
    pub token: Option<String>,
    /// The client every load client shares (keep-alive connections).
    pub client: reqwest::Client,
}

/// One message of the load: which appender wrote it and its index in that appender's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoadMessage {
    /// The appender.
    pub appender: u32,
    /// Its position among the appender's messages (0 first).
    pub index: u32,
}

impl LoadMessage {
    /// The message id: `load-<appender>-<index>`.
    pub fn id(self) -> String {
        format!("load-{}-{}", self.appender, self.index)
    }

    /// The message an id names, if it is a load message's id.
    pub fn parse(id: &str) -> Option<Self> {
        let rest = id.strip_prefix("load-")?;
        let (appender, index) = rest.split_once('-')?;
        Some(Self {
            appender: appender.parse().ok()?,
            index: index.parse().ok()?,
        })
    }
}

/// The latencies of one kind of request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    /// One duration per request, in the order they ended (per client).
    pub samples: Vec<Duration>,
}

impl Latencies {
    /// The nearest-rank percentile `p` (0 to 100); zero when there is no sample.
    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

/// What one reader saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReaderLog {
    /// Everything its window reads returned, in order: `(seq, message)`.
    pub seen: Vec<(u64, LoadMessage)>,
    /// Each context read: its messages, and how many messages the reader had seen through
    /// window reads before it.
    pub contexts: Vec<(Vec<LoadMessage>, usize)>,
    /// Window reads made.
    pub window_reads: usize,
}

/// What the load did and saw.
#[derive(Debug, Clone)]
pub struct LoadRun {
    /// The plan it ran.
    pub plan: LoadPlan,
    /// Wall-clock time from the first request to the last appender's last answer.
    pub append_phase: Duration,
    /// Every append request (retries included).
    pub appends: Latencies,
    /// Every window read.
    pub windows: Latencies,
    /// Every context read.
    pub contexts: Latencies,
    /// Per appender, per message in its order: the seq its append acknowledged.
    pub acked: Vec<Vec<Option<u64>>>,
    /// Per reader, what it saw.
    pub readers: Vec<ReaderLog>,
    /// The final read of the whole thread: `(seq, message id)`.
    pub final_thread: Vec<(u64, String)>,
    /// The thread's count at the end: `(active, last_seq)`.
    pub final_count: (u64, u64),
    /// Requests sent again after a failure (an error status or a transport error).
    pub resent_after_failure: usize,
    /// What went wrong along the way (requests that failed for good, unexpected answers).
    pub problems: Vec<String>,
}

/// What a verified load proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Messages in the final thread, each once.
    pub messages: usize,
    /// Batches sent twice whose second answer matched the first.
    pub retried_batches: usize,
    /// Reads checked (window and context).
    pub reads: usize,
}

/// A client's request outcome: the status and the JSON body.
type Answer = Result<(u16, Value), String>;

async fn send(target: &LoadTarget, request: reqwest::RequestBuilder) -> Answer {
    let request = match &target.token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, body))
}

fn messages_path(plan: &LoadPlan) -> String {
    format!("/v1/threads/{}/messages", plan.session)
}

/// The text of a load message: a sentence of about 100 bytes.
fn text_of(message: LoadMessage) -> String {
    format!(
        "appender {} says message {}: the release branch is green and the notes are posted.",
        message.appender, message.index
    )
}

/// Runs the load against `target` and returns what it saw; verify it with
/// [`LoadRun::verify`].
///
/// # Panics
/// When a window or context answer is not the JSON the API documents.
pub async fn run(target: &LoadTarget, plan: &LoadPlan) -> LoadRun {
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let appenders = (0..plan.appenders).map(|a| {
        let done = &done;
        async move {
            let log = appender(target, plan, a as u32).await;
            done.fetch_add(1, Ordering::SeqCst);
            (log, started.elapsed())
        }
    });
    let readers = (0..plan.readers).map(|_| reader(target, plan, &done));
    let (appended, read) = futures::future::join(
        futures::future::join_all(appenders),
        futures::future::join_all(readers),
    )
    .await;

    let mut run = LoadRun::new(plan.clone());
    for (log, ended) in appended {
        run.append_phase = run.append_phase.max(ended);
        run.appends.samples.extend(log.latencies);
        run.acked.push(log.acked);
        run.resent_after_failure += log.resent;
        run.problems.extend(log.problems);
    }
    for (log, windows, contexts, problems) in read {
        run.windows.samples.extend(windows);
        run.contexts.samples.extend(contexts);
        run.readers.push(log);
        run.problems.extend(problems);
    }
    final_reads(target, plan, &mut run).await;
    run
}

/// The final read of the whole thread and its count.
async fn final_reads(target: &LoadTarget, plan: &LoadPlan, run: &mut LoadRun) {
    let url = format!("{}{}", target.base, messages_path(plan));
    match send(target, target.client.get(&url)).await {
        Ok((200, body)) => {
            for m in body["messages"].as_array().into_iter().flatten() {
                let seq = m["seq"].as_u64().unwrap_or(0);
                let id = m["message"]["id"].as_str().unwrap_or("").to_owned();
                run.final_thread.push((seq, id));
            }
        }
        Ok((status, body)) => run
            .problems
            .push(format!("the final read answered {status}: {body}")),
        Err(e) => run.problems.push(format!("the final read failed: {e}")),
    }
    let url = format!("{}/v1/threads/{}/count", target.base, plan.session);
    match send(target, target.client.get(&url)).await {
        Ok((200, body)) => {
            run.final_count = (
                body["active"].as_u64().unwrap_or(0),
                body["last_seq"].as_u64().unwrap_or(0),
            );
        }
        Ok((status, body)) => run
            .problems
            .push(format!("the final count answered {status}: {body}")),
        Err(e) => run.problems.push(format!("the final count failed: {e}")),
    }
}

struct AppenderLog {
    latencies: Vec<Duration>,
    acked: Vec<Option<u64>>,
    resent: usize,
    problems: Vec<String>,
}

/// One appender: its batches in order, every `retry_every`-th one twice.
async fn appender(target: &LoadTarget, plan: &LoadPlan, appender: u32) -> AppenderLog {
    let url = format!("{}{}", target.base, messages_path(plan));
    let mut log = AppenderLog {
        latencies: Vec::with_capacity(plan.appends),
        acked: vec![None; plan.appends * plan.batch],
        resent: 0,
        problems: Vec::new(),
    };
    for k in 0..plan.appends {
        let batch: Vec<LoadMessage> = (0..plan.batch)
            .map(|j| LoadMessage {
                appender,
                index: (k * plan.batch + j) as u32,
            })
            .collect();
        let body = json!({
            "messages": batch
                .iter()
                .map(|m| json!({"id": m.id(), "role": "user", "text": text_of(*m)}))
                .collect::<Vec<_>>()
        });
        let Some(first) = append_once(target, &url, &body, &mut log).await else {
            log.problems.push(format!(
                "appender {appender}: batch {k} failed {MAX_ATTEMPTS} times"
            ));
            continue;
        };
        let seqs = seqs_of(&first);
        if seqs.len() != batch.len() {
            log.problems.push(format!(
                "appender {appender}: batch {k} acknowledged {} seqs for {} messages: {first}",
                seqs.len(),
                batch.len()
            ));
            continue;
        }
        for (m, seq) in batch.iter().zip(&seqs) {
            log.acked[m.index as usize] = Some(*seq);
        }
        if plan.retry_every > 0 && (k + 1) % plan.retry_every == 0 {
            match append_once(target, &url, &body, &mut log).await {
                Some(again) if seqs_of(&again) == seqs && again["inserted"] == 0 => {}
                Some(again) => log.problems.push(format!(
                    "appender {appender}: batch {k} sent again answered {again}, not the seqs \
                     {seqs:?} with nothing inserted"
                )),
                None => log.problems.push(format!(
                    "appender {appender}: the retry of batch {k} failed {MAX_ATTEMPTS} times"
                )),
            }
        }
    }
    log
}

fn seqs_of(answer: &Value) -> Vec<u64> {
    answer["seqs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

/// Posts `body` until it is acknowledged (at most [`MAX_ATTEMPTS`] times); the answer.
async fn append_once(
    target: &LoadTarget,
    url: &str,
    body: &Value,
    log: &mut AppenderLog,
) -> Option<Value> {
    for attempt in 0..MAX_ATTEMPTS {
        if attempt > 0 {
            log.resent += 1;
        }
        let started = Instant::now();
        let answer = send(target, target.client.post(url).json(body)).await;
        log.latencies.push(started.elapsed());
        match answer {
            Ok((200, answer)) => return Some(answer),
            Ok((status, answer)) if attempt + 1 == MAX_ATTEMPTS => {
                log.problems
                    .push(format!("an append answered {status}: {answer}"));
            }
            Err(e) if attempt + 1 == MAX_ATTEMPTS => {
                log.problems.push(format!("an append failed: {e}"));
            }
            _ => {}
        }
    }
    None
}

/// One reader: window and context reads in turn until every appender is done, then one more
/// of each.
async fn reader(
    target: &LoadTarget,
    plan: &LoadPlan,
    done: &AtomicUsize,
) -> (ReaderLog, Vec<Duration>, Vec<Duration>, Vec<String>) {
    let mut log = ReaderLog::default();
    let (mut windows, mut contexts, mut problems) = (Vec::new(), Vec::new(), Vec::new());
    let window_url = format!("{}{}", target.base, messages_path(plan));
    let context_url = format!(
        "{}/v1/memory/{}/context?token_limit={}",
        target.base, plan.session, plan.context_token_limit
    );
    let mut last_round = false;
    loop {
        // Read `done` before the reads: a round that began after the last append ended sees
        // every message.
        let finished = done.load(Ordering::SeqCst) == plan.appenders;
        let after = log.seen.last().map_or(0, |(seq, _)| *seq);
        let started = Instant::now();
        let answer = send(
            target,
            target.client.get(format!("{window_url}?after={after}")),
        )
        .await;
        windows.push(started.elapsed());
        log.window_reads += 1;
        match answer {
            Ok((200, body)) => {
                for m in body["messages"].as_array().into_iter().flatten() {
                    let seq = m["seq"].as_u64().unwrap_or(0);
                    let id = m["message"]["id"].as_str().unwrap_or("");
                    match LoadMessage::parse(id) {
                        Some(message) => log.seen.push((seq, message)),
                        None => problems.push(format!("a window read returned the id {id:?}")),
                    }
                }
            }
            Ok((status, body)) => problems.push(format!("a window read answered {status}: {body}")),
            Err(e) => problems.push(format!("a window read failed: {e}")),
        }
        let seen_before = log.seen.len();
        let started = Instant::now();
        let answer = send(target, target.client.get(&context_url)).await;
        contexts.push(started.elapsed());
        match answer {
            Ok((200, body)) => {
                let mut ids = Vec::new();
                for m in body["messages"].as_array().into_iter().flatten() {
                    let id = m["id"].as_str().unwrap_or("");
                    match LoadMessage::parse(id) {
                        Some(message) => ids.push(message),
                        None => problems.push(format!("a context read returned the id {id:?}")),
                    }
                }
                log.contexts.push((ids, seen_before));
            }
            Ok((status, body)) => {
                problems.push(format!("a context read answered {status}: {body}"));
            }
            Err(e) => problems.push(format!("a context read failed: {e}")),
        }
        if last_round {
            break;
        }
        last_round = finished;
    }
    (log, windows, contexts, problems)
}

impl LoadRun {
    /// A run of `plan` that has done nothing yet.
    pub fn new(plan: LoadPlan) -> Self {
        Self {
            plan,
            append_phase: Duration::ZERO,
            appends: Latencies::default(),
            windows: Latencies::default(),
            contexts: Latencies::default(),
            acked: Vec::new(),
            readers: Vec::new(),
            final_thread: Vec::new(),
            final_count: (0, 0),
            resent_after_failure: 0,
            problems: Vec::new(),
        }
    }

    /// Checks that nothing acknowledged was lost, nothing was stored twice, and every client
    /// saw one order (see the [module](self) documentation).
    ///
    /// # Errors
    /// Every violation found, one sentence each.
    pub fn verify(&self) -> Result<Verified, Vec<String>> {
        let mut problems = self.problems.clone();
        let plan = &self.plan;
        let expected = plan.messages();

        // The final thread: seqs 1..=n, each message once, and the count agrees.
        let mut position: HashMap<LoadMessage, usize> = HashMap::with_capacity(expected);
        let mut order: Vec<LoadMessage> = Vec::with_capacity(expected);
        for (i, (seq, id)) in self.final_thread.iter().enumerate() {
            if *seq != i as u64 + 1 {
                problems.push(format!(
                    "the final thread's message {} has seq {seq}: seqs are not 1, 2, 3, …",
                    i + 1
                ));
                break;
            }
            match LoadMessage::parse(id) {
                Some(m) if position.insert(m, i).is_some() => {
                    problems.push(format!("the message {id} is stored twice"));
                }
                Some(m) => order.push(m),
                None => problems.push(format!("the final thread holds a foreign id {id:?}")),
            }
        }
        if self.final_thread.len() != expected {
            problems.push(format!(
                "the final thread holds {} messages, not the {expected} appended",
                self.final_thread.len()
            ));
        }
        if self.final_count != (expected as u64, expected as u64) {
            problems.push(format!(
                "the count says {} active with last seq {}, not {expected} and {expected}",
                self.final_count.0, self.final_count.1
            ));
        }

        // Every acknowledged message at its seq, each appender's in its order.
        for (a, acked) in self.acked.iter().enumerate() {
            let mut last_seq = 0;
            for (index, seq) in acked.iter().enumerate() {
                let m = LoadMessage {
                    appender: a as u32,
                    index: index as u32,
                };
                let Some(seq) = *seq else {
                    problems.push(format!("{} was never acknowledged", m.id()));
                    continue;
                };
                match position.get(&m) {
                    None => {
                        problems.push(format!("{} (acknowledged at seq {seq}) is lost", m.id()))
                    }
                    Some(&p) if p as u64 + 1 != seq => problems.push(format!(
                        "{} was acknowledged at seq {seq} but is at seq {}",
                        m.id(),
                        p + 1
                    )),
                    Some(_) => {}
                }
                if seq <= last_seq {
                    problems.push(format!(
                        "{} (seq {seq}) is not after the appender's previous message (seq {last_seq})",
                        m.id()
                    ));
                }
                last_seq = seq;
            }
        }

        // Each reader: a growing prefix, and contexts that are runs reaching what it saw.
        let mut reads = 0;
        for (r, log) in self.readers.iter().enumerate() {
            reads += log.window_reads + log.contexts.len();
            for (i, (seq, m)) in log.seen.iter().enumerate() {
                if *seq != i as u64 + 1 || order.get(i) != Some(m) {
                    problems.push(format!(
                        "reader {r} saw {} at seq {seq} as its message {}: not a prefix of the final thread",
                        m.id(),
                        i + 1
                    ));
                    break;
                }
            }
            let mut reached = 0;
            for (ids, seen_before) in &log.contexts {
                let positions: Vec<Option<usize>> =
                    ids.iter().map(|m| position.get(m).copied()).collect();
                let contiguous = positions
                    .windows(2)
                    .all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if b == a + 1));
                let end = positions.last().copied().flatten().map_or(0, |p| p + 1);
                if !contiguous || positions.iter().any(Option::is_none) {
                    problems.push(format!(
                        "reader {r} got a context that is not a run of the final thread"
                    ));
                } else if end < *seen_before || end < reached {
                    problems.push(format!(
                        "reader {r} got a context ending at seq {end} after it had seen seq {}",
                        (*seen_before).max(reached)
                    ));
                }
                reached = reached.max(end);
            }
            if log.seen.len() != expected {
                problems.push(format!(
                    "reader {r} saw {} messages by its last read, not {expected}",
                    log.seen.len()
                ));
            }
        }

        let retried_batches =
            plan.appenders * plan.appends.checked_div(plan.retry_every).unwrap_or(0);
        if problems.is_empty() {
            Ok(Verified {
                messages: self.final_thread.len(),
                retried_batches,
                reads,
            })
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        let m = LoadMessage {
            appender: 11,
            index: 47,
        };
        assert_eq!(m.id(), "load-11-47");
        assert_eq!(LoadMessage::parse(&m.id()), Some(m));
        assert_eq!(LoadMessage::parse("other-1-2"), None);
        assert_eq!(LoadMessage::parse("load-1"), None);
    }

    #[test]
    fn a_plan_splits_clients() {
        let plan = LoadPlan::new(16, 10, "s");
        assert_eq!((plan.appenders, plan.readers), (12, 4));
        assert_eq!(plan.messages(), 120);
    }

    fn run_of(thread: &[(u64, &str)], acked: Vec<Vec<Option<u64>>>) -> LoadRun {
        let plan = LoadPlan {
            appenders: acked.len(),
            readers: 0,
            appends: acked.first().map_or(0, Vec::len),
            batch: 1,
            retry_every: 0,
            context_token_limit: 100,
            session: "s".into(),
        };
        let n = thread.len() as u64;
        let mut run = LoadRun::new(plan);
        run.acked = acked;
        run.final_thread = thread
            .iter()
            .map(|(s, id)| (*s, (*id).to_owned()))
            .collect();
        run.final_count = (n, n);
        run
    }

    #[test]
    fn a_good_run_verifies_and_bad_ones_do_not() {
        let good = run_of(
            &[
                (1, "load-0-0"),
                (2, "load-1-0"),
                (3, "load-0-1"),
                (4, "load-1-1"),
            ],
            vec![vec![Some(1), Some(3)], vec![Some(2), Some(4)]],
        );
        assert_eq!(good.verify().unwrap().messages, 4);

        let duplicated = run_of(
            &[(1, "load-0-0"), (2, "load-0-0"), (3, "load-0-1")],
            vec![vec![Some(1), Some(3)]],
        );
        assert!(duplicated.verify().is_err());

        let lost = run_of(&[(1, "load-0-0")], vec![vec![Some(1), Some(2)]]);
        assert!(lost.verify().is_err());

        let reordered = run_of(
            &[(1, "load-0-1"), (2, "load-0-0")],
            vec![vec![Some(2), Some(1)]],
        );
        assert!(reordered.verify().is_err());

        let mut gap = run_of(
            &[(1, "load-0-0"), (3, "load-0-1")],
            vec![vec![Some(1), Some(3)]],
        );
        gap.final_count = (2, 3);
        assert!(gap.verify().is_err());
    }

    #[test]
    fn readers_must_see_prefixes_and_reaching_contexts() {
        let thread = [(1, "load-0-0"), (2, "load-0-1"), (3, "load-0-2")];
        let acked = vec![vec![Some(1), Some(2), Some(3)]];
        let m = |index| LoadMessage { appender: 0, index };
        let mut run = run_of(&thread, acked.clone());
        run.readers.push(ReaderLog {
            seen: vec![(1, m(0)), (2, m(1)), (3, m(2))],
            contexts: vec![(vec![m(0), m(1)], 1), (vec![m(1), m(2)], 3)],
            window_reads: 2,
        });
        assert_eq!(run.verify().unwrap().reads, 4);

        let mut wrong_prefix = run_of(&thread, acked.clone());
        wrong_prefix.readers.push(ReaderLog {
            seen: vec![(1, m(1)), (2, m(0)), (3, m(2))],
            contexts: Vec::new(),
            window_reads: 1,
        });
        assert!(wrong_prefix.verify().is_err());

        let mut stale_context = run_of(&thread, acked.clone());
        stale_context.readers.push(ReaderLog {
            seen: vec![(1, m(0)), (2, m(1)), (3, m(2))],
            contexts: vec![(vec![m(0), m(1)], 3)],
            window_reads: 1,
        });
        assert!(stale_context.verify().is_err());

        let mut gapped_context = run_of(&thread, acked);
        gapped_context.readers.push(ReaderLog {
            seen: vec![(1, m(0)), (2, m(1)), (3, m(2))],
            contexts: vec![(vec![m(0), m(2)], 0)],
            window_reads: 1,
        });
        assert!(gapped_context.verify().is_err());
    }
}
