//! `cmc::Allocator` routing: arenas while entered, the system elsewhere,
//! frees by address, exhaustion reported instead of crashing.

use cmc::memory::{ArenaId, Memory, MemoryConfig};
use cmc::{in_any_arena, ArenaConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn two_arenas() -> (Memory, ArenaId, ArenaId) {
    let mut mem = Memory::new(MemoryConfig::default());
    let a = mem
        .add_arena("process 0", ArenaConfig::new().reserve(16 << 20))
        .unwrap();
    let b = mem
        .add_arena("process 1", ArenaConfig::new().reserve(16 << 20))
        .unwrap();
    (mem, a, b)
}

fn inside(mem: &Memory, arena: ArenaId, p: *const u8) -> bool {
    let base = mem.base(arena) as usize;
    (p as usize) >= base && (p as usize) < base + (16 << 20)
}

#[test]
fn allocations_go_to_the_entered_arena_and_nowhere_else() {
    let (mem, a, b) = two_arenas();
    let outside = Box::new(1u64);
    assert!(!in_any_arena(&*outside as *const u64 as *const u8));
    let (in_a, in_b) = {
        let _a = mem.enter(a);
        let x = Box::new(2u64);
        let y = {
            let _b = mem.enter(b);
            Box::new(3u64)
        };
        // Leaving b's scope returns to a.
        let z = Box::new(4u64);
        assert!(inside(&mem, a, &*z as *const u64 as *const u8));
        std::mem::forget(z);
        (Box::into_raw(x), Box::into_raw(y))
    };
    assert!(inside(&mem, a, in_a as *const u8));
    assert!(inside(&mem, b, in_b as *const u8));
    let after = Box::new(5u64);
    assert!(
        !in_any_arena(&*after as *const u64 as *const u8),
        "allocation after leave went to an arena"
    );
}

#[test]
fn frees_and_reallocs_are_routed_by_address() {
    let (mem, a, b) = two_arenas();
    let before_a = mem.heap_stats(a);
    let (boxed, mut grown) = {
        let _a = mem.enter(a);
        (Box::new([7u8; 100]), vec![1u32; 10])
    };
    // Observed, so the compiler cannot elide the allocation and its free.
    std::hint::black_box((&boxed, &grown));
    assert_eq!(mem.heap_stats(a).live_blocks, before_a.live_blocks + 2);
    let before_b = mem.heap_stats(b);
    {
        // An object of arena a freed, and another grown, while b is current:
        // both stay in a, and b is untouched.
        let _b = mem.enter(b);
        drop(boxed);
        grown.extend(0..10_000);
    }
    assert!(
        inside(&mem, a, grown.as_ptr() as *const u8),
        "realloc moved an object out of its arena"
    );
    assert_eq!(mem.heap_stats(a).live_blocks, before_a.live_blocks + 1);
    assert_eq!(
        mem.heap_stats(b),
        before_b,
        "arena b changed by operations on a's objects"
    );
    // Freed by the checker (no arena current): still returns to a.
    drop(grown);
    assert_eq!(mem.heap_stats(a).live_blocks, before_a.live_blocks);
    // A system object freed while an arena is current goes to the system.
    let sys = vec![0u8; 1000];
    {
        let _a = mem.enter(a);
        drop(sys);
    }
    assert_eq!(mem.heap_stats(a).live_blocks, before_a.live_blocks);
}

#[test]
fn other_threads_allocate_from_the_system_while_an_arena_is_current() {
    let (mem, a, _) = two_arenas();
    let _a = mem.enter(a);
    let mine = Box::new(1u8);
    assert!(inside(&mem, a, &*mine as *const u8));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut addrs = Vec::new();
                for i in 0..1000 {
                    let v = vec![t as u8; 1 + i % 300];
                    addrs.push(v.as_ptr() as usize);
                    assert!(
                        !in_any_arena(v.as_ptr()),
                        "thread {t} allocated in an arena"
                    );
                }
                addrs.len()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 1000);
    }
}

#[test]
fn the_allocator_matches_a_reference_under_random_use() {
    // Random Vec/String/Box churn inside an arena, mirrored by the same
    // operations on plain values in system memory: contents always agree, and
    // the heap stays consistent.
    let mut mem = Memory::new(MemoryConfig::default());
    let a = mem
        .add_arena("process 0", ArenaConfig::new().reserve(1 << 30))
        .unwrap();
    let inside = |_: &Memory, _: ArenaId, p: *const u8| in_any_arena(p);
    let mut rng = SmallRng::seed_from_u64(3);
    let mut arena_side: Vec<Vec<u8>> = Vec::new();
    let mut reference: Vec<Vec<u8>> = Vec::new();
    for step in 0..100_000 {
        // Pushes and removals are equally likely, so the heap stays bounded.
        let op = rng.gen_range(1..7);
        let idx = if reference.is_empty() {
            0
        } else {
            rng.gen_range(0..reference.len())
        };
        let byte: u8 = rng.gen();
        let len = match rng.gen_range(0..10) {
            0 => rng.gen_range(4096..40_000),
            _ => rng.gen_range(0..300),
        };
        {
            let _a = mem.enter(a);
            match op {
                0 | 1 => arena_side.push(vec![byte; len]),
                2 if !arena_side.is_empty() => drop(arena_side.swap_remove(idx)),
                3 if !arena_side.is_empty() => arena_side[idx].resize(len, byte),
                4 if !arena_side.is_empty() => arena_side[idx].shrink_to_fit(),
                _ if !arena_side.is_empty() => {
                    arena_side[idx].extend(std::iter::repeat_n(byte, len % 64))
                }
                _ => {}
            }
        }
        match op {
            0 | 1 => reference.push(vec![byte; len]),
            2 if !reference.is_empty() => drop(reference.swap_remove(idx)),
            3 if !reference.is_empty() => reference[idx].resize(len, byte),
            4 if !reference.is_empty() => reference[idx].shrink_to_fit(),
            _ if !reference.is_empty() => {
                reference[idx].extend(std::iter::repeat_n(byte, len % 64))
            }
            _ => {}
        }
        if step % 1000 == 0 {
            assert_eq!(arena_side, reference, "contents diverged at step {step}");
            mem.check_heap(a)
                .unwrap_or_else(|e| panic!("heap inconsistent at step {step}: {e}"));
            for v in arena_side.iter().filter(|v| v.capacity() > 0) {
                assert!(inside(&mem, a, v.as_ptr()), "a vector left the arena");
            }
        }
    }
    assert_eq!(arena_side, reference);
    assert_eq!(mem.take_exhaustion(), None);
    let _a = mem.enter(a);
    arena_side.clear();
    drop(arena_side);
    drop(_a);
    assert_eq!(
        mem.heap_stats(a).live_blocks,
        0,
        "blocks leaked after freeing everything"
    );
}

#[test]
fn an_exhausted_arena_is_reported_not_a_crash() {
    let mut mem = Memory::new(MemoryConfig::default());
    let p = mem
        .add_arena("process 2", ArenaConfig::new().reserve(1 << 20))
        .unwrap();
    assert_eq!(mem.take_exhaustion(), None);
    let big = {
        let _p = mem.enter(p);
        vec![9u8; 2 << 20]
    };
    // The allocation succeeded (from system memory, so the handler could run
    // to its end) and the arena recorded the error for the engine.
    assert!(big.iter().all(|&b| b == 9));
    assert!(!in_any_arena(big.as_ptr()));
    let err = mem.take_exhaustion().expect("exhaustion recorded");
    assert_eq!(
        err.to_string(),
        "process 2's arena exceeded 1 MiB (an allocation of 2097152 bytes did not fit)"
    );
    assert_eq!(mem.take_exhaustion(), None, "the record is taken once");
    drop(big);
    // Growing an arena vector past the limit moves it out, recorded too.
    let mut v = {
        let _p = mem.enter(p);
        vec![1u8; 1000]
    };
    assert!(in_any_arena(v.as_ptr()));
    {
        let _p = mem.enter(p);
        v.resize(3 << 20, 2);
    }
    assert!(!in_any_arena(v.as_ptr()));
    assert_eq!(v[999], 1);
    assert_eq!(v[1000], 2);
    assert!(mem.take_exhaustion().is_some());
    // The arena still works for allocations that fit.
    let small = {
        let _p = mem.enter(p);
        Box::new(5u32)
    };
    assert!(in_any_arena(&*small as *const u32 as *const u8));
}

#[test]
fn reservations_below_the_minimum_are_refused_with_a_message() {
    let mut mem = Memory::new(MemoryConfig::default());
    let err = mem
        .add_arena("process 0", ArenaConfig::new().reserve(4096))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "process 0's arena reservation of 4 KiB is below the minimum of 64 KiB"
    );
}

#[test]
fn live_blocks_and_interior_pointers_are_found() {
    let (mem, a, _) = two_arenas();
    let (x, y) = {
        let _a = mem.enter(a);
        (Box::new([1u64; 8]), vec![2u8; 5000])
    };
    let blocks = mem.live_blocks(a);
    let xp = &*x as *const [u64; 8] as *mut u8;
    assert!(
        blocks.iter().any(|&(p, len)| p == xp && len >= 64),
        "{blocks:?}"
    );
    assert!(blocks
        .iter()
        .any(|&(p, len)| std::ptr::eq(p, y.as_ptr()) && len >= 5000));
    // SAFETY: pointers into the middle and to the last byte of live blocks.
    let (mid, last) = unsafe { (xp.add(20), y.as_ptr().add(4999)) };
    assert_eq!(mem.block_containing(a, mid).map(|b| b.0), Some(xp));
    assert_eq!(
        mem.block_containing(a, last).map(|b| b.0),
        Some(y.as_ptr() as *mut u8)
    );
    drop(x);
    assert_eq!(
        mem.block_containing(a, mid),
        None,
        "a freed block is not live"
    );
    mem.check_heap(a).unwrap();
}
