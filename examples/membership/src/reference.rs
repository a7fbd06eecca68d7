//! A plain breadth-first search of the same protocol core, independent of
//! cmc: states are cloned `Node`s and a multiset of in-flight messages,
//! identified by a canonical `Debug` string (every map and set converted to
//! a sorted one first). It mirrors the model's environment: an unordered,
//! reliable network of bounded capacity where a send into a full network is
//! dropped, and the four handlers with their guards and choices.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use crate::{Id, Msg, Node};

/// A message in canonical form.
fn canon_msg(m: &Msg) -> String {
    match m {
        Msg::Digest {
            known,
            incarnations,
        } => format!(
            "Digest {{ known: {:?}, incarnations: {incarnations:?} }}",
            known.iter().collect::<BTreeSet<_>>()
        ),
        other => format!("{other:?}"),
    }
}

/// A node in canonical form.
fn canon_node(n: &Node) -> String {
    let members: BTreeMap<_, _> = n
        .members
        .iter()
        .map(|(id, m)| (id, (m.incarnation, &m.tags)))
        .collect();
    let outbox: Vec<(Id, String)> = n.outbox.iter().map(|(to, m)| (*to, canon_msg(m))).collect();
    format!(
        "{} {:?} {} {} {:?} {:?} {:?} {:?} {:?} {} {}",
        n.id,
        n.group,
        n.incarnation,
        n.max_incarnation,
        members,
        n.suspects.iter().collect::<BTreeSet<_>>(),
        n.learned.iter().collect::<BTreeMap<_, _>>(),
        outbox,
        n.log,
        n.gossip_budget,
        n.has_suspected
    )
}

/// A global state: the nodes and the in-flight messages as (to, from,
/// message), kept sorted by their canonical form.
#[derive(Clone)]
struct State {
    nodes: Vec<Node>,
    net: Vec<(Id, Id, Msg)>,
}

impl State {
    fn key(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(canon_node).collect();
        let mut net: Vec<(Id, Id, String)> = self
            .net
            .iter()
            .map(|(to, from, m)| (*to, *from, canon_msg(m)))
            .collect();
        net.sort();
        format!("{nodes:?} {net:?}")
    }

    /// Sends what node `i` queued, dropping what does not fit.
    fn flush(&mut self, i: usize, capacity: usize) {
        let outbox: VecDeque<(Id, Msg)> = std::mem::take(&mut self.nodes[i].outbox);
        for (to, msg) in outbox {
            if self.net.len() < capacity {
                self.net.push((to, i as Id, msg));
            }
        }
    }
}

/// What the reference found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exploration {
    /// Distinct states (the initial one included).
    pub states: usize,
    /// The first violation of the property found, if any.
    pub violation: Option<String>,
}

/// Explores the group of `nodes` members up to incarnation
/// `max_incarnation` with `capacity` messages in flight.
pub fn explore(nodes: u32, max_incarnation: u32, capacity: usize) -> Exploration {
    let initial = State {
        nodes: (0..nodes)
            .map(|i| Node::new(i, nodes, max_incarnation))
            .collect(),
        net: Vec::new(),
    };
    let mut seen = HashSet::new();
    seen.insert(initial.key());
    let mut queue = VecDeque::from([initial]);
    let mut violation = None;
    while let Some(s) = queue.pop_front() {
        let mut next = Vec::new();
        for i in 0..s.nodes.len() {
            let node = &s.nodes[i];
            if node.can_restart() {
                let mut t = s.clone();
                t.nodes[i].restart();
                t.flush(i, capacity);
                next.push(t);
            }
            for peer in node.suspectable() {
                let mut t = s.clone();
                t.nodes[i].suspect(peer);
                t.flush(i, capacity);
                next.push(t);
            }
            if node.can_gossip() {
                for to in (0..nodes).filter(|&p| p != i as Id) {
                    let mut t = s.clone();
                    t.nodes[i].gossip(to);
                    t.flush(i, capacity);
                    next.push(t);
                }
            }
            for k in 0..s.net.len() {
                if s.net[k].0 != i as Id {
                    continue;
                }
                let mut t = s.clone();
                let (_, from, msg) = t.net.remove(k);
                t.nodes[i].on_message(from, msg);
                t.flush(i, capacity);
                next.push(t);
            }
        }
        for t in next {
            if seen.insert(t.key()) {
                if violation.is_none() {
                    let refs: Vec<&Node> = t.nodes.iter().collect();
                    violation = crate::incarnations_are_never_ahead(&refs).err();
                }
                queue.push_back(t);
            }
        }
    }
    Exploration {
        states: seen.len(),
        violation,
    }
}
