//! Symmetry reduction (`Model::interchangeable`): counts against an
//! independent reference that keeps one state per orbit (breadth-first
//! search over cloned states, keyed by the smallest `Debug` of the state's
//! renamings), with identifiers in processes, messages in flight (on
//! unordered and FIFO networks) and timers; and the check of the declared
//! symmetry on models whose processes are not interchangeable.

use std::collections::{BTreeSet, HashSet, VecDeque};

use cmc::registry::RunOptions;
use cmc::{Ctx, Model, NetworkConfig, Verdict, View, ViolationKind, World};

/// A node's name. Names are not process indices: node `i` is `Node(10 + i)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, cmc::ProcessId)]
struct Node(u8);

impl Node {
    fn of(index: usize) -> Node {
        Node(10 + index as u8)
    }

    fn index(self) -> usize {
        usize::from(self.0 - 10)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
enum Msg {
    /// "Are you there?", from the named node.
    Ping(Node),
    /// "I am", to the named node's ping.
    Ack(Node),
}

/// How a node decides to answer a ping: the symmetric way, or one of the
/// ways that break the symmetry the models declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Rule {
    /// Every node answers every ping.
    Always,
    /// Only node 10, hard-coded as the leader, answers.
    LeaderAnswers,
    /// A node answers only pings from nodes with smaller names.
    SmallerNames,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
struct Peer {
    me: Node,
    /// The nodes it pinged (each at most once).
    pinged: BTreeSet<Node>,
    /// The nodes that answered it.
    acked: BTreeSet<Node>,
    /// The nodes whose pings it received.
    heard: BTreeSet<Node>,
    /// Whether its timer fired.
    ticked: bool,
    #[cmc(skip)]
    rule: Rule,
    #[cmc(skip)]
    n: usize,
}

impl Peer {
    fn new(i: usize, n: usize, rule: Rule) -> Peer {
        Peer {
            me: Node::of(i),
            pinged: BTreeSet::new(),
            acked: BTreeSet::new(),
            heard: BTreeSet::new(),
            ticked: false,
            rule,
            n,
        }
    }

    /// The nodes it may still ping, in order.
    fn unpinged(&self) -> Vec<Node> {
        (0..self.n)
            .map(Node::of)
            .filter(|&p| p != self.me && !self.pinged.contains(&p))
            .collect()
    }

    fn answers(&self, from: Node) -> bool {
        match self.rule {
            Rule::Always => true,
            Rule::LeaderAnswers => self.me == Node(10),
            Rule::SmallerNames => from < self.me,
        }
    }

    /// What receiving `msg` does: the reply to send, if any.
    fn on(&mut self, msg: &Msg) -> Option<(Node, Msg)> {
        match *msg {
            Msg::Ping(from) => {
                self.heard.insert(from);
                self.answers(from).then_some((from, Msg::Ack(from)))
            }
            Msg::Ack(_) => None,
        }
    }
}

#[cmc::process(msg = Msg)]
impl Peer {
    #[handler(start)]
    fn start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer("tick");
    }

    #[handler(timer = "tick")]
    fn tick(&mut self) {
        self.ticked = true;
    }

    #[handler(guard = can_ping)]
    fn ping(&mut self, ctx: &mut Ctx<'_, Self>) {
        let peers = self.unpinged();
        let to = peers[cmc::choose(peers.len())];
        self.pinged.insert(to);
        let _ = ctx.send(to.index(), Msg::Ping(self.me));
    }

    #[handler(guard = has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, msg)) = ctx.recv() {
            if let Msg::Ack(_) = msg {
                self.acked.insert(Node::of(from));
            }
            if let Some((to, reply)) = self.on(&msg) {
                let _ = ctx.send(to.index(), reply);
            }
        }
    }
}

fn can_ping(p: &Peer) -> bool {
    !p.unpinged().is_empty()
}

fn has_mail(_: &Peer, view: &View<'_, Peer>) -> bool {
    view.has_mail()
}

fn pingers(n: usize, fifo: bool, rule: Rule) -> Model<Peer> {
    Model::new(format!("pingers_{n}"), n, move |i| Peer::new(i, n, rule))
        .network(NetworkConfig::new().capacity(2 * n * n).fifo(fifo))
        .quiescence_ok(true)
        .debug_states()
}

fn symmetric(n: usize, fifo: bool, rule: Rule) -> Model<Peer> {
    pingers(n, fifo, rule).interchangeable(0..n, Node::of)
}

// ------------------------------------------------------------ the reference

/// A state of the reference: the peers, the messages in flight as
/// (to, from, message) (sorted: a multiset; on a FIFO network, each link's
/// messages keep their order, and a sort by (to, from) is stable), the
/// pending timers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    peers: Vec<Peer>,
    net: Vec<(usize, usize, Msg)>,
    timers: Vec<bool>,
}

impl State {
    fn initial(n: usize, rule: Rule) -> State {
        State {
            peers: (0..n).map(|i| Peer::new(i, n, rule)).collect(),
            net: Vec::new(),
            timers: vec![true; n],
        }
    }

    fn send(&mut self, fifo: bool, to: usize, from: usize, msg: Msg) {
        self.net.push((to, from, msg));
        if fifo {
            self.net.sort_by_key(|&(t, f, _)| (t, f));
        } else {
            self.net
                .sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        }
    }

    fn next(&self, fifo: bool) -> Vec<State> {
        let mut out = Vec::new();
        for i in 0..self.peers.len() {
            if self.timers[i] {
                let mut t = self.clone();
                t.timers[i] = false;
                t.peers[i].ticked = true;
                out.push(t);
            }
            for to in self.peers[i].unpinged() {
                let mut t = self.clone();
                t.peers[i].pinged.insert(to);
                let me = t.peers[i].me;
                t.send(fifo, to.index(), i, Msg::Ping(me));
                out.push(t);
            }
            for (k, (to, from, msg)) in self.net.iter().enumerate() {
                // On a FIFO network only a link's first message.
                if *to != i || (fifo && self.net[..k].iter().any(|(t, f, _)| (t, f) == (to, from)))
                {
                    continue;
                }
                let mut t = self.clone();
                t.net.remove(k);
                if let Msg::Ack(_) = msg {
                    t.peers[i].acked.insert(Node::of(*from));
                }
                if let Some((dest, reply)) = t.peers[i].on(msg) {
                    t.send(fifo, dest.index(), i, reply);
                }
                out.push(t);
            }
        }
        out
    }

    /// The state with process `i` renamed `perm[i]` everywhere.
    fn renamed(&self, perm: &[usize], fifo: bool) -> State {
        let node = |p: Node| Node::of(perm[p.index()]);
        let set = |s: &BTreeSet<Node>| s.iter().map(|&p| node(p)).collect();
        let msg = |m: &Msg| match *m {
            Msg::Ping(p) => Msg::Ping(node(p)),
            Msg::Ack(p) => Msg::Ack(node(p)),
        };
        let mut peers = self.peers.clone();
        let mut timers = self.timers.clone();
        for (i, p) in self.peers.iter().enumerate() {
            peers[perm[i]] = Peer {
                me: node(p.me),
                pinged: set(&p.pinged),
                acked: set(&p.acked),
                heard: set(&p.heard),
                ..p.clone()
            };
            timers[perm[i]] = self.timers[i];
        }
        let mut t = State {
            peers,
            net: Vec::new(),
            timers,
        };
        for (to, from, m) in &self.net {
            t.send(fifo, perm[*to], perm[*from], msg(m));
        }
        t
    }

    fn orbit_key(&self, fifo: bool) -> String {
        permutations(self.peers.len())
            .iter()
            .map(|p| format!("{:?}", self.renamed(p, fifo)))
            .min()
            .expect("at least the identity")
    }
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..n {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// (states, orbits) reachable: breadth-first search, all states, and one
/// per orbit.
fn reference(n: usize, fifo: bool, rule: Rule) -> (usize, usize) {
    let init = State::initial(n, rule);
    let mut seen = HashSet::from([init.clone()]);
    let mut queue = VecDeque::from([init.clone()]);
    while let Some(s) = queue.pop_front() {
        for t in s.next(fifo) {
            if seen.insert(t.clone()) {
                queue.push_back(t);
            }
        }
    }
    let mut orbits = HashSet::from([init.orbit_key(fifo)]);
    let mut queue = VecDeque::from([init]);
    while let Some(s) = queue.pop_front() {
        for t in s.next(fifo) {
            if orbits.insert(t.orbit_key(fifo)) {
                queue.push_back(t);
            }
        }
    }
    (seen.len(), orbits.len())
}

fn without_reduction(model: Model<Peer>) -> Model<Peer> {
    let mut options = RunOptions::default();
    options.symmetry = Some(false);
    model.apply(&options)
}

#[test]
fn pings_over_an_unordered_network_count_the_orbits() {
    for n in 2..=3 {
        let (states, orbits) = reference(n, false, Rule::Always);
        let plain = pingers(n, false, Rule::Always).check().unwrap();
        let off = without_reduction(symmetric(n, false, Rule::Always))
            .check()
            .unwrap();
        let reduced = symmetric(n, false, Rule::Always).check().unwrap();
        println!(
            "{n} nodes: reference {states} states, {orbits} orbits; cmc {}, {}, {}",
            plain.stats.unique, off.stats.unique, reduced.stats.unique
        );
        for r in [&plain, &off, &reduced] {
            assert_eq!(r.verdict, Verdict::Pass, "{n} nodes: {r:?}");
        }
        assert_eq!(plain.stats.unique as usize, states, "{n} nodes");
        assert_eq!(off.stats.unique as usize, states, "{n} nodes");
        assert_eq!(reduced.stats.unique as usize, orbits, "{n} nodes");
        let sym = reduced.stats.symmetry.expect("symmetry statistics");
        assert_eq!((sym.processes, sym.inexact), (n, 0));
        assert!(sym.merged > 0 && sym.checked > 0, "{sym:?}");
        assert!(plain.stats.symmetry.is_none() && off.stats.symmetry.is_none());
    }
}

#[test]
fn pings_over_fifo_links_count_the_orbits() {
    for n in 2..=3 {
        let (states, orbits) = reference(n, true, Rule::Always);
        let plain = pingers(n, true, Rule::Always).check().unwrap();
        let reduced = symmetric(n, true, Rule::Always)
            .check_symmetry(cmc::SymmetryCheck::All)
            .check()
            .unwrap();
        println!(
            "{n} nodes, FIFO: reference {states} states, {orbits} orbits; cmc {}, {}",
            plain.stats.unique, reduced.stats.unique
        );
        assert_eq!(reduced.verdict, Verdict::Pass, "{reduced:?}");
        assert_eq!(plain.stats.unique as usize, states, "{n} nodes");
        assert_eq!(reduced.stats.unique as usize, orbits, "{n} nodes");
    }
}

/// What a check of a model whose processes are not interchangeable says.
fn asymmetry(model: Model<Peer>) -> String {
    let r = model.check().unwrap();
    println!("{}", r.summary());
    assert_eq!(r.verdict, Verdict::Violation, "{r:?}");
    let v = &r.violations[0];
    println!("{v}");
    assert_eq!(v.record.kind, ViolationKind::Asymmetry, "{v}");
    assert!(
        v.record.message.contains("cannot be trusted"),
        "{}",
        v.record.message
    );
    v.record.message.clone()
}

/// Every exhaustive order, and two workers, count the same orbits.
#[test]
fn every_search_order_counts_the_orbits() {
    let (_, orbits) = reference(3, false, Rule::Always);
    for strategy in [
        cmc::Strategy::Dfs,
        cmc::Strategy::Random,
        cmc::Strategy::Bfs,
    ] {
        let r = symmetric(3, false, Rule::Always)
            .strategy(strategy)
            .check()
            .unwrap();
        assert_eq!(r.verdict, Verdict::Pass, "{strategy:?}");
        assert_eq!(r.stats.unique as usize, orbits, "{strategy:?}");
    }
    let r = symmetric(3, false, Rule::Always)
        .jobs(2)
        .check_isolated()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    assert_eq!(r.stats.unique as usize, orbits, "two workers");
    assert!(r.stats.symmetry.is_some_and(|s| s.merged > 0), "{r:?}");
}

/// A violation of the declared symmetry replays: its trace leads to the
/// state, and carries the path to the image that behaves otherwise.
#[test]
fn a_violation_of_the_symmetry_replays() {
    let r = symmetric(3, false, Rule::LeaderAnswers).check().unwrap();
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Asymmetry);
    assert!(
        v.trace.symmetric && !v.trace.twin.is_empty(),
        "{:?}",
        v.trace
    );
    let trace = cmc::Trace::from_json(&v.trace.to_json()).unwrap();
    match symmetric(3, false, Rule::LeaderAnswers)
        .replay(&trace)
        .unwrap()
    {
        cmc::ReplayOutcome::Reproduced(record) => {
            assert_eq!(record.kind, ViolationKind::Asymmetry);
            assert!(
                v.record.message.starts_with(&record.message),
                "{} / {}",
                record.message,
                v.record.message
            );
        }
        other => panic!("the asymmetry did not replay: {other:?}"),
    }
    // Fixed (every node answers), the two states behave alike.
    match symmetric(3, false, Rule::Always).replay(&trace).unwrap() {
        cmc::ReplayOutcome::NoViolation => {}
        other => panic!("the fixed model still differs: {other:?}"),
    }
}

#[test]
fn a_hard_coded_leader_is_reported() {
    let message = asymmetry(symmetric(3, false, Rule::LeaderAnswers));
    // Where the two differ: one answers, the other does not.
    assert!(message.contains("`receive` of process"), "{message}");
    assert!(
        message.contains("sent Ack(") && message.contains("sent nothing"),
        "{message}"
    );
    // The same model, declared without symmetry, passes: the code is
    // fine, the declaration is wrong.
    let plain = pingers(3, false, Rule::LeaderAnswers).check().unwrap();
    assert_eq!(plain.verdict, Verdict::Pass);
}

#[test]
fn identifiers_compared_by_order_are_reported() {
    let message = asymmetry(symmetric(3, false, Rule::SmallerNames));
    assert!(message.contains("`receive` of process"), "{message}");
    assert!(
        message.contains("sent Ack(") && message.contains("sent nothing"),
        "{message}"
    );
}

/// An invariant that names a process: node 10 never hears two pings. The
/// reduced search merges a state where node 11 heard two with one where
/// node 10 did, and would miss the violation; the check compares the
/// invariants' verdicts on the two.
#[test]
fn an_invariant_that_names_a_process_is_reported() {
    fn node_10_hears_one(world: &World<'_, Peer>) -> Result<(), String> {
        match world.process(0).heard.len() {
            0 | 1 => Ok(()),
            k => Err(format!("node 10 heard {k} pings")),
        }
    }
    let plain = pingers(3, false, Rule::Always)
        .invariant("node_10_hears_one", node_10_hears_one)
        .check()
        .unwrap();
    assert_eq!(plain.verdict, Verdict::Violation);
    assert_eq!(plain.violations[0].record.kind, ViolationKind::Invariant);
    let r = symmetric(3, false, Rule::Always)
        .invariant("node_10_hears_one", node_10_hears_one)
        .check()
        .unwrap();
    println!("{}", r.summary());
    assert_eq!(r.verdict, Verdict::Violation);
    let kinds: Vec<ViolationKind> = r.violations.iter().map(|v| v.record.kind).collect();
    // The search stops at the first violation: either the invariant's, in
    // a state the reduced search kept, or the asymmetry it would have
    // hidden.
    assert!(
        kinds.contains(&ViolationKind::Asymmetry) || kinds.contains(&ViolationKind::Invariant),
        "{kinds:?}"
    );
    let r = symmetric(3, false, Rule::Always)
        .invariant("node_10_hears_one", node_10_hears_one)
        .check_symmetry(cmc::SymmetryCheck::All)
        .keep_going(true)
        .check()
        .unwrap();
    let asym = r
        .violations
        .iter()
        .find(|v| v.record.kind == ViolationKind::Asymmetry)
        .expect("the asymmetric invariant is reported");
    assert!(
        asym.record.message.contains("violates `node_10_hears_one`"),
        "{}",
        asym.record.message
    );
}

#[test]
fn identifiers_hashed_without_state_hash_are_refused() {
    #[derive(Clone, Debug, Hash)]
    struct Plain {
        me: usize,
    }
    #[cmc::process]
    impl Plain {
        #[handler]
        fn step(&mut self) {
            self.me = (self.me + 1) % 2;
        }
    }
    let err = Model::new("plain", 2, |i| Plain { me: i })
        .interchangeable(0..2, Node::of)
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("derive cmc::StateHash"), "{err}");
}
