//! cmc checks ordinary Rust state with default flags and counts it by
//! meaning: its unique counts equal a plain breadth-first search over
//! cloned states keyed by a canonical `Debug` string, under DFS and BFS;
//! the determinism check finds nothing; the seeded bug's trace replays.
//! Release builds: `cargo test --release -p membership` (and with
//! `--features bug-refute-without-adopting`).

use cmc::{Model, Strategy, Verdict};
use membership::model::group;
use membership::{reference, Node};

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

fn check(model: Model<Node>) -> cmc::CheckResult {
    let r = model.check().expect("the check runs");
    println!("{}", r.summary());
    for s in &r.sources {
        println!("  {s}");
    }
    if let Some(v) = r.violations.first() {
        println!("{v}");
    }
    r
}

#[cfg(not(feature = "bug-refute-without-adopting"))]
mod clean {
    use super::*;
    use cmc::FingerprintMode;

    #[test]
    #[ignore = "long searches (bash scripts/test.sh --full runs it)"]
    fn default_flags_count_exactly_the_states_that_differ_in_meaning() {
        for (nodes, max, capacity) in [(2, 2, 2), (3, 1, 1)] {
            let reference = reference::explore(nodes, max, capacity);
            println!(
                "reference {nodes} nodes, incarnations {max}, capacity {capacity}: {reference:?}"
            );
            assert_eq!(reference.violation, None);
            for strategy in [Strategy::Dfs, Strategy::Bfs] {
                let r = check(group(nodes, max, capacity).strategy(strategy));
                assert_eq!(r.verdict, Verdict::Pass);
                assert_eq!(
                    r.stats.unique, reference.states as u64,
                    "{nodes} nodes, capacity {capacity}, {strategy:?}"
                );
                assert_eq!(
                    r.stats.fingerprint,
                    Some(FingerprintMode::Debug),
                    "the node derives Debug only, so Debug is its best source"
                );
                let message = r.sources.iter().find(|s| s.role == "message").unwrap();
                assert_eq!(message.source, FingerprintMode::Debug);
            }
        }
    }

    #[test]
    fn the_determinism_check_finds_nothing() {
        let r = check(group(2, 2, 2).check_determinism(true));
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(r.violations.is_empty());
    }

    /// The typed walk (the executable's type information, what a type with
    /// no `Debug` gets) counts by meaning too: exactly the reference, where
    /// the canonical heap (below) splits states without end.
    #[test]
    fn the_typed_walk_counts_exactly_the_reference() {
        let reference = reference::explore(2, 2, 2).states as u64;
        for strategy in [Strategy::Bfs, Strategy::Dfs] {
            let r = check(
                group(2, 2, 2)
                    .fingerprint(FingerprintMode::Typed)
                    .strategy(strategy),
            );
            assert_eq!(r.verdict, Verdict::Pass);
            assert_eq!(r.stats.unique, reference, "{strategy:?}");
            assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Typed));
        }
    }

    #[test]
    #[ignore = "a long search (bash scripts/test.sh --full runs it)"]
    fn byte_sources_split_the_same_states() {
        // What cmc counted before it compared states by meaning: the
        // canonical heap still sees each map's random keys and layout.
        let reference = reference::explore(2, 2, 2).states as u64;
        let r = check(
            group(2, 2, 2)
                .fingerprint(FingerprintMode::Heap)
                .max_states(50 * reference as usize),
        );
        assert!(
            r.stats.unique > reference,
            "heap fingerprints counted {} states, the reference {reference}",
            r.stats.unique
        );
    }
}

#[cfg(feature = "bug-refute-without-adopting")]
mod seeded {
    use super::*;
    use cmc::{ReplayOutcome, ViolationKind};

    #[test]
    fn the_seeded_bug_is_found_with_a_shortest_trace_that_replays() {
        let reference = reference::explore(2, 2, 2);
        assert!(
            reference.violation.is_some(),
            "the reference sees the bug too"
        );
        let model = || group(2, 2, 2).strategy(Strategy::Bfs);
        let r = check(model());
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        assert_eq!(v.record.kind, ViolationKind::Invariant);
        assert_eq!(v.record.property, "incarnations_are_never_ahead");
        // A restart makes the node known, a peer suspects it, it refutes
        // with an incarnation it does not adopt, the peer believes it.
        assert_eq!(v.trace.steps.len(), 5, "{}", v.trace);
        for _ in 0..3 {
            match model().replay(&v.trace).expect("the replay runs") {
                ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record),
                other => panic!("the trace did not replay: {other:?}"),
            }
        }
    }
}
