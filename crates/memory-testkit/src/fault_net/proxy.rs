//! A TCP proxy between a store and its server that cuts every connection at a chosen moment:
//! after a number of request bytes (the store's bytes to the server), after a number of reply
//! bytes, or on command.
//!
//! Counting starts when a cut is armed ([`CutProxy::arm`]) and spans every connection, so a
//! cut lands at a byte offset of whatever the store sends or receives from then on, e.g. in
//! the middle of one append. At the cut the proxy forwards exactly the bytes allowed, then
//! closes both sides of every open connection; new connections are accepted as before, so a
//! store can reconnect and retry.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where an armed cut falls, counted from the moment it is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Forward this many request bytes (store to server), then cut before the next one:
    /// `AfterRequestBytes(0)` cuts before anything of the next request reaches the server.
    AfterRequestBytes(u64),
    /// Forward this many reply bytes (server to store), then cut before the next one:
    /// `AfterReplyBytes(0)` lets the server receive and run the request but drops its reply.
    AfterReplyBytes(u64),
}

/// Bytes the proxy forwarded since the last [`arm`](CutProxy::arm) or
/// [`reset_traffic`](CutProxy::reset_traffic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    /// Bytes from the store to the server.
    pub request_bytes: u64,
    /// Bytes from the server to the store.
    pub reply_bytes: u64,
}

/// Where the traffic changed direction: each request and each reply of a round trip starts at
/// one of these offsets (as [`CutProxy::turns`] lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A request started at this request byte (after a reply, or first).
    Request(u64),
    /// A reply started at this reply byte (after a request, or first).
    Reply(u64),
}

#[derive(Debug, Default)]
struct State {
    plan: Option<Cut>,
    traffic: Traffic,
    turns: Vec<Turn>,
    cuts: u64,
}

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    state: Mutex<State>,
    generation: watch::Sender<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many of `n` bytes going `direction` may pass, and whether the cut fires now.
    fn pass(&self, direction: Direction, n: usize) -> (usize, bool) {
        let mut state = self.state();
        let sent = match direction {
            Direction::Request => state.traffic.request_bytes,
            Direction::Reply => state.traffic.reply_bytes,
        };
        let limit = match (state.plan, direction) {
            (Some(Cut::AfterRequestBytes(k)), Direction::Request)
            | (Some(Cut::AfterReplyBytes(k)), Direction::Reply) => Some(k),
            _ => None,
        };
        let turned = match state.turns.last() {
            Some(Turn::Request(_)) => direction == Direction::Reply,
            Some(Turn::Reply(_)) => direction == Direction::Request,
            None => true,
        };
        if turned {
            state.turns.push(match direction {
                Direction::Request => Turn::Request(sent),
                Direction::Reply => Turn::Reply(sent),
            });
        }
        let (pass, cut) = match limit {
            Some(k) => {
                let room = usize::try_from(k.saturating_sub(sent)).unwrap_or(usize::MAX);
                if n > room { (room, true) } else { (n, false) }
            }
            None => (n, false),
        };
        match direction {
            Direction::Request => state.traffic.request_bytes += pass as u64,
            Direction::Reply => state.traffic.reply_bytes += pass as u64,
        }
        if cut {
            state.plan = None;
            state.cuts += 1;
        }
        (pass, cut)
    }

    fn cut_all(&self) {
        self.generation.send_modify(|g| *g += 1);
    }
}

/// A cutting TCP proxy on a free 127.0.0.1 port; it stops (and closes its connections) when
/// dropped.
#[derive(Debug)]
pub struct CutProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl CutProxy {
    /// Starts a proxy to `upstream` on a free port of 127.0.0.1. Needs a Tokio runtime with
    /// I/O enabled.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let (generation, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            upstream,
            state: Mutex::new(State::default()),
            generation,
        });
        let accept = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let mut cut = shared.generation.subscribe();
                    cut.borrow_and_update();
                    tokio::spawn(relay(shared.clone(), client, cut));
                }
            }
        });
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    /// The proxy's address (connect the store here).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Arms `cut` (replacing any armed one) and restarts the byte counts from zero.
    pub fn arm(&self, cut: Cut) {
        let mut state = self.shared.state();
        state.plan = Some(cut);
        state.traffic = Traffic::default();
        state.turns.clear();
    }

    /// Disarms the armed cut; `true` when it had not fired yet.
    pub fn disarm(&self) -> bool {
        self.shared.state().plan.take().is_some()
    }

    /// Closes every open connection now.
    pub fn cut_now(&self) {
        self.shared.state().cuts += 1;
        self.shared.cut_all();
    }

    /// How many cuts happened (armed ones that fired, and [`cut_now`](Self::cut_now) calls).
    pub fn cuts(&self) -> u64 {
        self.shared.state().cuts
    }

    /// The bytes forwarded since the last [`arm`](Self::arm) or
    /// [`reset_traffic`](Self::reset_traffic).
    pub fn traffic(&self) -> Traffic {
        self.shared.state().traffic
    }

    /// Restarts the byte counts from zero (an armed cut stays armed and counts from here).
    pub fn reset_traffic(&self) {
        let mut state = self.shared.state();
        state.traffic = Traffic::default();
        state.turns.clear();
    }

    /// Where the traffic since the last [`arm`](Self::arm) or
    /// [`reset_traffic`](Self::reset_traffic) changed direction, in order: the start of each
    /// request and each reply (a cut at `AfterReplyBytes(k)` for a `Turn::Reply(k)` falls after
    /// that request reached the server and before any of its reply).
    pub fn turns(&self) -> Vec<Turn> {
        self.shared.state().turns.clone()
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.cut_all();
    }
}

/// Relays one connection until either side closes it or a cut ends every connection.
async fn relay(shared: Arc<Shared>, mut client: TcpStream, mut cut: watch::Receiver<u64>) {
    let Ok(mut server) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            changed = cut.changed() => {
                let _ = changed;
                break;
            }
            read = client_read.read(&mut up) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let (pass, fire) = shared.pass(Direction::Request, n);
                if pass > 0 && server_write.write_all(&up[..pass]).await.is_err() {
                    break;
                }
                if fire {
                    shared.cut_all();
                    break;
                }
            }
            read = server_read.read(&mut down) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let (pass, fire) = shared.pass(Direction::Reply, n);
                if pass > 0 && client_write.write_all(&down[..pass]).await.is_err() {
                    break;
                }
                if fire {
                    shared.cut_all();
                    break;
                }
            }
        }
    }
}
