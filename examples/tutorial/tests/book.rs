//! What cmc finds in each model of the book: the chapters quote these
//! numbers, and this test keeps them true.

use cmc::{ReplayOutcome, Strategy, Verdict, ViolationKind};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

#[test]
fn the_first_model_has_nine_states() {
    let r = tutorial::first::two_counters().check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass);
    assert_eq!((r.stats.unique, r.stats.transitions), (9, 18));
}

#[test]
fn the_lossy_link_delivers_in_order() {
    let r = tutorial::lossy::lossy_link().check().unwrap();
    assert_eq!(
        r.verdict,
        Verdict::Pass,
        "{:?}",
        r.violations.first().map(|v| v.to_string())
    );
    assert_eq!(r.stats.unique, LOSSY_STATES);
    // The registered `sometimes` property: both values can be logged.
    assert_eq!(r.reached.len(), 1);
    assert_eq!(r.reached[0].property, "both_values_logged");
}

/// Pinned: the chapter "Properties" quotes the lasso's shape.
#[test]
fn delivery_is_live_over_a_reliable_link_only() {
    let r = tutorial::properties::lossy_link_delivers()
        .strategy(Strategy::Bfs)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Liveness);
    // Send, then lose and retransmit forever.
    assert_eq!(
        (v.trace.steps.len(), v.trace.loop_start),
        (3, Some(1)),
        "{v}"
    );
    assert_eq!(
        tutorial::properties::lossy_link_delivers()
            .replay(&v.trace)
            .unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
    let r = tutorial::properties::reliable_link_delivers()
        .check()
        .unwrap();
    assert_eq!(
        r.verdict,
        Verdict::Pass,
        "{:?}",
        r.violations.first().map(|v| v.to_string())
    );
}

/// Pinned: the chapter "Writing models" quotes it.
const LOSSY_STATES: u64 = 121;

#[test]
fn a_leak_is_found() {
    let r = tutorial::properties::leaky()
        .strategy(Strategy::Bfs)
        .check()
        .unwrap();
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Leak);
    assert_eq!(v.trace.steps.len(), 1);
    assert_eq!(
        tutorial::properties::leaky().replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
}

/// Pinned: the chapter "Writing models" quotes the count, and the seeded
/// bug's trace (`--features bug-regrant`).
#[test]
fn the_lock_service_gives_the_lock_to_one_client_at_a_time() {
    let r = tutorial::roles::two_clients().check().unwrap();
    if tutorial::roles::SEEDED_BUG {
        let v = &r.violations[0];
        assert_eq!(v.record.property, "mutual_exclusion");
        assert_eq!(v.trace.steps.len(), 11, "{v}");
        return;
    }
    assert_eq!(
        r.verdict,
        Verdict::Pass,
        "{:?}",
        r.violations.first().map(|v| v.to_string())
    );
    assert_eq!(r.stats.unique, 141);
}
