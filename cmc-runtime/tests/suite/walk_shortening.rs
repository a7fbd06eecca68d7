//! The shortening of a random walk's trace against breadth-first search's
//! shortest: a counter that breaks its bound after three bumps, while two
//! other processes play ping-pong. In a walk's trace the pings, pongs and
//! their deliveries depend on each other in a chain (a ping waits for the
//! pong before, a delivery for its send), so no single one of them can go
//! without the next failing; dropping blocks, and skipping the steps a
//! dropped one made possible, leaves the three bumps.

use cmc::{Ctx, Handler, Model, Process, Strategy, Verdict};

#[derive(Debug, Hash)]
enum Node {
    Counter(u8),
    Player { waiting: bool, rallies: u8 },
}

impl Node {
    fn bump(&mut self, _: &mut Ctx<'_, Self>) {
        if let Node::Counter(n) = self {
            *n += 1;
        }
    }

    fn ping(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Node::Player { waiting, .. } = self {
            let _ = ctx.send(2, ());
            *waiting = true;
        }
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        let Some((from, ())) = ctx.recv() else { return };
        if let Node::Player { waiting, rallies } = self {
            if ctx.me() == 2 {
                let _ = ctx.send(from, ());
            } else {
                *waiting = false;
            }
            *rallies = (*rallies + 1) % 4;
        }
    }
}

impl Process for Node {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("bump", Self::bump).guard(|p, _| matches!(p, Node::Counter(_))),
            Handler::new("ping", Self::ping)
                .guard(|p, v| v.me() == 1 && matches!(p, Node::Player { waiting: false, .. })),
            Handler::new("receive", Self::receive).guard(|_, v| v.has_mail()),
        ]
    }
}

fn model() -> Model<Node> {
    Model::new("rally", 3, |i| match i {
        0 => Node::Counter(0),
        _ => Node::Player {
            waiting: false,
            rallies: 0,
        },
    })
    .invariant("below_three", |w| match w.process(0) {
        Node::Counter(n) if *n >= 3 => Err(format!("the counter reached {n}")),
        _ => Ok(()),
    })
}

#[test]
fn walks_at_any_depth_shorten_to_the_shortest_trace() {
    let bfs = model().strategy(Strategy::Bfs).check().unwrap();
    assert_eq!(bfs.verdict, Verdict::Violation, "{}", bfs.summary());
    let shortest = bfs.violations[0].trace.steps.len();
    assert_eq!(shortest, 3, "{}", bfs.violations[0].trace);
    let mut longest_walk = 0;
    for depth in [10, 60, 1000] {
        for seed in 0..8 {
            // Plain walks: a guided walk moves only into new states, so
            // its path has no loops to cut to begin with.
            let r = model()
                .strategy(Strategy::Walk)
                .guided_walks(false)
                .max_depth(depth)
                .max_walks(10_000)
                .seed(seed)
                .jobs(1)
                .check()
                .unwrap();
            assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary());
            let v = &r.violations[0];
            assert_eq!(v.record.property, "below_three", "{v}");
            assert_eq!(
                v.trace.steps.len(),
                shortest,
                "depth {depth}, seed {seed}: {}",
                v.trace
            );
            assert_eq!(
                model().replay(&v.trace).unwrap(),
                cmc::ReplayOutcome::Reproduced(v.record.clone())
            );
            longest_walk = longest_walk.max(r.stats.max_depth);
        }
    }
    // The walks themselves were longer: there was noise to cut.
    assert!(
        longest_walk > shortest + 3,
        "the walks were {longest_walk} steps at most"
    );
}
