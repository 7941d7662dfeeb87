//! Bearer tokens to principals: each configured token is bound to one tenant and optionally
//! one user; the tenant of every operation comes from the token, never from the request.

use std::fmt;

use agent_memory::{TenantId, UserId};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{ErrorCode, OpError, OpResult};

/// Who is calling: the tenant every scope of the request is in, and the user the token is
/// bound to (a request naming another user is refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant, from the token.
    pub tenant: TenantId,
    /// The user the token is bound to, if any.
    pub user: Option<UserId>,
}

impl Principal {
    /// The principal of a token bound to `tenant` only.
    pub fn tenant(tenant: TenantId) -> Self {
        Self { tenant, user: None }
    }

    /// The user a request may address: the token's user when it is bound to one (a different
    /// `requested` user is [`ErrorCode::Forbidden`]), else the requested one.
    ///
    /// # Errors
    /// [`ErrorCode::Forbidden`] when the token is bound to another user;
    /// [`ErrorCode::InvalidInput`] for an invalid user id.
    pub fn user_for(&self, requested: Option<&str>) -> OpResult<Option<UserId>> {
        match (&self.user, requested) {
            (Some(bound), Some(asked)) if bound.as_str() != asked => Err(OpError::forbidden(
                "this token is bound to another user than the one the request names",
            )),
            (Some(bound), _) => Ok(Some(bound.clone())),
            (None, Some(asked)) => UserId::new(asked).map(Some).map_err(OpError::from),
            (None, None) => Ok(None),
        }
    }
}

/// A configured token: the SHA-256 of the secret, and what it grants.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenEntry {
    digest: [u8; 32],
    principal: Principal,
}

impl fmt::Debug for TokenEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The digest is not the secret, but it is not needed in logs either.
        f.debug_struct("TokenEntry")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl TokenEntry {
    /// An entry for the token whose SHA-256 is `digest`.
    pub fn from_digest(digest: [u8; 32], principal: Principal) -> Self {
        Self { digest, principal }
    }

    /// An entry for the token `secret` (only its digest is kept).
    pub fn from_secret(secret: &str, principal: Principal) -> Self {
        Self::from_digest(sha256(secret), principal)
    }

    /// What the token grants.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The token's SHA-256 (to tell two entries of one token apart from two tokens).
    pub(crate) fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// The SHA-256 of a token, as configured with `sha256 = "…"` (hex).
pub fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Authenticator {
    /// No tokens configured: every request is the given principal (only allowed on a loopback
    /// listen address; see `config`).
    Open(Principal),
    /// Bearer tokens: a request without one that matches is refused.
    Tokens(Vec<TokenEntry>),
}

impl Authenticator {
    /// The principal of a request whose `Authorization` header is `header`.
    ///
    /// Every configured digest is compared, in constant time, whatever matched before: the
    /// time taken does not depend on which token (if any) matched.
    ///
    /// # Errors
    /// [`ErrorCode::Unauthorized`] when tokens are configured and the header is missing, not
    /// `Bearer …`, or matches none. The error never repeats the header.
    pub fn authenticate(&self, header: Option<&str>) -> OpResult<Principal> {
        let tokens = match self {
            Authenticator::Open(principal) => return Ok(principal.clone()),
            Authenticator::Tokens(tokens) => tokens,
        };
        let unauthorized = || {
            OpError::new(
                ErrorCode::Unauthorized,
                "a valid bearer token is required (Authorization: Bearer <token>)",
            )
        };
        let header = header.ok_or_else(unauthorized)?;
        let (scheme, token) = header.trim().split_once(' ').ok_or_else(unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(unauthorized());
        }
        let digest = sha256(token.trim());
        let mut found: Option<&TokenEntry> = None;
        for entry in tokens {
            let equal: bool = entry.digest.ct_eq(&digest).into();
            if equal && found.is_none() {
                found = Some(entry);
            }
        }
        found
            .map(|entry| entry.principal.clone())
            .ok_or_else(unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        TenantId::new(name).unwrap()
    }

    #[test]
    fn a_token_maps_to_its_principal_and_others_are_refused() {
        let auth = Authenticator::Tokens(vec![
            TokenEntry::from_secret("alpha-secret", Principal::tenant(tenant("a"))),
            TokenEntry::from_digest(
                sha256("beta-secret"),
                Principal {
                    tenant: tenant("b"),
                    user: Some(UserId::new("bob").unwrap()),
                },
            ),
        ]);
        assert_eq!(
            auth.authenticate(Some("Bearer alpha-secret"))
                .unwrap()
                .tenant,
            tenant("a")
        );
        let b = auth.authenticate(Some("bearer beta-secret")).unwrap();
        assert_eq!(b.tenant, tenant("b"));
        assert_eq!(b.user.as_ref().map(UserId::as_str), Some("bob"));
        for bad in [
            None,
            Some("Bearer nope"),
            Some("Basic alpha-secret"),
            Some("alpha-secret"),
        ] {
            let err = auth.authenticate(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::Unauthorized);
            assert!(!err.detail.contains("alpha-secret"));
        }
    }

    #[test]
    fn a_user_bound_token_cannot_name_another_user() {
        let p = Principal {
            tenant: tenant("t"),
            user: Some(UserId::new("alice").unwrap()),
        };
        assert_eq!(p.user_for(None).unwrap().unwrap().as_str(), "alice");
        assert_eq!(
            p.user_for(Some("alice")).unwrap().unwrap().as_str(),
            "alice"
        );
        assert_eq!(
            p.user_for(Some("bob")).unwrap_err().code,
            ErrorCode::Forbidden
        );
        let open = Principal::tenant(tenant("t"));
        assert_eq!(open.user_for(Some("bob")).unwrap().unwrap().as_str(), "bob");
        assert_eq!(
            open.user_for(Some("bad id!")).unwrap_err().code,
            ErrorCode::InvalidInput
        );
    }
}
