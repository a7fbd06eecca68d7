//! The cost of fingerprinting a heap of N objects after a transition that
//! changed K of them, printed as
//! `bench canon objects=<N> changed=<K> mode=<incremental|full|bytes> <v> ns`:
//!
//! * `incremental`: [`HeapGraph::fingerprint`], which updates the compact
//!   heap graph from the pages the transition changed;
//! * `full`: Iosif's canonicalization from scratch ([`reference_form`]) and a
//!   hash of the result, what a checker without the incremental algorithm
//!   pays;
//! * `bytes`: capturing the state, which is what the byte fingerprint costs
//!   (page hashes of the changed pages, folded into the state's sum).
//!
//! Besides, two kinds of pointer changes: `mode=incremental-cross` retargets
//! K node-to-node pointers (cross links to objects no deeper than their
//! holder, which cannot change an access chain, so no traversal runs), and
//! `mode=incremental-tree` swaps K pairs of slots of the root vector, which
//! changes breadth-first tree edges, so the compact graph is traversed.
//! `CMC_BENCH_QUICK=1` stops at N = 10^4.

use std::hint::black_box;
use std::time::Instant;

use cmc::canon::{reference_form, CanonTable, HeapGraph};
use cmc::memory::{Memory, MemoryConfig, StateId};
use cmc::ArenaConfig;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

/// 64 bytes: a value, a pointer to another node, padding-free filler.
#[repr(C)]
struct Node {
    value: u64,
    other: *mut Node,
    filler: [u64; 6],
}

struct Bench {
    mem: Memory,
    arena: cmc::memory::ArenaId,
    root: *mut Vec<*mut Node>,
    state: StateId,
    rng: SmallRng,
}

impl Bench {
    fn new(n: usize) -> Bench {
        let mut mem = Memory::new(MemoryConfig::default());
        let arena = mem
            .add_arena("bench", ArenaConfig::default().reserve(1 << 30))
            .expect("an arena");
        let root = {
            let _in = mem.enter(arena);
            let nodes: Vec<*mut Node> = (0..n)
                .map(|i| {
                    Box::into_raw(Box::new(Node {
                        value: i as u64,
                        other: std::ptr::null_mut(),
                        filler: [i as u64 + 1; 6],
                    }))
                })
                .collect();
            for (i, &node) in nodes.iter().enumerate() {
                // SAFETY: every node was just allocated and is never freed.
                unsafe { (*node).other = nodes[(i * 7 + 1) % n] };
            }
            Box::into_raw(Box::new(nodes))
        };
        let state = mem.capture();
        Bench {
            mem,
            arena,
            root,
            state,
            rng: SmallRng::seed_from_u64(n as u64),
        }
    }

    /// Makes `k` changes of the given kind and captures; returns the
    /// capture's time.
    fn transition(&mut self, k: usize, kind: Change) -> f64 {
        {
            let _in = self.mem.enter(self.arena);
            // SAFETY: the root vector and its nodes are live and only this
            // thread touches them.
            let nodes = unsafe { &mut *self.root };
            for _ in 0..k {
                let i = self.rng.gen_range(0..nodes.len());
                let j = self.rng.gen_range(0..nodes.len());
                let node = nodes[i];
                // SAFETY: as above.
                unsafe {
                    match kind {
                        Change::Value => (*node).value = self.rng.gen(),
                        Change::Cross => (*node).other = nodes[j],
                        Change::Tree => nodes.swap(i, j),
                    }
                }
            }
        }
        let t = Instant::now();
        let s = self.mem.capture();
        let ns = t.elapsed().as_nanos() as f64;
        self.mem.release(std::mem::replace(&mut self.state, s));
        ns
    }
}

#[derive(Clone, Copy)]
enum Change {
    Value,
    Cross,
    Tree,
}

fn run(n: usize, k: usize) {
    let iters = (2_000_000 / n).clamp(10, 400);
    let mut b = Bench::new(n);
    let mut graph = HeapGraph::new(&b.mem, b.arena, b.root.cast());
    let mut table = CanonTable::new();
    graph.fingerprint(&mut b.mem, &mut table, b.state);

    let (mut incremental, mut bytes) = (0.0, 0.0);
    for _ in 0..iters {
        bytes += b.transition(k, Change::Value);
        let t = Instant::now();
        black_box(graph.fingerprint(&mut b.mem, &mut table, b.state));
        incremental += t.elapsed().as_nanos() as f64;
    }
    let mut pointers = [0.0; 2];
    for (total, kind) in pointers.iter_mut().zip([Change::Cross, Change::Tree]) {
        for _ in 0..iters {
            b.transition(k, kind);
            let t = Instant::now();
            black_box(graph.fingerprint(&mut b.mem, &mut table, b.state));
            *total += t.elapsed().as_nanos() as f64;
        }
    }
    let full_iters = iters.clamp(5, 40);
    let mut full = 0.0;
    for _ in 0..full_iters {
        b.transition(k, Change::Value);
        let t = Instant::now();
        let form = reference_form(&b.mem, b.arena, b.root.cast());
        black_box(cmc::__bench::hash(&form));
        full += t.elapsed().as_nanos() as f64;
    }
    graph.release(&mut b.mem);
    let it = iters as f64;
    println!(
        "bench canon objects={n} changed={k} mode=incremental {:.0} ns",
        incremental / it
    );
    println!(
        "bench canon objects={n} changed={k} mode=full {:.0} ns",
        full / full_iters as f64
    );
    println!(
        "bench canon objects={n} changed={k} mode=bytes {:.0} ns",
        bytes / it
    );
    println!(
        "bench canon objects={n} changed={k} mode=incremental-cross {:.0} ns",
        pointers[0] / it
    );
    println!(
        "bench canon objects={n} changed={k} mode=incremental-tree {:.0} ns",
        pointers[1] / it
    );
}

fn main() {
    let quick = std::env::var_os("CMC_BENCH_QUICK").is_some();
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    for &n in sizes {
        for k in [1, 100] {
            run(n, k);
        }
    }
}
