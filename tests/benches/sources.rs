//! Time per state of each source of identity (`StateHash`, `Hash`,
//! `Debug`, the typed walk, canonical heap, bytes) on the same models, in
//! one run: two-phase commit with 6 RMs (whose process type offers all of
//! them) and the membership example (ordinary std collections: only
//! `Debug`, the typed walk, heap and bytes exist, and only `Debug` and the
//! typed walk count by meaning).
//!
//! Also the AODV 4-node model to a bounded depth (std collections behind
//! a derived `StateHash`), and the cost of seeding each transition's
//! randomness (`identity::random`) on two-phase commit: the same check
//! with seeding on and off, alternating, in one run.
//!
//! Prints `bench sources model=<m> source=<s> unique=<n> ns_per_state=<t>`
//! (median of three runs), the ratio of `Debug` to `Hash`, and
//! `bench controls ... seeded_over_unseeded=<r>`.
//! `CMC_BENCH_QUICK=1` runs one repetition of smaller models.

use std::time::Duration;

use cmc::{FingerprintMode, Model, Process, Verdict};

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

/// Checks the model `runs` times in `mode`; returns (unique, median time).
fn measure<P: Process>(
    model: impl Fn() -> Model<P>,
    mode: FingerprintMode,
    runs: usize,
) -> (u64, Duration) {
    let mut times = Vec::new();
    let mut unique = 0;
    for _ in 0..runs {
        let r = model().fingerprint(mode).check().expect("the check runs");
        assert!(
            matches!(r.verdict, Verdict::Pass | Verdict::Bounded),
            "{:?}",
            r.violations.first()
        );
        unique = r.stats.unique;
        times.push(r.stats.elapsed);
    }
    times.sort();
    (unique, times[times.len() / 2])
}

fn report<P: Process>(
    name: &str,
    model: impl Fn() -> Model<P>,
    modes: &[FingerprintMode],
    runs: usize,
) -> Vec<(FingerprintMode, f64)> {
    let mut out = Vec::new();
    for &mode in modes {
        let (unique, t) = measure(&model, mode, runs);
        let ns = t.as_nanos() as f64 / unique as f64;
        println!(
            "bench sources model={name} source={} unique={unique} ns_per_state={ns:.0}",
            mode.name()
        );
        out.push((mode, ns));
    }
    out
}

fn main() {
    let quick = std::env::var_os("CMC_BENCH_QUICK").is_some();
    let runs = if quick { 1 } else { 3 };
    use FingerprintMode::{Bytes, Debug, Hash, Heap, State, Typed};
    let rms = if quick { 4 } else { 6 };
    let tpc = report(
        &format!("two_phase_commit_{rms}"),
        || two_phase_commit::two_phase_commit(rms),
        &[State, Hash, Debug, Typed, Heap, Bytes],
        runs,
    );
    let of = |m| tpc.iter().find(|(x, _)| *x == m).map(|(_, t)| *t).unwrap();
    println!(
        "bench sources model=two_phase_commit_{rms} debug_over_hash={:.2}",
        of(Debug) / of(Hash)
    );
    let (nodes, max, capacity) = if quick { (2, 1, 2) } else { (2, 2, 2) };
    report(
        &format!("membership_{nodes}"),
        || membership::model::group(nodes, max, capacity).max_states(2_000_000),
        &[Debug, Typed, Heap, Bytes],
        runs,
    );
    let depth = if quick { 4 } else { 5 };
    report(
        &format!("aodv_4_nodes_depth_{depth}"),
        || aodv::model::aodv_4_nodes().max_depth(depth),
        &[State, Debug, Typed, Heap, Bytes],
        runs,
    );
    controls(rms, if quick { 3 } else { 9 });
}

/// Time per state of two-phase commit with per-transition seeding on and
/// off, alternating runs; prints the medians and their ratio.
fn controls(rms: usize, runs: usize) {
    let mut on = Vec::new();
    let mut off = Vec::new();
    let mut unique = 0;
    for _ in 0..runs {
        for seeded in [true, false] {
            cmc::determinism::random::set_enabled(seeded);
            let (n, t) = measure(
                || two_phase_commit::two_phase_commit(rms),
                FingerprintMode::State,
                1,
            );
            unique = n;
            if seeded {
                on.push(t)
            } else {
                off.push(t)
            }
        }
    }
    cmc::determinism::random::set_enabled(true);
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_nanos() as f64 / unique as f64
    };
    let (a, b) = (median(&mut on), median(&mut off));
    println!(
        "bench controls model=two_phase_commit_{rms} unique={unique} seeded_ns_per_state={a:.0} unseeded_ns_per_state={b:.0} seeded_over_unseeded={:.3}",
        a / b
    );
}
