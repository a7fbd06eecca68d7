//! Symmetry reduction for code written without cmc in mind: identifiers
//! are plain integers (`u64`), the types derive only `Clone` and `Debug`,
//! and the model names where identifiers are by type and field
//! (`Model::ids_in`); the typed walk renames them.
//!
//! The hash of a value under a renaming must be the hash of the value
//! renamed by hand (identifiers in fields, options, sets, maps' keys,
//! sorted lists, tuples inside lists, boxes), and the counts of the
//! reduced search the orbits of an independent reference (breadth-first
//! search over cloned states, keyed by the smallest `Debug` of a state's
//! renamings). What cannot be renamed is refused with the reason.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use cmc::identity::rename::{hashing_renamed, Renaming};
use cmc::identity::typed::{declare_ids, new_check, typed_hash, Root};
use cmc::registry::RunOptions;
use cmc::{Ctx, Model, NetworkConfig, StateHasher, Verdict, View, ViolationKind};

// ------------------------------------------------- hashes under a renaming

/// A replica's state as a library keeps it: identifiers everywhere, as
/// `u64`, beside numbers that are not identifiers.
#[derive(Clone, Debug, PartialEq)]
struct Replica {
    id: u64,
    term: u64,
    leader: Option<u64>,
    /// Sorted, as a configuration is kept.
    voters: Vec<u64>,
    /// In the order they arrived.
    arrivals: Vec<u64>,
    votes: HashMap<u64, bool>,
    acks: HashSet<u64>,
    next: BTreeMap<u64, u64>,
    /// (term, author): only the author is an identifier.
    log: Vec<(u64, u64)>,
    outbox: VecDeque<Envelope>,
    parent: Option<Box<Replica>>,
}

#[derive(Clone, Debug, PartialEq)]
struct Envelope {
    to: u64,
    index: u64,
}

const IDS: [(&str, &[&str]); 2] = [
    (
        "suite::typed_symmetry::Replica",
        &[
            "id", "leader", "voters", "arrivals", "votes", "acks", "next", "log.1",
        ],
    ),
    ("suite::typed_symmetry::Envelope", &["to"]),
];

fn decls(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    list.iter()
        .map(|(t, f)| (t.to_string(), f.iter().map(|s| s.to_string()).collect()))
        .collect()
}

fn declare(list: &[(&str, &[&str])]) -> Result<(), String> {
    new_check();
    declare_ids(&[Root::of::<Replica>()], &decls(list), &[], &[])
}

/// The typed hash of `r` under `renaming`.
fn under(renaming: &Renaming, r: &Replica) -> u128 {
    hashing_renamed(renaming, || {
        let mut h = StateHasher::default();
        typed_hash(r, &mut h);
        h.finish128()
    })
}

fn replica(id: u64) -> Replica {
    Replica {
        id,
        term: 3,
        leader: Some(2),
        voters: vec![1, 2, 3],
        // No renaming sorts it (one of three distinct ones would: then the
        // image is not the list renamed, see the next test).
        arrivals: vec![3, 1, 3],
        votes: HashMap::from([(1, true), (3, false)]),
        acks: HashSet::from([2, 3]),
        next: BTreeMap::from([(1, 7), (2, 5)]),
        log: vec![(1, 1), (2, 3), (3, 2)],
        outbox: VecDeque::from([Envelope { to: 3, index: 1 }, Envelope { to: 1, index: 2 }]),
        parent: Some(Box::new(Replica {
            id: 2,
            term: 1,
            leader: None,
            voters: vec![2],
            arrivals: Vec::new(),
            votes: HashMap::new(),
            acks: HashSet::new(),
            next: BTreeMap::new(),
            log: Vec::new(),
            outbox: VecDeque::new(),
            parent: None,
        })),
    }
}

/// `r` renamed by hand: identifier `i + 1` becomes `perm[i] + 1`; a
/// sorted list stays sorted, as the renamed program keeps it.
fn renamed(r: &Replica, perm: &[usize]) -> Replica {
    let f = |id: u64| perm[id as usize - 1] as u64 + 1;
    let mut voters: Vec<u64> = r.voters.iter().map(|&v| f(v)).collect();
    voters.sort_unstable();
    Replica {
        id: f(r.id),
        term: r.term,
        leader: r.leader.map(f),
        voters,
        arrivals: r.arrivals.iter().map(|&v| f(v)).collect(),
        votes: r.votes.iter().map(|(&k, &v)| (f(k), v)).collect(),
        acks: r.acks.iter().map(|&k| f(k)).collect(),
        next: r.next.iter().map(|(&k, &v)| (f(k), v)).collect(),
        log: r.log.iter().map(|&(t, a)| (t, f(a))).collect(),
        outbox: r
            .outbox
            .iter()
            .map(|e| Envelope {
                to: f(e.to),
                index: e.index,
            })
            .collect(),
        parent: r.parent.as_ref().map(|p| Box::new(renamed(p, perm))),
    }
}

#[test]
fn a_value_hashed_under_a_renaming_is_the_renamed_value() {
    declare(&IDS).unwrap();
    let ids = vec![1, 2, 3];
    let identity = Renaming::identity(ids.clone());
    for perm in [
        [0, 1, 2],
        [1, 0, 2],
        [2, 0, 1],
        [1, 2, 0],
        [0, 2, 1],
        [2, 1, 0],
    ] {
        let r = replica(1);
        let image = renamed(&r, &perm);
        let by_hand = under(&identity, &image);
        let renaming = Renaming::new(ids.clone(), perm.to_vec());
        assert_eq!(under(&renaming, &r), by_hand, "{perm:?}: {image:?}");
        // And a value that differs in what is not an identifier differs.
        let other = Replica {
            term: 4,
            ..image.clone()
        };
        assert_ne!(under(&identity, &other), by_hand, "{perm:?}");
    }
    // Every field named is renamed: changing any one identifier changes
    // the hash under the identity, and the masked renaming hides which
    // process it was.
    let masked = Renaming::masked(&ids);
    let base = replica(1);
    let variants = [
        Replica {
            id: 2,
            ..base.clone()
        },
        Replica {
            leader: Some(3),
            ..base.clone()
        },
        Replica {
            arrivals: vec![2, 1, 2],
            ..base.clone()
        },
        Replica {
            log: vec![(1, 2), (2, 3), (3, 2)],
            ..base.clone()
        },
        Replica {
            outbox: VecDeque::from([Envelope { to: 2, index: 1 }, Envelope { to: 1, index: 2 }]),
            ..base.clone()
        },
    ];
    for v in &variants {
        assert_ne!(under(&identity, v), under(&identity, &base), "{v:?}");
        assert_eq!(under(&masked, v), under(&masked, &base), "{v:?}");
    }
    // Without declarations nothing is renamed.
    declare(&[]).unwrap();
    let swap = Renaming::new(ids.clone(), vec![1, 0, 2]);
    assert_eq!(under(&swap, &base), under(&identity, &base));
    assert_ne!(
        under(&swap, &renamed(&base, &[1, 0, 2])),
        under(&swap, &base)
    );
}

/// A list of identifiers in the order they arrived is renamed in its
/// order; one in ascending order is a sorted set. Neither merges values
/// that differ.
#[test]
fn sorted_lists_are_sets_and_arrival_orders_are_kept() {
    declare(&IDS).unwrap();
    let ids = vec![1, 2, 3];
    let identity = Renaming::identity(ids.clone());
    let swap = Renaming::new(ids.clone(), vec![1, 0, 2]);
    let base = replica(1);
    let with = |arrivals: Vec<u64>| Replica {
        arrivals,
        ..base.clone()
    };
    // [1, 3] under the swap of 1 and 2 is [2, 3] as a set: equal to the
    // sorted [2, 3] renamed by the identity (and the rest renamed too).
    let a = with(vec![1, 3]);
    let mut b = renamed(&a, &[1, 0, 2]);
    assert_eq!(b.arrivals, vec![2, 3]);
    assert_eq!(under(&swap, &a), under(&identity, &b));
    // [3, 1] arrived in that order: its image is [3, 2], not [2, 3].
    let c = with(vec![3, 1]);
    b = renamed(&c, &[1, 0, 2]);
    assert_eq!(b.arrivals, vec![3, 2]);
    assert_eq!(under(&swap, &c), under(&identity, &b));
    assert_ne!(under(&identity, &c), under(&identity, &with(vec![1, 3])));
    // [1, 3] arrived in that order (sorted by chance): under the swap of
    // 1 and 3 it is [3, 1] in the program renamed, but hashed as the set
    // {1, 3}: sound (no two different values merge), it merges less.
    let swap13 = Renaming::new(ids.clone(), vec![2, 1, 0]);
    let d = renamed(&with(vec![1, 3]), &[2, 1, 0]);
    assert_eq!(d.arrivals, vec![3, 1]);
    assert_ne!(under(&swap13, &a), under(&identity, &d));
}

#[test]
fn what_cannot_be_renamed_is_refused_with_the_reason() {
    let err = declare(&[("suite::typed_symmetry::Replcia", &["id"])]).unwrap_err();
    assert!(
        err.contains("no struct named `suite::typed_symmetry::Replcia`"),
        "{err}"
    );
    let err = declare(&[("Replica", &["id"])]).unwrap_err();
    assert!(
        err.contains("did you mean `suite::typed_symmetry::Replica`"),
        "{err}"
    );
    let err = declare(&[("suite::typed_symmetry::Replica", &["leaders"])]).unwrap_err();
    assert!(
        err.contains("has no field `leaders`") && err.contains("leader"),
        "{err}"
    );
    // A path that ends at something other than integers.
    let err = declare(&[("suite::typed_symmetry::Replica", &["outbox"])]).unwrap_err();
    assert!(err.contains("outbox"), "{err}");
    let err = declare(&[("suite::typed_symmetry::Replica", &["votes.x"])]).unwrap_err();
    assert!(err.contains("no field `x`"), "{err}");
    declare(&[]).unwrap();
}

// ------------------------------------------------------- a model and counts

/// "Are you there?" and "I am", with the sender's raft-style `u64` id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Msg {
    Ping { from: u64 },
    Ack { to: u64 },
}

/// How a node answers: symmetrically, or by the order of identifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Always,
    SmallerIds,
}

/// Node `i` has id `i + 1`, as raft numbers its peers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Peer {
    id: u64,
    /// The ids it pinged.
    pinged: HashSet<u64>,
    /// The ids that answered, kept sorted.
    acked: Vec<u64>,
    /// The ids whose pings it received.
    heard: BTreeSet<u64>,
    ticked: bool,
    rule: Rule,
    n: usize,
}

impl Peer {
    fn new(i: usize, n: usize, rule: Rule) -> Peer {
        Peer {
            id: i as u64 + 1,
            pinged: HashSet::new(),
            acked: Vec::new(),
            heard: BTreeSet::new(),
            ticked: false,
            rule,
            n,
        }
    }

    fn unpinged(&self) -> Vec<u64> {
        (1..=self.n as u64)
            .filter(|&p| p != self.id && !self.pinged.contains(&p))
            .collect()
    }

    fn on(&mut self, from: u64, msg: &Msg) -> Option<(u64, Msg)> {
        match *msg {
            Msg::Ping { from: id } => {
                self.heard.insert(id);
                let answer = match self.rule {
                    Rule::Always => true,
                    Rule::SmallerIds => id < self.id,
                };
                answer.then_some((id, Msg::Ack { to: id }))
            }
            Msg::Ack { .. } => {
                if let Err(at) = self.acked.binary_search(&from) {
                    self.acked.insert(at, from);
                }
                None
            }
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
        let _ = ctx.send(to as usize - 1, Msg::Ping { from: self.id });
    }

    #[handler(guard = has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, msg)) = ctx.recv() {
            if let Some((to, reply)) = self.on(from as u64 + 1, &msg) {
                let _ = ctx.send(to as usize - 1, reply);
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

fn pingers(n: usize, rule: Rule) -> Model<Peer> {
    Model::new(format!("typed_pingers_{n}"), n, move |i| {
        Peer::new(i, n, rule)
    })
    .network(NetworkConfig::new().capacity(2 * n * n))
    .quiescence_ok(true)
}

fn symmetric(n: usize, rule: Rule) -> Model<Peer> {
    pingers(n, rule)
        .interchangeable(0..n, |i| i as u64 + 1)
        .ids_in(
            "suite::typed_symmetry::Peer",
            &["id", "pinged", "acked", "heard"],
        )
        .ids_in("suite::typed_symmetry::Msg", &["from", "to"])
}

/// A peer of the reference: id, pinged (sorted), acked, heard, ticked.
type Frozen = (u64, Vec<u64>, Vec<u64>, Vec<u64>, bool);

/// A state of the reference: peers, messages in flight (to, from, msg)
/// as a sorted multiset, pending timers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct State {
    peers: Vec<Frozen>,
    net: Vec<(usize, usize, Msg)>,
    timers: Vec<bool>,
}

fn freeze(peers: &[Peer], net: &[(usize, usize, Msg)], timers: &[bool]) -> State {
    let mut net = net.to_vec();
    net.sort();
    State {
        peers: peers
            .iter()
            .map(|p| {
                let mut pinged: Vec<u64> = p.pinged.iter().copied().collect();
                pinged.sort_unstable();
                (
                    p.id,
                    pinged,
                    p.acked.clone(),
                    p.heard.iter().copied().collect(),
                    p.ticked,
                )
            })
            .collect(),
        net,
        timers: timers.to_vec(),
    }
}

/// The successors of (peers, net, timers).
type Live = (Vec<Peer>, Vec<(usize, usize, Msg)>, Vec<bool>);

fn next(s: &Live) -> Vec<Live> {
    let (peers, net, timers) = s;
    let mut out = Vec::new();
    for i in 0..peers.len() {
        if timers[i] {
            let mut t = s.clone();
            t.2[i] = false;
            t.0[i].ticked = true;
            out.push(t);
        }
        for to in peers[i].unpinged() {
            let mut t = s.clone();
            t.0[i].pinged.insert(to);
            t.1.push((to as usize - 1, i, Msg::Ping { from: peers[i].id }));
            out.push(t);
        }
        for (k, (to, from, msg)) in net.iter().enumerate() {
            if *to != i {
                continue;
            }
            let mut t = s.clone();
            t.1.remove(k);
            if let Some((dest, reply)) = t.0[i].on(*from as u64 + 1, msg) {
                t.1.push((dest as usize - 1, i, reply));
            }
            out.push(t);
        }
    }
    out
}

/// The smallest `Debug` of the state's renamings.
fn orbit_key(s: &Live) -> String {
    let (peers, net, timers) = s;
    let n = peers.len();
    let mut best: Option<String> = None;
    for perm in permutations(n) {
        let f = |id: u64| perm[id as usize - 1] as u64 + 1;
        let mut p2 = peers.clone();
        let mut t2 = timers.clone();
        for (i, p) in peers.iter().enumerate() {
            let mut acked: Vec<u64> = p.acked.iter().map(|&a| f(a)).collect();
            acked.sort_unstable();
            p2[perm[i]] = Peer {
                id: f(p.id),
                pinged: p.pinged.iter().map(|&x| f(x)).collect(),
                acked,
                heard: p.heard.iter().map(|&x| f(x)).collect(),
                ..p.clone()
            };
            t2[perm[i]] = timers[i];
        }
        let n2: Vec<(usize, usize, Msg)> = net
            .iter()
            .map(|(to, from, m)| {
                let m = match *m {
                    Msg::Ping { from } => Msg::Ping { from: f(from) },
                    Msg::Ack { to } => Msg::Ack { to: f(to) },
                };
                (perm[*to], perm[*from], m)
            })
            .collect();
        let key = format!("{:?}", freeze(&p2, &n2, &t2));
        if best.as_ref().is_none_or(|b| key < *b) {
            best = Some(key);
        }
    }
    best.expect("at least the identity")
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

/// (states, orbits): breadth-first search over cloned states.
fn reference(n: usize) -> (usize, usize) {
    let init: Live = (
        (0..n).map(|i| Peer::new(i, n, Rule::Always)).collect(),
        Vec::new(),
        vec![true; n],
    );
    let key = |s: &Live| format!("{:?}", freeze(&s.0, &s.1, &s.2));
    let mut seen = HashSet::from([key(&init)]);
    let mut orbits = HashSet::from([orbit_key(&init)]);
    let mut queue = VecDeque::from([init.clone()]);
    while let Some(s) = queue.pop_front() {
        for t in next(&s) {
            if seen.insert(key(&t)) {
                queue.push_back(t);
            }
        }
    }
    let mut queue = VecDeque::from([init]);
    while let Some(s) = queue.pop_front() {
        for t in next(&s) {
            if orbits.insert(orbit_key(&t)) {
                queue.push_back(t);
            }
        }
    }
    (seen.len(), orbits.len())
}

#[test]
fn plain_integer_ids_named_by_field_count_the_orbits() {
    for n in 2..=3 {
        let (states, orbits) = reference(n);
        let plain = pingers(n, Rule::Always).check().unwrap();
        let mut off = RunOptions::default();
        off.symmetry = Some(false);
        let unreduced = symmetric(n, Rule::Always).apply(&off).check().unwrap();
        let reduced = symmetric(n, Rule::Always)
            .check_symmetry(cmc::SymmetryCheck::All)
            .check()
            .unwrap();
        println!(
            "{n} nodes: reference {states} states, {orbits} orbits; cmc {}, {}, {}",
            plain.stats.unique, unreduced.stats.unique, reduced.stats.unique
        );
        for r in [&plain, &unreduced, &reduced] {
            assert_eq!(r.verdict, Verdict::Pass, "{n} nodes: {r:?}");
        }
        assert_eq!(plain.stats.unique as usize, states, "{n} nodes");
        assert_eq!(unreduced.stats.unique as usize, states, "{n} nodes");
        assert_eq!(reduced.stats.unique as usize, orbits, "{n} nodes");
        let sym = reduced.stats.symmetry.expect("symmetry statistics");
        assert!(sym.merged > 0 && sym.checked > 0, "{sym:?}");
        // The reduced search walks the types; the others use `Debug`.
        let source = |r: &cmc::CheckResult, role: &str| {
            r.sources.iter().find(|s| s.role == role).map(|s| s.source)
        };
        assert_eq!(
            source(&reduced, "process"),
            Some(cmc::FingerprintMode::Typed)
        );
        assert_eq!(
            source(&reduced, "message"),
            Some(cmc::FingerprintMode::Typed)
        );
        assert_eq!(source(&plain, "process"), Some(cmc::FingerprintMode::Debug));
    }
}

/// Ids compared by order break the declared symmetry: the check says so.
#[test]
fn ids_compared_by_order_are_reported() {
    let r = symmetric(3, Rule::SmallerIds).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{r:?}");
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Asymmetry, "{v}");
    assert!(v.record.message.contains("cannot be trusted"), "{v}");
}

#[test]
fn plain_ids_without_their_fields_are_refused() {
    let err = pingers(2, Rule::Always)
        .interchangeable(0..2, |i| i as u64 + 1)
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("Model::ids_in"), "{err}");
    let err = symmetric(2, Rule::Always)
        .ids_in("suite::typed_symmetry::Peer", &["rule"])
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an integer identifier"), "{err}");
}

// ------------------------------------------- hidden and unordered fields

/// The typed hash of `r` with `hidden` and `unordered` declared (no
/// renaming).
fn marked(r: &Replica, hidden: &[(&str, &[&str])], unordered: &[(&str, &[&str])]) -> u128 {
    new_check();
    declare_ids(
        &[Root::of::<Replica>()],
        &[],
        &decls(hidden),
        &decls(unordered),
    )
    .unwrap();
    let mut h = StateHasher::default();
    typed_hash(r, &mut h);
    let out = h.finish128();
    declare_ids(&[Root::of::<Replica>()], &[], &[], &[]).unwrap();
    out
}

const REPLICA: &str = "suite::typed_symmetry::Replica";

/// A hidden field is left out of the hash, and only it; an unordered `Vec`
/// hashes as a multiset: its order is left out, its elements and their
/// numbers are not.
#[test]
fn hidden_fields_and_unordered_sequences_hash_as_declared() {
    let a = replica(1);
    let mut other_term = a.clone();
    other_term.term = 9;
    let mut reordered = a.clone();
    reordered.log.reverse();
    let mut fewer = a.clone();
    fewer.log.pop();
    let mut doubled = a.clone();
    doubled.log.push(a.log[0]);
    let none: &[(&str, &[&str])] = &[];
    let hide_term: &[(&str, &[&str])] = &[(REPLICA, &["term"])];
    let bag_log: &[(&str, &[&str])] = &[(REPLICA, &["log"])];
    // Without declarations: every field and the order count.
    assert_ne!(marked(&a, none, none), marked(&other_term, none, none));
    assert_ne!(marked(&a, none, none), marked(&reordered, none, none));
    // Hidden: the term no longer counts, everything else still does.
    assert_eq!(
        marked(&a, hide_term, none),
        marked(&other_term, hide_term, none)
    );
    assert_ne!(
        marked(&a, hide_term, none),
        marked(&reordered, hide_term, none)
    );
    // Unordered: the log's order no longer counts, its contents do (a
    // multiset: an element twice is not the element once).
    assert_eq!(marked(&a, none, bag_log), marked(&reordered, none, bag_log));
    assert_ne!(marked(&a, none, bag_log), marked(&fewer, none, bag_log));
    assert_ne!(marked(&a, none, bag_log), marked(&doubled, none, bag_log));
    assert_ne!(
        marked(&a, none, bag_log),
        marked(&other_term, none, bag_log)
    );
    // The parent's log is a `Replica`'s log too: also unordered.
    let mut parent_reordered = a.clone();
    if let Some(p) = parent_reordered.parent.as_mut() {
        p.log = vec![(4, 1), (5, 2)];
    }
    let mut parent_other = parent_reordered.clone();
    if let Some(p) = parent_other.parent.as_mut() {
        p.log.reverse();
    }
    assert_eq!(
        marked(&parent_reordered, none, bag_log),
        marked(&parent_other, none, bag_log)
    );
}

/// What `hidden_in` and `unordered_in` name is checked: a field the struct
/// lacks, an unordered field that is not a `Vec`, an enum.
#[test]
fn hidden_and_unordered_declarations_are_checked() {
    let check = |hidden: &[(&str, &[&str])], unordered: &[(&str, &[&str])]| {
        new_check();
        let r = declare_ids(
            &[Root::of::<Replica>()],
            &[],
            &decls(hidden),
            &decls(unordered),
        );
        declare_ids(&[Root::of::<Replica>()], &[], &[], &[]).unwrap();
        r
    };
    let err = check(&[(REPLICA, &["terms"])], &[]).unwrap_err();
    assert!(
        err.contains("has no field `terms`") && err.contains("term"),
        "{err}"
    );
    let err = check(&[], &[(REPLICA, &["outbox"])]).unwrap_err();
    assert!(err.contains("not a `Vec`"), "{err}");
    let err = check(&[], &[(REPLICA, &["term"])]).unwrap_err();
    assert!(err.contains("not a `Vec`"), "{err}");
    assert!(check(
        &[(REPLICA, &["term", "acks"])],
        &[(REPLICA, &["log", "arrivals"])]
    )
    .is_ok());
}
