//! The parallel search (`Model::jobs`) against one worker and against an
//! independent reference, on randomly generated small models: the same
//! states, transitions and violations, shortest traces under
//! breadth-first search, and a crash in one worker reported with a trace
//! that replays.

use crate::common;

use std::collections::{HashMap, HashSet};

use cmc::{Ctx, Handler, Model, Process, ReplayOutcome, Strategy, Verdict};
use common::auto::{auto, reachable, Auto, M, S};

/// The model, with an invariant that fails when every process is in its
/// last state and one that fails when the first two are in state 1 and 2.
fn model(seed: u64, n: usize) -> Model<Auto> {
    auto(seed, n)
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

fn bad(s: &S) -> Option<&'static str> {
    if s.0.iter().all(|&x| x == M - 1) {
        Some("not_all_last")
    } else if s.0[0] == 1 && s.0[1] == 2 {
        Some("not_one_two")
    } else {
        None
    }
}

/// The reference: every reachable state with its smallest depth, not
/// expanding violating states (the checker does not expand them either).
fn reference(seed: u64, n: usize) -> HashMap<S, usize> {
    reachable(seed, n, |s| bad(s).is_some())
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
/// count stays near the bound. The model has no invariants: with them, a
/// violation found before the bound is reached would rightly make the
/// verdict a violation, and whether one is found within the first 100
/// states depends on how the workers share the work.
#[test]
fn a_state_bound_stops_all_workers() {
    let all = reachable(3, 3, |_| false).len();
    assert!(all > 200, "the model is big enough to bound ({all} states)");
    for strategy in [Strategy::Dfs, Strategy::Bfs] {
        let r = auto(3, 3)
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
