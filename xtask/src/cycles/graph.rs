//! Cycles among sibling modules: the strongly connected components of each level's
//! dependency graph (Tarjan), and the elementary cycles inside each.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    resolve::{Edge, Edges, Location},
    tree::ModPath,
};

/// The most cycles listed per component; a dense tangle has more than anyone reads.
const MAX_CYCLES: usize = 50;

/// How many steps the search for cycles may take per component.
const MAX_STEPS: usize = 200_000;

/// Sibling modules that depend on each other in a circle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Tangle {
    /// The module whose children they are.
    pub(crate) parent: ModPath,
    /// Its elementary cycles, each as the modules in order (the first again closes it),
    /// shortest first.
    pub(crate) cycles: Vec<Vec<String>>,
    /// Whether there are more cycles than listed.
    pub(crate) more: bool,
    /// Every dependency between its modules, with where it is made.
    pub(crate) edges: Vec<(Edge, Vec<Location>)>,
}

/// The tangles of `edges`, by level and name.
pub(crate) fn tangles(edges: &Edges) -> Vec<Tangle> {
    let mut levels: BTreeMap<&ModPath, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for edge in edges.keys() {
        let graph = levels.entry(&edge.parent).or_default();
        graph
            .entry(edge.from.as_str())
            .or_default()
            .insert(edge.to.as_str());
        graph.entry(edge.to.as_str()).or_default();
    }
    let mut tangles = Vec::new();
    for (parent, graph) in levels {
        for component in components(&graph) {
            if component.len() < 2 {
                continue;
            }
            let (cycles, more) = cycles_in(&graph, &component);
            let members: BTreeSet<&str> = component.iter().copied().collect();
            let tangle_edges = edges
                .iter()
                .filter(|(edge, _)| {
                    &edge.parent == parent
                        && members.contains(edge.from.as_str())
                        && members.contains(edge.to.as_str())
                })
                .map(|(edge, locations)| (edge.clone(), locations.clone()))
                .collect();
            tangles.push(Tangle {
                parent: parent.clone(),
                cycles,
                more,
                edges: tangle_edges,
            });
        }
    }
    tangles
}

/// A level's graph: each module and the modules it depends on.
type Graph<'a> = BTreeMap<&'a str, BTreeSet<&'a str>>;

/// The strongly connected components of `graph` (Tarjan's algorithm), each sorted.
fn components<'a>(graph: &Graph<'a>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<&'a str>>,
    }

    fn visit<'a>(graph: &Graph<'a>, node: &'a str, state: &mut State<'a>) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next = state.next.saturating_add(1);
        state.stack.push(node);
        state.on_stack.insert(node);
        for &next in graph.get(node).into_iter().flatten() {
            if !state.index.contains_key(next) {
                visit(graph, next, state);
                let low = state.low.get(next).copied().unwrap_or(usize::MAX);
                lower(&mut state.low, node, low);
            } else if state.on_stack.contains(next) {
                let index = state.index.get(next).copied().unwrap_or(usize::MAX);
                lower(&mut state.low, node, index);
            }
        }
        if state.low.get(node) == state.index.get(node) {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member);
                if member == node {
                    break;
                }
            }
            component.sort_unstable();
            state.found.push(component);
        }
    }

    fn lower<'a>(low: &mut BTreeMap<&'a str, usize>, node: &'a str, value: usize) {
        if let Some(current) = low.get_mut(node) {
            *current = (*current).min(value);
        }
    }

    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for &node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(graph, node, &mut state);
        }
    }
    state.found.sort();
    state.found
}

/// The elementary cycles of `graph` within `component` (each found once, from its smallest
/// module), shortest first; and whether the search stopped before the end.
fn cycles_in(graph: &Graph<'_>, component: &[&str]) -> (Vec<Vec<String>>, bool) {
    let mut cycles: Vec<Vec<String>> = Vec::new();
    let mut steps = 0usize;
    let mut more = false;
    for (start_index, &start) in component.iter().enumerate() {
        // Only modules after `start` may be on the path, so each cycle is found once.
        let allowed: BTreeSet<&str> = component
            .iter()
            .skip(start_index.saturating_add(1))
            .copied()
            .collect();
        let mut path = vec![start];
        let mut pending: Vec<Vec<&str>> = vec![successors(graph, start, &allowed, start)];
        while let Some(options) = pending.last_mut() {
            steps = steps.saturating_add(1);
            if steps > MAX_STEPS || cycles.len() >= MAX_CYCLES {
                more = true;
                break;
            }
            match options.pop() {
                Some(next) if next == start => {
                    cycles.push(
                        path.iter()
                            .chain([&start])
                            .map(|s| (*s).to_owned())
                            .collect(),
                    );
                }
                Some(next) if !path.contains(&next) => {
                    path.push(next);
                    pending.push(successors(graph, next, &allowed, start));
                }
                Some(_) => {}
                None => {
                    pending.pop();
                    path.pop();
                }
            }
        }
        if more {
            break;
        }
    }
    cycles.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    (cycles, more)
}

/// Where the search may go from `node`: `start` itself (closing a cycle) and the allowed
/// modules; in reverse order, so popping visits them in name order.
fn successors<'a>(
    graph: &Graph<'a>,
    node: &str,
    allowed: &BTreeSet<&str>,
    start: &str,
) -> Vec<&'a str> {
    let mut next: Vec<&'a str> = graph
        .get(node)
        .into_iter()
        .flatten()
        .copied()
        .filter(|n| *n == start || allowed.contains(n))
        .collect();
    next.reverse();
    next
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn edges(list: &[(&[&str], &str, &str)]) -> Edges {
        list.iter()
            .enumerate()
            .map(|(line, (parent, from, to))| {
                (
                    Edge {
                        parent: parent.iter().map(|s| (*s).to_owned()).collect(),
                        from: (*from).to_owned(),
                        to: (*to).to_owned(),
                    },
                    vec![Location {
                        file: PathBuf::from(format!("src/{from}.rs")),
                        line: line + 1,
                    }],
                )
            })
            .collect()
    }

    fn shown(tangles: &[Tangle]) -> Vec<String> {
        tangles
            .iter()
            .flat_map(|t| {
                t.cycles
                    .iter()
                    .map(|c| format!("{}: {}", t.parent.join("::"), c.join(" -> ")))
            })
            .collect()
    }

    #[test]
    fn two_and_three_cycles_are_found_and_a_chain_is_not() {
        let tangles = tangles(&edges(&[
            (&[], "a", "b"),
            (&[], "b", "a"),
            (&[], "c", "d"),
            (&[], "d", "e"),
            (&[], "e", "c"),
            (&[], "f", "g"),
            (&[], "g", "h"),
            (&["m"], "x", "y"),
            (&["m"], "y", "x"),
        ]));
        assert_eq!(
            shown(&tangles),
            [": a -> b -> a", ": c -> d -> e -> c", "m: x -> y -> x"]
        );
        assert_eq!(tangles.first().map(|t| t.edges.len()), Some(2));
    }

    #[test]
    fn every_elementary_cycle_of_a_tangle_is_listed() {
        // a ⇄ b, b → c → a: two cycles in one component.
        let tangles = tangles(&edges(&[
            (&[], "a", "b"),
            (&[], "b", "a"),
            (&[], "b", "c"),
            (&[], "c", "a"),
        ]));
        assert_eq!(tangles.len(), 1);
        assert_eq!(shown(&tangles), [": a -> b -> a", ": a -> b -> c -> a"]);
        assert_eq!(tangles.first().map(|t| t.edges.len()), Some(4));
    }

    #[test]
    fn a_dense_tangle_is_cut_short() {
        let names: Vec<String> = (0..9).map(|i| format!("m{i}")).collect();
        let mut list: Vec<(&[&str], &str, &str)> = Vec::new();
        for a in &names {
            for b in &names {
                if a != b {
                    list.push((&[], a.as_str(), b.as_str()));
                }
            }
        }
        let tangles = tangles(&edges(&list));
        assert_eq!(tangles.len(), 1);
        let tangle = tangles.first().unwrap();
        assert!(tangle.more);
        assert_eq!(tangle.cycles.len(), MAX_CYCLES);
    }
}
