//! [`Filters`]: Mem0's filter language as types — field conditions with comparison operators,
//! combined with `AND`, `OR` and `NOT`.
//!
//! The JSON follows the "Memory filters" page of Mem0's platform documentation (v2 filters,
//! which the v3 search and list endpoints take unchanged): the root is a logical operator,
//! `{"AND": [...]}`, `{"OR": [...]}` or `{"NOT": [...]}`, whose items are conditions or nested
//! operators. A condition is `{"<field>": <value>}` for equality, `{"<field>": {"<op>": <value>}}`
//! for the operators `ne`, `in`, `gt`, `gte`, `lt`, `lte`, `contains` and `icontains`, and
//! `{"<field>": "*"}` for the wildcard (any non-null value). Metadata keys nest under
//! `metadata`: `{"metadata": {"<key>": <value or operator>}}`. The open-source `Memory.search`
//! (behind the self-hosted server's `filters`) reads the same shape since mem0 1.0
//! ("Enhanced metadata filtering").

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// A field a condition tests.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// `user_id`.
    UserId,
    /// `agent_id`.
    AgentId,
    /// `app_id`.
    AppId,
    /// `run_id`.
    RunId,
    /// `created_at` (an ISO 8601 date or date-time).
    CreatedAt,
    /// `updated_at` (an ISO 8601 date or date-time).
    UpdatedAt,
    /// `categories` (use [`Filters::contains`] or [`Filters::is_in`]).
    Categories,
    /// `keywords`.
    Keywords,
    /// One key of the memory's `metadata`; written as `{"metadata": {"<key>": …}}`.
    Metadata(String),
    /// Any other top-level field, by name (the platform rejects names it does not know).
    Other(String),
}

impl Field {
    /// The field's name in the JSON (the key itself for [`Field::Metadata`]).
    pub fn name(&self) -> &str {
        match self {
            Field::UserId => "user_id",
            Field::AgentId => "agent_id",
            Field::AppId => "app_id",
            Field::RunId => "run_id",
            Field::CreatedAt => "created_at",
            Field::UpdatedAt => "updated_at",
            Field::Categories => "categories",
            Field::Keywords => "keywords",
            Field::Metadata(key) | Field::Other(key) => key,
        }
    }
}

/// What a condition requires of its field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Predicate {
    /// Equal to the value: `{"f": v}`.
    Eq(Value),
    /// Not equal: `{"f": {"ne": v}}`.
    Ne(Value),
    /// One of the values: `{"f": {"in": [..]}}`.
    In(Vec<Value>),
    /// Greater than: `{"f": {"gt": v}}`.
    Gt(Value),
    /// Greater than or equal: `{"f": {"gte": v}}`.
    Gte(Value),
    /// Less than: `{"f": {"lt": v}}`.
    Lt(Value),
    /// Less than or equal: `{"f": {"lte": v}}`.
    Lte(Value),
    /// Contains the value (a list element or, for text, a substring, case-sensitive):
    /// `{"f": {"contains": v}}`.
    Contains(Value),
    /// Contains the text, ignoring case: `{"f": {"icontains": "…"}}`.
    IContains(String),
    /// Any non-null value (the wildcard): `{"f": "*"}`.
    Any,
}

impl Predicate {
    fn to_value(&self) -> Value {
        let op = |name: &str, value: Value| {
            let mut map = serde_json::Map::new();
            map.insert(name.to_owned(), value);
            Value::Object(map)
        };
        match self {
            Predicate::Eq(v) => v.clone(),
            Predicate::Any => Value::String("*".to_owned()),
            Predicate::Ne(v) => op("ne", v.clone()),
            Predicate::In(vs) => op("in", Value::Array(vs.clone())),
            Predicate::Gt(v) => op("gt", v.clone()),
            Predicate::Gte(v) => op("gte", v.clone()),
            Predicate::Lt(v) => op("lt", v.clone()),
            Predicate::Lte(v) => op("lte", v.clone()),
            Predicate::Contains(v) => op("contains", v.clone()),
            Predicate::IContains(s) => op("icontains", Value::String(s.clone())),
        }
    }
}

/// A Mem0 filter: a field condition, or `AND` / `OR` / `NOT` over filters.
///
/// Serializes to Mem0's JSON filter shape (see the module documentation).
///
/// ```
/// use memory_mem0::{Field, Filters};
/// use serde_json::json;
///
/// let filters = Filters::and([
///     Filters::user_id("alice"),
///     Filters::or([
///         Filters::gte(Field::CreatedAt, "2024-07-01"),
///         Filters::contains(Field::Categories, "food"),
///     ]),
///     Filters::not([Filters::metadata("archived", true)]),
///     Filters::any(Field::AgentId),
/// ]);
/// assert_eq!(
///     serde_json::to_value(&filters)?,
///     json!({"AND": [
///         {"user_id": "alice"},
///         {"OR": [
///             {"created_at": {"gte": "2024-07-01"}},
///             {"categories": {"contains": "food"}}
///         ]},
///         {"NOT": [{"metadata": {"archived": true}}]},
///         {"agent_id": "*"}
///     ]})
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Filters {
    /// One field condition.
    Condition {
        /// The field tested.
        field: Field,
        /// What it must satisfy.
        predicate: Predicate,
    },
    /// Every filter holds.
    And(Vec<Filters>),
    /// At least one filter holds.
    Or(Vec<Filters>),
    /// None of the filters holds.
    Not(Vec<Filters>),
}

impl Filters {
    /// `field` satisfies `predicate`.
    pub fn condition(field: Field, predicate: Predicate) -> Self {
        Filters::Condition { field, predicate }
    }

    /// `field` equals `value`.
    pub fn eq(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Eq(value.into()))
    }

    /// `field` differs from `value`.
    pub fn ne(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Ne(value.into()))
    }

    /// `field` is one of `values`.
    pub fn is_in<V: Into<Value>>(field: Field, values: impl IntoIterator<Item = V>) -> Self {
        Self::condition(
            field,
            Predicate::In(values.into_iter().map(Into::into).collect()),
        )
    }

    /// `field` is greater than `value`.
    pub fn gt(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Gt(value.into()))
    }

    /// `field` is at least `value`.
    pub fn gte(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Gte(value.into()))
    }

    /// `field` is less than `value`.
    pub fn lt(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Lt(value.into()))
    }

    /// `field` is at most `value`.
    pub fn lte(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Lte(value.into()))
    }

    /// `field` contains `value` (case-sensitive).
    pub fn contains(field: Field, value: impl Into<Value>) -> Self {
        Self::condition(field, Predicate::Contains(value.into()))
    }

    /// `field` contains `text`, ignoring case.
    pub fn icontains(field: Field, text: impl Into<String>) -> Self {
        Self::condition(field, Predicate::IContains(text.into()))
    }

    /// `field` has any non-null value (the wildcard `*`).
    pub fn any(field: Field) -> Self {
        Self::condition(field, Predicate::Any)
    }

    /// The memory's metadata `key` equals `value`.
    pub fn metadata(key: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::eq(Field::Metadata(key.into()), value)
    }

    /// `user_id` equals `id`.
    pub fn user_id(id: impl Into<String>) -> Self {
        Self::eq(Field::UserId, id.into())
    }

    /// `agent_id` equals `id`.
    pub fn agent_id(id: impl Into<String>) -> Self {
        Self::eq(Field::AgentId, id.into())
    }

    /// `app_id` equals `id`.
    pub fn app_id(id: impl Into<String>) -> Self {
        Self::eq(Field::AppId, id.into())
    }

    /// `run_id` equals `id`.
    pub fn run_id(id: impl Into<String>) -> Self {
        Self::eq(Field::RunId, id.into())
    }

    /// Every filter holds.
    pub fn and(filters: impl IntoIterator<Item = Filters>) -> Self {
        Filters::And(filters.into_iter().collect())
    }

    /// At least one filter holds.
    pub fn or(filters: impl IntoIterator<Item = Filters>) -> Self {
        Filters::Or(filters.into_iter().collect())
    }

    /// None of the filters holds.
    pub fn not(filters: impl IntoIterator<Item = Filters>) -> Self {
        Filters::Not(filters.into_iter().collect())
    }

    /// `self AND other`, flattening nested `AND`s.
    pub fn and_also(self, other: Filters) -> Self {
        let mut items = match self {
            Filters::And(items) => items,
            single => vec![single],
        };
        match other {
            Filters::And(more) => items.extend(more),
            single => items.push(single),
        }
        Filters::And(items)
    }

    /// The JSON Mem0 reads.
    pub fn to_value(&self) -> Value {
        match self {
            Filters::Condition { field, predicate } => {
                let mut map = serde_json::Map::new();
                match field {
                    Field::Metadata(key) => {
                        let mut inner = serde_json::Map::new();
                        inner.insert(key.clone(), predicate.to_value());
                        map.insert("metadata".to_owned(), Value::Object(inner));
                    }
                    other => {
                        map.insert(other.name().to_owned(), predicate.to_value());
                    }
                }
                Value::Object(map)
            }
            Filters::And(items) => logical("AND", items),
            Filters::Or(items) => logical("OR", items),
            Filters::Not(items) => logical("NOT", items),
        }
    }
}

fn logical(op: &str, items: &[Filters]) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(
        op.to_owned(),
        Value::Array(items.iter().map(Filters::to_value).collect()),
    );
    Value::Object(map)
}

impl Serialize for Filters {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.to_value() {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in &map {
                    out.serialize_entry(key, value)?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_operator_serializes() {
        let f = Filters::and([
            Filters::ne(Field::AgentId, "a"),
            Filters::is_in(Field::AppId, ["x", "y"]),
            Filters::gt(Field::UpdatedAt, "2024-01-01"),
            Filters::lt(Field::CreatedAt, "2025-01-01"),
            Filters::lte(Field::Metadata("priority".into()), 5),
            Filters::icontains(Field::Keywords, "Coffee"),
            Filters::eq(Field::Other("timestamp".into()), 1_700_000_000),
            Filters::condition(
                Field::Metadata("tags".into()),
                Predicate::Contains(json!("x")),
            ),
        ]);
        assert_eq!(
            f.to_value(),
            json!({"AND": [
                {"agent_id": {"ne": "a"}},
                {"app_id": {"in": ["x", "y"]}},
                {"updated_at": {"gt": "2024-01-01"}},
                {"created_at": {"lt": "2025-01-01"}},
                {"metadata": {"priority": {"lte": 5}}},
                {"keywords": {"icontains": "Coffee"}},
                {"timestamp": 1_700_000_000},
                {"metadata": {"tags": {"contains": "x"}}}
            ]})
        );
    }

    #[test]
    fn and_also_flattens() {
        let f = Filters::and([Filters::user_id("u")])
            .and_also(Filters::and([Filters::run_id("r"), Filters::app_id("p")]))
            .and_also(Filters::or([Filters::agent_id("a")]));
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"AND": [{"user_id": "u"}, {"run_id": "r"}, {"app_id": "p"}, {"OR": [{"agent_id": "a"}]}]})
        );
    }
}
