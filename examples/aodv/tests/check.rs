//! cmc checks of the registered models and of every seeded bug (release
//! builds: `cargo test --release --features bug-...`).

use aodv::model::{aodv, AodvNode, Bounds};
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

/// Checks a registered model breadth-first and expects a violation of
/// `property` with a trace of `steps` steps; returns its message and the
/// other properties the final state breaks.
#[allow(dead_code, reason = "used only by the tests of the seeded bugs")]
fn expect_in(
    model: cmc::Model<AodvNode>,
    property: &str,
    kind: ViolationKind,
    steps: usize,
) -> (String, Vec<String>) {
    let r = model
        .strategy(Strategy::Bfs)
        .check()
        .expect("the check runs");
    println!("{}", r.summary());
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary());
    let v = &r.violations[0];
    println!("{v}");
    assert_eq!(
        (v.record.kind, v.record.property.as_str()),
        (kind, property)
    );
    assert_eq!(v.trace.steps.len(), steps);
    (v.record.message.clone(), v.trace.also_violated.clone())
}

/// Expects a violation of `property` with a trace of `steps` steps; in a
/// full mesh where every node may look for every other, also with the
/// nodes declared interchangeable (symmetry reduction finds the same
/// violation, as shortest, and the check of the symmetry finds nothing
/// wrong before it).
#[allow(dead_code, reason = "used only by the tests of the seeded bugs")]
fn expect(property: &str, kind: ViolationKind, bounds: Bounds, depth: usize, steps: usize) {
    let symmetric = bounds.topology == aodv::model::Topology::Full
        && bounds.flows.is_none()
        && bounds.breaks.is_none();
    let nodes = bounds.nodes;
    let r = run(bounds, depth);
    let mut results = vec![r];
    if symmetric {
        let r = aodv("aodv_test", bounds)
            .max_depth(depth)
            .strategy(Strategy::Bfs)
            .interchangeable(0..nodes, aodv::model::addr_of)
            .check()
            .expect("the check runs");
        println!("{}", r.summary());
        results.push(r);
    }
    for r in &results {
        assert_eq!(r.verdict, Verdict::Violation);
        let v = &r.violations[0];
        assert_eq!(
            (v.record.kind, v.record.property.as_str()),
            (kind, property),
            "{v}"
        );
        assert_eq!(v.trace.steps.len(), steps);
    }
}

#[cfg(not(any(
    feature = "bug-rerr-seqno",
    feature = "bug-hopcount-compare",
    feature = "bug-reboot-null-route",
    feature = "bug-invalid-route-reply",
    feature = "bug-hopcount-overflow",
    feature = "bug-gratuitous-self-route",
    feature = "bug-linkbreak-no-increment",
    feature = "bug-reverse-route-revive"
)))]
mod clean {
    use super::*;

    /// Three nodes in a full mesh, each interchangeable with the others:
    /// one state per orbit (1,403,131 states to depth 10 without, 233,939
    /// with: 6.0 = 3!), and every pair of states the reduction merges,
    /// compared to depth 6, behaves alike.
    #[test]
    fn three_interchangeable_nodes_count_each_orbit_once() {
        let full = aodv("aodv_test", aodv::model::SMALL)
            .max_depth(6)
            .strategy(Strategy::Bfs)
            .check()
            .expect("the check runs");
        let reduced = aodv("aodv_test", aodv::model::SMALL)
            .max_depth(6)
            .strategy(Strategy::Bfs)
            .interchangeable(0..3, aodv::model::addr_of)
            .check_symmetry(cmc::SymmetryCheck::All)
            .check()
            .expect("the check runs");
        println!("{}\n{}", full.summary(), reduced.summary());
        assert_eq!(reduced.verdict, Verdict::Bounded, "{reduced:?}");
        let s = reduced.stats.symmetry.expect("reduced");
        assert!(s.checked > 100 && s.inexact == 0, "{s:?}");
        // Each orbit has at most 3! states, and at least one.
        assert!(reduced.stats.unique * 6 >= full.stats.unique);
        assert!(reduced.stats.unique * 5 < full.stats.unique);
    }

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
    #[ignore = "a long search (bash scripts/test.sh --full runs it)"]
    fn three_nodes_have_no_violation_to_depth_9() {
        let r = run(aodv::model::SMALL, 9);
        assert_eq!(r.verdict, Verdict::Bounded);
    }

    #[test]
    #[ignore = "a long search (bash scripts/test.sh --full runs it)"]
    fn the_ring_has_no_violation_to_depth_6() {
        let r = run(aodv::model::RING, 6);
        assert_eq!(r.verdict, Verdict::Bounded);
    }

    #[test]
    #[ignore = "a long search (bash scripts/test.sh --full runs it)"]
    fn the_rerr_race_environment_has_no_violation_to_depth_13() {
        let r = run(aodv::model::RERR_RACE, 13);
        assert_eq!(r.verdict, Verdict::Bounded);
    }

    #[test]
    fn the_options_environment_has_no_violation_to_depth_6() {
        // Retries, RREP-ACKs, repeated requests and damaged packets.
        let r = run(aodv::model::OPTIONS, 6);
        assert_eq!(r.verdict, Verdict::Bounded);
        assert!(r.stats.unique > 10_000, "{}", r.summary());
    }

    #[test]
    fn the_hosts_environment_has_no_violation_to_depth_7() {
        // Timers that fire after their cancellation, NET_DIAMETER 1.
        let r = run(aodv::model::HOSTS, 7);
        assert_eq!(r.verdict, Verdict::Bounded);
        assert!(r.stats.unique > 10_000, "{}", r.summary());
    }

    #[test]
    fn the_wrap_around_environment_has_no_violation_to_depth_7() {
        let r = run(aodv::model::WRAP, 7);
        assert_eq!(r.verdict, Verdict::Bounded);
        assert!(r.stats.unique > 10_000, "{}", r.summary());
    }

    #[test]
    fn the_port_does_not_revive_a_route_with_an_older_rreq() {
        // The same events in the port without the mistake: at the last
        // step 10.0.0.1 keeps its route to 10.0.0.3 invalid, and no
        // property breaks.
        let outcome = aodv::model::aodv_4_nodes()
            .replay(&revive_trace())
            .expect("the replay runs");
        assert!(
            matches!(outcome, cmc::ReplayOutcome::NoViolation),
            "{outcome:?}"
        );
    }
}

/// Plain random walks of `model` to several depth bounds, each seed until
/// it finds the violation of `property` (or `limit` seconds pass): every
/// trace found, once shortened, is at most two steps longer than the
/// shortest (`shortest`, breadth-first search's), however deep the walk
/// that found it. Returns how many walks found it. (Plain walks: what is
/// tested is the shortening of long random traces. A guided walk to depth
/// 1,000 with seed 2 finds the revived route with a trace that shortens to
/// 14 steps.)
#[allow(dead_code, reason = "used only by the tests of the seeded bugs")]
fn walks_shorten_to_near_the_shortest(
    model: fn() -> cmc::Model<AodvNode>,
    property: &str,
    shortest: usize,
    seeds: &[u64],
    limit: u64,
) -> usize {
    let mut found = 0;
    for depth in [20, 60, 1000] {
        for &seed in seeds {
            let r = model()
                .strategy(Strategy::Walk)
                .guided_walks(false)
                .max_depth(depth)
                .seed(seed)
                .jobs(1)
                .time_limit(std::time::Duration::from_secs(limit))
                .check()
                .expect("the check runs");
            println!("depth {depth}, seed {seed}: {}", r.summary());
            let Some(v) = r.violations.first() else {
                continue;
            };
            assert_eq!(v.record.property, property, "{v}");
            let n = v.trace.steps.len();
            println!("  {n} steps (the shortest: {shortest})");
            assert!(
                (shortest..=shortest + 2).contains(&n),
                "a walk to depth {depth} (seed {seed}) left a trace of {n} steps, the shortest \
                 has {shortest}:\n{v}"
            );
            found += 1;
        }
    }
    found
}

#[cfg(feature = "bug-invalid-route-reply")]
#[test]
fn walks_shorten_the_invalid_route_reply_to_near_its_shortest_trace() {
    // Before blocks were dropped and later steps skipped, a walk to depth
    // 60 with seed 3 left 18 steps.
    let found = walks_shorten_to_near_the_shortest(
        aodv::model::aodv_3_nodes,
        "message_sanity",
        6,
        &[1, 2, 3, 4],
        20,
    );
    assert_eq!(found, 12, "every walk finds this one within seconds");
}

#[cfg(feature = "bug-reverse-route-revive")]
#[test]
fn walks_shorten_the_revived_route_to_near_its_shortest_trace() {
    // Breadth-first search finds it in 10 steps in three nodes.
    let found =
        walks_shorten_to_near_the_shortest(aodv::model::aodv_3_nodes, "freshness", 10, &[2], 30);
    assert!(
        found >= 2,
        "seed 2 finds it within seconds at depths 60 and 1000"
    );
}

#[cfg(feature = "bug-invalid-route-reply")]
#[test]
fn invalid_route_reply_sends_an_infinite_hop_count() {
    expect(
        "message_sanity",
        ViolationKind::Invariant,
        aodv::model::SMALL,
        8,
        6,
    );
}

#[cfg(feature = "bug-reboot-null-route")]
#[test]
fn an_old_rrep_after_a_reboot_panics() {
    expect("receive", ViolationKind::Panic, aodv::model::SMALL, 8, 5);
}

#[cfg(feature = "bug-hopcount-overflow")]
#[test]
fn an_infinite_hop_count_wraps_to_zero() {
    expect(
        "hop_count_bounds",
        ViolationKind::Invariant,
        aodv::model::SMALL,
        10,
        9,
    );
}

#[cfg(feature = "bug-linkbreak-no-increment")]
#[test]
fn a_link_break_without_increment_makes_a_loop() {
    // The looping route's hop count (3 in a 3-node network) is caught by the
    // per-process hop-count check in the same state as the loop.
    expect(
        "hop_count_bounds",
        ViolationKind::Invariant,
        aodv::model::SMALL,
        8,
        8,
    );
}

#[cfg(feature = "bug-rerr-seqno")]
#[test]
fn a_stale_rerr_makes_a_loop() {
    // Node 1 takes the stale RERR's sequence number, accepts node 0's
    // route through itself and closes the loop 1 -> 0 -> 1; the looping
    // route's 4 hops in a 4-node network are caught first, in the same
    // state.
    let (v, also) = expect_in(
        aodv::model::aodv_4_line(),
        "hop_count_bounds",
        ViolationKind::Invariant,
        15,
    );
    assert!(v.contains("hop count 4"), "{v}");
    assert!(also.contains(&"loop_freedom".to_string()), "{also:?}");
}

#[cfg(feature = "bug-hopcount-compare")]
#[test]
fn comparing_before_the_increment_breaks_the_update_rule() {
    let (v, _) = expect_in(
        aodv::model::aodv_4_ring(),
        "update_rule",
        ViolationKind::Invariant,
        8,
    );
    assert!(
        v.contains("hops 2 via") && v.contains("by (seq 1, hops 2"),
        "{v}"
    );
}

#[cfg(feature = "bug-gratuitous-self-route")]
#[test]
fn a_gratuitous_rrep_installs_a_route_to_self() {
    expect_in(
        aodv::model::aodv_4_ring(),
        "route_to_self",
        ViolationKind::Invariant,
        8,
    );
}

/// The trace of `bug-reverse-route-revive` that random walks found in
/// `aodv_4_nodes` (`--strategy walk --plain-walks --seed 1 --jobs 2 --max-depth 60`,
/// shortened to 10 steps; recorded again whenever the model's shape
/// changes):
/// breadth-first search does not get that deep in the four-node
/// environment, so the test replays it instead of searching.
#[allow(dead_code, reason = "used only with and without one seeded bug")]
fn revive_trace() -> cmc::Trace {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/traces/reverse_route_revive.json"
    );
    let mut trace = cmc::Trace::load(std::path::Path::new(path)).expect("the trace loads");
    // `cargo cmc` names a registered model by its path; the model built
    // here is named by its function.
    assert_eq!(trace.model, "aodv::model::aodv_4_nodes");
    trace.model = "aodv_4_nodes".into();
    trace
}

#[cfg(feature = "bug-reverse-route-revive")]
#[test]
fn an_older_rreq_revives_a_route_fresher_than_its_next_hop() {
    let trace = revive_trace();
    assert_eq!(trace.steps.len(), 10);
    match aodv::model::aodv_4_nodes()
        .replay(&trace)
        .expect("the replay runs")
    {
        cmc::ReplayOutcome::Reproduced(record) => {
            assert_eq!(
                (record.kind, record.property.as_str()),
                (ViolationKind::Invariant, "freshness")
            );
            assert!(
                record
                    .message
                    .contains("with (seq 2, hops 2), but 10.0.0.2 has (seq 1, hops 1)"),
                "{}",
                record.message
            );
        }
        other => panic!("the trace did not replay: {other:?}"),
    }
}

#[test]
fn topologies_link_the_right_nodes() {
    use aodv::model::Topology;
    let links = |t: Topology, n: usize| -> Vec<(usize, usize)> {
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| t.linked(a, b, n) && t.linked(b, a, n))
            .collect()
    };
    assert_eq!(links(Topology::Full, 3), [(0, 1), (0, 2), (1, 2)]);
    assert_eq!(links(Topology::Line, 4), [(0, 1), (1, 2), (2, 3)]);
    assert_eq!(links(Topology::Ring, 4), [(0, 1), (0, 3), (1, 2), (2, 3)]);
    // Two nodes: a ring is a single link, and nobody is linked to itself.
    assert_eq!(links(Topology::Ring, 2), [(0, 1)]);
    assert!(!Topology::Full.linked(1, 1, 3));
}
