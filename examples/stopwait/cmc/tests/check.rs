//! The check crate's models, checked in a test: the clean library passes
//! with exactly the states of a plain breadth-first search written here;
//! with `--features bug-stale-ack` cmc finds the seeded bug in the
//! shortest trace that search finds; over a network that reorders, the
//! alternating bit fails as the library's documentation says it would.
//!
//! `cargo test --release -p stopwait-cmc` (and with `--features
//! bug-stale-ack`).

use std::collections::{HashSet, VecDeque};

use cmc::{FingerprintMode, NetworkConfig, ReplayOutcome, Strategy, Verdict, ViolationKind};
use stopwait::{Action, Packet, Receiver, Sender};
use stopwait_cmc::{
    link, lossy_link, reordering_link, MAX_RETRANSMISSIONS, PAYLOADS, RECEIVER, SENDER,
};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

const SEEDED_BUG: bool = cfg!(feature = "bug-stale-ack");

/// A plain breadth-first search of the same system, independent of cmc:
/// the library's `Sender` and `Receiver` cloned into every state, the
/// network a list of (to, from, packet) kept in the order of each link
/// (or sorted, when it reorders), a send into a full network dropped, the
/// timer a flag that its expiry clears, states with more retransmissions
/// than the bound left out. States are identified by their `Debug`
/// string.
mod reference {
    use super::*;

    #[derive(Clone, Debug)]
    struct State {
        sender: Sender,
        receiver: Receiver,
        delivered: Vec<String>,
        net: Vec<(usize, usize, Packet)>,
        timer: bool,
    }

    /// The network the models use.
    #[derive(Clone, Copy)]
    pub struct Net {
        pub fifo: bool,
        pub duplicating: bool,
        pub capacity: usize,
    }

    impl State {
        fn key(&self, net: Net) -> String {
            let mut msgs = self.net.clone();
            if net.fifo {
                // Links in a fixed order, each link's packets in order.
                msgs.sort_by_key(|&(to, from, _)| (to, from));
            } else {
                msgs.sort_by_key(|m| format!("{m:?}"));
            }
            format!(
                "{:?} {:?} {:?} {msgs:?} {}",
                self.sender, self.receiver, self.delivered, self.timer
            )
        }

        /// What the check crate's `perform` does.
        fn perform(&mut self, me: usize, peer: usize, actions: Vec<Action>, net: Net) {
            for action in actions {
                match action {
                    Action::Transmit(p) if self.net.len() < net.capacity => {
                        self.net.push((peer, me, p))
                    }
                    Action::Transmit(_) => {}
                    Action::ArmTimer => self.timer = true,
                    Action::DisarmTimer => self.timer = false,
                    Action::Deliver(payload) => self.delivered.push(payload),
                }
            }
        }

        /// The first violated property, as the check crate defines them.
        fn violation(&self) -> Option<&'static str> {
            let delivered: Vec<&str> = self.delivered.iter().map(String::as_str).collect();
            if !PAYLOADS.starts_with(&delivered) {
                Some("Receiver::in_order")
            } else if PAYLOADS.len() - self.sender.pending() > self.delivered.len() {
                Some("acknowledged_means_delivered")
            } else {
                None
            }
        }

        /// Index of the first packet for `to` that may be delivered
        /// next: on an ordered network the head of its one link,
        /// otherwise any.
        fn deliverable(&self, to: usize, net: Net) -> Vec<usize> {
            let mine = (0..self.net.len()).filter(|&k| self.net[k].0 == to);
            if net.fifo {
                mine.take(1).collect()
            } else {
                mine.collect()
            }
        }
    }

    /// What the search found.
    #[derive(Debug)]
    pub struct Found {
        pub states: u64,
        /// The fewest steps to a state with every payload delivered.
        pub all_delivered_at: Option<usize>,
        /// The fewest steps to a violating state, and the property.
        pub violation: Option<(usize, &'static str)>,
    }

    pub fn explore(net: Net) -> Found {
        let mut initial = State {
            sender: Sender::new(),
            receiver: Receiver::new(),
            delivered: Vec::new(),
            net: Vec::new(),
            timer: false,
        };
        for payload in PAYLOADS {
            let actions = initial.sender.send(payload);
            initial.perform(SENDER, RECEIVER, actions, net);
        }
        let mut seen = HashSet::from([initial.key(net)]);
        let mut queue = VecDeque::from([(initial, 0)]);
        let mut found = Found {
            states: 1,
            all_delivered_at: None,
            violation: None,
        };
        while let Some((s, depth)) = queue.pop_front() {
            if s.delivered.len() == PAYLOADS.len() && found.all_delivered_at.is_none() {
                found.all_delivered_at = Some(depth);
            }
            if let Some(property) = s.violation() {
                found.violation.get_or_insert((depth, property));
                continue; // cmc stops here too; nothing beyond is compared.
            }
            let mut next = Vec::new();
            for k in s.deliverable(SENDER, net) {
                let mut t = s.clone();
                let (_, _, packet) = t.net.remove(k);
                let actions = t.sender.on_packet(packet);
                t.perform(SENDER, RECEIVER, actions, net);
                next.push(t);
            }
            if s.timer {
                let mut t = s.clone();
                t.timer = false;
                let actions = t.sender.on_timeout();
                t.perform(SENDER, RECEIVER, actions, net);
                next.push(t);
            }
            for k in s.deliverable(RECEIVER, net) {
                let mut t = s.clone();
                let (_, from, packet) = t.net.remove(k);
                let actions = t.receiver.on_packet(packet);
                t.perform(RECEIVER, from, actions, net);
                next.push(t);
            }
            for k in 0..s.net.len() {
                let mut lost = s.clone();
                lost.net.remove(k);
                next.push(lost);
                if net.duplicating && s.net.len() < net.capacity {
                    let mut twice = s.clone();
                    twice.net.insert(k + 1, s.net[k].clone());
                    next.push(twice);
                }
            }
            for t in next {
                if t.sender.retransmissions() > MAX_RETRANSMISSIONS {
                    continue;
                }
                if seen.insert(t.key(net)) {
                    found.states += 1;
                    queue.push_back((t, depth + 1));
                }
            }
        }
        found
    }
}

use reference::Net;

/// The network of `lossy_link`, as the reference search sees it.
const LOSSY_FIFO: Net = Net {
    fifo: true,
    duplicating: true,
    capacity: 2,
};

/// Pinned: the chapter "Checking a crate you did not write" quotes it.
const LOSSY_LINK_STATES: u64 = 104;

#[test]
fn the_lossy_link_counts_what_a_plain_search_counts() {
    let plain = reference::explore(LOSSY_FIFO);
    let r = lossy_link().check().unwrap();
    println!("reference: {plain:?}; cmc: {}", r.summary());
    if SEEDED_BUG {
        // The seeded bug: cmc stops at the shortest violation, as the
        // reference search does.
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        println!("{v}");
        assert_eq!(v.record.kind, ViolationKind::Invariant);
        assert_eq!(v.record.property, "acknowledged_means_delivered");
        assert_eq!(
            v.record.message,
            r#"the sender has 2 payloads acknowledged, the application got ["a"]"#
        );
        assert_eq!(
            plain.violation,
            Some((4, "acknowledged_means_delivered")),
            "{plain:?}"
        );
        // The receiver acknowledges "a", the acknowledgement is
        // duplicated, the sender takes the first copy for "a" and the
        // second for "b".
        let steps: Vec<&str> = v.trace.steps.iter().map(|s| s.handler.as_str()).collect();
        assert_eq!(
            steps,
            [
                "Receiver::receive",
                "duplicate message",
                "Sender::receive",
                "Sender::receive"
            ]
        );
        assert_eq!(
            lossy_link().replay(&v.trace).unwrap(),
            ReplayOutcome::Reproduced(v.record.clone())
        );
        return;
    }
    assert_eq!(plain.violation, None, "{plain:?}");
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert!(r.stats.complete);
    assert_eq!(r.stats.unique, plain.states);
    assert_eq!(r.stats.unique, LOSSY_LINK_STATES);
    // Both roles derive `Debug` over the library's derived `Debug`.
    assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Debug));
    // The `sometimes` property, reached by a shortest witness.
    assert_eq!(r.reached.len(), 1);
    assert_eq!(r.reached[0].property, "all_delivered");
    assert_eq!(
        Some(r.reached[0].trace.steps.len()),
        plain.all_delivered_at,
        "{plain:?}"
    );
    // The same states depth-first.
    let dfs = lossy_link().strategy(Strategy::Dfs).check().unwrap();
    assert_eq!(dfs.stats.unique, plain.states);
}

/// Without `Debug` on the library's types, the wrappers could not derive
/// it, and cmc would walk their values by the executable's type
/// information (the typed identity), or, in a build without it, fall back
/// to the canonical heap: for this library (a `VecDeque`, `String`s, no
/// hash map) both count the same states.
#[test]
fn the_typed_walk_and_the_canonical_heap_count_the_same_states() {
    if SEEDED_BUG {
        return;
    }
    for mode in [FingerprintMode::Typed, FingerprintMode::Heap] {
        let r = lossy_link().fingerprint(mode).check().unwrap();
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
        assert_eq!(r.stats.fingerprint, Some(mode));
        assert_eq!(r.stats.unique, LOSSY_LINK_STATES, "{mode:?}");
    }
}

/// Over a network that reorders, the correct library delivers an old
/// copy of "a" as a third payload: one bit cannot tell them apart, as the
/// library's documentation warns.
#[test]
fn a_reordering_network_breaks_the_alternating_bit() {
    let unordered = Net {
        fifo: false,
        duplicating: true,
        capacity: 2,
    };
    let plain = reference::explore(unordered);
    let r = reordering_link().check().unwrap();
    println!("reference: {plain:?}; cmc: {}", r.summary());
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    println!("{v}");
    let (depth, property) = plain.violation.expect("the reference finds it too");
    assert_eq!(v.record.property, property);
    assert_eq!(v.trace.steps.len(), depth);
    if !SEEDED_BUG {
        assert_eq!(v.record.property, "Receiver::in_order");
        assert_eq!(
            v.record.message,
            r#"process 1: delivered ["a", "b", "a"] of ["a", "b"]"#
        );
    }
}

/// A channel that loses packets but never duplicates them: the same
/// states as the plain search; with the seeded bug, a timeout stands in
/// for the duplication and the trace is one step longer.
#[test]
fn a_channel_that_only_loses_counts_what_a_plain_search_counts() {
    let net = Net {
        fifo: true,
        duplicating: false,
        capacity: 2,
    };
    let plain = reference::explore(net);
    let r = link(NetworkConfig::new().fifo(true).lossy(true).capacity(2))
        .check()
        .unwrap();
    println!("reference: {plain:?}; cmc: {}", r.summary());
    if SEEDED_BUG {
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        println!("{v}");
        assert_eq!(v.record.property, "acknowledged_means_delivered");
        assert_eq!(
            plain.violation,
            Some((5, "acknowledged_means_delivered")),
            "{plain:?}"
        );
        assert_eq!(v.trace.steps.len(), 5);
        assert_eq!(v.trace.steps[0].handler, "Sender::timeout");
    } else {
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
        assert_eq!(plain.violation, None, "{plain:?}");
        assert_eq!(r.stats.unique, plain.states);
    }
}
