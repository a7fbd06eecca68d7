//! The typed identity (the value walked by the executable's type
//! information) against the sources the examples' types offer: on models
//! written the ordinary way, it counts exactly the states their
//! `StateHash`, `Hash` or `Debug` count, breadth-first and depth-first.
//! (This package is built with `debug = 2`, see the workspace manifest.)

use cmc::{FingerprintMode, Model, Process, Strategy, Verdict};

fn same_count<P: Process>(name: &str, model: impl Fn() -> Model<P>) {
    let reference = model().strategy(Strategy::Bfs).check().expect("runs");
    assert_eq!(reference.verdict, Verdict::Pass, "{name}");
    assert_ne!(reference.stats.fingerprint, Some(FingerprintMode::Typed));
    for strategy in [Strategy::Bfs, Strategy::Dfs] {
        let r = model()
            .strategy(strategy)
            .fingerprint(FingerprintMode::Typed)
            .check()
            .expect("runs");
        assert_eq!(r.verdict, Verdict::Pass, "{name}");
        assert_eq!(r.stats.fingerprint, Some(FingerprintMode::Typed));
        assert_eq!(
            r.stats.unique, reference.stats.unique,
            "{name}, {strategy:?}: typed against {:?}",
            reference.stats.fingerprint
        );
        assert_eq!(r.stats.transitions, reference.stats.transitions, "{name}");
    }
    println!("{name}: {} states", reference.stats.unique);
}

#[test]
fn aodv_counts_the_same_by_its_state_hash_and_by_type_information() {
    same_count("aodv_2_nodes", aodv::model::aodv_2_nodes);
}

#[test]
fn two_phase_commit_counts_the_same() {
    same_count("two_phase_commit(5)", || {
        two_phase_commit::two_phase_commit(5)
    });
}

#[test]
fn membership_counts_the_same_as_by_debug() {
    same_count("membership(2, 2, 2)", || membership::model::group(2, 2, 2));
}

#[test]
fn roles_count_the_same() {
    same_count("two_clients", tutorial::roles::two_clients);
}
