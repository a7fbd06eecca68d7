//! Several kinds of process in one model (`#[cmc::roles]`): each role's
//! handlers, timers, start handlers and invariants concern the processes
//! of that role only, traces name the role's handlers, and the tutorial's
//! lock service has exactly the states a plain breadth-first search over
//! cloned states finds.
//!
//! Release builds: `cargo test --release -p cmc-tests --test roles` (and
//! with `--features tutorial/bug-regrant` for the seeded bug).

use std::collections::{HashSet, VecDeque};

use cmc::{Ctx, FingerprintMode, Model, Process, ReplayOutcome, Trigger, Verdict, ViolationKind};
use tutorial::roles::{lock_service, Node, ROUNDS, SEEDED_BUG};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

/// A plain breadth-first search of the lock service, independent of cmc:
/// states are cloned values identified by their `Debug` string, the
/// network a sorted list of (receiver, sender, message), a send into a
/// full network dropped. `regrant` is the seeded bug.
mod reference {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum M {
        Acquire,
        Grant,
        Release,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Phase {
        Idle,
        Waiting,
        Holding,
    }

    #[derive(Clone, Debug)]
    struct State {
        /// Each client's phase and rounds done (client `i` is process `i + 1`).
        clients: Vec<(Phase, u32)>,
        holder: Option<usize>,
        waiting: VecDeque<usize>,
        net: Vec<(usize, usize, M)>,
    }

    impl State {
        fn key(&self) -> String {
            let mut net = self.net.clone();
            net.sort();
            format!(
                "{:?} {:?} {:?} {net:?}",
                self.clients, self.holder, self.waiting
            )
        }

        fn send(&mut self, from: usize, to: usize, m: M, capacity: usize) {
            if self.net.len() < capacity {
                self.net.push((to, from, m));
            }
        }

        fn holders(&self) -> usize {
            self.clients
                .iter()
                .filter(|c| c.0 == Phase::Holding)
                .count()
        }
    }

    /// What the search found.
    #[derive(Debug)]
    pub struct Found {
        pub states: u64,
        /// Whether some state has two holders.
        pub two_holders: bool,
        /// The most messages in flight in any state.
        pub most_in_flight: usize,
    }

    pub fn explore(clients: usize, capacity: usize, regrant: bool) -> Found {
        let initial = State {
            clients: vec![(Phase::Idle, 0); clients],
            holder: None,
            waiting: VecDeque::new(),
            net: Vec::new(),
        };
        let mut seen = HashSet::from([initial.key()]);
        let mut queue = VecDeque::from([initial]);
        let mut found = Found {
            states: 1,
            two_holders: false,
            most_in_flight: 0,
        };
        while let Some(s) = queue.pop_front() {
            found.most_in_flight = found.most_in_flight.max(s.net.len());
            found.two_holders |= s.holders() > 1;
            let mut next = Vec::new();
            // The server, process 0: each message for it.
            for k in 0..s.net.len() {
                if s.net[k].0 != 0 {
                    continue;
                }
                let mut t = s.clone();
                let (_, from, m) = t.net.remove(k);
                match m {
                    M::Acquire if regrant && t.holder == Some(from) => {
                        t.send(0, from, M::Grant, capacity)
                    }
                    M::Acquire if t.holder.is_none() => {
                        t.holder = Some(from);
                        t.send(0, from, M::Grant, capacity);
                    }
                    M::Acquire => t.waiting.push_back(from),
                    M::Release if t.holder == Some(from) => {
                        t.holder = t.waiting.pop_front();
                        if let Some(n) = t.holder {
                            t.send(0, n, M::Grant, capacity);
                        }
                    }
                    _ => {}
                }
                next.push(t);
            }
            for c in 0..clients {
                let p = c + 1;
                let (phase, done) = s.clients[c];
                if phase == Phase::Idle && done < ROUNDS {
                    let mut t = s.clone();
                    t.send(p, 0, M::Acquire, capacity);
                    t.clients[c].0 = Phase::Waiting;
                    next.push(t);
                }
                for k in 0..s.net.len() {
                    if s.net[k].0 != p {
                        continue;
                    }
                    let mut t = s.clone();
                    let (_, _, m) = t.net.remove(k);
                    if m == M::Grant {
                        t.clients[c].0 = Phase::Holding;
                    }
                    next.push(t);
                }
                if phase == Phase::Holding {
                    let mut t = s.clone();
                    t.send(p, 0, M::Release, capacity);
                    t.clients[c] = (Phase::Idle, done + 1);
                    next.push(t);
                }
            }
            for t in next {
                if seen.insert(t.key()) {
                    found.states += 1;
                    queue.push_back(t);
                }
            }
        }
        found
    }
}

/// The tutorial's model checked with default flags: the count of the
/// plain search, no violation (or, with the seeded bug, the violation the
/// plain search also finds).
#[test]
fn the_lock_service_counts_what_a_plain_search_counts() {
    let r = lock_service(2).check().unwrap();
    let bug = SEEDED_BUG;
    let plain = reference::explore(2, 4, bug);
    println!("reference: {plain:?}; cmc: {}", r.summary());
    assert!(
        plain.most_in_flight < 4,
        "the network never fills up, so no send is dropped: {plain:?}"
    );
    assert_eq!(plain.two_holders, bug);
    if bug {
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        assert_eq!(v.record.kind, ViolationKind::Invariant);
        assert_eq!(v.record.property, "mutual_exclusion");
        let handlers: Vec<&str> = v.trace.steps.iter().map(|s| s.handler.as_str()).collect();
        println!("{v}");
        // A client takes the lock, releases it and asks again; the server
        // reads the new request first and grants it again, then the
        // release, which frees the lock: the other client takes it too.
        assert!(handlers.contains(&"Client::release"), "{handlers:?}");
        assert!(handlers.contains(&"Server::receive"), "{handlers:?}");
        for step in &v.trace.steps {
            let role = if step.process == Some(0) {
                "Server::"
            } else {
                "Client::"
            };
            assert!(step.handler.starts_with(role), "{step:?}");
        }
        assert_eq!(
            lock_service(2).replay(&v.trace).unwrap(),
            ReplayOutcome::Reproduced(v.record.clone())
        );
    } else {
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
        assert!(r.stats.complete);
        assert_eq!(r.stats.unique, plain.states);
        assert_eq!(r.stats.unique, LOCK_SERVICE_STATES);
        assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Debug));
        // The same count depth-first, and in a forked child (which builds
        // the roles' tables again after the parent built them).
        let dfs = lock_service(2)
            .strategy(cmc::Strategy::Dfs)
            .check()
            .unwrap();
        assert_eq!(dfs.stats.unique, plain.states);
        let isolated = lock_service(2).check_isolated().unwrap();
        assert_eq!(isolated.verdict, Verdict::Pass);
        assert_eq!(isolated.stats.unique, plain.states);
    }
}

/// Pinned: the chapter "Writing models" quotes it.
const LOCK_SERVICE_STATES: u64 = 141;

#[test]
fn three_clients_count_what_a_plain_search_counts() {
    if SEEDED_BUG {
        return; // The test above covers the seeded bug.
    }
    let r = lock_service(3).check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    let plain = reference::explore(3, 6, false);
    println!("reference: {plain:?}; cmc: {}", r.summary());
    assert!(plain.most_in_flight < 6, "{plain:?}");
    assert_eq!(r.stats.unique, plain.states);
}

/// The enum's table is the clients' table, then the server's, each entry
/// named after its role and given only to that role's processes.
#[test]
fn each_role_has_its_own_handlers() {
    let table = Node::handlers();
    let names: Vec<&str> = table.iter().map(|h| h.name).collect();
    assert_eq!(
        names,
        [
            "Client::acquire",
            "Client::receive",
            "Client::release",
            "Server::receive"
        ]
    );
    assert!(table.iter().all(|h| matches!(h.trigger, Trigger::Guard(_))));
    let client = Node::Client(tutorial::roles::Client::new(0));
    let server = Node::Server(tutorial::roles::Server::default());
    let applies = |node: &Node| -> Vec<bool> {
        table
            .iter()
            .map(|h| h.applies.is_some_and(|f| f(node)))
            .collect()
    };
    assert_eq!(applies(&client), [true, true, true, false]);
    assert_eq!(applies(&server), [false, false, false, true]);
    let invariants: Vec<&str> = Node::invariants().iter().map(|i| i.name).collect();
    assert_eq!(invariants, ["Client::rounds_bounded", "Server::waits_once"]);
}

// Two roles that use the same timer name, the same handler names, start
// handlers and invariants of their own.

#[derive(Clone, Debug, Hash)]
pub enum Beat {
    Ping(u8),
}

/// Counts its own ticks (its timer is armed at start, twice in all).
#[derive(Debug, Hash)]
pub struct Ticker {
    ticks: u8,
    started: u8,
}

#[cmc::process(msg = Beat)]
impl Ticker {
    #[handler(start)]
    fn boot(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.started += 1;
        ctx.set_timer("tick");
    }

    #[handler(timer = "tick")]
    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.ticks += 1;
        let _ = ctx.broadcast(Beat::Ping(self.ticks));
        if self.ticks < 2 {
            ctx.set_timer("tick");
        }
    }

    #[invariant]
    fn started_once(&self) -> Result<(), String> {
        match self.started {
            1 => Ok(()),
            n => Err(format!("started {n} times")),
        }
    }
}

/// Hears pings, and has a `tick` timer of its own, armed at start: a
/// ticker's timer must never run the listener's handler, nor the reverse.
#[derive(Debug, Hash)]
pub struct Listener {
    heard: u8,
    ticked: bool,
    started: u8,
    /// The largest number of pings it may hear before its invariant fails.
    limit: u8,
}

#[cmc::process(msg = Beat)]
impl Listener {
    #[handler(start)]
    fn boot(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.started += 1;
        ctx.set_timer("tick");
    }

    #[handler(timer = "tick", fair)]
    fn tick(&mut self) {
        self.ticked = true;
    }

    #[handler(guard = has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if ctx.recv().is_some() {
            self.heard += 1;
        }
    }

    fn has_mail(&self, view: &cmc::View<'_, Self>) -> bool {
        view.has_mail()
    }

    #[invariant]
    fn started_once(&self) -> bool {
        self.started == 1
    }

    #[invariant]
    fn heard_at_most_limit(&self) -> Result<(), String> {
        if self.heard <= self.limit {
            Ok(())
        } else {
            Err(format!("heard {} pings", self.heard))
        }
    }
}

#[cmc::roles]
#[derive(Debug)]
pub enum Band {
    Ticker(Ticker),
    Listener(Listener),
}

/// Process 0 ticks, process 1 listens, hearing at most `limit` pings.
fn band(limit: u8) -> Model<Band> {
    Model::new("band", 2, move |i| match i {
        0 => Band::Ticker(Ticker {
            ticks: 0,
            started: 0,
        }),
        _ => Band::Listener(Listener {
            heard: 0,
            ticked: false,
            started: 0,
            limit,
        }),
    })
    .quiescence_ok(true)
}

/// The states, counted by hand. The ticker goes 0 → 1 → 2 ticks, sending
/// `Ping(1)`, then `Ping(2)`; each is delivered at any point after it is
/// sent, in either order; the listener's own `tick` fires once at any
/// point. A state is the ticks, the pings still in flight (any subset of
/// those sent: 1 + 2 + 4 = 7 in all) and whether the listener ticked
/// (× 2): 14 states.
#[test]
fn the_same_timer_name_in_two_roles_fires_each_role_s_own_handler() {
    let r = band(2).check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert_eq!(r.stats.unique, 14);
    // Both roles derive Hash and Debug: Hash is the best source both offer.
    assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Hash));
    let names: Vec<&str> = Band::handlers().iter().map(|h| h.name).collect();
    assert_eq!(
        names,
        [
            "Ticker::boot",
            "Ticker::tick",
            "Listener::boot",
            "Listener::tick",
            "Listener::receive"
        ]
    );
    let fair: Vec<bool> = Band::handlers().iter().map(|h| h.fair).collect();
    assert_eq!(fair, [false, false, false, true, false]);
    let timers: Vec<Option<&str>> = Band::handlers()
        .iter()
        .map(|h| match h.trigger {
            Trigger::Timer(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        timers,
        [None, Some("tick"), None, Some("tick"), None],
        "both roles have a timer named `tick`"
    );
}

/// A per-role invariant is checked on the processes of its role: the
/// listener's limit fails at the first ping heard, in a trace whose steps
/// name each role's own handler.
#[test]
fn a_role_s_invariant_is_checked_on_its_processes() {
    let m = || band(0).strategy(cmc::Strategy::Bfs);
    let r = m().check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Invariant);
    assert_eq!(v.record.property, "Listener::heard_at_most_limit");
    assert_eq!(v.record.message, "process 1: heard 1 pings");
    let steps: Vec<(Option<usize>, &str)> = v
        .trace
        .steps
        .iter()
        .map(|s| (s.process, s.handler.as_str()))
        .collect();
    assert_eq!(
        steps,
        [(Some(0), "Ticker::tick"), (Some(1), "Listener::receive")]
    );
    assert_eq!(
        m().replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
}

/// Each role's start handler ran once on each process of that role, and
/// on no other: `started_once` holds everywhere (a start handler run on a
/// process of the other role would be a violation, since the role's code
/// cannot run on another role's value).
#[test]
fn each_role_s_start_handler_runs_on_its_processes() {
    let r = Model::new("bands", 4, |i| match i % 2 {
        0 => Band::Ticker(Ticker {
            ticks: 0,
            started: 0,
        }),
        _ => Band::Listener(Listener {
            heard: 0,
            ticked: false,
            started: 0,
            limit: 4,
        }),
    })
    .quiescence_ok(true)
    .max_depth(3)
    .invariant("every_timer_armed_at_start", |w| {
        // Depth 0 is the initial state: every process's own start
        // handler has armed its `tick`.
        for p in 0..w.process_count() {
            let fresh = match w.process(p) {
                Band::Ticker(t) => t.ticks == 0,
                Band::Listener(l) => !l.ticked,
            };
            if fresh && !w.timer_pending(p, "tick") {
                return Err(format!("process {p} has no tick pending"));
            }
        }
        Ok(())
    })
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Bounded, "{:?}", r.violations);
}

/// A role with a hash-less process: the enum offers only the sources
/// every role offers.
#[derive(Debug)]
pub struct Quiet {
    n: u8,
}

#[cmc::process(msg = Beat)]
impl Quiet {
    #[handler(guard = Self::small)]
    fn step(&mut self) {
        self.n += 1;
    }

    fn small(&self) -> bool {
        self.n < 2
    }
}

#[cmc::roles]
#[derive(Debug)]
pub enum Mixed {
    Ticker(Ticker),
    Quiet(Quiet),
}

#[test]
fn the_enum_offers_the_sources_all_roles_offer() {
    let fns = Mixed::hash_fns();
    assert!(fns.process.state.is_none());
    assert!(fns.process.hash.is_none(), "Quiet has no Hash");
    assert!(fns.process.debug.is_some(), "both roles derive Debug");
    let r = Model::new("mixed", 2, |i| match i {
        0 => Mixed::Ticker(Ticker {
            ticks: 0,
            started: 0,
        }),
        _ => Mixed::Quiet(Quiet { n: 0 }),
    })
    .quiescence_ok(true)
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Debug));
    // The ticker: 0, 1 or 2 ticks, its pings in flight to the quiet
    // process, which never reads them; the quiet process: n = 0, 1, 2.
    // 3 × 3 = 9.
    assert_eq!(r.stats.unique, 9);
}
