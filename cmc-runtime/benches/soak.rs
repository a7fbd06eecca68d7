//! Soak benchmark (not in CI): injects random faults into a medium model —
//! panics, segfaults, aborts, exits, stack overflows, endless loops, in
//! handlers, guards and invariants, at a random depth — checks it isolated
//! with BFS, and counts the reports that are right: a violation of the
//! expected kind, pinned on the expected code, with the shortest trace,
//! which an isolated replay reproduces.
//!
//! `cargo bench -p cmc-runtime --bench soak` (CMC_SOAK_FAULTS=N for another
//! count than 1,000; CMC_SOAK_SEED for another seed). Prints
//! `bench soak faults=N correct=M` and the wrong reports, if any.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cmc::{Handler, Invariant, Model, Process, ReplayOutcome, View, ViolationKind};
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

/// The fault of the current run: kind in the low byte, the count at which
/// it strikes in the next byte (set before each check; the search's child
/// process inherits it).
static FAULT: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Panic,
    Segfault,
    Abort,
    Exit,
    StackOverflow,
    Spin,
    GuardPanic,
    GuardSegfault,
    InvariantFails,
    InvariantSegfault,
    InvariantSpin,
}

const FAULTS: [Fault; 11] = [
    Fault::Panic,
    Fault::Segfault,
    Fault::Abort,
    Fault::Exit,
    Fault::StackOverflow,
    Fault::Spin,
    Fault::GuardPanic,
    Fault::GuardSegfault,
    Fault::InvariantFails,
    Fault::InvariantSegfault,
    Fault::InvariantSpin,
];

fn fault() -> (Fault, u32) {
    let f = FAULT.load(Ordering::Relaxed);
    (FAULTS[(f & 0xff) as usize], (f >> 8) as u32)
}

#[inline(never)]
fn segfault() {
    let p = std::hint::black_box(8usize) as *mut u64;
    // SAFETY: deliberately not: the fault under test.
    unsafe { p.write_volatile(1) };
}

#[inline(never)]
#[allow(unconditional_recursion, reason = "the stack overflow is the point")]
fn overflow(n: u64) -> u64 {
    let pad = std::hint::black_box([n; 64]);
    overflow(n + 1) + pad[3]
}

#[inline(never)]
fn spin() {
    loop {
        std::hint::spin_loop();
    }
}

/// A process with ordinary state: a counter, a map and a log.
#[derive(Debug, Default)]
struct Node {
    count: u32,
    seen: std::collections::HashMap<u32, String>,
    log: Vec<u32>,
}

impl Node {
    fn bump(&mut self, _: &mut cmc::Ctx<'_, Self>) {
        self.count += 1;
        self.seen.insert(self.count, format!("n{}", self.count));
        self.log.push(self.count);
        let (f, at) = fault();
        if self.count == at {
            match f {
                Fault::Panic => panic!("bump reached {at}"),
                Fault::Segfault => segfault(),
                Fault::Abort => std::process::abort(),
                Fault::Exit => std::process::exit(9),
                Fault::StackOverflow => self.log.push(overflow(1) as u32),
                Fault::Spin => spin(),
                _ => {}
            }
        }
    }

    fn can_bump(&self, _: &View<'_, Self>) -> bool {
        let (f, at) = fault();
        if self.count == at {
            match f {
                Fault::GuardPanic => panic!("the guard gave up at {at}"),
                Fault::GuardSegfault => segfault(),
                _ => {}
            }
        }
        self.count < 8
    }
}

impl Process for Node {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("bump", Node::bump).guard(Node::can_bump)]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("sane", |n| {
            let (f, at) = fault();
            if n.count == at {
                match f {
                    Fault::InvariantFails => return Err(format!("count is {at}")),
                    Fault::InvariantSegfault => segfault(),
                    Fault::InvariantSpin => spin(),
                    _ => {}
                }
            }
            Ok(())
        })]
    }
}

fn model() -> Model<Node> {
    Model::new("soak", 3, |_| Node::default())
        .quiescence_ok(true)
        .strategy(cmc::Strategy::Bfs)
        .transition_timeout(Some(Duration::from_millis(200)))
}

/// What a right report of `f` striking at count `at` is: its kind, the
/// property it names, and its trace's length.
fn expected(f: Fault, at: u32) -> (ViolationKind, &'static str, usize) {
    let at = at as usize;
    match f {
        Fault::Panic => (ViolationKind::Panic, "bump", at),
        Fault::Segfault | Fault::Abort | Fault::Exit | Fault::StackOverflow => {
            (ViolationKind::Crash, "bump", at)
        }
        Fault::Spin => (ViolationKind::Timeout, "bump", at),
        Fault::GuardPanic => (ViolationKind::Panic, "guard of bump", at),
        Fault::GuardSegfault => (ViolationKind::Crash, "guard of bump", at),
        Fault::InvariantFails => (ViolationKind::Invariant, "sane", at),
        Fault::InvariantSegfault => (ViolationKind::Crash, "sane", at),
        Fault::InvariantSpin => (ViolationKind::Timeout, "sane", at),
    }
}

fn main() {
    let faults: usize = std::env::var("CMC_SOAK_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let seed: u64 = std::env::var("CMC_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2026);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let start = Instant::now();
    let mut correct = 0;
    let mut by_fault: BTreeMap<Fault, (usize, usize)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for _ in 0..faults {
        let f = FAULTS[rng.gen_range(0..FAULTS.len())];
        let at: u32 = rng.gen_range(1..=6);
        FAULT.store(
            (FAULTS.iter().position(|&x| x == f).unwrap() as u64) | (u64::from(at) << 8),
            Ordering::Relaxed,
        );
        let (kind, property, steps) = expected(f, at);
        let verdict = match model().check_isolated() {
            Err(e) => Err(format!("tool error: {e}")),
            Ok(r) => match r.violations.first() {
                None => Err(format!("no violation ({:?}, {:?})", r.verdict, r.stopped)),
                Some(v) if v.record.kind != kind || v.record.property != property => Err(format!(
                    "reported {} {}: {}",
                    v.record.kind, v.record.property, v.record.message
                )),
                Some(v) if v.trace.steps.len() != steps => Err(format!(
                    "a trace of {} steps, not {steps}",
                    v.trace.steps.len()
                )),
                Some(v) => match model().replay_isolated(&v.trace) {
                    Ok(ReplayOutcome::Reproduced(r))
                        if r.kind == kind && r.property == property =>
                    {
                        Ok(())
                    }
                    other => Err(format!("replay gave {other:?}")),
                },
            },
        };
        let entry = by_fault.entry(f).or_default();
        entry.0 += 1;
        match verdict {
            Ok(()) => {
                correct += 1;
                entry.1 += 1;
            }
            Err(why) => wrong.push(format!("{f:?} at {at}: {why}")),
        }
    }
    for (f, (n, ok)) in &by_fault {
        println!("bench soak fault={f:?} injected={n} correct={ok}");
    }
    for w in wrong.iter().take(20) {
        println!("wrong: {w}");
    }
    println!(
        "bench soak faults={faults} correct={correct} seconds={:.1}",
        start.elapsed().as_secs_f64()
    );
}
