//! cmc checks of the registered models and of every seeded bug (release
//! builds: `cargo test --release --features bug-...`).

use aodv::model::{aodv, Bounds, SMALL};
use cmc::{Strategy, Verdict, ViolationKind};

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

fn run(bounds: Bounds, depth: usize) -> cmc::CheckResult {
    let r = aodv("aodv_test", bounds)
        .max_depth(depth)
        .strategy(Strategy::Bfs)
        .check()
        .expect("the check runs");
    println!("{}", r.summary());
    if let Some(v) = r.violations.first() {
        println!("{v}");
    }
    r
}

#[allow(dead_code, reason = "used only by the tests of the seeded bugs")]
fn expect(property: &str, kind: ViolationKind, bounds: Bounds, depth: usize, steps: usize) {
    let r = run(bounds, depth);
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(
        (v.record.kind, v.record.property.as_str()),
        (kind, property)
    );
    assert_eq!(v.trace.steps.len(), steps);
}

#[cfg(not(any(
    feature = "bug-rerr-seqno",
    feature = "bug-hopcount-compare",
    feature = "bug-reboot-null-route",
    feature = "bug-invalid-route-reply",
    feature = "bug-hopcount-overflow",
    feature = "bug-gratuitous-self-route",
    feature = "bug-linkbreak-no-increment"
)))]
mod clean {
    use super::*;

    #[test]
    fn two_nodes_pass() {
        let r = aodv::model::aodv_2_nodes()
            .strategy(Strategy::Bfs)
            .check()
            .unwrap();
        assert_eq!(r.verdict, Verdict::Pass);
        assert_eq!(r.stats.unique, 4836);
    }

    #[test]
    fn three_nodes_have_no_violation_to_depth_10() {
        let r = run(SMALL, 10);
        assert_eq!(r.verdict, Verdict::Bounded);
    }
}

#[cfg(feature = "bug-invalid-route-reply")]
#[test]
fn invalid_route_reply_sends_an_infinite_hop_count() {
    expect("message_sanity", ViolationKind::Invariant, SMALL, 8, 6);
}

#[cfg(feature = "bug-reboot-null-route")]
#[test]
fn an_old_rrep_after_a_reboot_panics() {
    expect("receive", ViolationKind::Panic, SMALL, 8, 5);
}

#[cfg(feature = "bug-hopcount-overflow")]
#[test]
fn an_infinite_hop_count_wraps_to_zero() {
    expect("hop_count_bounds", ViolationKind::Invariant, SMALL, 13, 13);
}

#[cfg(feature = "bug-linkbreak-no-increment")]
#[test]
fn a_link_break_without_increment_makes_a_loop() {
    // The looping route's hop count (3 in a 3-node network) is caught by the
    // per-process hop-count check in the same state as the loop.
    expect("hop_count_bounds", ViolationKind::Invariant, SMALL, 8, 8);
}

// The three seeded bugs below are not found yet within bounds a test can
// afford (see the README); the tests say what finding them means.

#[cfg(feature = "bug-rerr-seqno")]
#[test]
#[ignore = "not found within the 3-node bounds: needs 4 nodes and sequence numbers up to 2 (README)"]
fn a_stale_rerr_makes_a_loop() {
    let r = run(
        Bounds {
            nodes: 4,
            max_seq: 2,
            max_rreq_id: 2,
            queue: 2,
            ..SMALL
        },
        30,
    );
    assert_eq!(r.verdict, Verdict::Violation);
}

#[cfg(feature = "bug-hopcount-compare")]
#[test]
#[ignore = "not found within the bounds (README: accepting equal hop counts may be benign in this port)"]
fn comparing_before_the_increment_is_caught() {
    let r = run(Bounds { nodes: 4, ..SMALL }, 20);
    assert_eq!(r.verdict, Verdict::Violation);
}

#[cfg(feature = "bug-gratuitous-self-route")]
#[test]
#[ignore = "not found within the bounds (README: unreachable under the real-time environment rules?)"]
fn a_gratuitous_rrep_installs_a_route_to_self() {
    expect(
        "route_to_self",
        ViolationKind::Invariant,
        Bounds { nodes: 4, ..SMALL },
        20,
        0,
    );
}
