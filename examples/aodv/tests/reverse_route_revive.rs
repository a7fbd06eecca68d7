//! The revived reverse route (feature `bug-reverse-route-revive`), scripted
//! on the engine alone: three nodes that all hear each other, O, X and Y.
//!
//! 1. O looks for X; X learns O's sequence number 1 from the RREQ.
//! 2. O reboots and ends its wait; its sequence number is 0 again.
//! 3. X's route to O expires: it is invalidated with number 2, one more
//!    than O ever sent. X forgets O's RREQ.
//! 4. O looks for X again, with sequence number 1 and RREQ ID 1. Y hears it
//!    first and learns O's number 1, then passes the RREQ on to X.
//! 5. The port keeps X's route invalid: number 1 is older than 2. With the
//!    mistake, X revives it through Y and keeps number 2, so X claims a
//!    fresher route than its next hop has: the freshness invariant breaks.

use aodv::{Action, Addr, Config, Message, Node, Timer};

const O: usize = 0;
const X: usize = 1;
const Y: usize = 2;

fn addr(i: usize) -> Addr {
    Addr::new(10, 0, 0, i as u8 + 1)
}

/// Three nodes that all hear each other; messages wait in a list until
/// delivered.
struct Mesh {
    nodes: Vec<Node>,
    queue: Vec<(usize, usize, Message)>,
}

impl Mesh {
    fn new() -> Mesh {
        let config = Config {
            rreq_retries: 0,
            gratuitous: true,
            ..Config::default()
        };
        Mesh {
            nodes: (0..3).map(|i| Node::new(addr(i), config)).collect(),
            queue: Vec::new(),
        }
    }

    fn act(&mut self, from: usize, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Broadcast(m) => {
                    for to in (0..3).filter(|&to| to != from) {
                        self.queue.push((from, to, m.clone()));
                    }
                }
                Action::Unicast(to, m) => {
                    self.queue.push((from, (to.0 - addr(0).0) as usize, m));
                }
                _ => {}
            }
        }
    }

    /// Delivers the message in flight from `from` to `to`.
    fn deliver(&mut self, from: usize, to: usize) {
        let i = self
            .queue
            .iter()
            .position(|(f, t, _)| (*f, *t) == (from, to))
            .expect("the message is in flight");
        let (_, _, m) = self.queue.remove(i);
        let out = self.nodes[to].handle(addr(from), m);
        self.act(to, out);
    }

    fn timer(&mut self, at: usize, t: Timer) {
        let out = self.nodes[at].timer_expired(t);
        self.act(at, out);
    }

    fn originate(&mut self, at: usize, dest: usize) {
        let out = self.nodes[at].originate(addr(dest));
        self.act(at, out);
    }

    /// The valid route from `at` to `dest`: next hop (as a node index),
    /// sequence number and hop count.
    fn route(&self, at: usize, dest: usize) -> Option<(usize, u32, u8)> {
        let r = self.nodes[at].routes().valid(addr(dest))?;
        Some(((r.next_hop.0 - addr(0).0) as usize, r.seq, r.hops))
    }
}

/// Steps 1–4; returns the mesh after X has heard O's second RREQ from Y.
fn revive() -> Mesh {
    let mut m = Mesh::new();
    // 1. O looks for X; only X hears the RREQ.
    m.originate(O, X);
    m.deliver(O, X);
    assert_eq!(m.route(X, O), Some((O, 1, 1)));
    m.queue.clear();
    // 2. O reboots and waits DELETE_PERIOD.
    let out = m.nodes[O].reboot();
    m.act(O, out);
    m.timer(O, Timer::RebootWait);
    assert_eq!(m.nodes[O].seq(), 0);
    // 3. X's route to O expires (number 1 + 1), and X forgets the RREQ.
    m.timer(X, Timer::RouteExpiry(addr(O)));
    m.timer(X, Timer::RreqSeen(addr(O), 1));
    assert_eq!(m.nodes[X].routes().get(addr(O)).map(|r| r.seq), Some(2));
    assert_eq!(m.route(X, O), None);
    // 4. O's second RREQ (number 1, ID 1) reaches X through Y.
    m.originate(O, X);
    m.queue.retain(|&(_, to, _)| to == Y);
    m.deliver(O, Y);
    assert_eq!(m.route(Y, O), Some((O, 1, 1)));
    m.deliver(Y, X);
    m
}

#[cfg(not(feature = "bug-reverse-route-revive"))]
#[test]
fn an_older_rreq_does_not_revive_a_route() {
    let m = revive();
    assert_eq!(m.route(X, O), None, "X's route to O stays invalid");
}

#[cfg(feature = "bug-reverse-route-revive")]
#[test]
fn an_older_rreq_revives_a_route_fresher_than_its_next_hop() {
    let m = revive();
    // X routes to O through Y with number 2, but Y has only number 1: the
    // next hop is not strictly fresher (the freshness invariant).
    assert_eq!(m.route(X, O), Some((Y, 2, 2)));
    assert_eq!(m.route(Y, O), Some((O, 1, 1)));
}
