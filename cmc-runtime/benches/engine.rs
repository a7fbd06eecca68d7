//! Engine throughput on models with known state counts: unique states per
//! second and transitions per second, printed as `bench <name> <value> <unit>`;
//! and the speed-up of a search on all cores (`Model::jobs`) over one,
//! wall-clock, as `bench engine parallel model=… jobs=… one_s=… many_s=… speedup=…`.
//! `CMC_BENCH_QUICK=1` runs smaller models. (Two-phase commit against
//! stateright's threads: `benches/vs-stateright`, mode `jobs`.)

use std::time::Instant;

use cmc::{Ctx, Handler, Model, NetworkConfig, Process, Strategy, Verdict, View};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

/// A counter modulo `m`: `n` of them give exactly m^n states.
struct Counter {
    value: u32,
    modulo: u32,
}

impl Process for Counter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new(
            "inc",
            |c: &mut Counter, _: &mut Ctx<'_, Counter>| c.value = (c.value + 1) % c.modulo,
        )]
    }
}

/// A token passed over the network to a chosen peer with a chosen value;
/// each process keeps a heap-allocated log of the last two values it
/// received: exercises send, recv, choose and the allocator.
struct Ring {
    log: Vec<u32>,
    holding: bool,
}

impl Process for Ring {
    type Msg = u32;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("pass", |r: &mut Ring, ctx: &mut Ctx<'_, Ring>| {
                r.holding = false;
                // The holder picks a peer and a value: real branching.
                let peers: Vec<usize> = ctx.peers().collect();
                let next = peers[cmc::choose(peers.len())];
                let _ = ctx.send(next, cmc::choose(3) as u32);
            })
            .guard(|r: &Ring, _: &View<'_, Ring>| r.holding),
            Handler::new("take", |r: &mut Ring, ctx: &mut Ctx<'_, Ring>| {
                if let Some((_, hop)) = ctx.recv() {
                    r.holding = true;
                    if r.log.len() == 2 {
                        r.log.remove(0);
                    }
                    r.log.push(hop);
                }
            })
            .guard(|_: &Ring, v: &View<'_, Ring>| v.has_mail()),
        ]
    }
}

/// The counters model with one worker and with one per core: the same
/// count, and the wall-clock speed-up.
fn parallel(quick: bool) {
    let (n, m) = if quick { (4, 10) } else { (5, 12) };
    let jobs = std::thread::available_parallelism()
        .map_or(2, |p| p.get())
        .max(2);
    let model = || {
        Model::new("counters", n, move |_| Counter {
            value: 0,
            modulo: m as u32,
        })
    };
    let time = |jobs: usize| {
        let start = Instant::now();
        let r = model().jobs(jobs).check().expect("the model checks");
        assert_eq!(r.verdict, Verdict::Pass);
        assert_eq!(r.stats.unique, (m as u64).pow(n as u32));
        start.elapsed().as_secs_f64()
    };
    let (one, many) = (time(1), time(jobs));
    println!(
        "bench engine parallel model=counters_{n}x{m} jobs={jobs} one_s={one:.3} many_s={many:.3} speedup={:.2}",
        one / many
    );
}

fn report<P: Process>(name: &str, model: Model<P>, expected: Option<u64>) {
    let start = Instant::now();
    let r = model.check().expect("the model checks");
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r.verdict, Verdict::Pass, "{name}");
    if let Some(n) = expected {
        assert_eq!(r.stats.unique, n, "{name}: unexpected state count");
    }
    println!("bench engine {name} unique {} states", r.stats.unique);
    println!(
        "bench engine {name} states_per_second {:.0} states/s",
        r.stats.unique as f64 / secs
    );
    println!(
        "bench engine {name} transitions_per_second {:.0} transitions/s",
        r.stats.transitions as f64 / secs
    );
    println!(
        "bench engine {name} ns_per_transition {:.0} ns",
        secs * 1e9 / r.stats.transitions as f64
    );
}

fn main() {
    let quick = std::env::var_os("CMC_BENCH_QUICK").is_some();
    let (n, m) = if quick { (3, 8) } else { (4, 12) };
    report(
        &format!("counters_{n}x{m}"),
        Model::new("counters", n, move |_| Counter {
            value: 0,
            modulo: m as u32,
        }),
        Some((m as u64).pow(n as u32)),
    );
    parallel(quick);
    let ring = if quick { 3 } else { 4 };
    report(
        &format!("ring_{ring}"),
        Model::new("ring", ring, |i| Ring {
            log: Vec::new(),
            holding: i == 0,
        })
        .network(NetworkConfig::new().capacity(2))
        .strategy(Strategy::Bfs),
        None,
    );
}
