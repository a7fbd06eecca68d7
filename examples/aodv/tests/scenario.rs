//! The engine alone, without cmc: the a–b–d scenario of thesis Figs. 4.1–4.4
//! (b hears a and d; a and d do not hear each other), on a tiny in-memory
//! network that delivers packets in order.

use std::collections::BTreeSet;

use aodv::{Action, Addr, Config, Message, Node, RouteState, Timer, INFINITY};

const A: Addr = Addr::new(10, 0, 0, 1);
const B: Addr = Addr::new(10, 0, 0, 2);
const D: Addr = Addr::new(10, 0, 0, 3);

struct Net {
    nodes: Vec<Node>,
    links: Vec<(Addr, Addr)>,
    queue: Vec<(Addr, Addr, Vec<u8>)>,
    timers: Vec<(Addr, Timer)>,
}

impl Net {
    fn new() -> Net {
        Net::with(Config::default())
    }

    fn with(config: Config) -> Net {
        Net {
            nodes: [A, B, D].map(|a| Node::new(a, config)).to_vec(),
            links: vec![(A, B), (B, D)],
            queue: Vec::new(),
            timers: Vec::new(),
        }
    }

    fn node(&mut self, a: Addr) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.addr() == a).unwrap()
    }

    fn linked(&self, x: Addr, y: Addr) -> bool {
        self.links.contains(&(x, y)) || self.links.contains(&(y, x))
    }

    fn apply(&mut self, from: Addr, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Broadcast(m) => {
                    for to in [A, B, D] {
                        if to != from && self.linked(from, to) {
                            self.queue.push((from, to, m.encode()));
                        }
                    }
                }
                Action::Unicast(to, m) if self.linked(from, to) => {
                    self.queue.push((from, to, m.encode()));
                }
                Action::SetTimer(t, _) => self.timers.push((from, t)),
                _ => {}
            }
        }
    }

    /// Delivers everything in order; returns the messages delivered.
    fn run(&mut self) -> Vec<(Addr, Addr, Message)> {
        let mut log = Vec::new();
        while !self.queue.is_empty() {
            let (from, to, bytes) = self.queue.remove(0);
            log.push((from, to, Message::decode(&bytes).unwrap()));
            let out = self.node(to).receive(from, &bytes);
            self.apply(to, out);
        }
        log
    }
}

fn rreq(out: &[Action]) -> aodv::Rreq {
    out.iter()
        .find_map(|a| match a {
            Action::Broadcast(Message::Rreq(q)) => Some(*q),
            _ => None,
        })
        .expect("an RREQ is broadcast")
}

#[test]
fn discovery_then_link_break() {
    let mut net = Net::new();
    // b first learns a route to d (d looks for b).
    let out = net.node(D).originate(B);
    net.apply(D, out);
    net.run();
    assert_eq!(net.node(B).routes().valid(D).unwrap().hops, 1);

    // Fig. 4.1-4.3: a looks for d; b answers for d as an intermediate node.
    let out = net.node(A).originate(D);
    let q = rreq(&out);
    assert!(q.hop_count == 0 && q.unknown_seq && q.orig_seq == 1);
    net.apply(A, out);
    let log = net.run();
    assert!(log.iter().any(|(f, t, m)| *f == B
        && *t == A
        && matches!(m, Message::Rrep(p) if p.dest == D && p.hop_count == 1)));
    let r = net.node(A).routes().valid(D).unwrap().clone();
    assert_eq!((r.next_hop, r.hops, r.seq), (B, 2, 1));
    assert!(net.node(A).discoveries().is_empty());
    // b has a reverse route to a, and each side lists the other as precursor.
    assert_eq!(net.node(B).routes().valid(A).unwrap().hops, 1);
    assert_eq!(
        net.node(B).routes().get(D).unwrap().precursors,
        BTreeSet::from([A])
    );

    // Fig. 4.4: the link b–d breaks; b invalidates with seq + 1 and tells a.
    net.links.retain(|&l| l != (B, D));
    let out = net.node(B).link_broken(D);
    net.apply(B, out);
    let log = net.run();
    assert!(
        log.iter()
            .any(|(_, t, m)| *t == A
                && matches!(m, Message::Rerr(e) if e.unreachable == vec![(D, 2)]))
    );
    for n in [A, B] {
        let r = net.node(n).routes().get(D).unwrap().clone();
        assert_eq!((r.state, r.seq, r.hops), (RouteState::Invalid, 2, INFINITY));
    }
    assert!(net.timers.contains(&(A, Timer::RouteDelete(D))));

    // A new discovery asks for a number newer than 2: b cannot answer.
    let out = net.node(A).originate(D);
    let q = rreq(&out);
    assert!(q.dest_seq == 2 && !q.unknown_seq);
    net.apply(A, out);
    net.run();
    assert!(net.node(A).routes().valid(D).is_none());
}

#[test]
fn a_stale_rerr_does_not_move_time_backwards() {
    let mut b = Node::new(B, Config::default());
    // b learns d's route with seq 5 from d.
    let rrep = Message::Rrep(aodv::Rrep {
        repair: false,
        ack_required: false,
        prefix_size: 0,
        hop_count: 0,
        dest: D,
        dest_seq: 5,
        orig: A,
        lifetime: 6000,
    });
    b.handle(D, rrep);
    assert_eq!(b.routes().valid(D).unwrap().seq, 5);
    let stale = Message::Rerr(aodv::Rerr {
        no_delete: false,
        unreachable: vec![(D, 4)],
    });
    b.handle(D, stale);
    let r = b.routes().get(D).unwrap();
    #[cfg(not(feature = "bug-rerr-seqno"))]
    assert!(r.is_valid() && r.seq == 5);
    #[cfg(feature = "bug-rerr-seqno")]
    assert!(!r.is_valid() && r.seq == 4);
}

#[test]
fn reboot_waits_and_forgets() {
    let mut a = Node::new(A, Config::default());
    a.originate(D);
    assert_eq!(a.seq(), 1);
    let out = a.reboot();
    assert_eq!(
        out,
        vec![
            Action::CancelAllTimers,
            Action::SetTimer(Timer::RebootWait, aodv::consts::DELETE_PERIOD)
        ]
    );
    assert!(a.is_waiting() && a.seq() == 0 && a.routes().is_empty());
    assert!(a.originate(D).is_empty());
    a.timer_expired(Timer::RebootWait);
    assert!(!a.originate(D).is_empty());
}

#[test]
fn destination_reply_uses_the_newer_sequence_number() {
    let mut d = Node::new(D, Config::default());
    let q = aodv::Rreq {
        join: false,
        repair: false,
        gratuitous: false,
        dest_only: false,
        unknown_seq: false,
        hop_count: 0,
        rreq_id: 1,
        dest: D,
        dest_seq: 7,
        orig: A,
        orig_seq: 3,
    };
    let out = d.handle(A, Message::Rreq(q));
    assert_eq!(d.seq(), 7);
    assert!(out.iter().any(|a| matches!(a, Action::Unicast(to, Message::Rrep(p)) if *to == A && p.dest_seq == 7 && p.hop_count == 0)));
    // The same request again is a duplicate.
    assert!(!d
        .handle(A, Message::Rreq(q))
        .iter()
        .any(|a| matches!(a, Action::Unicast(..))));
}

#[test]
fn replies_ask_for_an_acknowledgement_when_configured() {
    let config = Config {
        request_ack: true,
        ..Config::default()
    };
    let mut net = Net::new();
    net.nodes = [A, B, D].map(|a| Node::new(a, config)).to_vec();
    let out = net.node(A).originate(D);
    net.apply(A, out);
    let log = net.run();
    // Every RREP (D's reply, B's forward) carries the A flag, and each
    // receiver answers it with a RREP-ACK to the neighbour it came from.
    let rreps: Vec<_> = log
        .iter()
        .filter_map(|(from, to, m)| match m {
            Message::Rrep(p) => Some((*from, *to, p.ack_required)),
            _ => None,
        })
        .collect();
    assert_eq!(rreps, [(D, B, true), (B, A, true)]);
    let acks: Vec<_> = log
        .iter()
        .filter(|(_, _, m)| *m == Message::RrepAck)
        .map(|(from, to, _)| (*from, *to))
        .collect();
    assert_eq!(acks, [(B, D), (A, B)]);
    assert!(net.node(A).routes().valid(D).is_some());
    // Without the option nobody asks.
    let mut plain = Net::new();
    let out = plain.node(A).originate(D);
    plain.apply(A, out);
    assert!(plain.run().iter().all(|(_, _, m)| match m {
        Message::Rrep(p) => !p.ack_required,
        m => *m != Message::RrepAck,
    }));
}

#[test]
fn damaged_packets_are_dropped_without_effect() {
    use aodv::model::Damage;
    let mut a = Node::new(A, Config::default());
    let sent = rreq(&a.originate(D));
    let packets = [
        Message::Rreq(sent).encode(),
        Message::RrepAck.encode(),
        Message::Rerr(aodv::Rerr {
            no_delete: false,
            unreachable: vec![(D, 4), (A, 2)],
        })
        .encode(),
    ];
    for bytes in packets {
        for damage in Damage::ALL {
            let damaged = damage.apply(&bytes);
            assert!(
                Message::decode(&damaged).is_err(),
                "{damage:?} of {bytes:02x?} still decodes"
            );
            let mut b = Node::new(B, Config::default());
            assert!(b.receive(A, &damaged).is_empty(), "{damage:?}");
            assert!(b.routes().iter().next().is_none(), "{damage:?}");
        }
    }
}

#[test]
fn a_node_started_near_the_wrap_around_skips_zero() {
    let config = Config {
        first_seq: u32::MAX,
        ..Config::default()
    };
    let mut a = Node::new(A, config);
    assert_eq!(a.seq(), u32::MAX);
    let q = rreq(&a.originate(D));
    // §6.1 wraps the number; 0 would mean "unknown", so the node goes to 1.
    assert_eq!((a.seq(), q.orig_seq), (1, 1));
    // A reboot starts it again where it was configured to start.
    a.reboot();
    assert_eq!(a.seq(), u32::MAX);
}

#[test]
fn a_rreq_that_travelled_net_diameter_hops_is_not_rebroadcast() {
    // a looks for d, two hops away: with NET_DIAMETER 1, b drops the RREQ
    // it would forward (and learns its reverse route to a all the same).
    for (diameter, found) in [(aodv::consts::NET_DIAMETER, true), (1, false)] {
        let mut net = Net::with(Config {
            net_diameter: diameter,
            ..Config::default()
        });
        let out = net.node(A).originate(D);
        net.apply(A, out);
        let log = net.run();
        assert_eq!(
            log.iter().any(|(_, t, _)| *t == D),
            found,
            "NET_DIAMETER {diameter}: {log:?}"
        );
        assert_eq!(net.node(A).routes().valid(D).is_some(), found);
        assert_eq!(net.node(B).routes().valid(A).unwrap().hops, 1);
    }
}

#[test]
fn a_timer_that_fires_after_its_cancellation_is_ignored() {
    let mut net = Net::new();
    let out = net.node(A).originate(D);
    net.apply(A, out);
    net.run();
    // The reply ended the discovery and cancelled its retry; the retry
    // fires all the same.
    assert!(net.node(A).routes().valid(D).is_some());
    assert!(net.node(A).discoveries().is_empty());
    let before = format!("{:?}", net.node(A));
    assert!(net
        .node(A)
        .timer_expired(Timer::DiscoveryRetry(D))
        .is_empty());
    assert_eq!(format!("{:?}", net.node(A)), before);
    // b's link to d breaks: a's route is invalidated and its expiry
    // cancelled; the expiry fires all the same.
    net.links.retain(|&l| l != (B, D));
    let out = net.node(B).link_broken(D);
    net.apply(B, out);
    net.run();
    assert!(net.node(A).routes().valid(D).is_none());
    let before = format!("{:?}", net.node(A));
    assert!(net.node(A).timer_expired(Timer::RouteExpiry(D)).is_empty());
    assert_eq!(format!("{:?}", net.node(A)), before);
}
