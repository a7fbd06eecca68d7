//! A depth bound (`max_depth`) under an order that can reach a state by a
//! longer path first (depth-first, random, best-first): every state within
//! the bound is still reached, as breadth-first search reaches it, because
//! a state that a shorter path reaches later is expanded again with the
//! depth it has left. Checked against the reference's depths on the
//! generated models, with and without the transition cache and
//! partial-order reduction.

use crate::common;

use cmc::{Model, Strategy, Verdict};
use common::auto::{auto, reachable, Auto};
use common::probe::{auto_probe, run};

fn bounded(seed: u64, n: usize, strategy: Strategy, depth: usize) -> Model<Auto> {
    auto(seed, n)
        .strategy(strategy)
        .max_depth(depth)
        .invariant("probe", auto_probe)
        // Best-first: the process with the highest state first, a
        // priority that leads the search deep before it goes wide.
        .priority(|w| w.processes().map(|p| i64::from(p.s)).max().unwrap_or(0))
}

#[test]
fn every_state_within_the_bound_is_reached_in_every_order() {
    let (mut revisited, mut cut) = (0, 0);
    for seed in 0..12u64 {
        let n = 2 + (seed % 2) as usize;
        let all = reachable(seed, n, |_| false);
        let deepest = all.values().copied().max().unwrap_or(0);
        for depth in [1, 2, 3, 5, 8] {
            let within = all.values().filter(|&&d| d <= depth).count();
            cut += usize::from(within < all.len());
            let reference = run(bounded(seed, n, Strategy::Bfs, depth));
            assert_eq!(
                reference.unique as usize, within,
                "seed {seed}, bfs to {depth}"
            );
            for strategy in [Strategy::Dfs, Strategy::Random, Strategy::BestFirst] {
                for (cache, por) in [(true, false), (false, false), (false, true)] {
                    let what = format!(
                        "seed {seed}, {strategy:?} to depth {depth}, cache {cache}, por {por}"
                    );
                    let m = bounded(seed, n, strategy, depth)
                        .transition_cache(cache)
                        .por(por);
                    let found = run(m);
                    assert_eq!(found.unique as usize, within, "{what}");
                    assert_eq!(found.states, reference.states, "{what}");
                    let expect = if depth >= deepest {
                        // The bound may still cut states at its depth
                        // that have successors (already known).
                        [Verdict::Pass, Verdict::Bounded]
                    } else {
                        [Verdict::Bounded, Verdict::Bounded]
                    };
                    assert!(
                        expect.contains(&found.verdict),
                        "{what}: {:?}",
                        found.verdict
                    );
                }
                let r = bounded(seed, n, strategy, depth).check().unwrap();
                revisited += r.stats.revisited;
            }
        }
    }
    eprintln!("{revisited} states expanded again; {cut} bounds cut");
    assert!(cut > 10, "the bounds cut too little to test anything");
    assert!(revisited > 0, "no shorter path was ever found later");
}

thread_local! {
    /// The process states the invariant of the next test calls bad.
    static BAD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A violation within the bound is found whatever the order, even when
/// the bound is the bad state's smallest depth.
#[test]
fn a_violation_within_the_bound_is_found_by_depth_first_search() {
    let mut checked = 0;
    for seed in 0..12u64 {
        let n = 2 + (seed % 2) as usize;
        let all = reachable(seed, n, |_| false);
        // States of the reference at depths 2 to 4 as the bad one, the
        // bound at their smallest depth (each process-state vector once).
        let mut bad: Vec<(Vec<u8>, usize)> = all
            .iter()
            .filter(|(_, &d)| (2..=4).contains(&d))
            .map(|(s, &d)| (s.0.clone(), d))
            .collect();
        bad.sort();
        bad.dedup_by(|a, b| a.0 == b.0);
        for (bad, _) in bad.into_iter().take(12) {
            // The smallest depth of any state with these process states.
            let at = all
                .iter()
                .filter(|(s, _)| s.0 == bad)
                .map(|(_, &d)| d)
                .min()
                .expect("reachable");
            BAD.with(|b| *b.borrow_mut() = bad.clone());
            checked += 1;
            for strategy in [Strategy::Dfs, Strategy::Random, Strategy::BestFirst] {
                let r = bounded(seed, n, strategy, at)
                    .invariant("bad", |w| {
                        let here: Vec<u8> = w.processes().map(|p| p.s).collect();
                        if BAD.with(|b| *b.borrow() == here) {
                            Err("the bad state".into())
                        } else {
                            Ok(())
                        }
                    })
                    .check()
                    .unwrap();
                assert_eq!(
                    r.verdict,
                    Verdict::Violation,
                    "seed {seed}, {strategy:?} to {at}, bad {bad:?}"
                );
            }
        }
    }
    assert!(checked >= 50, "{checked}");
}

/// The depths live with one worker's visited set: a bounded depth-first
/// search runs on one worker by default and refuses more.
#[test]
fn a_bounded_depth_first_search_runs_on_one_worker() {
    let r = bounded(3, 2, Strategy::Dfs, 4).jobs(0).check().unwrap();
    assert!(r.stats.jobs <= 1, "{}", r.stats.jobs);
    let e = bounded(3, 2, Strategy::Dfs, 4).jobs(2).check().unwrap_err();
    assert!(e.to_string().contains("--jobs 1"), "{e}");
    // Breadth-first search reaches every state at its smallest depth on
    // any number of workers.
    let r = bounded(3, 2, Strategy::Bfs, 4).jobs(2).check().unwrap();
    assert_eq!(r.stats.jobs, 2);
}
