//! Partial-order reduction by sleep sets (`Model::por`) against the search
//! without it and against an independent reference, on randomly generated
//! small models: exactly the same states (compared one by one, by a
//! probe invariant that records every state it is evaluated in), the same
//! violations, shortest traces under breadth-first search that replay, and
//! fewer transitions (only a few percent fewer on these tightly coupled
//! models: see the book's search chapter for what sleep sets can and
//! cannot save).

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use cmc::{Check, Ctx, Handler, Model, NetworkConfig, Process, ReplayOutcome, Strategy, Verdict};
use common::auto::{auto, reachable, Auto, M};
use common::probe::{auto_probe, probe, run, Found};

/// The generated model of the other search tests, with two invariants
/// that fail in some models and a probe.
fn auto_model(seed: u64, n: usize) -> Model<Auto> {
    auto(seed, n)
        .invariant("probe", auto_probe)
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

fn same(a: &Found, b: &Found, what: &str) {
    assert_eq!(a.unique, b.unique, "{what}: unique count");
    assert_eq!(a.states, b.states, "{what}: states");
    assert_eq!(a.violated, b.violated, "{what}: violations");
    assert_eq!(a.verdict, b.verdict, "{what}: verdict");
    assert!(
        a.transitions <= b.transitions,
        "{what}: {} transitions with reduction, {} without",
        a.transitions,
        b.transitions
    );
}

/// The reference's verdict on the generated models' invariants.
fn bad(s: &common::auto::S) -> Option<&'static str> {
    if s.0.iter().all(|&x| x == M - 1) {
        Some("not_all_last")
    } else if s.0[0] == 1 && s.0[1] == 2 {
        Some("not_one_two")
    } else {
        None
    }
}

/// On the shared family of generated models, every strategy: without a
/// failing invariant, the same states with and without reduction (the
/// reference's); with keep-going, the reduced search goes past violations
/// and finds every property violated in any reachable state; without,
/// it fails exactly when the search without reduction does, with a trace
/// as short under breadth-first search, which replays.
#[test]
fn sleep_sets_keep_every_state_and_violation_of_generated_models() {
    let (mut with, mut without, mut violating) = (0, 0, 0);
    for seed in 0..16u64 {
        let n = 2 + (seed % 2) as usize;
        let all = reachable(seed, n, |_| false);
        let violated: BTreeSet<String> = all.keys().filter_map(bad).map(str::to_string).collect();
        violating += usize::from(!violated.is_empty());
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let what = format!("seed {seed}, {strategy:?}");
            let m = || {
                auto(seed, n)
                    .strategy(strategy)
                    .invariant("probe", auto_probe)
            };
            let plain = run(m());
            let reduced = run(m().por(true));
            assert_eq!(plain.unique as usize, all.len(), "{what}");
            same(&reduced, &plain, &what);
            with += reduced.transitions;
            without += plain.transitions;
            let past = run(auto_model(seed, n)
                .strategy(strategy)
                .keep_going(true)
                .por(true));
            assert_eq!(past.unique as usize, all.len(), "{what}, keep-going");
            assert_eq!(past.violated, violated, "{what}, keep-going");
            let plain = auto_model(seed, n).strategy(strategy).check().unwrap();
            let reduced = auto_model(seed, n)
                .strategy(strategy)
                .por(true)
                .check()
                .unwrap();
            assert_eq!(reduced.verdict, plain.verdict, "{what}");
            if let (Some(a), Some(b)) = (reduced.violations.first(), plain.violations.first()) {
                if strategy == Strategy::Bfs {
                    assert_eq!(a.trace.steps.len(), b.trace.steps.len(), "{what}");
                }
                assert_eq!(
                    auto_model(seed, n).replay(&a.trace).unwrap(),
                    ReplayOutcome::Reproduced(a.record.clone()),
                    "{what}"
                );
            }
        }
    }
    eprintln!("transitions: {with} with reduction, {without} without; {violating} of 16 violate");
    assert!((3..16).contains(&violating), "{violating}");
    assert!(with < without, "{with} vs {without}");
}

/// A bound that reads one process at a time (`Model::prune_process`)
/// keeps commuting steps commuting: inside it, the reduced search visits
/// exactly the states the search without reduction visits, which are the
/// reference's states inside the bound. A bound over the whole world is
/// refused with reduction.
#[test]
fn sleep_sets_keep_every_state_inside_a_bound_on_each_process() {
    let (mut with, mut without, mut cut) = (0, 0, 0);
    for seed in 0..16u64 {
        let n = 2 + (seed % 2) as usize;
        let k = 1 + (seed % u64::from(M - 1)) as u8;
        let out = move |s: &common::auto::S| s.0.contains(&k);
        let all = reachable(seed, n, out);
        let inside = all.keys().filter(|s| !out(s)).count();
        cut += all.len() - inside;
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let what = format!("seed {seed}, bound {k}, {strategy:?}");
            let m = || {
                auto(seed, n)
                    .strategy(strategy)
                    .invariant("probe", auto_probe)
                    .prune_process(move |a| a.s == k)
            };
            let plain = run(m());
            let reduced = run(m().por(true));
            assert_eq!(plain.unique as usize, inside, "{what}");
            same(&reduced, &plain, &what);
            with += reduced.transitions;
            without += plain.transitions;
        }
    }
    eprintln!("transitions: {with} with reduction, {without} without; {cut} states cut");
    assert!(cut > 0, "the bounds cut no state");
    assert!(with < without, "{with} vs {without}");
    let e = auto_model(1, 2)
        .prune(|_| false)
        .por(true)
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("prune_process"), "{e}");
}

/// A richer family: processes that send to a chosen peer or broadcast,
/// receive, act only when their mailbox is empty, read and write a shared
/// counter, act only when the network is empty, and set a timer — every
/// way a handler can depend on another process.
#[derive(Clone, Debug)]
struct MixRules {
    /// Per process and state, for each handler: the next state when it is
    /// enabled there.
    next: Vec<Vec<[Option<u8>; 7]>>,
    /// Per process and state: whom `send` sends to (`n`: everyone else).
    to: Vec<Vec<usize>>,
}

const MS: u8 = 3;

fn mix_rules(seed: u64, n: usize) -> MixRules {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut draw = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % k
    };
    let mut r = MixRules {
        next: Vec::new(),
        to: Vec::new(),
    };
    for p in 0..n {
        r.next.push(
            (0..MS)
                .map(|_| std::array::from_fn(|_| (draw(5) < 2).then(|| draw(MS as u64) as u8)))
                .collect(),
        );
        r.to.push(
            (0..MS)
                .map(|_| {
                    let t = draw(n as u64) as usize;
                    if t == p {
                        n
                    } else {
                        t
                    }
                })
                .collect(),
        );
    }
    r
}

#[derive(Debug)]
struct Mix {
    id: usize,
    s: u8,
    rules: Arc<MixRules>,
}

impl std::hash::Hash for Mix {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.s.hash(h);
    }
}

const STEP: usize = 0;
const SEND: usize = 1;
const IDLE: usize = 2;
const BUMP: usize = 3;
const LOOK: usize = 4;
const QUIET: usize = 5;
const ARM: usize = 6;

impl Mix {
    fn next(&self, h: usize) -> Option<u8> {
        self.rules.next[self.id][self.s as usize][h]
    }

    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        let next = self.next(STEP).expect("guarded");
        self.s = [next, (next + 1) % MS][cmc::choose(2)];
    }

    fn send(&mut self, ctx: &mut Ctx<'_, Self>) {
        let to = self.rules.to[self.id][self.s as usize];
        let _ = if to == ctx.process_count() {
            ctx.broadcast(self.s)
        } else {
            ctx.send(to, self.s)
        };
        self.s = self.next(SEND).expect("guarded");
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, m)) = ctx.recv() {
            self.s = (self.s + m + 1) % MS;
        }
    }

    fn idle(&mut self, _: &mut Ctx<'_, Self>) {
        self.s = self.next(IDLE).expect("guarded");
    }

    fn bump(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.with_shared(|c: &mut u8| *c += 1);
        self.s = self.next(BUMP).expect("guarded");
    }

    fn look(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.s = (self.next(LOOK).expect("guarded") + *ctx.shared()) % MS;
    }

    fn quiet(&mut self, _: &mut Ctx<'_, Self>) {
        self.s = self.next(QUIET).expect("guarded");
    }

    fn arm(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer("t");
        self.s = self.next(ARM).expect("guarded");
    }

    fn expire(&mut self, _: &mut Ctx<'_, Self>) {
        self.s = (self.s + 2) % MS;
    }
}

impl Process for Mix {
    type Msg = u8;
    type Shared = u8;
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("step", Self::step).guard(|m, _| m.next(STEP).is_some()),
            Handler::new("send", Self::send).guard(|m, _| m.next(SEND).is_some()),
            Handler::new("receive", Self::receive).guard(|_, v| v.has_mail()),
            Handler::new("idle", Self::idle).guard(|m, v| m.next(IDLE).is_some() && !v.has_mail()),
            Handler::new("bump", Self::bump)
                .guard(|m, v| m.next(BUMP).is_some() && *v.shared() < 2),
            Handler::new("look", Self::look).guard(|m, _| m.next(LOOK).is_some()),
            Handler::new("quiet", Self::quiet)
                .guard(|m, v| m.next(QUIET).is_some() && v.in_flight() == 0),
            Handler::new("arm", Self::arm).guard(|m, _| m.next(ARM).is_some()),
            Handler::new("expire", Self::expire).on_timer("t"),
        ]
    }
}

fn mix(seed: u64, n: usize) -> Model<Mix> {
    let rules = Arc::new(mix_rules(seed, n));
    Model::new(format!("mix_{seed}"), n, move |id| Mix {
        id,
        s: 0,
        rules: rules.clone(),
    })
    .network(
        NetworkConfig::new()
            .capacity(if n == 2 { 3 } else { 2 })
            .lossy(seed % 3 == 0)
            .duplicating(seed % 5 == 0),
    )
    .quiescence_ok(true)
    .invariant("probe", |w| {
        probe(format!(
            "{:?} {:?} {} {:?}",
            w.processes().map(|p| p.s).collect::<Vec<_>>(),
            w.in_flight().collect::<Vec<_>>(),
            w.shared(),
            (0..w.process_count())
                .map(|p| w.timer_pending(p, "t"))
                .collect::<Vec<_>>()
        ))
    })
}

fn not_all_three(w: &cmc::World<'_, Mix>) -> Check {
    if w.processes().all(|p| p.s == MS - 1) && *w.shared() == 2 {
        Err("every process in its last state and the counter at 2".into())
    } else {
        Ok(())
    }
}

/// On the richer family, every strategy: the same states with and without
/// reduction; with a failing invariant, the same verdict; with
/// keep-going, at least the violations found without reduction (the
/// reduced search goes past violations).
#[test]
#[ignore = "long searches (bash scripts/test.sh --full runs it)"]
fn sleep_sets_keep_every_state_of_models_that_share_and_observe() {
    let (mut with, mut without, mut sizes, mut failing) = (0, 0, Vec::new(), 0);
    for seed in 0..20u64 {
        let n = 2 + (seed % 2) as usize;
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let what = format!("seed {seed}, {strategy:?}");
            let m = || mix(seed, n).strategy(strategy);
            let plain = run(m());
            let reduced = run(m().por(true));
            same(&reduced, &plain, &what);
            // Inside a bound on one process's state.
            let bounded = || {
                let k = seed as usize % n;
                m().prune_process(move |p: &Mix| p.id == k && p.s == 2)
            };
            let plain_bounded = run(bounded());
            let reduced_bounded = run(bounded().por(true));
            same(
                &reduced_bounded,
                &plain_bounded,
                &format!("{what}, bounded"),
            );
            assert!(
                plain_bounded.unique < plain.unique,
                "{what}: the bound cuts"
            );
            with += reduced_bounded.transitions;
            without += plain_bounded.transitions;
            with += reduced.transitions;
            without += plain.transitions;
            if strategy == Strategy::Bfs {
                sizes.push(plain.unique);
            }
            let m = || m().invariant("not_all_three", not_all_three);
            let plain = run(m());
            let reduced = run(m().por(true));
            assert_eq!(reduced.verdict, plain.verdict, "{what}");
            failing += usize::from(plain.verdict == Verdict::Violation);
            let plain = run(m().keep_going(true));
            let reduced = run(m().keep_going(true).por(true));
            assert!(reduced.violated.is_superset(&plain.violated), "{what}");
        }
    }
    eprintln!(
        "states per model: {sizes:?}; transitions: {with} with reduction, {without} without; \
         {failing} searches fail"
    );
    assert!(
        sizes.iter().filter(|&&n| n > 100).count() >= 10,
        "{sizes:?}"
    );
    assert!(failing > 0);
    assert!(with < without, "{with} vs {without}");
}

/// Reduction runs on one worker: asking for more is an error, and so is a
/// random walk; one worker per core means one.
#[test]
fn reduction_runs_exhaustive_searches_on_one_worker() {
    let e = auto_model(1, 2).por(true).jobs(2).check().unwrap_err();
    assert!(e.to_string().contains("--jobs 1"), "{e}");
    let e = auto_model(1, 2)
        .por(true)
        .strategy(Strategy::Walk)
        .max_walks(10)
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("walk"), "{e}");
    let r = auto_model(1, 2).por(true).jobs(0).check().unwrap();
    assert!(r.stats.jobs <= 1);
}
