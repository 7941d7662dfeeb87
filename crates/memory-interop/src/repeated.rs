//! [`RepeatedIds`]: content-derived ids that tell the repeated messages of one thread apart.

use std::collections::HashMap;

use memory_core::id::MessageId;

use super::derived_id;

/// The namespace of the ids of repeated messages.
const REPEATED: &str = "repeated";

/// Gives the messages of one thread that a peer wrote without an id of their own ids that
/// differ when the messages repeat.
///
/// A peer's message without an id (Agent Framework without `message_id`, LlamaIndex without our
/// recorded id) reads with an id derived from its content, so two equal messages of one thread
/// (a user who says "ok" twice) would share it, and a store that keeps one message per id would
/// take the second for a retry of the first. Reading a thread in order through one
/// `RepeatedIds` ([`from_agent_framework_in`](crate::agent_framework::from_agent_framework_in),
/// [`from_llamaindex_in`](crate::llamaindex::from_llamaindex_in)) keeps them apart:
///
/// - the first message of the thread with a given content keeps the derived id, the one
///   earlier versions gave it, so a thread without repeats reads with the ids it always had
///   and data stored or exported with them still matches;
/// - the `n`-th (`n` ≥ 2) gets the UUIDv5 of the derived id and `n`, which depends only on the
///   content and on how many equal messages come before it in the thread.
///
/// Written back to the peer, the first keeps having no id and a later one carries its id (an
/// Agent Framework `message_id`, a LlamaIndex record), so it reads back with the same id
/// wherever it is copied.
///
/// ```
/// use memory_interop::repeated::RepeatedIds;
/// use memory_core::MessageId;
///
/// let ok = MessageId::new("derived-from-ok")?;
/// let mut ids = RepeatedIds::new();
/// let first = ids.next(ok.clone());
/// let second = ids.next(ok.clone());
/// assert_eq!(first, ok);
/// assert_ne!(second, ok);
/// // The same thread read again gives the same ids.
/// let mut again = RepeatedIds::new();
/// assert_eq!((again.next(ok.clone()), again.next(ok)), (first, second));
/// # Ok::<(), memory_core::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct RepeatedIds {
    /// How many messages of the thread so far had each derived id.
    seen: HashMap<MessageId, u64>,
}

impl RepeatedIds {
    /// A thread read from its first message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of the thread's next message whose content gave the id `derived`: `derived`
    /// itself for the first such message, a distinct id for each later one.
    pub fn next(&mut self, derived: MessageId) -> MessageId {
        let id = self.peek(&derived);
        let count = self.seen.entry(derived).or_insert(0);
        *count = count.saturating_add(1);
        id
    }

    /// The id [`next`](Self::next) would give the next message whose content gave `derived`,
    /// without counting it.
    pub fn peek(&self, derived: &MessageId) -> MessageId {
        match self.seen.get(derived).copied().unwrap_or(0) {
            0 => derived.clone(),
            n => derived_id(REPEATED, &format!("{derived}\u{0}{}", n.saturating_add(1))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_get_distinct_stable_ids() {
        let a = MessageId::new("a").unwrap();
        let b = MessageId::new("b").unwrap();
        let mut ids = RepeatedIds::new();
        let got = [
            ids.next(a.clone()),
            ids.next(b.clone()),
            ids.next(a.clone()),
            ids.next(a.clone()),
            ids.next(b.clone()),
        ];
        assert_eq!(got[0], a);
        assert_eq!(got[1], b);
        let distinct: std::collections::HashSet<&MessageId> = got.iter().collect();
        assert_eq!(distinct.len(), got.len());
        let mut again = RepeatedIds::new();
        let replay: Vec<MessageId> = [&a, &b, &a, &a, &b]
            .into_iter()
            .map(|id| again.next(id.clone()))
            .collect();
        assert_eq!(replay, got);
    }
}
