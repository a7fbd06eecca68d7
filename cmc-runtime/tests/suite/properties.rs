//! `sometimes` and `eventually` properties against independent
//! references on generated models, and weak fairness on a model made for
//! it.

use crate::common;

use std::collections::{HashMap, HashSet, VecDeque};

use cmc::{
    Ctx, Handler, Model, Process, PropertyKind, ReplayOutcome, Strategy, Verdict, View,
    ViolationKind,
};
use common::auto::{auto_fair, reachable, rules, successors, Auto, Label, M, S};

/// What the `sometimes` test asks: both first processes in their last
/// state.
fn both_last(s: &S) -> bool {
    s.0[0] == M - 1 && s.0[1] == M - 1
}

fn both_last_world<const F: bool>(w: &cmc::World<'_, Auto<F>>) -> bool {
    w.process(0).s == M - 1 && w.process(1).s == M - 1
}

/// What the `eventually` test asks: process 1 in state 2.
fn goal(s: &S) -> bool {
    s.0[1] == 2
}

fn goal_world<const F: bool>(w: &cmc::World<'_, Auto<F>>) -> bool {
    w.process(1).s == 2
}

/// `sometimes`: a complete search reports a witness exactly when the
/// reference reaches the goal, and breadth-first with a shortest trace
/// that replays; otherwise the property is never reached. On 1 and 2
/// workers, depth- and breadth-first.
#[test]
fn sometimes_is_reached_exactly_where_the_reference_reaches_it() {
    let (mut reached, mut never) = (0, 0);
    for seed in 0..16u64 {
        let n = 2 + (seed % 2) as usize;
        let states = reachable(seed, n, |_| false);
        let shortest = states
            .iter()
            .filter(|(s, _)| both_last(s))
            .map(|(_, &d)| d)
            .min();
        for strategy in [Strategy::Bfs, Strategy::Dfs] {
            for jobs in [1, 2] {
                let what = format!("seed {seed}, {strategy:?}, {jobs} jobs");
                let model = || {
                    auto_fair::<true>(seed, n)
                        .sometimes("goal", both_last_world)
                        .strategy(strategy)
                        .jobs(jobs)
                };
                let r = model().check().unwrap();
                assert!(r.stats.complete, "{what}");
                assert_eq!(r.stats.unique as usize, states.len(), "{what}");
                match shortest {
                    Some(d) => {
                        assert_eq!(r.verdict, Verdict::Pass, "{what}");
                        assert_eq!(r.reached.len(), 1, "{what}");
                        let w = &r.reached[0];
                        assert_eq!(w.property, "goal");
                        if strategy == Strategy::Bfs {
                            assert_eq!(w.trace.steps.len(), d, "{what}");
                        }
                        assert_eq!(
                            model().replay(&w.trace).unwrap(),
                            ReplayOutcome::NoViolation,
                            "{what}: the witness replays"
                        );
                    }
                    None => {
                        assert_eq!(r.verdict, Verdict::Violation, "{what}");
                        let v = &r.violations[0];
                        assert_eq!(
                            (v.record.kind, v.record.property.as_str()),
                            (ViolationKind::NeverReached, "goal"),
                            "{what}"
                        );
                    }
                }
            }
        }
        if shortest.is_some() {
            reached += 1;
        } else {
            never += 1;
        }
    }
    assert!(
        reached >= 3 && never >= 3,
        "{reached} reach the goal, {never} never do"
    );
}

/// A bounded search that has not reached a `sometimes` property says
/// nothing about it.
#[test]
fn a_bounded_search_does_not_call_a_property_unreachable() {
    assert!(reachable(3, 3, |_| false).len() > 100);
    let r = auto_fair::<true>(3, 3)
        .sometimes("impossible", |_| false)
        .max_states(20)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Bounded, "{:?}", r.violations);
    assert!(!r.stats.complete);
    assert!(r.violations.is_empty());
}

/// The pending graph of the reference: the states reachable from the
/// initial one through states where the goal does not hold, with their
/// edges among themselves; and whether some of them have no successor.
struct Pending {
    states: Vec<S>,
    edges: Vec<Vec<(usize, Label)>>,
    terminal: bool,
}

fn pending(seed: u64, n: usize) -> Pending {
    let r = rules(seed, n);
    let initial: S = (vec![0; n], Vec::new());
    let mut index = HashMap::from([(initial.clone(), 0)]);
    let mut states = vec![initial.clone()];
    let mut edges = vec![Vec::new()];
    let mut terminal = false;
    let mut queue = VecDeque::from([0]);
    if goal(&initial) {
        return Pending {
            states: Vec::new(),
            edges: Vec::new(),
            terminal: false,
        };
    }
    while let Some(i) = queue.pop_front() {
        let succ = successors(&r, n, &states[i]);
        terminal |= succ.is_empty();
        for (t, label) in succ {
            if goal(&t) {
                continue;
            }
            let j = *index.entry(t.clone()).or_insert_with(|| {
                states.push(t);
                edges.push(Vec::new());
                queue.push_back(states.len() - 1);
                states.len() - 1
            });
            edges[i].push((j, label));
        }
    }
    Pending {
        states,
        edges,
        terminal,
    }
}

/// Without fairness: an execution avoids the goal forever iff some pending
/// state has no successor, or the greatest set of pending states each with
/// a successor in the set is not empty (`EG ¬goal`, by its fixpoint).
fn avoidable(p: &Pending) -> bool {
    if p.terminal {
        return true;
    }
    let mut keep = vec![true; p.states.len()];
    loop {
        let mut changed = false;
        for i in 0..p.states.len() {
            if keep[i] && !p.edges[i].iter().any(|&(j, _)| keep[j]) {
                keep[i] = false;
                changed = true;
            }
        }
        if !changed {
            return keep.iter().any(|&k| k);
        }
    }
}

/// With `step` weakly fair for every process: some pending state has no
/// successor, or some strongly connected set of pending states (found by
/// mutual reachability) has an edge inside it and, for every process, an
/// edge inside it that runs its `step` or a state where its `step` is
/// disabled.
fn avoidable_fairly(seed: u64, n: usize, p: &Pending) -> bool {
    if p.terminal {
        return true;
    }
    let r = rules(seed, n);
    let reach: Vec<HashSet<usize>> = (0..p.states.len())
        .map(|i| {
            let mut seen = HashSet::new();
            let mut stack = vec![i];
            while let Some(a) = stack.pop() {
                for &(b, _) in &p.edges[a] {
                    if seen.insert(b) {
                        stack.push(b);
                    }
                }
            }
            seen
        })
        .collect();
    (0..p.states.len()).any(|i| {
        if !reach[i].contains(&i) {
            return false; // on no cycle
        }
        let scc: Vec<usize> = reach[i]
            .iter()
            .copied()
            .filter(|&j| reach[j].contains(&i))
            .collect();
        (0..n).all(|q| {
            let runs = scc.iter().any(|&a| {
                p.edges[a]
                    .iter()
                    .any(|&(b, label)| label == Some(q) && scc.contains(&b))
            });
            let disabled = scc
                .iter()
                .any(|&a| r.step[q][p.states[a].0[q] as usize].is_none());
            runs || disabled
        })
    })
}

/// `eventually`: a counterexample exactly when the reference finds an
/// execution that avoids the goal forever (with `step` fair, and
/// without), and it replays; a lasso's cycle returns to its start.
#[test]
fn eventually_fails_exactly_where_the_reference_avoids_the_goal() {
    let mut outcomes = HashMap::new();
    for seed in 0..64u64 {
        let n = 2 + (seed % 2) as usize;
        let p = pending(seed, n);
        // The reference's strongly connected sets are quadratic.
        if p.states.len() > 600 {
            continue;
        }
        for fair in [true, false] {
            let expect = if fair {
                avoidable_fairly(seed, n, &p)
            } else {
                avoidable(&p)
            };
            *outcomes.entry((fair, expect)).or_insert(0) += 1;
            for jobs in [1, 2] {
                let what = format!("seed {seed}, fair {fair}, {jobs} jobs");
                let (r, replayed) = if fair {
                    check_eventually::<true>(seed, n, jobs)
                } else {
                    check_eventually::<false>(seed, n, jobs)
                };
                let found = r
                    .violations
                    .iter()
                    .find(|v| v.record.kind == ViolationKind::Liveness);
                assert_eq!(found.is_some(), expect, "{what}: {:?}", r.violations);
                if let Some(v) = found {
                    assert_eq!(v.record.property, "goal");
                    assert_eq!(
                        replayed,
                        Some(ReplayOutcome::Reproduced(v.record.clone())),
                        "{what}: {}",
                        v.trace
                    );
                    if let Some(l) = v.trace.loop_start {
                        assert!(l < v.trace.steps.len(), "{what}");
                    }
                }
                assert!(
                    r.stats.liveness_transitions > 0 || p.states.is_empty(),
                    "{what}"
                );
            }
        }
    }
    // Both answers occur, with and without fairness, and fairness changes
    // some.
    for fair in [true, false] {
        for expect in [true, false] {
            assert!(
                outcomes.get(&(fair, expect)).copied().unwrap_or(0) > 0,
                "no model where fair={fair} gives {expect}: {outcomes:?}"
            );
        }
    }
    assert!(
        outcomes[&(true, true)] < outcomes[&(false, true)],
        "fairness excludes some counterexamples: {outcomes:?}"
    );
}

fn check_eventually<const F: bool>(
    seed: u64,
    n: usize,
    jobs: usize,
) -> (cmc::CheckResult, Option<ReplayOutcome>) {
    let model = || {
        auto_fair::<F>(seed, n)
            .eventually("goal", goal_world)
            .jobs(jobs)
    };
    let r = model().check().unwrap();
    let replayed = r
        .violations
        .iter()
        .find(|v| v.record.kind == ViolationKind::Liveness)
        .map(|v| model().replay(&v.trace).unwrap());
    (r, replayed)
}

/// A worker that can spin forever or finish: "eventually every worker has
/// finished" fails (the lasso spins) unless `finish` is fair.
#[derive(Debug, Hash)]
struct Spinner<const FAIR: bool> {
    done: bool,
    spins: u8,
}

impl<const FAIR: bool> Spinner<FAIR> {
    fn spin(&mut self, _: &mut Ctx<'_, Self>) {
        self.spins = (self.spins + 1) % 2;
    }

    fn finish(&mut self, _: &mut Ctx<'_, Self>) {
        self.done = true;
    }
}

impl<const FAIR: bool> Process for Spinner<FAIR> {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        let finish =
            Handler::new("finish", Self::finish).guard(|s: &Self, _: &View<'_, Self>| !s.done);
        vec![
            Handler::new("spin", Self::spin).guard(|s: &Self, _: &View<'_, Self>| !s.done),
            if FAIR { finish.fair() } else { finish },
        ]
    }
}

fn spinners<const FAIR: bool>() -> Model<Spinner<FAIR>> {
    Model::new("spinners", 2, |_| Spinner {
        done: false,
        spins: 0,
    })
    .quiescence_ok(true)
    .eventually("all_done", |w| w.processes().all(|s| s.done))
    .sometimes("one_done", |w| w.processes().any(|s| s.done))
}

#[test]
fn weak_fairness_excludes_the_lasso_that_starves_a_fair_handler() {
    let unfair = spinners::<false>().strategy(Strategy::Bfs).check().unwrap();
    assert_eq!(unfair.verdict, Verdict::Violation);
    let v = &unfair.violations[0];
    assert_eq!(
        (v.record.kind, v.record.property.as_str()),
        (ViolationKind::Liveness, "all_done")
    );
    let l = v.trace.loop_start.expect("a lasso");
    assert!(
        v.trace.steps[l..].iter().all(|s| s.handler == "spin"),
        "{}",
        v.trace
    );
    assert_eq!(
        spinners::<false>().replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
    assert!(v.trace.to_string().contains("repeat forever"));
    // The witness of `one_done`: one step.
    assert_eq!(unfair.reached[0].property, "one_done");
    assert_eq!(unfair.reached[0].trace.steps.len(), 1);
    let fair = spinners::<true>().check().unwrap();
    assert_eq!(fair.verdict, Verdict::Pass, "{:?}", fair.violations);
    assert!(fair.stats.complete);
}

/// A lasso whose cycle is said to start elsewhere does not close, and
/// does not reproduce; nor does one whose property now holds on the way.
#[test]
fn a_tampered_lasso_does_not_replay() {
    let r = spinners::<false>().strategy(Strategy::Bfs).check().unwrap();
    let v = r
        .violations
        .iter()
        .find(|v| v.record.kind == ViolationKind::Liveness)
        .expect("a lasso");
    let l = v.trace.loop_start.expect("a lasso");
    let n = v.trace.steps.len();
    assert!(n - l >= 2, "a cycle of two spins at least: {}", v.trace);
    let mut moved = v.trace.clone();
    moved.loop_start = Some(n - 1);
    assert_eq!(
        spinners::<false>().replay(&moved).unwrap(),
        ReplayOutcome::NoViolation
    );
    // The same trace against a model where the property holds at once.
    let easy = Model::new("spinners", 2, |_| Spinner::<false> {
        done: false,
        spins: 0,
    })
    .quiescence_ok(true)
    .eventually("all_done", |_| true);
    assert_eq!(easy.replay(&v.trace).unwrap(), ReplayOutcome::NoViolation);
    let _ = PropertyKind::Eventually;
}
