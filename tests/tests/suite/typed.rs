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

#[test]
fn the_librarian_in_every_mode() {
    use crate::common::librarian::{librarian, Librarian};
    use cmc::FingerprintMode::{Bytes, Heap};
    use cmc::Strategy;
    // The librarian's splits come from stale bytes, not placement: a popped
    // element stays in the spare capacity of its Vec, String or B-tree
    // node, which no canonicalization without types can tell from live
    // data. Heap fingerprints therefore count what bytes count; an
    // abstraction of the logical content counts the 15 logical states, and
    // so does the typed walk, which knows the types.
    let count = |m: Model<Librarian>| m.check().unwrap().stats.unique;
    assert_eq!(count(librarian(true).fingerprint(Bytes)), 49);
    assert_eq!(count(librarian(true).fingerprint(Heap)), 49);
    let logical = librarian(true).abstraction(|l: &Librarian| {
        let mut chain = Vec::new();
        let mut at = &l.chain;
        while let Some(link) = at {
            chain.push(link.value);
            at = &link.next;
        }
        (l.shelves.clone(), l.index.clone(), l.log.clone(), chain)
    });
    assert_eq!(count(logical), 15);
    // The typed walk (the default for a type with no Debug, Hash or
    // StateHash) reads live elements only: the 15, with no abstraction.
    let typed = librarian(true).check().unwrap();
    assert_eq!(typed.stats.fingerprint, Some(FingerprintMode::Typed));
    assert_eq!(typed.stats.unique, 15);
    assert_eq!(
        count(librarian(true).strategy(Strategy::Bfs)),
        15,
        "breadth-first"
    );
    // Hash needs the type to implement Hash; the librarian does not.
    let err = librarian(true)
        .fingerprint(FingerprintMode::Hash)
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("implement Hash"), "{err}");
}
