//! The one segmentation of a history that every reducer cuts along.

use std::collections::HashSet;
use std::ops::Range;

use crate::message::{ChatMessage, Role};

/// A history split into groups that a reducer keeps or drops whole.
///
/// - A leading system (or developer) message is *pinned*: always kept, outside every group.
/// - An assistant message that calls tools and the tool messages that answer those calls form
///   one group, so a cut never separates a call from its results.
/// - A tool message that answers no call before it (an orphan) joins the group before it, so no
///   kept window starts with an orphaned result.
/// - Every other message is a group of its own.
/// - The groups from the one holding the last user message to the end are *protected*: the last
///   user turn is always kept. With no user message, the last group is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segmentation {
    /// Index of the pinned leading system message.
    pub pinned: Option<usize>,
    /// The groups, as index ranges, in order; together they cover every other message.
    pub groups: Vec<Range<usize>>,
    /// Index into `groups` of the first protected group (`groups.len()` when there are none).
    pub protected_from: usize,
}

impl Segmentation {
    /// Segments `messages`.
    pub fn of<M: AsRef<ChatMessage>>(messages: &[M]) -> Self {
        let msg = |i: usize| messages.get(i).map(AsRef::as_ref);
        let pinned = msg(0)
            .is_some_and(|m| matches!(m.role, Role::System | Role::Developer))
            .then_some(0);
        let start = usize::from(pinned.is_some());
        let mut groups: Vec<Range<usize>> = Vec::new();
        let mut i = start;
        while let Some(m) = msg(i) {
            // `i < messages.len() <= isize::MAX`, so the successor cannot overflow.
            let after = i.saturating_add(1);
            if m.has_tool_calls() {
                let calls: HashSet<&str> = m.tool_call_ids().collect();
                let mut end = after;
                while let Some(next) = msg(end) {
                    let answers = next.tool_result_ids().next().is_some()
                        && next.tool_result_ids().all(|id| calls.contains(id));
                    if next.role == Role::Tool && answers {
                        end = end.saturating_add(1);
                    } else {
                        break;
                    }
                }
                groups.push(i..end);
                i = end;
            } else if m.role == Role::Tool && !groups.is_empty() {
                // An orphaned result stays with whatever precedes it.
                if let Some(last) = groups.last_mut() {
                    last.end = after;
                }
                i = after;
            } else {
                groups.push(i..after);
                i = after;
            }
        }
        let last_user = (start..messages.len())
            .rev()
            .find(|&i| msg(i).is_some_and(|m| m.role == Role::User));
        let protected_from = match last_user {
            Some(u) => groups
                .iter()
                .position(|g| g.contains(&u))
                .unwrap_or(groups.len()),
            None => groups.len().saturating_sub(1),
        };
        Self {
            pinned,
            groups,
            protected_from,
        }
    }

    /// Index of the first message of group `g` (the end of the messages when `g` is past the
    /// last group).
    pub fn group_start(&self, g: usize, len: usize) -> usize {
        self.groups.get(g).map_or(len, |r| r.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_and_results_are_one_group() {
        let msgs = vec![
            ChatMessage::system("sys"),
            ChatMessage::user("weather?"),
            ChatMessage::tool_call("c1", "weather", "{}"),
            ChatMessage::tool_result("c1", "sunny"),
            ChatMessage::assistant("It is sunny."),
            ChatMessage::user("thanks"),
        ];
        let seg = Segmentation::of(&msgs);
        assert_eq!(seg.pinned, Some(0));
        assert_eq!(seg.groups, vec![1..2, 2..4, 4..5, 5..6]);
        assert_eq!(seg.protected_from, 3);
    }

    #[test]
    fn orphan_result_joins_previous_group() {
        let msgs = vec![
            ChatMessage::user("a"),
            ChatMessage::tool_result("zz", "orphan"),
            ChatMessage::assistant("b"),
        ];
        let seg = Segmentation::of(&msgs);
        assert_eq!(seg.pinned, None);
        assert_eq!(seg.groups, vec![0..2, 2..3]);
        assert_eq!(seg.protected_from, 0);
    }

    #[test]
    fn empty_and_no_user() {
        let none: Vec<ChatMessage> = Vec::new();
        let seg = Segmentation::of(&none);
        assert!(seg.groups.is_empty());
        let msgs = vec![ChatMessage::assistant("a"), ChatMessage::assistant("b")];
        assert_eq!(Segmentation::of(&msgs).protected_from, 1);
    }
}
