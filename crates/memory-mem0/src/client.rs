//! [`Mem0Client`]: one async method per Mem0 endpoint, for either flavour.

use std::sync::Arc;

use memory_core::{Error, Result};
use serde_json::Value;

use crate::config::{Mem0Config, Mem0Flavor};
use crate::http::{Call, Http};
use crate::platform::Platform;
use crate::request::{AddRequest, ListRequest, MemoryUpdate, SearchRequest};
use crate::response::{self, AddResponse, HistoryEntry, MemoryPage, MemoryRecord, PingInfo};
use crate::scope::Mem0Scope;
use crate::self_hosted;

/// A typed client of Mem0's REST API, on the hosted platform or a self-hosted server (chosen
/// by [`Mem0Config::flavor`]).
///
/// Requests time out after [`Mem0Config::http`]'s timeout and are retried with exponential
/// backoff after a rate limit, a server error, a connection error or a timeout, honouring
/// `Retry-After`. Failures are `memory_core::Error`s: `InvalidInput` (bad request, invalid or
/// missing key), `NotFound`, `LimitExceeded` (rate limit, quota), `Unavailable`, `Timeout`,
/// `Serialization` (an answer that is not the documented JSON), `Unsupported` (an endpoint or
/// setting the flavour does not have). The key never appears in `Debug` output, error messages
/// or traces.
///
/// Cloning is cheap; clones share the connection pool.
///
/// ```no_run
/// use memory_mem0::{AddRequest, Mem0Client, Mem0Config, Mem0Message, Mem0Scope, SearchRequest};
///
/// # async fn run() -> memory_core::Result<()> {
/// let client = Mem0Client::new(Mem0Config::platform("m0-..."))?;
/// let alice = Mem0Scope::user("alice")?;
/// client
///     .add(&AddRequest::new(alice.clone(), vec![Mem0Message::user("I am vegetarian.")]))
///     .await?;
/// for memory in client.search(&SearchRequest::new("dinner ideas", alice).with_top_k(3)).await? {
///     println!("{} ({:?})", memory.memory, memory.score);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Mem0Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: Http,
    wire: Wire,
}

/// Which request builder to use.
#[derive(Debug)]
enum Wire {
    Platform(Platform),
    SelfHosted,
}

impl Mem0Client {
    /// A client for `config`, with its own HTTP client.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](memory_core::ErrorKind::InvalidInput) for invalid settings
    /// (see [`Mem0Config::validate`]); [`ErrorKind::Backend`](memory_core::ErrorKind::Backend)
    /// if the platform's root certificates cannot be loaded.
    pub fn new(config: Mem0Config) -> Result<Self> {
        Self::build(config, None)
    }

    /// A client for `config` on an application's `reqwest::Client` (build one with
    /// [`http_client_builder`](crate::http_client_builder) to get the same TLS set-up). The
    /// client keeps its own connect timeout; [`Mem0Config::http`]'s timeout still applies per
    /// request.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_http_client(config: Mem0Config, client: reqwest::Client) -> Result<Self> {
        Self::build(config, Some(client))
    }

    /// A platform client configured from the environment (see [`Mem0Config::from_env`]).
    ///
    /// # Errors
    /// As [`Mem0Config::from_env`] and [`new`](Self::new).
    pub fn from_env() -> Result<Self> {
        Self::new(Mem0Config::from_env()?)
    }

    fn build(config: Mem0Config, client: Option<reqwest::Client>) -> Result<Self> {
        let http = Http::new(&config, client)?;
        let wire = match &config.flavor {
            Mem0Flavor::Platform {
                org_id, project_id, ..
            } => Wire::Platform(Platform {
                org_id: org_id.clone(),
                project_id: project_id.clone(),
            }),
            Mem0Flavor::SelfHosted { .. } => Wire::SelfHosted,
        };
        Ok(Self {
            inner: Arc::new(Inner { http, wire }),
        })
    }

    /// Whether this client talks to the hosted platform.
    pub fn is_platform(&self) -> bool {
        matches!(self.inner.wire, Wire::Platform(_))
    }

    /// Sends messages for Mem0 to remember, filed under the request's scope.
    ///
    /// The platform (`POST /v3/memories/add/`) processes them in the background and answers
    /// with an event id; the self-hosted server (`POST /memories`) answers with the memories it
    /// added, updated or deleted.
    ///
    /// # Errors
    /// See the type's documentation; `InvalidInput` for a request without messages;
    /// `Unsupported` on a self-hosted server for `app_id`, `infer` or `async_mode`.
    pub async fn add(&self, request: &AddRequest) -> Result<AddResponse> {
        request.check()?;
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.add(request),
            Wire::SelfHosted => self_hosted::add(request)?,
        };
        AddResponse::from_value(self.inner.http.json(call).await?)
    }

    /// The memories most similar to the query within the request's scope, best first.
    ///
    /// # Errors
    /// See the type's documentation; `InvalidInput` for an empty query; `Unsupported` on a
    /// self-hosted server for `app_id`, `threshold` or `rerank`.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<MemoryRecord>> {
        request.check()?;
        let (call, cut) = match &self.inner.wire {
            Wire::Platform(p) => (p.search(request), None),
            Wire::SelfHosted => (self_hosted::search(request)?, request.top_k),
        };
        let mut records = response::records(self.inner.http.json(call).await?, "search")?;
        if let Some(top_k) = cut {
            records.truncate(usize::try_from(top_k).unwrap_or(usize::MAX));
        }
        Ok(records)
    }

    /// One page of the memories of the request's scope.
    ///
    /// The self-hosted server returns the scope's memories at once (mem0ai 2.x: at most 20,
    /// the default of its `get_all`); the page is cut from that here.
    ///
    /// # Errors
    /// See the type's documentation; `Unsupported` on a self-hosted server for `app_id` or
    /// filters.
    pub async fn list(&self, request: &ListRequest) -> Result<MemoryPage> {
        request.check()?;
        match &self.inner.wire {
            Wire::Platform(p) => {
                MemoryPage::from_value(self.inner.http.json(p.list(request)).await?)
            }
            Wire::SelfHosted => {
                let call = self_hosted::list(request)?;
                let all = response::records(self.inner.http.json(call).await?, "list")?;
                let total = all.len();
                let size = usize::try_from(request.page_size).unwrap_or(usize::MAX);
                let start = usize::try_from(request.page.saturating_sub(1))
                    .unwrap_or(usize::MAX)
                    .saturating_mul(size);
                let results: Vec<MemoryRecord> = all.into_iter().skip(start).take(size).collect();
                Ok(MemoryPage {
                    has_more: start.saturating_add(results.len()) < total,
                    count: u64::try_from(total).ok(),
                    results,
                    next: None,
                    previous: None,
                })
            }
        }
    }

    /// One memory.
    ///
    /// # Errors
    /// `NotFound` when there is no memory `memory_id` (the self-hosted server answers `null`
    /// for it); see the type's documentation for the others.
    pub async fn get(&self, memory_id: &str) -> Result<MemoryRecord> {
        check_id(memory_id)?;
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.get(memory_id),
            Wire::SelfHosted => self_hosted::get(memory_id),
        };
        match self.inner.http.json(call).await? {
            Value::Null => Err(Error::not_found(format!(
                "Mem0 get request failed: there is no memory {memory_id:?}"
            ))),
            value => serde_json::from_value(value).map_err(|err| {
                Error::serialization(format!("the Mem0 get answer is malformed: {err}"))
                    .with_source(err)
            }),
        }
    }

    /// Replaces a memory's text and/or metadata. Returns the updated memory when the server
    /// sends it back (the platform does; the self-hosted server answers with a message only).
    ///
    /// # Errors
    /// `InvalidInput` for an update with neither text nor metadata; `NotFound`; see the type's
    /// documentation for the others.
    pub async fn update(
        &self,
        memory_id: &str,
        update: &MemoryUpdate,
    ) -> Result<Option<MemoryRecord>> {
        check_id(memory_id)?;
        update.check()?;
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.update(memory_id, update),
            Wire::SelfHosted => self_hosted::update(memory_id, update),
        };
        let value = self.inner.http.json(call).await?;
        Ok(value
            .get("id")
            .is_some()
            .then(|| serde_json::from_value(value).ok())
            .flatten())
    }

    /// Deletes one memory.
    ///
    /// # Errors
    /// `NotFound` (the self-hosted server answers it as HTTP 500 `Memory with id … not found`,
    /// which is recognised); see the type's documentation for the others.
    pub async fn delete(&self, memory_id: &str) -> Result<()> {
        check_id(memory_id)?;
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.delete(memory_id),
            Wire::SelfHosted => self_hosted::delete(memory_id),
        };
        self.send_ignoring_body(call).await
    }

    /// Deletes every memory of `scope` (a scope always names at least one id, so this never
    /// deletes a whole project by accident).
    ///
    /// # Errors
    /// See the type's documentation; `Unsupported` on a self-hosted server for `app_id`.
    pub async fn delete_all(&self, scope: &Mem0Scope) -> Result<()> {
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.delete_all(scope),
            Wire::SelfHosted => self_hosted::delete_all(scope)?,
        };
        self.send_ignoring_body(call).await
    }

    /// The changes of one memory, oldest first as the server orders them.
    ///
    /// The self-hosted server answers an empty history for an unknown id.
    ///
    /// # Errors
    /// `NotFound` (platform); see the type's documentation for the others.
    pub async fn history(&self, memory_id: &str) -> Result<Vec<HistoryEntry>> {
        check_id(memory_id)?;
        let call = match &self.inner.wire {
            Wire::Platform(p) => p.history(memory_id),
            Wire::SelfHosted => self_hosted::history(memory_id),
        };
        response::history(self.inner.http.json(call).await?)
    }

    /// Checks the platform key (`GET /v1/ping/`).
    ///
    /// # Errors
    /// `InvalidInput` for an invalid key; `Unsupported` on a self-hosted server, which has no
    /// such endpoint.
    pub async fn ping(&self) -> Result<PingInfo> {
        let Wire::Platform(p) = &self.inner.wire else {
            return Err(Error::unsupported(
                "Mem0 (self-hosted): the server has no ping endpoint",
            ));
        };
        let value = self.inner.http.json(p.ping()).await?;
        serde_json::from_value(value).map_err(|err| {
            Error::serialization(format!("the Mem0 ping answer is malformed: {err}"))
                .with_source(err)
        })
    }

    /// Deletes every memory of a self-hosted server (`POST /reset`).
    ///
    /// # Errors
    /// `Unsupported` on the platform, which has no such endpoint (delete scopes with
    /// [`delete_all`](Self::delete_all)); see the type's documentation for the others.
    pub async fn reset(&self) -> Result<()> {
        if !matches!(self.inner.wire, Wire::SelfHosted) {
            return Err(Error::unsupported(
                "Mem0 (platform): there is no reset endpoint; delete scopes with delete_all",
            ));
        }
        self.send_ignoring_body(self_hosted::reset()).await
    }

    async fn send_ignoring_body(&self, call: Call) -> Result<()> {
        self.inner.http.send(call).await.map(|_| ())
    }
}

fn check_id(memory_id: &str) -> Result<()> {
    if memory_id.trim().is_empty() {
        return Err(Error::invalid_input("a Mem0 memory id must not be empty"));
    }
    Ok(())
}
