//! The storage layout: every key the store reads or writes is built here.
//!
//! Every key of one scope is `{prefix}:{<scope key>}:<suffix>`, where `<scope key>` is
//! [`Scope::key`] (tenant, user, agent, source and session joined by `|`, `~` for an absent
//! part). The braces are a Redis Cluster hash tag around the *whole* scope key, so
//!
//! - all keys of one thread (and its session) live in one cluster slot, which is what lets one
//!   Lua script update them atomically, and
//! - two scopes that differ in any part (two users, two agents, two providers of one session)
//!   never share a key.
//!
//! Ids cannot contain `{ } | ~ * ? [ ]`, spaces or backslashes (see
//! [`memory_core::id::is_id_char`]), so a scope key placed verbatim in a key cannot end the hash
//! tag early, alias another scope, or act as a glob in a `SCAN ... MATCH` pattern.
//!
//! | key | type | holds |
//! |-----|------|-------|
//! | `…:meta` | hash | `last_seq`, `active`, `tokens` (active tokens), `deleted`, `first_kept` (every body below it is deleted), `ttl_ms`, `gone` (see `…:ids`), `unindexed` (until the thread is in its tenant's index), `born` (when this life of the thread began: a paged read restarts when it changes), `epoch` (a random non-zero u64 in decimal, for cursor reads: set when an append creates the thread, replaced when an archive moves a message or an append's `max_messages` overflow moves messages out of the window, gone with the thread; a thread written before epochs gets one from its first cursor read) |
//! | `…:ids` | hash | message id → seq of every stored message (active or archived), plus the ids the last append stored and `Overflow::Delete` deleted at once (listed in meta `gone`, forgotten by the next append); never more |
//! | `…:msg` | hash | seq → the message's versioned JSON |
//! | `…:tok` | hash | seq → the message's token count |
//! | `…:active` | sorted set | the active window: member seq, score seq |
//! | `…:exp` | string | expiry record of a thread with a TTL (see `purge_expired`) |
//! | `…:session` | hash | `version`, `state` (JSON), `ttl_ms`, `last_nonce` (of the last save) |
//! | `…:sexp` | string | expiry record of a session with a TTL |
//! | `…:sver` | string | the last version the scope's session had: written by every save, kept (no TTL) when the session is deleted or expires, so a re-created session continues above it |
//! | `…:ack` | string | `<nonce> <reply>` of the last archive, clear or session delete, for 5 minutes |
//! | `{prefix}:{<tenant>}:threads` | sorted set | the tenant's thread index: scope keys, score 0 ([`thread_index`]) |
//! | `{prefix}:{|expiring}:threads` | sorted set | threads with an expiry record, scored by a time before which they have not expired ([`expiry_index`]) |
//! | `{prefix}:{|expiring}:complete` | string | set for 24 hours after a scan added every expiry record to the expiry index |
//!
//! The vector store ([`RedisVectorStore`](crate::RedisVectorStore)) keeps the points of one
//! *user* (tenant and user, `~` for none) in one cluster slot, under the hash tag
//! `{<tenant>|<user or ~>}` ([`VectorKeys`]), so a later step can read all of a user's scopes in
//! one call. That tag holds exactly one `|`: it is never a scope's tag (four) nor a tenant's
//! (none), and `{|vectors}` has an empty tenant, which no scope has.
//!
//! | key | type | holds |
//! |-----|------|-------|
//! | `{prefix}:{\|vectors}:vdims` | string | the dimension of every vector of the store, set once by the first upsert ([`vector_dimensions`]) |
//! | `{prefix}:{<tenant>}:vusers` | set | the user parts (`<user>` or `~`) of the tenant's users that may hold points: added before their points are written, removed by `delete_matching` once a user holds none ([`vector_users`]) |
//! | `{prefix}:{<tenant>\|<user>}:vscopes` | set | the scope keys of the user's scopes that hold points |
//! | `{prefix}:{<tenant>\|<user>}:vvec:<scope key>` | hash | point id (hyphenated UUID) → its vector, `4 × dimension` bytes of f32 little-endian |
//! | `{prefix}:{<tenant>\|<user>}:vpay:<scope key>` | hash | point id → its payload (a JSON object) |
//! | `{prefix}:{<tenant>\|<user>}:vq8:<scope key>` | hash | point id → its compact vector, `4 + dimension` bytes (an f32 scale, then one i8 a dimension of the unit vector: `memory_core::vector::quantized`), which a search scans |
//! | `{prefix}:{<tenant>\|<user>}:vack:<scope key>` | string | `<nonce> <reply>` of the scope's last point delete or clear, for 5 minutes |
//! | `{prefix}:{<tenant>\|<user>}:vack` | string | `<nonce> <reply>` of the user's last `delete_matching` step, for 5 minutes |

use memory_core::{Error, Result, Scope, ScopeFilter};

/// The suffix of a thread's meta hash: what `list_threads` scans for.
const META: &str = "meta";
/// The suffix of a session's hash: what `SessionStore::list` scans for.
const SESSION: &str = "session";
/// The suffix of a thread's expiry record.
const THREAD_EXPIRY: &str = "exp";
/// The suffix of a session's expiry record.
const SESSION_EXPIRY: &str = "sexp";
/// The suffix of the last version a scope's session had.
const SESSION_VERSION: &str = "sver";
/// The suffix of the acknowledgement of a scope's last archive, clear or session delete.
const ACK: &str = "ack";

/// The suffix of a tenant's thread index.
const THREAD_INDEX: &str = "threads";

/// The member of a tenant's thread index that says the index is complete: every thread of the
/// tenant written before the index existed was added to it by a one-time scan. It sorts before
/// every scope key, so no listing range reaches it.
pub(crate) const INDEX_COMPLETE: &str = "";

/// The longest key prefix.
pub const MAX_PREFIX_LEN: usize = 32;

/// Checks a key prefix: 1 to [`MAX_PREFIX_LEN`] characters of `[a-z0-9_.-]`.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN {
        return Err(Error::invalid_input(format!(
            "the redis key prefix must be 1 to {MAX_PREFIX_LEN} characters, got {}",
            prefix.len()
        )));
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '_' | '.' | '-'))
    {
        return Err(Error::invalid_input(format!(
            "the redis key prefix {prefix:?} contains {bad:?}; use a-z, 0-9, '_', '.' and '-'"
        )));
    }
    Ok(())
}

/// `{prefix}:{<scope key>}:<suffix>`.
fn key(prefix: &str, scope: &Scope, suffix: &str) -> String {
    format!("{prefix}:{{{}}}:{suffix}", scope.key())
}

/// The keys of one thread, in the order the Lua scripts expect them.
#[derive(Debug, Clone)]
pub(crate) struct ThreadKeys {
    pub(crate) meta: String,
    pub(crate) ids: String,
    pub(crate) msg: String,
    pub(crate) tok: String,
    pub(crate) active: String,
    pub(crate) expiry: String,
    /// Not one of [`all`](ThreadKeys::all): archive and clear pass it on its own.
    pub(crate) ack: String,
}

impl ThreadKeys {
    pub(crate) fn new(prefix: &str, scope: &Scope) -> Self {
        Self {
            meta: key(prefix, scope, META),
            ids: key(prefix, scope, "ids"),
            msg: key(prefix, scope, "msg"),
            tok: key(prefix, scope, "tok"),
            active: key(prefix, scope, "active"),
            expiry: key(prefix, scope, THREAD_EXPIRY),
            ack: key(prefix, scope, ACK),
        }
    }

    /// Every key, in the order `KEYS[1..6]` of the scripts: meta, ids, msg, tok, active, exp.
    pub(crate) fn all(&self) -> [&str; 6] {
        [
            &self.meta,
            &self.ids,
            &self.msg,
            &self.tok,
            &self.active,
            &self.expiry,
        ]
    }
}

/// `{prefix}:{|expiring}:threads`: the sorted set of the scope keys of threads with an expiry
/// record, each scored with a time (Unix ms) before which it surely has not expired, so
/// `purge_expired` looks only at those due. The hash tag holds a `|` but no scope key has this
/// one, and no tenant holds a `|`: it is no other key's tag.
pub(crate) fn expiry_index(prefix: &str) -> String {
    format!("{prefix}:{{|expiring}}:{THREAD_INDEX}")
}

/// `{prefix}:{|expiring}:complete`: set for 24 hours after a scan added every expiry record to
/// the expiry index; a purge that finds it gone scans again.
pub(crate) fn expiry_index_complete(prefix: &str) -> String {
    format!("{prefix}:{{|expiring}}:complete")
}

/// `{prefix}:{<tenant>}:threads`: the sorted set of the scope keys of the tenant's threads
/// (all with score 0, so they are in lexicographic order: [`Scope::key`] order). Its hash tag
/// is the tenant alone, which holds no `|`, so it is never the hash tag of a scope's keys.
pub(crate) fn thread_index(prefix: &str, tenant: &str) -> String {
    format!("{prefix}:{{{tenant}}}:{THREAD_INDEX}")
}

/// The `ZRANGEBYLEX` bounds of the members of a thread index that may match `filter`, after
/// the scope key `cursor` (when given): the parts the filter fixes from the tenant on, up to
/// the first it leaves open, are a prefix of every matching scope key.
pub(crate) fn index_range(filter: &ScopeFilter, cursor: Option<&str>) -> (String, String) {
    let mut prefix = format!("{}|", filter.tenant);
    if let Some(user) = &filter.user {
        prefix.push_str(user.as_str());
        prefix.push('|');
        if let Some(agent) = &filter.agent {
            prefix.push_str(agent.as_str());
            prefix.push('|');
            if let Some(source) = &filter.source {
                prefix.push_str(source.as_str());
                prefix.push('|');
            }
        }
    }
    // Every string that starts with the prefix (which ends with `|`) sorts below the prefix
    // with its last `|` replaced by the next byte, `}`.
    let max = format!("({}}}", prefix.strip_suffix('|').unwrap_or(&prefix));
    let min = match cursor {
        Some(c) if c >= prefix.as_str() => format!("({c}"),
        _ => format!("[{prefix}"),
    };
    (min, max)
}

/// The user part of a vector hash tag for a scope without a user.
pub(crate) const NO_USER: &str = "~";

/// The user part of `scope`'s vector hash tag: its user, or [`NO_USER`].
pub(crate) fn user_part(scope: &Scope) -> &str {
    scope.user().map_or(NO_USER, |user| user.as_str())
}

/// `{prefix}:{<tenant>|<user>}:<suffix>`: a key in the slot of one user's vector points.
fn user_key(prefix: &str, tenant: &str, user: &str, suffix: &str) -> String {
    format!("{prefix}:{{{tenant}|{user}}}:{suffix}")
}

/// `{prefix}:{<tenant>|<user>}:vscopes`: the set of the scope keys of the user's scopes that
/// hold points (`user` is a user id or [`NO_USER`]).
pub(crate) fn vector_scopes(prefix: &str, tenant: &str, user: &str) -> String {
    user_key(prefix, tenant, user, "vscopes")
}

/// `{prefix}:{<tenant>|<user>}:vack`: the acknowledgement of the user's last
/// `delete_matching` step.
pub(crate) fn vector_user_ack(prefix: &str, tenant: &str, user: &str) -> String {
    user_key(prefix, tenant, user, "vack")
}

/// `{prefix}:{<tenant>}:vusers`: the set of the user parts of the tenant's users that may hold
/// points. Its hash tag is the tenant alone, as the tenant's thread index.
pub(crate) fn vector_users(prefix: &str, tenant: &str) -> String {
    format!("{prefix}:{{{tenant}}}:vusers")
}

/// `{prefix}:{|vectors}:vdims`: the dimension of the store's vectors. No tenant is empty, so
/// no user or scope has this tag.
pub(crate) fn vector_dimensions(prefix: &str) -> String {
    format!("{prefix}:{{|vectors}}:vdims")
}

/// The keys of one scope's vector points, all in the slot of the scope's user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VectorKeys {
    /// The user's set of scope keys holding points ([`vector_scopes`]).
    pub(crate) scopes: String,
    /// Point id → vector bytes.
    pub(crate) vectors: String,
    /// Point id → payload JSON.
    pub(crate) payloads: String,
    /// Point id → compact vector ([`quantized`](memory_core::vector::quantized)), which a
    /// search scans before it reads the best points' vectors.
    pub(crate) compact: String,
    /// The acknowledgement of the scope's last delete or clear.
    pub(crate) ack: String,
}

impl VectorKeys {
    pub(crate) fn new(prefix: &str, scope: &Scope) -> Self {
        let tenant = scope.tenant().as_str();
        let user = user_part(scope);
        let scope_key = scope.key();
        Self {
            scopes: vector_scopes(prefix, tenant, user),
            vectors: user_key(prefix, tenant, user, &format!("vvec:{scope_key}")),
            payloads: user_key(prefix, tenant, user, &format!("vpay:{scope_key}")),
            compact: user_key(prefix, tenant, user, &format!("vq8:{scope_key}")),
            ack: user_key(prefix, tenant, user, &format!("vack:{scope_key}")),
        }
    }
}

/// The keys of one session: its hash, its expiry record and the scope's acknowledgement.
#[derive(Debug, Clone)]
pub(crate) struct SessionKeys {
    pub(crate) session: String,
    pub(crate) expiry: String,
    pub(crate) ack: String,
    /// The session's tombstone: its last version.
    pub(crate) last_version: String,
}

impl SessionKeys {
    pub(crate) fn new(prefix: &str, scope: &Scope) -> Self {
        Self {
            session: key(prefix, scope, SESSION),
            expiry: key(prefix, scope, SESSION_EXPIRY),
            ack: key(prefix, scope, ACK),
            last_version: key(prefix, scope, SESSION_VERSION),
        }
    }
}

/// What a listing scans for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Threads (their meta hash).
    Threads,
    /// Sessions (their hash).
    Sessions,
    /// Expiry records of threads.
    ThreadExpiries,
    /// Expiry records of sessions.
    SessionExpiries,
}

impl Listed {
    fn suffix(self) -> &'static str {
        match self {
            Listed::Threads => META,
            Listed::Sessions => SESSION,
            Listed::ThreadExpiries => THREAD_EXPIRY,
            Listed::SessionExpiries => SESSION_EXPIRY,
        }
    }
}

/// The `SCAN ... MATCH` pattern of the keys of `what` that may match `filter`: the tenant and
/// every part the filter fixes are literal, the others `*`. Scopes found with it are checked
/// against the filter again ([`ScopeFilter::matches`]).
pub(crate) fn scan_pattern(prefix: &str, filter: &ScopeFilter, what: Listed) -> String {
    let part = |v: Option<&str>| v.unwrap_or("*").to_owned();
    format!(
        "{prefix}:{{{}|{}|{}|{}|*}}:{}",
        filter.tenant,
        part(filter.user.as_ref().map(|u| u.as_str())),
        part(filter.agent.as_ref().map(|a| a.as_str())),
        part(filter.source.as_ref().map(|s| s.as_str())),
        what.suffix()
    )
}

/// The pattern of every key of `what` under `prefix`, in every tenant.
pub(crate) fn scan_all_pattern(prefix: &str, what: Listed) -> String {
    format!("{prefix}:{{*}}:{}", what.suffix())
}

/// The scope a key of `what` belongs to, or `None` for a key that is not one of ours (a
/// foreign key that happens to match a pattern is skipped, never an error).
pub(crate) fn scope_of(prefix: &str, key: &str, what: Listed) -> Option<Scope> {
    let inner = key
        .strip_prefix(prefix)?
        .strip_prefix(":{")?
        .strip_suffix(what.suffix())?
        .strip_suffix("}:")?;
    scope_from_key(inner)
}

/// Rebuilds a scope from its [`Scope::key`], validating every part.
pub(crate) fn scope_from_key(scope_key: &str) -> Option<Scope> {
    Scope::from_key(scope_key)
        .ok()
        .filter(|scope| scope.key() == scope_key)
}

#[cfg(test)]
mod tests {
    use memory_core::{TenantId, UserId};

    use super::*;

    fn scope() -> Scope {
        Scope::session("s-1")
            .unwrap()
            .with_tenant("t-1")
            .unwrap()
            .with_user("u@x")
            .unwrap()
    }

    #[test]
    fn keys_carry_the_whole_scope_as_hash_tag() {
        let keys = ThreadKeys::new("am", &scope());
        assert_eq!(keys.meta, "am:{t-1|u@x|~|history|s-1}:meta");
        for k in keys.all().into_iter().chain([keys.ack.as_str()]) {
            let open = k.find('{').unwrap();
            let close = k.find('}').unwrap();
            assert_eq!(&k[open + 1..close], scope().key());
        }
        let session = SessionKeys::new("am", &scope());
        assert_eq!(session.session, "am:{t-1|u@x|~|history|s-1}:session");
        assert_eq!(session.ack, keys.ack, "one acknowledgement key per scope");
    }

    #[test]
    fn two_sources_never_share_a_key() {
        let a = ThreadKeys::new("am", &scope());
        let b = ThreadKeys::new("am", &scope().with_source("mem0").unwrap());
        for (x, y) in a.all().iter().zip(b.all()) {
            assert_ne!(*x, y);
        }
    }

    #[test]
    fn scope_round_trips_through_its_key() {
        for s in [
            scope(),
            scope().with_agent("a").unwrap(),
            Scope::session("x").unwrap(),
        ] {
            let keys = ThreadKeys::new("am.test-1", &s);
            assert_eq!(scope_of("am.test-1", &keys.meta, Listed::Threads), Some(s));
        }
        assert_eq!(scope_of("am", "am:{a|b}:meta", Listed::Threads), None);
        assert_eq!(
            scope_of("am", "am:{a|~|~|h|bad id}:meta", Listed::Threads),
            None
        );
        assert_eq!(
            scope_of("am", "other:{a|~|~|h|s}:meta", Listed::Threads),
            None
        );
        assert_eq!(
            scope_of("am", "am:{a|~|~|h|s}:session", Listed::Threads),
            None
        );
    }

    #[test]
    fn patterns_fix_the_filtered_parts() {
        let filter =
            ScopeFilter::tenant(TenantId::new("t-1").unwrap()).with_user(UserId::new("u").unwrap());
        assert_eq!(
            scan_pattern("am", &filter, Listed::Threads),
            "am:{t-1|u|*|*|*}:meta"
        );
        assert_eq!(
            scan_all_pattern("am", Listed::SessionExpiries),
            "am:{*}:sexp"
        );
    }

    #[test]
    fn index_ranges_fix_the_leading_filtered_parts() {
        let tenant = ScopeFilter::tenant(TenantId::new("t-1").unwrap());
        assert_eq!(
            index_range(&tenant, None),
            ("[t-1|".to_owned(), "(t-1}".to_owned())
        );
        let user = tenant.clone().with_user(UserId::new("u").unwrap());
        assert_eq!(
            index_range(&user, Some("t-1|u|~|history|s")),
            ("(t-1|u|~|history|s".to_owned(), "(t-1|u}".to_owned())
        );
        // A cursor below the range starts at the range.
        assert_eq!(index_range(&user, Some("t-1|a")).0, "[t-1|u|");
        assert_eq!(thread_index("am", "t-1"), "am:{t-1}:threads");
    }

    /// The hash tag of a key: between its first `{` and the first `}` after it (Redis
    /// Cluster's rule).
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').unwrap();
        let close = open + key[open..].find('}').unwrap();
        &key[open + 1..close]
    }

    #[test]
    fn vector_keys_of_a_user_share_one_tag_and_scopes_never_share_a_key() {
        let base = scope();
        let scopes = [
            base.clone(),
            base.clone().with_agent("a").unwrap(),
            base.clone().with_source("memory.blocks").unwrap(),
            Scope::session("s-2")
                .unwrap()
                .with_tenant("t-1")
                .unwrap()
                .with_user("u@x")
                .unwrap(),
        ];
        let keys: Vec<VectorKeys> = scopes.iter().map(|s| VectorKeys::new("am", s)).collect();
        assert_eq!(keys[0].vectors, "am:{t-1|u@x}:vvec:t-1|u@x|~|history|s-1");
        assert_eq!(keys[0].payloads, "am:{t-1|u@x}:vpay:t-1|u@x|~|history|s-1");
        assert_eq!(keys[0].scopes, "am:{t-1|u@x}:vscopes");
        for k in &keys {
            for key in [&k.scopes, &k.vectors, &k.payloads, &k.compact, &k.ack] {
                assert_eq!(hash_tag(key), "t-1|u@x", "{key}: one slot per user");
            }
            assert_eq!(
                hash_tag(&vector_user_ack("am", "t-1", "u@x")),
                "t-1|u@x",
                "the user's acknowledgement is in the user's slot"
            );
        }
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                for (x, y) in [
                    (&a.vectors, &b.vectors),
                    (&a.payloads, &b.payloads),
                    (&a.compact, &b.compact),
                ] {
                    assert_ne!(x, y, "two scopes never share a key");
                }
                assert_ne!(a.ack, b.ack);
            }
        }
    }

    #[test]
    fn vector_tags_of_users_tenants_and_scopes_never_meet() {
        let with_user = scope();
        let no_user = Scope::session("s-1").unwrap().with_tenant("t-1").unwrap();
        let other_tenant = scope().with_tenant("t-2").unwrap();
        let other_user = scope().with_user("u@y").unwrap();
        let tag = |s: &Scope| hash_tag(&VectorKeys::new("am", s).vectors).to_owned();
        assert_eq!(tag(&no_user), "t-1|~");
        assert_ne!(tag(&with_user), tag(&no_user));
        assert_ne!(tag(&with_user), tag(&other_tenant));
        assert_ne!(tag(&with_user), tag(&other_user));
        // One `|` in a user tag, four in a scope's, none in a tenant's: never the same tag.
        assert_eq!(tag(&with_user).matches('|').count(), 1);
        let thread = ThreadKeys::new("am", &with_user);
        assert_eq!(hash_tag(&thread.meta).matches('|').count(), 4);
        assert_eq!(hash_tag(&vector_users("am", "t-1")), "t-1");
        assert_eq!(hash_tag(&vector_dimensions("am")), "|vectors");
        assert_ne!(
            vector_users("am", "t-1"),
            thread_index("am", "t-1"),
            "the tenant's vector users are not its thread index"
        );
        // The dimension's tag has an empty tenant: no scope and no user has it.
        assert!(!with_user.tenant().as_str().is_empty());
    }

    #[test]
    fn vector_keys_are_not_found_by_the_history_scans() {
        // A session named after a history suffix still does not make a history key.
        let meta = Scope::session("meta")
            .unwrap()
            .with_tenant("t-1")
            .unwrap()
            .with_user("u")
            .unwrap();
        let keys = VectorKeys::new("am", &meta);
        for key in [
            &keys.scopes,
            &keys.vectors,
            &keys.payloads,
            &keys.compact,
            &keys.ack,
        ] {
            for what in [
                Listed::Threads,
                Listed::Sessions,
                Listed::ThreadExpiries,
                Listed::SessionExpiries,
            ] {
                assert_eq!(
                    scope_of("am", key, what),
                    None,
                    "{key} is not a {what:?} key"
                );
            }
        }
    }

    #[test]
    fn prefixes_are_validated() {
        assert!(validate_prefix("am").is_ok());
        assert!(validate_prefix("a.b-c_9").is_ok());
        for bad in ["", "AM", "a b", "a{", "a*", "a:b", &"x".repeat(33)] {
            assert!(validate_prefix(bad).is_err(), "{bad:?}");
        }
    }
}
