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

/// A node in canonical form, its log left out unless `log`.
fn canon_node_with(n: &Node, log: bool) -> String {
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
        if log { &n.log[..] } else { &[] },
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
        self.key_with(true)
    }

    /// The key, the nodes' logs left out unless `log`.
    fn key_with(&self, log: bool) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|n| canon_node_with(n, log)).collect();
        let mut net: Vec<(Id, Id, String)> = self
            .net
            .iter()
            .map(|(to, from, m)| (*to, *from, canon_msg(m)))
            .collect();
        net.sort();
        format!("{nodes:?} {net:?}")
    }

    /// The state with every id `i` written `p[i]`, node `i` moved to
    /// place `p[i]`.
    fn renamed(&self, p: &[Id]) -> State {
        let mut nodes = self.nodes.clone();
        for (i, n) in self.nodes.iter().enumerate() {
            nodes[p[i] as usize] = rename_node(n, p);
        }
        let net = self
            .net
            .iter()
            .map(|(to, from, m)| (p[*to as usize], p[*from as usize], rename_msg(m, p)))
            .collect();
        State { nodes, net }
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
    explore_by(nodes, max_incarnation, capacity, State::key)
}

/// As [`explore`], two states that differ only in the nodes' logs counted
/// as one (the log hidden, as `Model::hidden_in` hides it).
pub fn explore_without_logs(nodes: u32, max_incarnation: u32, capacity: usize) -> Exploration {
    explore_by(nodes, max_incarnation, capacity, |s| s.key_with(false))
}

/// As [`explore_without_logs`], counting orbits: a state's key is the
/// smallest of the keys of its images under every renaming of the nodes
/// (ids rewritten in every field and message, nodes moved to their new
/// places), so that states that differ only in the nodes' names count
/// once.
pub fn explore_orbits(nodes: u32, max_incarnation: u32, capacity: usize) -> Exploration {
    let perms = permutations(nodes as usize);
    explore_by(nodes, max_incarnation, capacity, move |s| {
        perms
            .iter()
            .map(|p| s.renamed(p).key_with(false))
            .min()
            .expect("there is at least the identity")
    })
}

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<Id>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..n {
            let mut q = p.clone();
            q.insert(at, (n - 1) as Id);
            out.push(q);
        }
    }
    out
}

/// `msg` with every id `i` written `p[i]`.
fn rename_msg(msg: &Msg, p: &[Id]) -> Msg {
    let r = |i: &Id| p[*i as usize];
    match msg {
        Msg::Alive { from, incarnation } => Msg::Alive {
            from: r(from),
            incarnation: *incarnation,
        },
        Msg::Suspect { about } => Msg::Suspect { about: r(about) },
        Msg::Digest {
            known,
            incarnations,
        } => Msg::Digest {
            known: known.iter().map(r).collect(),
            incarnations: incarnations.iter().map(|(i, n)| (r(i), *n)).collect(),
        },
    }
}

/// `n` with every id `i` written `p[i]` (its group kept sorted, as the
/// node keeps it).
fn rename_node(n: &Node, p: &[Id]) -> Node {
    let r = |i: &Id| p[*i as usize];
    let mut group: Vec<Id> = n.group.iter().map(r).collect();
    group.sort_unstable();
    Node {
        id: r(&n.id),
        group,
        members: n.members.iter().map(|(i, m)| (r(i), m.clone())).collect(),
        suspects: n.suspects.iter().map(r).collect(),
        learned: n.learned.iter().map(|(i, v)| (r(i), *v)).collect(),
        outbox: n
            .outbox
            .iter()
            .map(|(to, m)| (r(to), rename_msg(m, p)))
            .collect(),
        ..n.clone()
    }
}

/// The search, states identified by `key`.
fn explore_by(
    nodes: u32,
    max_incarnation: u32,
    capacity: usize,
    key: impl Fn(&State) -> String,
) -> Exploration {
    let initial = State {
        nodes: (0..nodes)
            .map(|i| Node::new(i, nodes, max_incarnation))
            .collect(),
        net: Vec::new(),
    };
    let mut seen = HashSet::new();
    seen.insert(key(&initial));
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
            if seen.insert(key(&t)) {
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
