//! One client connection: HTTP/1.1 (hyper) over the router, watched so that no client holds
//! it longer than [`Transport`] allows.
//!
//! The watchdog knows where the connection is:
//! - waiting for a request's headers: from the connection's start (its first request) or the
//!   first byte of the next request, the headers must be complete within
//!   [`header_timeout`](Transport::header_timeout);
//! - busy with a request: the handler runs as long as it needs; its body must arrive within
//!   [`body_timeout`](Transport::body_timeout) ([`DeadlineBody`], answered 408);
//! - idle between requests: the next request must start within
//!   [`idle_timeout`](Transport::idle_timeout).
//!
//! Whatever the phase, a response the client does not read for `idle_timeout` (every write
//! waiting) ends it too.
//!
//! While the connection waits for a request's headers no handler has run, so what hyper
//! writes then is its own answer to a head it could not read (400, 414, 431, with an empty
//! body): the socket sends the server's answer with a body instead ([`head_refusal`]). Ending a connection drops it: its socket closes and a handler still
//! running is dropped (an append is atomic, so it is stored whole or not at all).

use std::convert::Infallible;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Request;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower_service::Service;

use super::deadline::DeadlineBody;
use super::head_refusal::{self, REQUEST_START_BYTES};
use crate::config::Transport;

/// Serves `stream` with `router` until the client or the server closes it, a timeout of
/// `transport` cuts it, or `stop` turns true (a graceful shutdown: the request in flight
/// finishes, then the connection closes).
pub(super) async fn serve(
    stream: TcpStream,
    router: Router,
    transport: Transport,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(WatchedIo {
        inner: stream,
        activity: Arc::clone(&activity),
        replacement: None,
    });
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let busy = Busy::begin(Arc::clone(&activity));
            let request =
                request.map(|body| Body::new(DeadlineBody::new(body, transport.body_timeout)));
            let response = router.clone().call(request);
            async move {
                let response = match response.await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(BusyBody {
                        inner: body,
                        _busy: busy,
                    })
                }))
            }
        })
    };
    let mut builder = http1::Builder::new();
    // The watchdog times the headers (hyper's own timer would also cut idle keep-alive
    // connections at the header timeout).
    builder
        .header_read_timeout(Option::<std::time::Duration>::None)
        .keep_alive(true);
    let mut connection = pin!(builder.serve_connection(io, service));
    let mut stopping = *stop.borrow();
    if stopping {
        connection.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = activity.deadline(&transport);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "a connection ended with an error");
                }
                return;
            }
            () = sleep_until(deadline) => {
                if let Some(reason) = activity.expired(&transport, Instant::now()) {
                    tracing::debug!(reason, "a connection was cut");
                    return;
                }
            }
            () = activity.wake.notified() => {}
            _ = stop.changed(), if !stopping => {
                // A closed channel (the server is gone) stops it too.
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Where a connection is (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request's headers since then.
    AwaitingHeaders(Instant),
    /// Handling this many requests (hyper handles one at a time on HTTP/1.1).
    Busy(usize),
    /// Between requests since then.
    Idle(Instant),
}

#[derive(Debug, Clone, Copy)]
struct State {
    phase: Phase,
    /// Since when every write has waited for the client to read.
    write_waiting: Option<Instant>,
    /// The first bytes of the request whose headers are awaited, as far as they are known.
    request_start: RequestStart,
}

/// The first bytes (up to [`REQUEST_START_BYTES`]) of the request whose headers are awaited:
/// those read since the connection started or since it was idle. Bytes read while a request
/// is busy (its body, or a pipelined request's start) are not kept, so a pipelined request's
/// start is unknown (empty).
#[derive(Debug, Clone, Copy, Default)]
struct RequestStart {
    bytes: [u8; REQUEST_START_BYTES],
    len: usize,
}

impl RequestStart {
    fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    fn extend(&mut self, read: &[u8]) {
        let free = self.bytes.get_mut(self.len..).unwrap_or_default();
        let n = free.len().min(read.len());
        if let (Some(to), Some(from)) = (free.get_mut(..n), read.get(..n)) {
            to.copy_from_slice(from);
            self.len = self.len.saturating_add(n);
        }
    }
}

/// A connection's [`State`], shared by its socket, its requests and its watchdog; `wake`
/// tells the watchdog a deadline may have come nearer.
#[derive(Debug)]
struct Activity {
    state: Mutex<State>,
    wake: Notify,
}

impl Activity {
    fn new(now: Instant) -> Self {
        Self {
            state: Mutex::new(State {
                phase: Phase::AwaitingHeaders(now),
                write_waiting: None,
                request_start: RequestStart::default(),
            }),
            wake: Notify::new(),
        }
    }

    fn update<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        change(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The earliest deadline of the current state, with the reason it would cut.
    fn next_deadline(&self, transport: &Transport) -> Option<(Instant, &'static str)> {
        let state = self.update(|state| *state);
        let phase = match state.phase {
            Phase::AwaitingHeaders(since) => since
                .checked_add(transport.header_timeout)
                .map(|at| (at, "the request headers did not arrive in time")),
            Phase::Idle(since) => since
                .checked_add(transport.idle_timeout)
                .map(|at| (at, "the connection was idle too long")),
            Phase::Busy(_) => None,
        };
        let write = state.write_waiting.and_then(|since| {
            since
                .checked_add(transport.idle_timeout)
                .map(|at| (at, "the client did not read the response"))
        });
        match (phase, write) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    fn deadline(&self, transport: &Transport) -> Option<Instant> {
        self.next_deadline(transport).map(|(at, _)| at)
    }

    /// Why the connection must be cut at `now`, if it must.
    fn expired(&self, transport: &Transport, now: Instant) -> Option<&'static str> {
        self.next_deadline(transport)
            .filter(|(at, _)| *at <= now)
            .map(|(_, reason)| reason)
    }

    /// Bytes (`read`) arrived: an idle connection starts waiting for the headers they begin;
    /// the first bytes of the awaited request are kept.
    fn on_read(&self, read: &[u8]) {
        let woke = self.update(|state| match state.phase {
            Phase::Idle(_) => {
                state.phase = Phase::AwaitingHeaders(Instant::now());
                state.request_start = RequestStart::default();
                state.request_start.extend(read);
                true
            }
            Phase::AwaitingHeaders(_) => {
                state.request_start.extend(read);
                false
            }
            Phase::Busy(_) => false,
        });
        if woke {
            self.wake.notify_one();
        }
    }

    /// The first bytes of the request whose headers are awaited, when no handler runs: what
    /// hyper writes then is its own answer (see the module's documentation).
    fn awaited_request_start(&self) -> Option<RequestStart> {
        self.update(|state| match state.phase {
            Phase::AwaitingHeaders(_) => Some(state.request_start),
            _ => None,
        })
    }

    /// A write waits for the client (`waiting`) or went through.
    fn on_write(&self, waiting: bool) {
        let woke = self.update(|state| match (waiting, state.write_waiting) {
            (true, None) => {
                state.write_waiting = Some(Instant::now());
                true
            }
            (false, Some(_)) => {
                state.write_waiting = None;
                false
            }
            _ => false,
        });
        if woke {
            self.wake.notify_one();
        }
    }
}

/// A request in flight: the connection is busy from the request's headers until its
/// response is sent (or dropped).
#[derive(Debug)]
struct Busy(Arc<Activity>);

impl Busy {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.update(|state| {
            state.request_start = RequestStart::default();
            state.phase = match state.phase {
                Phase::Busy(n) => Phase::Busy(n.saturating_add(1)),
                _ => Phase::Busy(1),
            };
        });
        Self(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let idle = self.0.update(|state| match state.phase {
            Phase::Busy(n) if n > 1 => {
                state.phase = Phase::Busy(n.saturating_sub(1));
                false
            }
            _ => {
                state.phase = Phase::Idle(Instant::now());
                true
            }
        });
        if idle {
            self.0.wake.notify_one();
        }
    }
}

/// A response body that keeps its request [`Busy`] until hyper has sent it and drops it.
#[derive(Debug)]
struct BusyBody {
    inner: Body,
    /// Held for its drop.
    _busy: Busy,
}

impl http_body::Body for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, telling [`Activity`] when bytes arrive and when writes wait, and sending the
/// server's answer in place of hyper's empty one to a head it could not read.
#[derive(Debug)]
struct WatchedIo {
    inner: TcpStream,
    activity: Arc<Activity>,
    /// The answer sent instead of hyper's, once hyper has begun its own.
    replacement: Option<Replacement>,
}

/// An answer sent in place of what hyper writes, and how much of it is sent.
#[derive(Debug)]
struct Replacement {
    answer: Vec<u8>,
    sent: usize,
}

impl WatchedIo {
    /// Takes the server's answer in place of `written` when `written` is hyper's own answer to
    /// a head it could not read.
    fn replace_refusal(&mut self, written: &[u8]) {
        if self.replacement.is_some() {
            return;
        }
        let Some(start) = self.activity.awaited_request_start() else {
            return;
        };
        if let Some(answer) = head_refusal::rewrite(written, start.as_slice()) {
            self.replacement = Some(Replacement { answer, sent: 0 });
        }
    }

    /// Sends the rest of the replacement answer, if there is one (`None`: there is none and
    /// hyper's bytes go to the socket as they are). Once it is sent, whatever hyper writes
    /// is dropped: hyper writes nothing after its answer but closes the connection.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Option<Poll<std::io::Result<()>>> {
        let replacement = self.replacement.as_mut()?;
        while let Some(rest) = replacement
            .answer
            .get(replacement.sent..)
            .filter(|rest| !rest.is_empty())
        {
            let result = Pin::new(&mut self.inner).poll_write(cx, rest);
            self.activity.on_write(result.is_pending());
            match result {
                Poll::Ready(Ok(0)) => {
                    return Some(Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())));
                }
                Poll::Ready(Ok(n)) => replacement.sent = replacement.sent.saturating_add(n),
                Poll::Ready(Err(error)) => return Some(Poll::Ready(Err(error))),
                Poll::Pending => return Some(Poll::Pending),
            }
        }
        Some(Poll::Ready(Ok(())))
    }
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) {
            let read = buf.filled().get(before..).unwrap_or_default();
            if !read.is_empty() {
                this.activity.on_read(read);
            }
        }
        result
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.replace_refusal(buf);
        if let Some(replaced) = this.poll_replacement(cx) {
            // hyper's bytes count as written: the answer in their place is.
            return replaced.map_ok(|()| buf.len());
        }
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.activity.on_write(result.is_pending());
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if let Some(first) = bufs.iter().find(|buf| !buf.is_empty()) {
            this.replace_refusal(first);
        }
        if let Some(replaced) = this.poll_replacement(cx) {
            let len = bufs
                .iter()
                .map(|buf| buf.len())
                .fold(0, usize::saturating_add);
            return replaced.map_ok(|()| len);
        }
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.activity.on_write(result.is_pending());
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn transport() -> Transport {
        Transport {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            ..Transport::default()
        }
    }

    #[test]
    fn each_phase_has_its_deadline() {
        let t = transport();
        let start = Instant::now();
        let activity = Arc::new(Activity::new(start));
        assert_eq!(activity.deadline(&t), Some(start + t.header_timeout));
        assert!(activity.expired(&t, start + t.header_timeout).is_some());
        let busy = Busy::begin(Arc::clone(&activity));
        assert_eq!(
            activity.deadline(&t),
            None,
            "a handler runs as long as it needs"
        );
        drop(busy);
        let idle_at = activity.deadline(&t).unwrap();
        assert!(idle_at >= start + t.idle_timeout);
        activity.on_read(b"GET / HTTP/1.1\r\n");
        let headers_at = activity.deadline(&t).unwrap();
        assert!(
            headers_at < idle_at,
            "the first byte starts the header clock"
        );
        activity.on_write(true);
        let _busy = Busy::begin(Arc::clone(&activity));
        assert!(
            activity.deadline(&t).is_some(),
            "an unread response is timed even while busy"
        );
        activity.on_write(false);
        assert_eq!(activity.deadline(&t), None);
    }
}
