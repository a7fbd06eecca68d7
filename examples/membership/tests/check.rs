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
    use cmc::registry::RunOptions;
    use cmc::{FingerprintMode, SymmetryCheck};
    use membership::model::{interchangeable_ids, symmetric};

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

    /// The nodes declared interchangeable, their ids named by type and
    /// field, the log hidden: the reduced search counts exactly the
    /// reference's orbits (renamings of the nodes), the unreduced one the
    /// states that differ other than in their logs, and the symmetry,
    /// checked on every merge, holds.
    #[test]
    fn interchangeable_nodes_count_the_orbits() {
        let (nodes, max, capacity) = (2, 2, 2);
        let orbits = reference::explore_orbits(nodes, max, capacity).states as u64;
        let states = reference::explore_without_logs(nodes, max, capacity).states as u64;
        println!("reference: {states} states without logs, {orbits} orbits");
        let mut off = RunOptions::default();
        off.symmetry = Some(false);
        let unreduced = check(symmetric(group(nodes, max, capacity), nodes).apply(&off));
        let reduced = check(
            symmetric(group(nodes, max, capacity), nodes)
                .check_symmetry(SymmetryCheck::All)
                .strategy(Strategy::Bfs),
        );
        for r in [&unreduced, &reduced] {
            assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations.first());
            assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Typed));
        }
        assert_eq!(unreduced.stats.unique, states);
        assert_eq!(reduced.stats.unique, orbits);
        let sym = reduced.stats.symmetry.expect("symmetry statistics");
        assert!(sym.merged > 0 && sym.checked > 0, "{sym:?}");
        assert!(
            orbits < states,
            "two nodes have two names: {orbits} of {states}"
        );
    }

    /// The log names ids as text, which no renaming rewrites: not hidden,
    /// it breaks the declared symmetry, and the check names it.
    #[test]
    fn a_log_that_names_ids_breaks_the_symmetry() {
        let r = check(
            interchangeable_ids(group(2, 2, 2), 2)
                .check_symmetry(SymmetryCheck::All)
                .strategy(Strategy::Bfs),
        );
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        assert_eq!(v.record.kind, cmc::ViolationKind::Asymmetry, "{v}");
        assert!(
            v.record.message.contains("log.vec = \"") && v.record.message.contains(" alive at "),
            "the report names the log and shows its text: {v}"
        );
    }

    /// What `hidden_in` names is checked when the search starts.
    #[test]
    fn hidden_fields_are_checked_against_the_types() {
        let err = group(2, 2, 2)
            .hidden_in("membership::Node", &["logs"])
            .check()
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no field `logs`"), "{err}");
        assert!(err.contains("log"), "{err}");
        let err = group(2, 2, 2)
            .hidden_in("membership::Nod", &["log"])
            .check()
            .unwrap_err()
            .to_string();
        assert!(err.contains("no struct named `membership::Nod`"), "{err}");
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
