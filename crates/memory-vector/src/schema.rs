//! The storage layout shared by both Qdrant backends: point ids, payload fields and the
//! translation of [`PayloadFilter`]s.
//!
//! Every Qdrant point carries, at the top level of its payload:
//!
//! | field       | holds                                                             |
//! |-------------|-------------------------------------------------------------------|
//! | `scope_key` | [`Scope::key`], matched by every read (keyword index)             |
//! | `tenant`, `user`, `agent`, `source`, `session` | the scope's parts (keyword indexes) |
//! | `point_id`  | the caller's point id (a UUID string)                             |
//! | `vector`    | the caller's exact vector (Qdrant keeps cosine vectors normalised) |
//! | `payload`   | the caller's payload, as given                                    |
//!
//! A forget ([`Cond::forget`]) deletes by the parts: `tenant`, and `user`, `agent` and
//! `session` when the filter names them (a point of a scope without a user stores `null` there,
//! which no keyword matches). Every build of this crate has written these fields, so points
//! written by earlier versions are found too.
//!
//! The Qdrant point id is [`qdrant_point_id`]: a UUID v5 of the scope key and the caller's id,
//! so the same id in two scopes is two points and a retried upsert rewrites the same point.

use std::cmp::Ordering;

use memory_core::{
    Error, PayloadFilter, Result, Scope, ScopeFilter, ScopedHit, ScoredPoint, VectorPoint,
    VectorQuery,
};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The payload field holding [`Scope::key`].
pub(crate) const SCOPE_KEY_FIELD: &str = "scope_key";
/// The payload field holding the caller's point id.
pub(crate) const POINT_ID_FIELD: &str = "point_id";
/// The payload field holding the caller's exact vector.
pub(crate) const VECTOR_FIELD: &str = "vector";
/// The payload field holding the caller's payload.
pub(crate) const PAYLOAD_FIELD: &str = "payload";
/// The payload field holding the scope's tenant.
pub(crate) const TENANT_FIELD: &str = "tenant";
/// The payload field holding the scope's user (`null` without one).
pub(crate) const USER_FIELD: &str = "user";
/// The payload field holding the scope's agent (`null` without one).
pub(crate) const AGENT_FIELD: &str = "agent";
/// The payload field holding the scope's source.
pub(crate) const SOURCE_FIELD: &str = "source";
/// The payload field holding the scope's session id.
pub(crate) const SESSION_FIELD: &str = "session";
/// The scope fields that get a keyword payload index.
pub(crate) const INDEXED_FIELDS: [&str; 6] = [
    SCOPE_KEY_FIELD,
    TENANT_FIELD,
    USER_FIELD,
    AGENT_FIELD,
    SOURCE_FIELD,
    SESSION_FIELD,
];

/// The namespace of [`qdrant_point_id`] (a fixed random UUID).
const POINT_NAMESPACE: Uuid = Uuid::from_u128(0x5d1c_7c1e_9a4f_4f0b_8e3a_2b6f_0c9d_1a77);

/// The Qdrant point id of the caller's point `id` in `scope`.
pub(crate) fn qdrant_point_id(scope_key: &str, id: Uuid) -> Uuid {
    let mut name = Vec::with_capacity(scope_key.len().saturating_add(17));
    name.extend_from_slice(scope_key.as_bytes());
    name.push(0);
    name.extend_from_slice(id.as_bytes());
    Uuid::new_v5(&POINT_NAMESPACE, &name)
}

/// The stored payload of `point` in `scope`.
pub(crate) fn stored_payload(
    scope: &Scope,
    scope_key: &str,
    point: &VectorPoint,
) -> Map<String, Value> {
    let opt = |v: Option<&str>| v.map_or(Value::Null, |s| Value::String(s.to_owned()));
    let mut map = Map::new();
    map.insert(SCOPE_KEY_FIELD.into(), Value::String(scope_key.to_owned()));
    map.insert(
        TENANT_FIELD.into(),
        Value::String(scope.tenant().to_string()),
    );
    map.insert(USER_FIELD.into(), opt(scope.user().map(|u| u.as_str())));
    map.insert(AGENT_FIELD.into(), opt(scope.agent().map(|a| a.as_str())));
    map.insert(
        SOURCE_FIELD.into(),
        Value::String(scope.source().to_string()),
    );
    map.insert(
        SESSION_FIELD.into(),
        Value::String(scope.session_id().to_string()),
    );
    map.insert(POINT_ID_FIELD.into(), Value::String(point.id.to_string()));
    map.insert(
        VECTOR_FIELD.into(),
        Value::Array(
            point
                .vector
                .iter()
                .map(|x| Value::from(f64::from(*x)))
                .collect(),
        ),
    );
    map.insert(PAYLOAD_FIELD.into(), Value::Object(point.payload.clone()));
    map
}

/// A point read back: its scope key and the caller's point.
#[derive(Debug)]
pub(crate) struct StoredPoint {
    /// The stored [`Scope::key`].
    pub(crate) scope_key: String,
    /// The caller's point.
    pub(crate) point: VectorPoint,
}

/// Decodes a stored payload; `None` for a point this crate did not write.
pub(crate) fn decode_payload(mut map: Map<String, Value>) -> Option<StoredPoint> {
    let scope_key = match map.remove(SCOPE_KEY_FIELD)? {
        Value::String(s) => s,
        _ => return None,
    };
    let id = map.get(POINT_ID_FIELD)?.as_str()?.parse().ok()?;
    let vector = match map.remove(VECTOR_FIELD)? {
        Value::Array(values) => values
            .iter()
            .map(|v| v.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()?,
        _ => return None,
    };
    let payload = match map.remove(PAYLOAD_FIELD)? {
        Value::Object(p) => p,
        _ => return None,
    };
    Some(StoredPoint {
        scope_key,
        point: VectorPoint {
            id,
            vector,
            payload,
        },
    })
}

/// The points of `payloads` stored in `scope_key`, in the order of `ids` (the ids a caller
/// asked for), each once. A payload this crate did not write, or one of another scope, is left
/// out.
pub(crate) fn points_in_scope(
    scope_key: &str,
    ids: &[Uuid],
    payloads: impl IntoIterator<Item = Map<String, Value>>,
) -> Vec<VectorPoint> {
    let mut found: Vec<VectorPoint> = payloads
        .into_iter()
        .filter_map(decode_payload)
        .filter(|s| s.scope_key == scope_key)
        .map(|s| s.point)
        .collect();
    found.sort_by_key(|p| ids.iter().position(|id| *id == p.id));
    found.dedup_by_key(|p| p.id);
    found
}

/// A search hit with `score` as a [`ScoredPoint`] when its payload decodes and is stored in
/// `scope_key` (the search's filter selects the scope; this checks it again).
pub(crate) fn scored_hit(
    scope_key: &str,
    score: f32,
    payload: Map<String, Value>,
) -> Option<ScoredPoint> {
    let StoredPoint {
        scope_key: key,
        point,
    } = decode_payload(payload)?;
    (key == scope_key).then_some(ScoredPoint {
        id: point.id,
        score,
        payload: point.payload,
    })
}

/// A search hit across scopes with `score` when its payload decodes and its stored scope is
/// one `filter` [matches](ScopeFilter::matches) (the search's condition selects those scopes;
/// this checks it again).
pub(crate) fn scoped_hit(
    filter: &ScopeFilter,
    score: f32,
    payload: Map<String, Value>,
) -> Option<ScopedHit<ScoredPoint>> {
    let StoredPoint { scope_key, point } = decode_payload(payload)?;
    let scope = Scope::from_key(&scope_key).ok()?;
    filter.matches(&scope).then(|| {
        ScopedHit::new(
            scope,
            ScoredPoint {
                id: point.id,
                score,
                payload: point.payload,
            },
        )
    })
}

/// A search hit as the results order it: by score, then the ties.
pub(crate) trait Ranked {
    /// The hit's score.
    fn score(&self) -> f32;
    /// The order of two hits of the same score: by ascending id (then scope key).
    fn tie_order(&self, other: &Self) -> Ordering;
}

impl Ranked for ScoredPoint {
    fn score(&self) -> f32 {
        self.score
    }

    fn tie_order(&self, other: &Self) -> Ordering {
        self.id.cmp(&other.id)
    }
}

impl Ranked for ScopedHit<ScoredPoint> {
    fn score(&self) -> f32 {
        self.hit.score
    }

    fn tie_order(&self, other: &Self) -> Ordering {
        self.hit
            .id
            .cmp(&other.hit.id)
            .then_with(|| self.scope.key().cmp(&other.scope.key()))
    }
}

/// A scalar a Qdrant `match` condition compares with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MatchScalar {
    /// A keyword.
    Keyword(String),
    /// An integer.
    Integer(i64),
    /// A boolean.
    Bool(bool),
}

/// A [`PayloadFilter`] in the shape of Qdrant conditions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cond {
    /// The field at `path` (a Qdrant JSON path) matches the value.
    Match {
        /// The JSON path.
        path: String,
        /// The value.
        value: MatchScalar,
    },
    /// Every condition holds.
    All(Vec<Cond>),
    /// At least one condition holds.
    Any(Vec<Cond>),
    /// The condition does not hold.
    Not(Box<Cond>),
}

impl Cond {
    /// A condition no point written by this crate meets (its scope key is never empty).
    pub(crate) fn never() -> Cond {
        Cond::Match {
            path: SCOPE_KEY_FIELD.to_owned(),
            value: MatchScalar::Keyword(String::new()),
        }
    }

    /// The condition selecting every point of the scopes `filter`
    /// [matches](ScopeFilter::matches): its tenant, and its user, agent, session and source
    /// when it names them.
    pub(crate) fn forget(filter: &ScopeFilter) -> Cond {
        let keyword = |field: &str, value: &str| Cond::Match {
            path: field.to_owned(),
            value: MatchScalar::Keyword(value.to_owned()),
        };
        let mut all = vec![keyword(TENANT_FIELD, filter.tenant.as_str())];
        if let Some(user) = filter.user.as_ref() {
            all.push(keyword(USER_FIELD, user.as_str()));
        }
        if let Some(agent) = filter.agent.as_ref() {
            all.push(keyword(AGENT_FIELD, agent.as_str()));
        }
        if let Some(session) = filter.session.as_ref() {
            all.push(keyword(SESSION_FIELD, session.as_str()));
        }
        if let Some(source) = filter.source.as_ref() {
            all.push(keyword(SOURCE_FIELD, source.as_str()));
        }
        Cond::All(all)
    }

    /// The condition restricting reads to `scope_key`.
    pub(crate) fn scope(scope_key: &str) -> Cond {
        Cond::Match {
            path: SCOPE_KEY_FIELD.to_owned(),
            value: MatchScalar::Keyword(scope_key.to_owned()),
        }
    }
}

/// The JSON path of the caller's payload field `key`.
fn payload_path(key: &str) -> Result<String> {
    if key.is_empty() || key.contains(['"', '\\']) {
        return Err(Error::unsupported(format!(
            "the Qdrant stores cannot filter on the payload field {key:?}: a field name must be \
             non-empty and hold no '\"' or '\\\\'"
        )));
    }
    Ok(format!("{PAYLOAD_FIELD}.\"{key}\""))
}

/// Translates a caller's filter; `None` means "every point".
///
/// # Errors
/// [`Unsupported`](memory_core::ErrorKind::Unsupported) for an `Eq` on a value other than a
/// string, an `i64` integer or a boolean, and for a field name Qdrant cannot address (empty, or
/// holding `"` or `\`): filters the backend cannot express, as the `VectorStore` contract
/// says, not invalid ones.
pub(crate) fn translate_filter(filter: &PayloadFilter) -> Result<Option<Cond>> {
    Ok(match filter {
        PayloadFilter::Eq { key, value } => {
            let value = match value {
                Value::String(s) => MatchScalar::Keyword(s.clone()),
                Value::Bool(b) => MatchScalar::Bool(*b),
                Value::Number(n) if n.as_i64().is_some() => {
                    MatchScalar::Integer(n.as_i64().unwrap_or_default())
                }
                other => {
                    return Err(Error::unsupported(format!(
                        "the Qdrant stores filter on strings, integers and booleans, not {other}"
                    )));
                }
            };
            Some(Cond::Match {
                path: payload_path(key)?,
                value,
            })
        }
        PayloadFilter::And(all) => {
            let mut conds = Vec::new();
            for f in all {
                if let Some(c) = translate_filter(f)? {
                    conds.push(c);
                }
            }
            match conds.len() {
                0 => None,
                1 => conds.pop(),
                _ => Some(Cond::All(conds)),
            }
        }
        PayloadFilter::Or(any) => {
            let mut conds = Vec::new();
            for f in any {
                match translate_filter(f)? {
                    Some(c) => conds.push(c),
                    // One branch matches every point.
                    None => return Ok(None),
                }
            }
            match conds.len() {
                0 => Some(Cond::never()),
                1 => conds.pop(),
                _ => Some(Cond::Any(conds)),
            }
        }
        PayloadFilter::Not(inner) => Some(match translate_filter(inner)? {
            Some(c) => Cond::Not(Box::new(c)),
            None => Cond::never(),
        }),
    })
}

/// The full condition of a scoped read: the scope and, when given, the caller's filter.
pub(crate) fn scoped(scope_key: &str, filter: Option<&PayloadFilter>) -> Result<Cond> {
    with_payload_filter(Cond::scope(scope_key), filter)
}

/// The full condition of a read across the scopes `scopes` selects and, when given, the
/// caller's filter.
pub(crate) fn matching(scopes: &ScopeFilter, filter: Option<&PayloadFilter>) -> Result<Cond> {
    with_payload_filter(Cond::forget(scopes), filter)
}

fn with_payload_filter(cond: Cond, filter: Option<&PayloadFilter>) -> Result<Cond> {
    Ok(match filter.map(translate_filter).transpose()?.flatten() {
        Some(c) => Cond::All(vec![cond, c]),
        None => cond,
    })
}

/// Orders results as the contract says (decreasing score, ties by id, then scope key), drops
/// scores below `min_score` and keeps `top_k`. A NaN score (which no checked vector should
/// produce) ranks last, never first.
fn finish_results<H: Ranked>(mut results: Vec<H>, query: &VectorQuery) -> Vec<H> {
    results.retain(|r| query.min_score.is_none_or(|min| r.score() >= min));
    let rank = |score: f32| {
        if score.is_nan() {
            f32::NEG_INFINITY
        } else {
            score
        }
    };
    results.sort_by(|a, b| {
        rank(b.score())
            .total_cmp(&rank(a.score()))
            .then_with(|| a.tie_order(b))
    });
    results.truncate(query.top_k);
    results
}

/// How many more points than `top_k` a search fetches at most to order ties at the `top_k`
/// boundary by id: the limit doubles while the last point fetched ties with the boundary, up to
/// `max(4 × top_k, top_k + 256)`. Past that (a zero vector, or hundreds of equal vectors),
/// the ties are ordered by id among the points fetched, so one search never reads a whole
/// scope.
pub(crate) const TIE_FETCH_FACTOR: usize = 4;
/// See [`TIE_FETCH_FACTOR`].
pub(crate) const TIE_FETCH_EXTRA: usize = 256;

/// The largest limit a search with `top_k` asks for (see [`TIE_FETCH_FACTOR`]).
pub(crate) fn tie_fetch_cap(top_k: usize) -> usize {
    top_k
        .saturating_mul(TIE_FETCH_FACTOR)
        .max(top_k.saturating_add(TIE_FETCH_EXTRA))
}

/// The limit to search again with when a search that asked for `limit` points and got the
/// scores `got` may have cut a tie at the `top_k` boundary; `None` when it did not, or when the
/// limit reached [`tie_fetch_cap`].
fn next_limit(got: &[f32], limit: usize, top_k: usize) -> Option<usize> {
    if got.len() < limit || top_k == 0 || got.len() < top_k {
        return None;
    }
    let &boundary = got.get(top_k.saturating_sub(1))?;
    let tied = got.last().is_some_and(|last| *last >= boundary);
    let cap = tie_fetch_cap(top_k);
    (tied && limit < cap).then(|| limit.saturating_mul(2).min(cap))
}

/// What one search round decided: the results, or a larger limit to search again with.
pub(crate) enum Round<H> {
    /// The results, ordered and cut as [`finish_results`] does.
    Done(Vec<H>),
    /// Search again with this limit (a tie at the `top_k` boundary may have been cut).
    Again(usize),
}

/// Settles a search that asked for `limit` points and found `found`: per point in the engine's
/// order, its score and its hit (`None` for a point this crate cannot read, which ranks but is
/// not returned; see [`scored_hit`]).
pub(crate) fn settle<H: Ranked>(
    found: Vec<(f32, Option<H>)>,
    limit: usize,
    query: &VectorQuery,
) -> Round<H> {
    let scores: Vec<f32> = found.iter().map(|(score, _)| *score).collect();
    match next_limit(&scores, limit, query.top_k) {
        Some(next) => Round::Again(next),
        None => Round::Done(finish_results(
            found.into_iter().filter_map(|(_, hit)| hit).collect(),
            query,
        )),
    }
}

/// Checks that the squared norm of every vector is finite in `f32`, as Qdrant computes it for a
/// cosine distance: components near `1e20` and above overflow it, and the scores of such a
/// vector come out NaN or infinite.
///
/// # Errors
/// [`InvalidInput`](memory_core::ErrorKind::InvalidInput) for the first such vector.
pub(crate) fn check_norms<'a>(vectors: impl IntoIterator<Item = &'a [f32]>) -> Result<()> {
    for v in vectors {
        let squared: f32 = v.iter().map(|x| x * x).sum();
        if !squared.is_finite() {
            return Err(Error::invalid_input(
                "a vector's norm overflows: its components are too large for a cosine score",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> Scope {
        Scope::session("s1").unwrap().with_user("u").unwrap()
    }

    #[test]
    fn tie_fetching_is_bounded() {
        // Every score ties: the limit doubles up to the cap, then stops.
        let top_k = 10;
        let mut limit = top_k;
        let mut asked = vec![limit];
        while let Some(next) = next_limit(&vec![0.0; limit], limit, top_k) {
            limit = next;
            asked.push(limit);
        }
        assert_eq!(asked, [10, 20, 40, 80, 160, 266]);
        assert_eq!(tie_fetch_cap(100), 400);
        assert_eq!(tie_fetch_cap(usize::MAX), usize::MAX);
        // No tie at the boundary, or fewer points than asked: done.
        assert_eq!(next_limit(&[0.9, 0.8, 0.7], 3, 2), None);
        assert_eq!(next_limit(&[0.9, 0.9], 3, 2), None);
        assert_eq!(next_limit(&[0.9, 0.8, 0.8], 3, 2), Some(6));
        // A NaN at the end is no tie.
        assert_eq!(next_limit(&[0.9, 0.8, f32::NAN], 3, 2), None);
    }

    #[test]
    fn a_nan_score_never_ranks_first() {
        let point = |score: f32, id: u128| ScoredPoint {
            id: Uuid::from_u128(id),
            score,
            payload: serde_json::Map::new(),
        };
        let query = VectorQuery::new(vec![1.0, 0.0], 3);
        let ranked = finish_results(
            vec![
                point(f32::NAN, 1),
                point(0.5, 3),
                point(0.9, 2),
                point(0.5, 0),
            ],
            &query,
        );
        let ids: Vec<u128> = ranked.iter().map(|p| p.id.as_u128()).collect();
        assert_eq!(ids, [2, 0, 3]);
    }

    #[test]
    fn field_names_qdrant_cannot_address_are_unsupported() {
        for key in ["", "say \"hi\"", "back\\slash"] {
            let err =
                translate_filter(&PayloadFilter::eq(key, serde_json::json!("v"))).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::Unsupported, "{key:?}");
        }
        for key in ["a.b", "it's", "$.text", "$[0]", "with space", "*", "ü日本"] {
            assert!(
                translate_filter(&PayloadFilter::eq(key, serde_json::json!("v"))).is_ok(),
                "{key:?}"
            );
        }
    }

    #[test]
    fn overflowing_norms_are_invalid_input() {
        assert!(check_norms([[1.0f32, 2.0].as_slice(), [0.0, 0.0].as_slice()]).is_ok());
        assert!(check_norms([[1e18f32, 1e18].as_slice()]).is_ok());
        for bad in [[1e30f32, 1e30], [3e19, 3e19], [f32::MAX, 0.0]] {
            let err = check_norms([bad.as_slice()]).unwrap_err();
            assert_eq!(err.kind(), memory_core::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn point_ids_are_namespaced_per_scope_and_stable() {
        let id = Uuid::new_v4();
        let a = qdrant_point_id("t|~|~|s|1", id);
        assert_eq!(a, qdrant_point_id("t|~|~|s|1", id));
        assert_ne!(a, qdrant_point_id("t|~|~|s|2", id));
        assert_ne!(a, id);
    }

    #[test]
    fn payload_round_trips_with_the_exact_vector() {
        let s = scope();
        let point = VectorPoint {
            id: Uuid::new_v4(),
            vector: vec![0.1, -1.5, 1e-3, 3.25],
            payload: json!({"a": 1, "b": {"c": [true]}})
                .as_object()
                .cloned()
                .unwrap(),
        };
        let map = stored_payload(&s, &s.key(), &point);
        assert_eq!(map["user"], json!("u"));
        assert_eq!(map["agent"], Value::Null);
        let back = decode_payload(map).unwrap();
        assert_eq!(back.scope_key, s.key());
        assert_eq!(back.point, point);
        assert!(decode_payload(Map::new()).is_none());
    }

    #[test]
    fn filters_translate_to_conditions() {
        let f = PayloadFilter::eq("kind", json!("fact"))
            .and(PayloadFilter::eq("n", json!(2)).not())
            .or(PayloadFilter::eq("pinned", json!(true)));
        let m = |p: &str, v| Cond::Match {
            path: format!("payload.\"{p}\""),
            value: v,
        };
        assert_eq!(
            translate_filter(&f).unwrap(),
            Some(Cond::Any(vec![
                Cond::All(vec![
                    m("kind", MatchScalar::Keyword("fact".into())),
                    Cond::Not(Box::new(m("n", MatchScalar::Integer(2)))),
                ]),
                m("pinned", MatchScalar::Bool(true)),
            ]))
        );
        assert_eq!(translate_filter(&PayloadFilter::And(vec![])).unwrap(), None);
        assert_eq!(
            translate_filter(&PayloadFilter::Or(vec![])).unwrap(),
            Some(Cond::never())
        );
        assert_eq!(
            translate_filter(&PayloadFilter::And(vec![]).not()).unwrap(),
            Some(Cond::never())
        );
        assert!(translate_filter(&PayloadFilter::eq("x", json!(1.5))).is_err());
        assert!(translate_filter(&PayloadFilter::eq("a\"b", json!(1))).is_err());
        assert_eq!(
            scoped("k", None).unwrap(),
            Cond::scope("k"),
            "an unfiltered read is still scoped"
        );
    }

    #[test]
    fn results_are_ordered_by_score_then_id() {
        let p = |id: u128, score: f32| ScoredPoint {
            id: Uuid::from_u128(id),
            score,
            payload: Map::new(),
        };
        let q = VectorQuery::new(vec![1.0], 2).with_min_score(0.0);
        let out = finish_results(vec![p(3, 0.5), p(2, 0.5), p(1, 0.1), p(4, -0.2)], &q);
        assert_eq!(out, vec![p(2, 0.5), p(3, 0.5)]);
        assert_eq!(next_limit(&[0.9, 0.5, 0.5], 3, 2), Some(6));
        assert_eq!(next_limit(&[0.9, 0.5, 0.4], 3, 2), None);
        assert_eq!(next_limit(&[0.9, 0.5], 3, 2), None);
    }
}
