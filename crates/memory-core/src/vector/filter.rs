//! Payload filters for vector searches.

use serde_json::Value;

/// A condition on a point's payload.
///
/// ```
/// use memory_core::PayloadFilter;
/// use serde_json::json;
///
/// let f = PayloadFilter::eq("kind", json!("fact")).and(PayloadFilter::eq("lang", json!("en")).not());
/// let payload = json!({"kind": "fact", "lang": "pt"});
/// assert!(f.matches(payload.as_object().unwrap()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadFilter {
    /// The payload field `key` equals `value`.
    Eq {
        /// The field.
        key: String,
        /// The value.
        value: Value,
    },
    /// Every filter matches.
    And(Vec<PayloadFilter>),
    /// At least one filter matches.
    Or(Vec<PayloadFilter>),
    /// The filter does not match.
    Not(Box<PayloadFilter>),
}

impl PayloadFilter {
    /// `key == value`.
    pub fn eq(key: impl Into<String>, value: Value) -> Self {
        PayloadFilter::Eq {
            key: key.into(),
            value,
        }
    }

    /// Both this and `other`.
    pub fn and(self, other: PayloadFilter) -> Self {
        PayloadFilter::And(vec![self, other])
    }

    /// This or `other`.
    pub fn or(self, other: PayloadFilter) -> Self {
        PayloadFilter::Or(vec![self, other])
    }

    /// The negation.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        PayloadFilter::Not(Box::new(self))
    }

    /// Whether `payload` matches.
    pub fn matches(&self, payload: &serde_json::Map<String, Value>) -> bool {
        match self {
            PayloadFilter::Eq { key, value } => payload.get(key) == Some(value),
            PayloadFilter::And(all) => all.iter().all(|f| f.matches(payload)),
            PayloadFilter::Or(any) => any.iter().any(|f| f.matches(payload)),
            PayloadFilter::Not(f) => !f.matches(payload),
        }
    }
}
