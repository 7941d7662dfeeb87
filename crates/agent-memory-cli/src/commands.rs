//! The read and delete commands: threads, show, stats, forget, purge-expired.

use std::collections::BTreeSet;
use std::future::Future;

use agent_memory::{
    AgentId, ErrorKind, ForgetMode, ForgetReceipt, Page, PageRequest, Scope, ScopeFilter,
    SessionId, Stores, TenantId, ThreadCount, UserId, Window,
};
use serde_json::{Value, json};

use crate::cli::{ForgetArgs, ScopeArgs, ShowArgs, TenantsArgs, ThreadsArgs};
use crate::error::{CliResult, Doing, Failed};
use crate::output::{one_line, print, print_json, table};

/// How many items a listing asks for per page.
const PAGE: usize = 500;
/// How many tenants a tenant listing asks for per page: large, as some stores (Redis) scan
/// their whole keyspace for every page of tenants.
const TENANT_PAGE: usize = 10_000;

/// Every item of a paged listing.
pub(crate) async fn all_pages<T, F, Fut>(list: F) -> agent_memory::Result<Vec<T>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: Future<Output = agent_memory::Result<Page<T>>>,
{
    all_pages_of(PAGE, list).await
}

/// Every item of a paged listing, asking for `size` items per page.
async fn all_pages_of<T, F, Fut>(size: usize, mut list: F) -> agent_memory::Result<Vec<T>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: Future<Output = agent_memory::Result<Page<T>>>,
{
    let mut items = Vec::new();
    let mut request = PageRequest::first(size);
    loop {
        let page = list(request).await?;
        items.extend(page.items);
        match page.next_cursor {
            Some(cursor) => request = PageRequest::after(size, cursor),
            None => return Ok(items),
        }
    }
}

/// A validated tenant id.
pub(crate) fn tenant_id(tenant: &str) -> CliResult<TenantId> {
    TenantId::new(tenant).doing(|| format!("the tenant {tenant:?} is not a valid id"))
}

/// A validated user id.
pub(crate) fn user_id(user: &str) -> CliResult<UserId> {
    UserId::new(user).doing(|| format!("the user {user:?} is not a valid id"))
}

/// A validated agent id.
pub(crate) fn agent_id(agent: &str) -> CliResult<AgentId> {
    AgentId::new(agent).doing(|| format!("the agent {agent:?} is not a valid id"))
}

/// A validated session id.
pub(crate) fn session_id(session: &str) -> CliResult<SessionId> {
    SessionId::new(session).doing(|| format!("the session {session:?} is not a valid id"))
}

/// The scope the flags address.
pub(crate) fn scope_of(args: &ScopeArgs) -> CliResult<Scope> {
    let owner = &args.owner;
    let mut scope = Scope::new(tenant_id(&owner.tenant)?, session_id(&args.session)?);
    if let Some(user) = &owner.user {
        scope = scope
            .with_user(user.as_str())
            .doing(|| format!("the user {user:?} is not a valid id"))?;
    }
    if let Some(agent) = &owner.agent {
        scope = scope.with_agent_id(agent_id(agent)?);
    }
    scope
        .with_source(args.source.as_str())
        .doing(|| format!("the source {:?} is not a valid id", args.source))
}

/// The tenants a listing covers: the one named, or every tenant of the store's history and
/// sessions.
pub(crate) async fn tenants(stores: &Stores, args: &TenantsArgs) -> CliResult<Vec<TenantId>> {
    if !args.all_tenants {
        return Ok(vec![tenant_id(&args.tenant)?]);
    }
    all_tenants(stores).await
}

/// Every tenant that holds threads or sessions.
pub(crate) async fn all_tenants(stores: &Stores) -> CliResult<Vec<TenantId>> {
    let cannot =
        || "could not list the tenants of this store (name one with --tenant instead)".to_owned();
    let mut set: BTreeSet<TenantId> =
        all_pages_of(TENANT_PAGE, |page| stores.history.list_tenants(page))
            .await
            .doing(cannot)?
            .into_iter()
            .collect();
    set.extend(
        all_pages_of(TENANT_PAGE, |page| stores.sessions.list_tenants(page))
            .await
            .doing(cannot)?,
    );
    Ok(set.into_iter().collect())
}

/// The listing filter of a tenant, narrowed to a user and an agent.
fn filter_of(
    tenant: &TenantId,
    user: Option<&String>,
    agent: Option<&String>,
) -> CliResult<ScopeFilter> {
    let mut filter = ScopeFilter::tenant(tenant.clone());
    if let Some(user) = user {
        filter = filter.with_user(user_id(user)?);
    }
    if let Some(agent) = agent {
        filter = filter.with_agent(agent_id(agent)?);
    }
    Ok(filter)
}

/// `threads`: one row per thread, with its counts.
pub(crate) async fn threads(stores: &Stores, args: &ThreadsArgs, json: bool) -> CliResult<()> {
    let mut rows: Vec<(Scope, ThreadCount)> = Vec::new();
    for tenant in tenants(stores, &args.tenants).await? {
        let filter = filter_of(&tenant, args.user.as_ref(), args.agent.as_ref())?;
        let scopes = all_pages(|page| stores.history.list_threads(&filter, page))
            .await
            .doing(|| format!("could not list the threads of tenant {tenant}"))?;
        for scope in scopes {
            let count = stores
                .history
                .count(&scope)
                .await
                .doing(|| format!("could not count the messages of thread {scope}"))?;
            rows.push((scope, count));
        }
    }
    if json {
        let items: Vec<Value> = rows
            .iter()
            .map(|(scope, count)| {
                json!({
                    "tenant": scope.tenant().as_str(),
                    "user": scope.user().map(|u| u.as_str()),
                    "agent": scope.agent().map(|a| a.as_str()),
                    "session": scope.session_id().as_str(),
                    "source": scope.source().as_str(),
                    "active": count.active,
                    "archived": count.archived,
                    "active_tokens": count.active_tokens,
                    "last_seq": count.last_seq,
                })
            })
            .collect();
        return print_json(&Value::Array(items));
    }
    if rows.is_empty() {
        return print("No threads.");
    }
    let mut out = table(&[
        "tenant", "user", "agent", "session", "source", "active", "archived", "tokens", "last seq",
    ]);
    for (scope, count) in &rows {
        out.add_row(vec![
            scope.tenant().to_string(),
            scope.user().map(ToString::to_string).unwrap_or_default(),
            scope.agent().map(ToString::to_string).unwrap_or_default(),
            scope.session_id().to_string(),
            scope.source().to_string(),
            count.active.to_string(),
            count.archived.to_string(),
            count.active_tokens.to_string(),
            count.last_seq.to_string(),
        ]);
    }
    print(&out.to_string())?;
    print(&format!("{} threads.", rows.len()))
}

/// `show`: a thread's messages, or a session's state.
pub(crate) async fn show(stores: &Stores, args: &ShowArgs, json: bool) -> CliResult<()> {
    let scope = scope_of(&args.scope)?;
    if args.session_state {
        let stored = stores
            .sessions
            .load(&scope)
            .await
            .doing(|| format!("could not load the session state of {scope}"))?
            .ok_or_else(|| Failed::msg(format!("no session state is stored for {scope}")))?;
        if json {
            return print_json(&json!({"version": stored.version, "state": stored.state}));
        }
        print(&format!("Session {scope}, version {}:", stored.version))?;
        return print_json(&stored.state);
    }
    let window = match (args.last, args.all || args.archived) {
        (Some(n), _) => Window::Last(n),
        (None, true) => Window::Everything,
        (None, false) => Window::All,
    };
    let messages: Vec<_> = stores
        .history
        .read(&scope, window)
        .await
        .doing(|| format!("could not read thread {scope}"))?
        .into_iter()
        .filter(|m| !args.archived || m.archived)
        .collect();
    if json {
        let mut items = Vec::with_capacity(messages.len());
        for m in &messages {
            let message = m
                .message
                .to_json_value()
                .doing(|| format!("could not write message {} as JSON", m.seq))?;
            items.push(json!({
                "seq": m.seq,
                "role": m.message.role.as_str(),
                "tokens": m.tokens,
                "archived": m.archived,
                "text": m.message.text(),
                "message": message,
            }));
        }
        return print_json(&json!({"thread": scope.key(), "messages": items}));
    }
    if messages.is_empty() {
        return print(&format!("No messages in thread {scope}."));
    }
    let mut out = table(&["seq", "role", "tokens", "archived", "text"]);
    for m in &messages {
        out.add_row(vec![
            m.seq.to_string(),
            m.message.role.as_str().to_owned(),
            m.tokens.to_string(),
            if m.archived { "yes" } else { "" }.to_owned(),
            one_line(&m.message.text(), 100),
        ]);
    }
    print(&out.to_string())?;
    print(&format!("{} messages.", messages.len()))
}

/// The counts of one tenant.
#[derive(Debug, Default)]
struct TenantStats {
    threads: u64,
    messages: u64,
    archived: u64,
    tokens: u64,
    sessions: u64,
}

/// `stats`: threads, messages, archived messages, tokens and sessions per tenant.
pub(crate) async fn stats(stores: &Stores, args: &TenantsArgs, json: bool) -> CliResult<()> {
    let mut rows = Vec::new();
    for tenant in tenants(stores, args).await? {
        let filter = ScopeFilter::tenant(tenant.clone());
        let scopes = all_pages(|page| stores.history.list_threads(&filter, page))
            .await
            .doing(|| format!("could not list the threads of tenant {tenant}"))?;
        let mut stats = TenantStats::default();
        for scope in &scopes {
            let count = stores
                .history
                .count(scope)
                .await
                .doing(|| format!("could not count the messages of thread {scope}"))?;
            stats.threads = stats.threads.saturating_add(1);
            stats.messages = stats.messages.saturating_add(count.active);
            stats.archived = stats.archived.saturating_add(count.archived);
            stats.tokens = stats.tokens.saturating_add(count.active_tokens);
        }
        let sessions = all_pages(|page| stores.sessions.list(&filter, page))
            .await
            .doing(|| format!("could not list the sessions of tenant {tenant}"))?;
        stats.sessions = u64::try_from(sessions.len()).unwrap_or(u64::MAX);
        rows.push((tenant, stats));
    }
    if json {
        let items: Vec<Value> = rows
            .iter()
            .map(|(tenant, s)| {
                json!({
                    "tenant": tenant.as_str(),
                    "threads": s.threads,
                    "messages": s.messages,
                    "archived": s.archived,
                    "tokens": s.tokens,
                    "sessions": s.sessions,
                })
            })
            .collect();
        return print_json(&Value::Array(items));
    }
    let mut out = table(&[
        "tenant", "threads", "messages", "archived", "tokens", "sessions",
    ]);
    for (tenant, s) in &rows {
        out.add_row(vec![
            tenant.to_string(),
            s.threads.to_string(),
            s.messages.to_string(),
            s.archived.to_string(),
            s.tokens.to_string(),
            s.sessions.to_string(),
        ]);
    }
    print(&out.to_string())
}

/// The forget filter of the flags.
fn forget_filter(args: &ForgetArgs) -> CliResult<ScopeFilter> {
    let owner = &args.owner;
    let mut filter = ScopeFilter::tenant(tenant_id(&owner.tenant)?);
    if let Some(user) = &owner.user {
        filter = filter.with_user(user_id(user)?);
    }
    if let Some(agent) = &owner.agent {
        filter = filter.with_agent(agent_id(agent)?);
    }
    if let Some(session) = &args.session {
        filter = filter.with_session(session_id(session)?);
    }
    Ok(filter)
}

/// `forget`: deletes (or counts, with `--dry-run`) and prints the receipt.
pub(crate) async fn forget(stores: &Stores, args: &ForgetArgs, json: bool) -> CliResult<()> {
    let filter = forget_filter(args)?;
    if filter.is_whole_tenant() && !args.dry_run && !args.yes {
        return Err(Failed::msg(format!(
            "forgetting all of tenant {} deletes every thread and session in it; add --yes to \
             confirm, narrow it with --user, --agent or --session, or look first with --dry-run",
            filter.tenant
        )));
    }
    let mode = if args.dry_run {
        ForgetMode::DryRun
    } else {
        ForgetMode::Delete
    };
    let receipt =
        stores.forgetter().forget(&filter, mode).await.doing(|| {
            format!("could not forget {filter} (running the same forget again is safe)")
        })?;
    if json {
        return print_json(&receipt_json(&receipt));
    }
    print(&receipt.to_string())
}

/// A receipt as JSON.
fn receipt_json(receipt: &ForgetReceipt) -> Value {
    let filter = &receipt.filter;
    json!({
        "dry_run": receipt.mode == ForgetMode::DryRun,
        "tenant": filter.tenant.as_str(),
        "user": filter.user.as_ref().map(|u| u.as_str()),
        "agent": filter.agent.as_ref().map(|a| a.as_str()),
        "session": filter.session.as_ref().map(|s| s.as_str()),
        "stores": receipt.stores.iter().map(|s| json!({
            "store": s.store,
            "scopes": s.known_scopes(),
            "items": s.items,
            "unit": s.unit,
        })).collect::<Vec<_>>(),
        "total_items": receipt.total_items(),
    })
}

/// What one purge did: the count, or `None` when the store keeps no time to live.
fn purged(result: agent_memory::Result<u64>, store: &str) -> CliResult<Option<u64>> {
    match result {
        Ok(n) => Ok(Some(n)),
        Err(err) if err.kind() == ErrorKind::Unsupported => Ok(None),
        Err(err) => Err(Failed::with(
            format!("could not purge the expired data of the {store} store"),
            err,
        )),
    }
}

/// `purge-expired`: deletes the expired threads and sessions now.
pub(crate) async fn purge_expired(stores: &Stores, json: bool) -> CliResult<()> {
    let history = purged(stores.history.purge_expired().await, "history")?;
    let sessions = purged(stores.sessions.purge_expired().await, "session")?;
    if json {
        return print_json(&json!({"threads": history, "sessions": sessions}));
    }
    let line = |n: Option<u64>, what: &str| match n {
        Some(n) => format!("{what}: purged {n} expired"),
        None => format!("{what}: this store keeps no time to live; nothing to purge"),
    };
    print(&line(history, "threads"))?;
    print(&line(sessions, "sessions"))
}
