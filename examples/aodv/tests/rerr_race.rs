//! The RERR race of the specification bug (thesis §4.6.5, Fig. 4.8), scripted
//! on the engine alone: the trace cmc finds in `aodv_4_line`, replayed by
//! hand. Four nodes in a line, Y – X – N – D.
//!
//! 1. X finds D through N (sequence number 0); N records X as a precursor.
//! 2. N's link to D breaks: N invalidates its route with sequence number 1
//!    and sends X a RERR (D, 1), which is delayed.
//! 3. D looks for Y; its RREQ carries D's new sequence number 1, so N, X and
//!    Y learn routes to D with number 1 (Y through X).
//! 4. The stale RERR (D, 1) arrives at X. Its number is not newer than X's:
//!    the port ignores it. The RFC's rule (copy it) invalidates X's fresh
//!    route at the same number.
//! 5. X looks for D; Y answers from its route through X, and X accepts it:
//!    X -> Y -> X is a loop.

use aodv::{Action, Addr, Config, Message, Node};

const NODES: usize = 4;
const Y: usize = 0;
const X: usize = 1;
const N: usize = 2;
const D: usize = 3;

fn addr(i: usize) -> Addr {
    Addr::new(10, 0, 0, i as u8 + 1)
}

/// The line Y – X – N – D; messages wait in a list until delivered.
struct Line {
    nodes: Vec<Node>,
    queue: Vec<(usize, usize, Message)>,
}

impl Line {
    fn new() -> Line {
        let config = Config {
            rreq_retries: 0,
            gratuitous: true,
            ..Config::default()
        };
        Line {
            nodes: (0..NODES).map(|i| Node::new(addr(i), config)).collect(),
            queue: Vec::new(),
        }
    }

    fn act(&mut self, from: usize, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Broadcast(m) => {
                    for to in [from.wrapping_sub(1), from + 1] {
                        if to < NODES {
                            self.queue.push((from, to, m.clone()));
                        }
                    }
                }
                Action::Unicast(to, m) => {
                    let to = (to.0 - addr(0).0) as usize;
                    assert_eq!(from.abs_diff(to), 1, "unicast to a neighbour");
                    self.queue.push((from, to, m));
                }
                _ => {}
            }
        }
    }

    /// Delivers the oldest message from `from` to `to` that `pick` accepts.
    fn deliver(&mut self, from: usize, to: usize, pick: impl Fn(&Message) -> bool) {
        let i = self
            .queue
            .iter()
            .position(|(f, t, m)| (*f, *t) == (from, to) && pick(m))
            .expect("the message is in flight");
        let (_, _, m) = self.queue.remove(i);
        let out = self.nodes[to].handle(addr(from), m);
        self.act(to, out);
    }

    fn originate(&mut self, at: usize, dest: usize) {
        let out = self.nodes[at].originate(addr(dest));
        self.act(at, out);
    }

    /// The valid next hop from `at` towards `dest`, as a node index.
    fn next(&self, at: usize, dest: usize) -> Option<usize> {
        let r = self.nodes[at].routes().valid(addr(dest))?;
        Some((r.next_hop.0 - addr(0).0) as usize)
    }
}

fn rreq(m: &Message) -> bool {
    matches!(m, Message::Rreq(_))
}

fn rreq_of(orig: usize) -> impl Fn(&Message) -> bool {
    move |m| matches!(m, Message::Rreq(q) if q.orig == addr(orig))
}

fn rrep(m: &Message) -> bool {
    matches!(m, Message::Rrep(_))
}

fn rerr(m: &Message) -> bool {
    matches!(m, Message::Rerr(_))
}

/// Steps 1–4; returns the line after X has received the stale RERR.
fn race() -> Line {
    let mut l = Line::new();
    // 1. X finds D through N.
    l.originate(X, D);
    l.deliver(X, N, rreq);
    l.deliver(N, D, rreq);
    l.deliver(D, N, rrep);
    l.deliver(N, X, rrep);
    assert_eq!(l.next(X, D), Some(N));
    // 2. N's link to D breaks; the RERR (D, 1) to X is delayed.
    let out = l.nodes[N].link_broken(addr(D));
    l.act(N, out);
    assert!(l
        .queue
        .iter()
        .any(|(f, t, m)| (*f, *t) == (N, X) && rerr(m)));
    // 3. D looks for Y: everyone learns D's sequence number 1.
    l.originate(D, Y);
    l.deliver(D, N, rreq);
    l.deliver(N, X, rreq_of(D));
    l.deliver(X, Y, rreq_of(D));
    assert_eq!(l.nodes[X].routes().valid(addr(D)).map(|r| r.seq), Some(1));
    assert_eq!(l.next(Y, D), Some(X));
    // 4. The stale RERR arrives.
    l.deliver(N, X, rerr);
    l
}

#[cfg(not(feature = "bug-rerr-seqno"))]
#[test]
fn a_stale_rerr_is_ignored() {
    let l = race();
    assert_eq!(l.next(X, D), Some(N), "X keeps its fresh route");
}

#[cfg(feature = "bug-rerr-seqno")]
#[test]
fn a_stale_rerr_closes_a_loop() {
    let mut l = race();
    assert_eq!(l.next(X, D), None, "the RFC's rule invalidates X's route");
    // 5. X looks for D; Y answers from its route through X.
    l.originate(X, D);
    l.deliver(
        X,
        Y,
        |m| matches!(m, Message::Rreq(q) if q.orig == addr(X) && q.rreq_id == 2),
    );
    l.deliver(Y, X, |m| matches!(m, Message::Rrep(p) if p.dest == addr(D)));
    assert_eq!((l.next(X, D), l.next(Y, D)), (Some(Y), Some(X)), "a loop");
}
