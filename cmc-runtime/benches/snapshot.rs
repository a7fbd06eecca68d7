//! The runtime core's figures: the cost of a write fault, of restoring,
//! capturing and hashing a page, and of a whole transition (restore, run a
//! closure that writes D pages, capture, fingerprint) for several arena sizes
//! in both tracking modes.
//!
//! Every figure is printed as `bench <name> <value> ns`: the median over
//! several batches of the mean time per operation. Set `CMC_BENCH_QUICK=1`
//! for a short smoke run (CI uses it to keep the benchmark from rotting).

use std::hint::black_box;
use std::time::{Duration, Instant};

use cmc::memory::{ArenaId, Memory, MemoryConfig};
use cmc::{ArenaConfig, PageHasher, Tracking};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

const PAGE: usize = 4096;

struct Timer {
    batches: usize,
    batch_time: Duration,
}

impl Timer {
    fn from_env() -> Self {
        if std::env::var_os("CMC_BENCH_QUICK").is_some() {
            Timer {
                batches: 3,
                batch_time: Duration::from_millis(20),
            }
        } else {
            Timer {
                batches: 9,
                batch_time: Duration::from_millis(150),
            }
        }
    }

    /// Median over batches of ns per operation; `run(n)` performs `n`
    /// operations and returns the time they took (so set-up can be excluded).
    fn measure(&self, mut run: impl FnMut(usize) -> Duration) -> f64 {
        // Calibrate the batch size so each batch takes about `batch_time`.
        let mut n = 1;
        loop {
            let t = run(n);
            if t >= self.batch_time / 4 || n >= 1 << 24 {
                let per = t.as_secs_f64() / n as f64;
                n = ((self.batch_time.as_secs_f64() / per.max(1e-9)) as usize).max(1);
                break;
            }
            n *= 4;
        }
        let mut samples: Vec<f64> = (0..self.batches)
            .map(|_| run(n).as_nanos() as f64 / n as f64)
            .collect();
        samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
        samples[samples.len() / 2]
    }
}

fn report(name: &str, ns: f64) -> f64 {
    println!("bench {name} {ns:.1} ns");
    ns
}

/// A memory with one arena holding a zeroed buffer of `bytes` bytes.
fn arena_with_buffer(bytes: usize, tracking: Tracking) -> (Memory, ArenaId, *mut u8) {
    let mut mem = Memory::new(MemoryConfig::default());
    let reserve = (2 * bytes).next_multiple_of(1 << 20).max(1 << 20) + (1 << 20);
    let a = mem
        .add_arena(
            "bench",
            ArenaConfig::new().reserve(reserve).tracking(tracking),
        )
        .unwrap();
    let buf = {
        let _in = mem.enter(a);
        Box::leak(vec![0u8; bytes].into_boxed_slice()).as_mut_ptr()
    };
    (mem, a, buf)
}

/// Writes `value` at the start of each of the first `pages` pages of the
/// buffer (or its first byte when it is smaller than a page).
fn write_pages(mem: &Memory, a: ArenaId, buf: *mut u8, pages: usize, stride: usize, value: u8) {
    let _in = mem.enter(a);
    for p in 0..pages {
        // SAFETY: the caller keeps p * stride inside the buffer.
        unsafe { std::ptr::write_volatile(buf.add(p * stride), value) };
    }
}

fn fault_per_page(timer: &Timer) -> f64 {
    const PAGES: usize = 1024;
    let (mut mem, a, buf) = arena_with_buffer(PAGES * PAGE, Tracking::Mprotect);
    let s0 = mem.capture();
    let mut value = 0u8;
    timer.measure(|n| {
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < n {
            let k = (n - done).min(PAGES);
            mem.restore(s0);
            value = value.wrapping_add(1);
            let start = Instant::now();
            write_pages(&mem, a, buf, k, PAGE, value);
            total += start.elapsed();
            done += k;
        }
        total
    })
}

fn restore_per_page(timer: &Timer, tracking: Tracking) -> f64 {
    // Two states that differ in every other page of 2048, so no two
    // differing pages are adjacent and none share an mprotect call.
    const PAGES: usize = 2048;
    let (mut mem, a, buf) = arena_with_buffer(PAGES * PAGE, tracking);
    let sa = mem.capture();
    write_pages(&mem, a, buf, PAGES / 2, 2 * PAGE, 1);
    let sb = mem.capture();
    let differing = PAGES / 2;
    timer.measure(|n| {
        // n pages take n / differing restores; report the time of n pages.
        let restores = n.div_ceil(differing);
        let start = Instant::now();
        for i in 0..restores {
            mem.restore(if i % 2 == 0 { sa } else { sb });
        }
        start
            .elapsed()
            .mul_f64(n as f64 / (restores * differing) as f64)
    })
}

fn random_page(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..PAGE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn capture_per_page(timer: &Timer) -> f64 {
    // Storing a page that is not in the store yet: the copy, the index
    // insertion and the slot, without the hash (measured separately).
    let pages: Vec<Vec<u8>> = (0..4096).map(|i| random_page(i + 1)).collect();
    let hashes: Vec<u128> = pages.iter().map(|p| PageHasher::Fold.hash(p)).collect();
    let mut store = cmc::__bench::PageStore::new();
    let mut ids = Vec::with_capacity(pages.len());
    timer.measure(|n| {
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < n {
            let k = (n - done).min(pages.len());
            let start = Instant::now();
            for i in 0..k {
                ids.push(store.intern(&pages[i], hashes[i]));
            }
            total += start.elapsed();
            for id in ids.drain(..) {
                store.release(id);
            }
            done += k;
        }
        total
    })
}

fn hash_per_page(timer: &Timer, hasher: PageHasher) -> f64 {
    let page = random_page(7);
    timer.measure(|n| {
        let start = Instant::now();
        for _ in 0..n {
            black_box(hasher.hash(black_box(&page)));
        }
        start.elapsed()
    })
}

fn transition(timer: &Timer, arena_bytes: usize, dirty: usize, tracking: Tracking) -> f64 {
    let (mut mem, a, buf) = arena_with_buffer(arena_bytes, tracking);
    let s0 = mem.capture();
    // One byte in each of `dirty` distinct pages of the buffer.
    let stride = if dirty == 1 {
        0
    } else {
        (arena_bytes / dirty).max(1)
    };
    let mut value = 0u8;
    timer.measure(|n| {
        let start = Instant::now();
        for _ in 0..n {
            mem.restore(s0);
            value = value.wrapping_add(1) | 1;
            write_pages(&mem, a, buf, dirty, stride, value);
            let s = mem.capture();
            black_box(mem.fingerprint(s));
            mem.release(s);
        }
        start.elapsed()
    })
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do
    // not support, so ignore arguments entirely.
    let timer = Timer::from_env();
    println!(
        "# cmc-runtime snapshot benchmark (median of {} batches)",
        timer.batches
    );
    let fault = report("fault_per_page", fault_per_page(&timer));
    let restore = report(
        "restore_per_page",
        restore_per_page(&timer, Tracking::Mprotect),
    );
    report(
        "restore_per_page_scan",
        restore_per_page(&timer, Tracking::Scan),
    );
    let capture = report("capture_per_page", capture_per_page(&timer));
    let hash = report("hash_per_page", hash_per_page(&timer, PageHasher::Fold));
    report(
        "hash_per_page_siphash13",
        hash_per_page(&timer, PageHasher::Sip),
    );

    let sizes: [(&str, usize); 4] = [
        ("256B", 256),
        ("64KiB", 64 << 10),
        ("1MiB", 1 << 20),
        ("64MiB", 64 << 20),
    ];
    let mut t_1mib_prot = 0.0;
    let mut t_256_scan = 0.0;
    for (label, bytes) in sizes {
        for dirty in [1, 16] {
            if dirty > bytes.div_ceil(PAGE) {
                continue;
            }
            for (mode, tracking) in [("scan", Tracking::Scan), ("mprotect", Tracking::Mprotect)] {
                let t = report(
                    &format!("transition arena={label} dirty={dirty} mode={mode}"),
                    transition(&timer, bytes, dirty, tracking),
                );
                if label == "1MiB" && dirty == 1 && mode == "mprotect" {
                    t_1mib_prot = t;
                }
                if label == "256B" && dirty == 1 && mode == "scan" {
                    t_256_scan = t;
                }
            }
        }
    }
    let bound = 2.0 * (fault + restore + capture + hash);
    println!(
        "# transition arena=1MiB dirty=1 mode=mprotect = {t_1mib_prot:.0} ns; bound 2x(fault+restore+capture+hash) = {bound:.0} ns: {}",
        if t_1mib_prot <= bound { "within" } else { "EXCEEDED" }
    );
    println!(
        "# transition arena=256B dirty=1 mode=scan = {t_256_scan:.0} ns; bound 1000 ns: {}",
        if t_256_scan < 1000.0 {
            "within"
        } else {
            "EXCEEDED"
        }
    );
}
