//! Values as the tables store them: the scope's columns, Unix-millisecond times and expiries,
//! counts as SQL integers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memory_core::{Error, Result, Scope, SessionId, TenantId, ttl_millis};

use crate::driver::{Arg, Row};

/// The scope's columns, in table order: tenant, user_id, agent_id, source, session_id.
pub(crate) fn scope_args(scope: &Scope) -> [Arg<'_>; 5] {
    [
        Arg::Text(scope.tenant().as_str()),
        Arg::OptText(scope.user().map(|u| u.as_str())),
        Arg::OptText(scope.agent().map(|a| a.as_str())),
        Arg::Text(scope.source().as_str()),
        Arg::Text(scope.session_id().as_str()),
    ]
}

/// Rebuilds a scope from the columns tenant, user_id, agent_id, source, session_id at
/// `first..first + 5` of `row`; ids are validated again, so a corrupt row is a
/// `Serialization` error.
pub(crate) fn scope_from_row(row: &mut Row, first: usize) -> Result<Scope> {
    let corrupt = |err: Error| {
        Error::serialization(format!("a stored scope is invalid: {}", err.message()))
            .with_source(err)
    };
    let tenant = TenantId::new(row.take_text(first)?).map_err(corrupt)?;
    let user = row.take_opt_text(first.saturating_add(1))?;
    let agent = row.take_opt_text(first.saturating_add(2))?;
    let source = row.take_text(first.saturating_add(3))?;
    let session = SessionId::new(row.take_text(first.saturating_add(4))?).map_err(corrupt)?;
    let mut scope = Scope::new(tenant, session)
        .with_source(source)
        .map_err(corrupt)?;
    if let Some(user) = user {
        scope = scope.with_user(user).map_err(corrupt)?;
    }
    if let Some(agent) = agent {
        scope = scope.with_agent(agent).map_err(corrupt)?;
    }
    Ok(scope)
}

/// The application's clock, in Unix milliseconds: the time base of every expiry.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| to_i64(d.as_millis()))
        .unwrap_or_default()
}

/// An unsigned count or bound as an SQL integer, saturating at `i64::MAX`.
pub(crate) fn to_i64(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// A time to live, checked ([`ttl_millis`]: 1 ms to 100 years), in milliseconds.
pub(crate) fn ttl_ms(ttl: Duration) -> Result<i64> {
    ttl_millis(ttl).map(to_i64)
}

/// `now + ttl`. Checked TTLs keep it far from overflowing; a corrupt stored one saturates.
pub(crate) fn expiry(now: i64, ttl_ms: Option<i64>) -> Option<i64> {
    ttl_ms.map(|t| now.saturating_add(t))
}
