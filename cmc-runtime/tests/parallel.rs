//! The parallel search (`Model::jobs`) against one worker and against an
//! independent reference, on randomly generated small models: the same
//! states, transitions and violations, shortest traces under
//! breadth-first search, and a crash in one worker reported with a trace
//! that replays.

use std::collections::{HashMap, HashSet, VecDeque};

use cmc::{Ctx, Handler, Model, NetworkConfig, Process, ReplayOutcome, Strategy, Verdict, View};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

/// States per process.
const M: u8 = 5;
/// Messages in flight at most.
const CAPACITY: usize = 2;

/// The rules of one generated model: what each process does in each of
/// its states, all drawn from a seed.
#[derive(Clone, Debug)]
struct Rules {
    /// `step[p][s][c]`: the next state of `p` after `step` with choice `c`
    /// (`None`: step is disabled in `s`).
    step: Vec<Vec<Option<[u8; 2]>>>,
    /// `send[p][s]`: the next state after sending `s` to the next process
    /// (`None`: disabled).
    send: Vec<Vec<Option<u8>>>,
    /// `recv[p][s][m]`: the next state after receiving `m`.
    recv: Vec<Vec<Vec<u8>>>,
}

fn rules(seed: u64, n: usize) -> Rules {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut draw = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % k) as u8
    };
    let mut r = Rules {
        step: Vec::new(),
        send: Vec::new(),
        recv: Vec::new(),
    };
    for _ in 0..n {
        r.step.push(
            (0..M)
                .map(|_| (draw(3) != 0).then(|| [draw(M as u64), draw(M as u64)]))
                .collect(),
        );
        r.send.push(
            (0..M)
                .map(|_| (draw(2) == 0).then(|| draw(M as u64)))
                .collect(),
        );
        r.recv.push(
            (0..M)
                .map(|_| (0..M).map(|_| draw(M as u64)).collect())
                .collect(),
        );
    }
    r
}

/// A process of a generated model, written as ordinary code would be: its
/// rules behind an `Rc`-free shared table it only reads.
#[derive(Debug)]
struct Auto {
    id: usize,
    n: usize,
    s: u8,
    rules: std::sync::Arc<Rules>,
}

impl Auto {
    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        let next = self.rules.step[self.id][self.s as usize].expect("guarded");
        self.s = next[cmc::choose(2)];
    }

    fn send(&mut self, ctx: &mut Ctx<'_, Self>) {
        let to = (self.id + 1) % self.n;
        let _ = ctx.send(to, self.s);
        self.s = self.rules.send[self.id][self.s as usize].expect("guarded");
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, m)) = ctx.recv() {
            self.s = self.rules.recv[self.id][self.s as usize][m as usize];
        }
    }
}

impl std::hash::Hash for Auto {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.s.hash(h);
    }
}

impl Process for Auto {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("step", Auto::step)
                .guard(|a: &Auto, _: &View<'_, Auto>| a.rules.step[a.id][a.s as usize].is_some()),
            Handler::new("send", Auto::send)
                .guard(|a: &Auto, _: &View<'_, Auto>| a.rules.send[a.id][a.s as usize].is_some()),
            Handler::new("receive", Auto::receive).guard(|_, v| v.has_mail()),
        ]
    }
}

/// The model, with an invariant that fails when every process is in its
/// last state and one that fails when the first two are in state 1 and 2.
fn model(seed: u64, n: usize) -> Model<Auto> {
    let r = std::sync::Arc::new(rules(seed, n));
    Model::new(format!("auto_{seed}"), n, move |id| Auto {
        id,
        n,
        s: 0,
        rules: r.clone(),
    })
    .network(NetworkConfig::new().capacity(CAPACITY))
    .quiescence_ok(true)
    .invariant("not_all_last", |w| {
        if w.processes().all(|p| p.s == M - 1) {
            Err("every process is in its last state".into())
        } else {
            Ok(())
        }
    })
    .invariant("not_one_two", |w| {
        if w.process(0).s == 1 && w.process(1).s == 2 {
            Err("processes 0 and 1 are in states 1 and 2".into())
        } else {
            Ok(())
        }
    })
}

type S = (Vec<u8>, Vec<(usize, usize, u8)>);

fn bad(s: &S) -> Option<&'static str> {
    if s.0.iter().all(|&x| x == M - 1) {
        Some("not_all_last")
    } else if s.0[0] == 1 && s.0[1] == 2 {
        Some("not_one_two")
    } else {
        None
    }
}

/// The same model over plain values: the process states and the multiset
/// of messages (to, from, value) as a sorted list. A full network drops a
/// send. Returns every reachable state with its smallest depth, stopping
/// at violating states (the checker does not expand them either).
fn reference(seed: u64, n: usize) -> HashMap<S, usize> {
    let r = rules(seed, n);
    let initial: S = (vec![0; n], Vec::new());
    let mut depth = HashMap::from([(initial.clone(), 0)]);
    let mut queue = VecDeque::from([initial]);
    while let Some(s) = queue.pop_front() {
        if bad(&s).is_some() {
            continue;
        }
        let d = depth[&s];
        let mut out: Vec<S> = Vec::new();
        for p in 0..n {
            let x = s.0[p] as usize;
            if let Some(next) = r.step[p][x] {
                for c in next {
                    let mut t = s.clone();
                    t.0[p] = c;
                    out.push(t);
                }
            }
            if let Some(next) = r.send[p][x] {
                let mut t = s.clone();
                if t.1.len() < CAPACITY {
                    t.1.push(((p + 1) % n, p, s.0[p]));
                    t.1.sort();
                }
                t.0[p] = next;
                out.push(t);
            }
        }
        for i in 0..s.1.len() {
            let mut t = s.clone();
            let (to, _, m) = t.1.remove(i);
            t.0[to] = r.recv[to][s.0[to] as usize][m as usize];
            out.push(t);
        }
        for t in out {
            if !depth.contains_key(&t) {
                depth.insert(t.clone(), d + 1);
                queue.push_back(t);
            }
        }
    }
    depth
}

/// For every generated model, every strategy and 1 to 3 workers: the
/// states are the reference's, the transitions are one worker's, the
/// violations found with keep-going are the reference's, and without
/// keep-going breadth-first search reports a shortest trace, which
/// replays.
#[test]
fn workers_find_what_one_finds_and_the_reference_says() {
    let mut checked = 0;
    let (mut replayed, mut sizes, mut violating) = (0, Vec::new(), 0);
    for seed in 0..12u64 {
        let n = 2 + (seed % 2) as usize;
        let states = reference(seed, n);
        let violated: HashSet<&str> = states.keys().filter_map(bad).collect();
        sizes.push(states.len());
        violating += usize::from(!violated.is_empty());
        let shortest = states
            .iter()
            .filter(|(s, _)| bad(s).is_some())
            .map(|(_, &d)| d)
            .min();
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let mut one = None;
            for jobs in 1..=3 {
                let r = model(seed, n)
                    .strategy(strategy)
                    .keep_going(true)
                    .jobs(jobs)
                    .check()
                    .unwrap();
                let what = format!("seed {seed}, {strategy:?}, {jobs} jobs");
                assert_eq!(r.stats.unique as usize, states.len(), "{what}");
                let found: HashSet<&str> = r
                    .violations
                    .iter()
                    .map(|v| v.record.property.as_str())
                    .collect();
                assert_eq!(found, violated, "{what}");
                let expected = if violated.is_empty() {
                    Verdict::Pass
                } else {
                    Verdict::Violation
                };
                assert_eq!(r.verdict, expected, "{what}");
                if jobs > 1 {
                    replayed += r.stats.replayed;
                }
                match one {
                    None => one = Some(r.stats.transitions),
                    Some(t) => assert_eq!(r.stats.transitions, t, "{what}"),
                }
                checked += 1;
            }
        }
        if let Some(shortest) = shortest {
            for jobs in 1..=3 {
                let m = || model(seed, n).strategy(Strategy::Bfs).jobs(jobs);
                let r = m().check().unwrap();
                assert_eq!(r.verdict, Verdict::Violation);
                let v = &r.violations[0];
                assert_eq!(v.trace.steps.len(), shortest, "seed {seed}, {jobs} jobs");
                assert_eq!(
                    model(seed, n).replay(&v.trace).unwrap(),
                    ReplayOutcome::Reproduced(v.record.clone()),
                    "seed {seed}, {jobs} jobs"
                );
            }
        }
    }
    assert_eq!(checked, 12 * 3 * 3);
    // The models are not trivial, some break an invariant and some do not,
    // and the workers did hand each other states.
    eprintln!("states per model: {sizes:?}; {violating} violate; {replayed} steps replayed");
    assert!(sizes.iter().filter(|&&n| n > 100).count() >= 6, "{sizes:?}");
    assert!(
        (3..12).contains(&violating),
        "{violating} of 12 models violate"
    );
    assert!(replayed > 0);
}

/// A bound on states stops every worker: the verdict is bounded and the
/// count stays near the bound.
#[test]
fn a_state_bound_stops_all_workers() {
    let all = reference(3, 3).len();
    assert!(all > 200, "the model is big enough to bound ({all} states)");
    for strategy in [Strategy::Dfs, Strategy::Bfs] {
        let r = model(3, 3)
            .strategy(strategy)
            .keep_going(true)
            .max_states(100)
            .jobs(2)
            .check()
            .unwrap();
        assert_eq!(r.verdict, Verdict::Bounded, "{strategy:?}");
        assert!(r
            .stopped
            .as_deref()
            .is_some_and(|s| s.contains("state bound")));
        assert!(
            (100..all as u64).contains(&r.stats.unique),
            "{}",
            r.stats.unique
        );
    }
}

/// A process that crashes (a null write) when it reaches its fourth
/// state: the worker that runs into it dies, the others stop, and the
/// crash comes back as a violation whose trace leads to it.
#[derive(Debug, Hash)]
struct Crasher {
    count: u8,
}

impl Crasher {
    fn tick(&mut self, _: &mut Ctx<'_, Self>) {
        self.count += 1;
        if self.count == 4 {
            // SAFETY: none; this is the crash the test is about.
            unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u8>(), 1) };
        }
    }
}

impl Process for Crasher {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("tick", Crasher::tick).guard(|c: &Crasher, _| c.count < 6)]
    }
}

#[test]
fn a_crash_in_one_worker_is_a_violation_with_its_trace() {
    for strategy in [Strategy::Dfs, Strategy::Bfs] {
        let r = Model::new("crasher", 3, |_| Crasher { count: 0 })
            .quiescence_ok(true)
            .strategy(strategy)
            .jobs(2)
            .check_isolated()
            .unwrap();
        assert_eq!(r.verdict, Verdict::Violation, "{strategy:?}");
        let v = &r.violations[0];
        assert_eq!(v.record.kind, cmc::ViolationKind::Crash, "{v}");
        let last = v.trace.steps.last().expect("a step");
        assert_eq!(last.handler, "tick");
        // Four ticks of one process: the trace holds them, in any order
        // with ticks of the others.
        let mine = v
            .trace
            .steps
            .iter()
            .filter(|s| s.process == last.process)
            .count();
        assert_eq!(mine, 4, "{v}");
    }
}
