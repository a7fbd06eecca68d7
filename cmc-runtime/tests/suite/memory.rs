//! Snapshots, restores, fingerprints and tracking modes of `cmc::memory`,
//! through the real global allocator.

use std::alloc::Layout;

use cmc::memory::{ArenaId, FingerprintWidth, Memory, MemoryConfig, Mode, StateId};
use cmc::{ArenaConfig, Tracking};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn memory(tracking: Tracking, reserve: usize) -> (Memory, ArenaId) {
    let mut mem = Memory::new(MemoryConfig::default());
    let a = mem
        .add_arena(
            "process 0",
            ArenaConfig::new().reserve(reserve).tracking(tracking),
        )
        .unwrap();
    (mem, a)
}

/// The bytes of the arena as they are now, up to its used length.
fn live_bytes(mem: &Memory, a: ArenaId) -> Vec<u8> {
    let used = mem.used(a);
    // SAFETY: the first `used` bytes of an arena are committed and readable.
    unsafe { std::slice::from_raw_parts(mem.base(a), used) }.to_vec()
}

/// Whether `len` bytes after the used length are zero (the invariant that
/// makes growth deterministic).
fn zero_beyond_used(mem: &Memory, a: ArenaId, len: usize) -> bool {
    let used = mem.used(a);
    let committed_end = used.next_multiple_of(64 << 10);
    let len = len.min(committed_end - used);
    // SAFETY: committed memory extends at least to the next 64 KiB step.
    unsafe { std::slice::from_raw_parts(mem.base(a).add(used), len) }
        .iter()
        .all(|&b| b == 0)
}

/// A small model of user data kept outside the arena: the live blocks as
/// (offset, size), so two memories at different addresses can run the same
/// operations and hold byte-identical arenas.
#[derive(Clone, Debug, Default)]
struct Blocks(Vec<(usize, usize)>);

/// One random operation on the arena. Only the allocation, free or write
/// itself runs inside `enter`: the test's own bookkeeping (`blocks`) must stay
/// in checker memory, or it would be rolled back by restores.
fn random_op(mem: &Memory, a: ArenaId, blocks: &mut Blocks, rng: &mut SmallRng) {
    let base = mem.base(a) as usize;
    match rng.gen_range(0..10) {
        0..=2 => {
            let size = match rng.gen_range(0..4) {
                0 => rng.gen_range(1..64),
                1 => rng.gen_range(64..1024),
                2 => rng.gen_range(1024..10_000),
                _ => rng.gen_range(10_000..100_000),
            };
            let layout = Layout::from_size_align(size, 8).unwrap();
            let p = {
                let _in = mem.enter(a);
                // SAFETY: non-zero size.
                unsafe { std::alloc::alloc(layout) }
            };
            assert!(
                cmc::in_any_arena(p),
                "allocation inside enter() left the arena"
            );
            blocks.0.push((p as usize - base, size));
        }
        3 if !blocks.0.is_empty() => {
            let (off, size) = blocks.0.swap_remove(rng.gen_range(0..blocks.0.len()));
            let _in = mem.enter(a);
            // SAFETY: a live block of this arena with this layout.
            unsafe {
                std::alloc::dealloc(
                    (base + off) as *mut u8,
                    Layout::from_size_align(size, 8).unwrap(),
                )
            };
        }
        _ if !blocks.0.is_empty() => {
            let (off, size) = blocks.0[rng.gen_range(0..blocks.0.len())];
            let writes: Vec<(usize, u8)> = (0..rng.gen_range(1..8))
                .map(|_| (rng.gen_range(0..size), rng.gen()))
                .collect();
            let _in = mem.enter(a);
            for (at, byte) in writes {
                // SAFETY: inside a live block of this arena.
                unsafe { *((base + off + at) as *mut u8) = byte };
            }
        }
        _ => {}
    }
}

#[test]
fn restore_brings_back_exactly_the_captured_bytes() {
    for tracking in [Tracking::Scan, Tracking::Mprotect, Tracking::Auto] {
        let (mut mem, a) = memory(tracking, 64 << 20);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut states: Vec<(StateId, Blocks, Vec<u8>)> = Vec::new();
        let mut blocks = Blocks::default();
        let s0 = mem.capture();
        states.push((s0, blocks.clone(), live_bytes(&mem, a)));
        for step in 0..3000 {
            if rng.gen_ratio(1, 3) {
                let (s, b, bytes) = &states[rng.gen_range(0..states.len())];
                mem.restore(*s);
                blocks = b.clone();
                assert_eq!(
                    &live_bytes(&mem, a),
                    bytes,
                    "{tracking:?} step {step}: restore differs"
                );
                assert!(
                    zero_beyond_used(&mem, a, 1 << 20),
                    "{tracking:?} step {step}: garbage beyond used"
                );
            }
            random_op(&mem, a, &mut blocks, &mut rng);
            if rng.gen_ratio(1, 2) {
                let s = mem.capture();
                assert_eq!(mem.used_in(s, a), mem.used(a));
                states.push((s, blocks.clone(), live_bytes(&mem, a)));
            }
        }
        // Captured bytes can also be read without restoring.
        for (s, _, bytes) in &states {
            assert_eq!(
                &mem.read_state(*s, a),
                bytes,
                "{tracking:?}: read_state differs from the capture"
            );
        }
    }
}

#[test]
fn scan_and_mprotect_produce_identical_captures() {
    for seed in 0..4 {
        let (mut scan, a) = memory(Tracking::Scan, 64 << 20);
        let (mut prot, b) = memory(Tracking::Mprotect, 64 << 20);
        let mut rng_a = SmallRng::seed_from_u64(seed);
        let mut rng_b = SmallRng::seed_from_u64(seed);
        let mut shared = SmallRng::seed_from_u64(seed + 100);
        let (mut blocks_a, mut blocks_b) = (Blocks::default(), Blocks::default());
        let mut states = vec![(scan.capture(), prot.capture(), Blocks::default())];
        let mut first_with_a =
            std::collections::HashMap::from([(scan.fingerprint(states[0].0), 0)]);
        let mut first_with_b =
            std::collections::HashMap::from([(prot.fingerprint(states[0].1), 0)]);
        for step in 0..2000 {
            if shared.gen_ratio(1, 4) {
                let i = shared.gen_range(0..states.len());
                let (sa, sb, blocks) = states[i].clone();
                scan.restore(sa);
                prot.restore(sb);
                blocks_a = blocks.clone();
                blocks_b = blocks;
            }
            random_op(&scan, a, &mut blocks_a, &mut rng_a);
            random_op(&prot, b, &mut blocks_b, &mut rng_b);
            let (sa, sb) = (scan.capture(), prot.capture());
            assert_eq!(scan.mode(a), Mode::Scan);
            assert_eq!(prot.mode(b), Mode::Mprotect);
            let (x, y) = (scan.read_state(sa, a), prot.read_state(sb, b));
            let first_difference = x.iter().zip(&y).position(|(p, q)| p != q);
            assert!(
                x == y,
                "seed {seed} step {step}: captures differ (lengths {} and {}, first difference at {first_difference:?})",
                x.len(),
                y.len()
            );
            // The two arenas lie at different addresses, and a word that
            // equals an address of its own arena hashes as a pointer (an
            // integer such as the heap's free-list bitmap can equal the
            // first arena's base, 2^45): equal bytes need not have equal
            // fingerprints across the two memories. Each must tell the same
            // states apart: the first state with this fingerprint is the
            // same in both.
            let n = states.len();
            let first_a = *first_with_a.entry(scan.fingerprint(sa)).or_insert(n);
            let first_b = *first_with_b.entry(prot.fingerprint(sb)).or_insert(n);
            assert_eq!(
                first_a, first_b,
                "seed {seed} step {step}: the fingerprints tell different states apart"
            );
            states.push((sa, sb, blocks_a.clone()));
        }
    }
}

/// Transitions that keep writing the same few pages of a large arena in
/// mprotect mode (which a restore leaves writable, marked dirty, rather
/// than fault on them again), now and then another page or more pages
/// than stay writable, from restored states and from the state just
/// captured: every capture holds exactly the arena's bytes, and every
/// restore brings back exactly the captured ones, as the same steps in
/// scan mode do.
#[test]
fn pages_written_again_and_again_are_tracked_exactly_in_mprotect_mode() {
    const PAGES: usize = 256;
    for seed in 0..3 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut arenas = [Tracking::Mprotect, Tracking::Scan].map(|t| {
            let (mut mem, a) = memory(t, 64 << 20);
            let layout = Layout::from_size_align(PAGES * 4096, 4096).unwrap();
            let block = {
                let _in = mem.enter(a);
                // SAFETY: non-zero size.
                unsafe { std::alloc::alloc_zeroed(layout) }
            } as usize;
            let s0 = mem.capture();
            (mem, a, block, vec![s0])
        });
        let hot = [3usize, 4, 17, 90, 91, 200];
        for step in 0..3000 {
            let restore = rng
                .gen_ratio(1, 3)
                .then(|| rng.gen_range(0..arenas[0].3.len()));
            let writes: Vec<(usize, u8)> = (0..rng.gen_range(1..4))
                .map(|_| {
                    let page = match rng.gen_range(0..20) {
                        0 => rng.gen_range(0..PAGES),
                        // Now and then more pages than stay writable.
                        1 => (step * 7) % PAGES,
                        _ => hot[rng.gen_range(0..hot.len())],
                    };
                    // The low byte of a word: no word can come to look
                    // like a pointer into an arena (of one memory and not
                    // the other), which the fingerprints would relocate.
                    (page * 4096 + rng.gen_range(0..512) * 8, rng.gen())
                })
                .collect();
            let capture = rng.gen_ratio(3, 4);
            let mut seen = Vec::new();
            for (mem, a, block, states) in &mut arenas {
                if let Some(i) = restore {
                    mem.restore(states[i]);
                    let expected = mem.read_state(states[i], *a);
                    assert!(
                        live_bytes(mem, *a) == expected,
                        "seed {seed} step {step}: restore"
                    );
                }
                {
                    let _in = mem.enter(*a);
                    for &(at, byte) in &writes {
                        // SAFETY: inside the block, which lives in every
                        // state (allocated before the first capture).
                        unsafe { *((*block + at) as *mut u8) = byte };
                    }
                }
                if capture {
                    let s = mem.capture();
                    assert!(
                        mem.read_state(s, *a) == live_bytes(mem, *a),
                        "seed {seed} step {step}: capture"
                    );
                    seen.push(mem.fingerprint(s));
                    states.push(s);
                }
            }
            assert_eq!(arenas[0].0.mode(arenas[0].1), Mode::Mprotect);
            if let [x, y] = seen[..] {
                assert_eq!(x, y, "seed {seed} step {step}: the two modes disagree");
            }
        }
    }
}

/// A transition that allocates, frees and writes; returns the addresses it
/// allocated. The result is a plain array: a `Vec` built inside `enter` would
/// live in the arena and be freed later into a restored heap that no longer
/// has it.
fn transition(mem: &Memory, a: ArenaId, root: *mut Vec<Box<[u64]>>, k: u64) -> [usize; 8] {
    let _in = mem.enter(a);
    // SAFETY: `root` is the live root object of the restored arena.
    let v = unsafe { &mut *root };
    if v.len() > 3 {
        v.remove(1);
    }
    v.push(vec![k; 10 + k as usize].into_boxed_slice());
    let s = format!("transition {k}");
    let mut out = [0usize; 8];
    for (slot, b) in out.iter_mut().zip(v.iter()) {
        *slot = b.as_ptr() as usize;
    }
    out[7] = s.as_ptr() as usize;
    out
}

#[test]
fn rerunning_a_transition_gives_the_same_addresses_and_fingerprint() {
    for tracking in [Tracking::Scan, Tracking::Mprotect] {
        let (mut mem, a) = memory(tracking, 16 << 20);
        let root: *mut Vec<Box<[u64]>> = {
            let _in = mem.enter(a);
            Box::into_raw(Box::new(Vec::new()))
        };
        let mut s = mem.capture();
        for k in 0..20 {
            let first = transition(&mem, a, root, k);
            let s1 = mem.capture();
            mem.restore(s);
            cmc::scrub_stack(cmc::DEFAULT_SCRUB_BYTES);
            let second = transition(&mem, a, root, k);
            let s2 = mem.capture();
            assert_eq!(
                first, second,
                "{tracking:?}: addresses differ on re-run {k}"
            );
            assert_eq!(
                mem.fingerprint(s1),
                mem.fingerprint(s2),
                "{tracking:?}: fingerprint differs on re-run {k}"
            );
            mem.release(s1);
            mem.release(s);
            s = s2;
        }
    }
}

#[test]
fn equal_states_have_equal_fingerprints_and_different_ones_differ() {
    let (mut mem, a) = memory(Tracking::Auto, 16 << 20);
    let root: *mut Vec<u64> = {
        let _in = mem.enter(a);
        Box::into_raw(Box::new(vec![0; 1000]))
    };
    let s0 = mem.capture();
    let set = |mem: &Memory, i: usize, v: u64| {
        let _in = mem.enter(a);
        // SAFETY: the live root of the restored arena.
        unsafe { (&mut *root)[i] = v };
    };
    set(&mem, 10, 1);
    let s1 = mem.capture();
    set(&mem, 10, 0);
    let s2 = mem.capture();
    assert_eq!(
        mem.fingerprint(s0),
        mem.fingerprint(s2),
        "undoing a write must give the first fingerprint"
    );
    assert_ne!(mem.fingerprint(s0), mem.fingerprint(s1));
    // The same value in another place is another state.
    mem.restore(s0);
    set(&mem, 11, 1);
    let s3 = mem.capture();
    assert_ne!(mem.fingerprint(s1), mem.fingerprint(s3));
    // 128-bit fingerprints have a non-zero upper half.
    let mut wide = Memory::new(MemoryConfig::new().width(FingerprintWidth::Bits128));
    wide.add_arena("p", ArenaConfig::new().reserve(1 << 20))
        .unwrap();
    let w = wide.capture();
    assert_ne!(wide.fingerprint(w).0 >> 64, 0);
    assert_eq!(
        mem.fingerprint(s0).0 >> 64,
        0,
        "64-bit fingerprints keep 64 bits"
    );
}

#[test]
fn pages_are_shared_between_states_and_freed_with_them() {
    let (mut mem, a) = memory(Tracking::Mprotect, 64 << 20);
    let root: *mut Vec<u8> = {
        let _in = mem.enter(a);
        Box::into_raw(Box::new(vec![7u8; 1 << 20]))
    };
    let s0 = mem.capture();
    let base = mem.stats();
    let mut states = Vec::new();
    for k in 0..50 {
        mem.restore(s0);
        {
            let _in = mem.enter(a);
            // SAFETY: the live root of the restored arena.
            unsafe { (&mut *root)[k * 4096] = 1 };
        }
        states.push(mem.capture());
    }
    let stats = mem.stats();
    // 50 successors of a 1 MiB state, each differing in one page: about 50
    // new pages (plus the heap header page at most once per state), not 50 MiB.
    assert!(
        stats.pages <= base.pages + 2 * 50,
        "pages are not shared: {stats:?} vs {base:?}"
    );
    for s in states {
        mem.release(s);
    }
    mem.restore(s0);
    let after = mem.stats();
    assert_eq!(
        after.pages, base.pages,
        "pages of released states were not freed"
    );
    assert_eq!(after.states, 1);
}

#[test]
fn small_arenas_choose_scan_and_large_busy_ones_mprotect() {
    let (mut mem, a) = memory(Tracking::Auto, 256 << 20);
    let root: *mut Vec<u8> = {
        let _in = mem.enter(a);
        Box::into_raw(Box::new(vec![0u8; 100]))
    };
    let s0 = mem.capture();
    for _ in 0..3 {
        mem.restore(s0);
    }
    assert_eq!(mem.mode(a), Mode::Scan, "a 100-byte heap should be scanned");
    {
        let _in = mem.enter(a);
        // SAFETY: the live root.
        unsafe { (&mut *root).resize(32 << 20, 1) };
    }
    let big = mem.capture();
    for _ in 0..10 {
        mem.restore(big);
        {
            let _in = mem.enter(a);
            // SAFETY: the live root.
            unsafe { (&mut *root)[0] = 2 };
        }
        let s = mem.capture();
        mem.release(s);
    }
    mem.restore(big);
    assert_eq!(
        mem.mode(a),
        Mode::Mprotect,
        "a 32 MiB heap with one dirty page should use faults"
    );
}

#[test]
fn restore_rewrites_pages_above_a_top_that_shrank() {
    // A run that frees the heap's top block lowers the used length and
    // zeroes what it freed, above the new top: restoring the state before
    // must rewrite those pages too, in every tracking mode.
    for tracking in [Tracking::Scan, Tracking::Mprotect, Tracking::Auto] {
        let (mut mem, a) = memory(tracking, 64 << 20);
        let base = mem.base(a) as usize;
        let layout = Layout::from_size_align(3000, 8).unwrap();
        let fill = |v: u8| {
            let _in = mem.enter(a);
            // SAFETY: non-zero size; the block is ours to write.
            unsafe {
                let p = std::alloc::alloc(layout);
                std::ptr::write_bytes(p, v, layout.size());
                p as usize - base
            }
        };
        let mut top = fill(1);
        while mem.used(a) <= 4096 + 1000 {
            top = fill(2);
        }
        let s = mem.capture();
        let bytes = live_bytes(&mem, a);
        assert!(
            bytes.len() > 4096,
            "{tracking:?}: the state spans two pages ({})",
            bytes.len()
        );
        for _ in 0..3 {
            {
                let _in = mem.enter(a);
                // SAFETY: the live top block, allocated above with `layout`.
                unsafe { std::alloc::dealloc((base + top) as *mut u8, layout) };
            }
            assert!(
                mem.used(a) < bytes.len(),
                "{tracking:?}: freeing the top block lowers the top"
            );
            mem.restore(s);
            assert_eq!(live_bytes(&mem, a), bytes, "{tracking:?}: restore differs");
        }
    }
}

/// The bytes of every arena as they are now.
fn all_live(mem: &Memory, arenas: &[ArenaId]) -> Vec<Vec<u8>> {
    arenas.iter().map(|&a| live_bytes(mem, a)).collect()
}

#[test]
fn changes_names_exactly_the_arenas_that_differ_and_what_follows_it_is_exact() {
    for tracking in [Tracking::Scan, Tracking::Mprotect, Tracking::Auto] {
        let mut mem = Memory::new(MemoryConfig::default());
        let arenas: Vec<ArenaId> = (0..3)
            .map(|i| {
                mem.add_arena(
                    format!("process {i}"),
                    ArenaConfig::new().reserve(64 << 20).tracking(tracking),
                )
                .unwrap()
            })
            .collect();
        let mut rng = SmallRng::seed_from_u64(7);
        let mut blocks = vec![Blocks::default(); arenas.len()];
        let s0 = mem.capture();
        let mut states: Vec<(StateId, Vec<Blocks>, Vec<Vec<u8>>)> =
            vec![(s0, blocks.clone(), all_live(&mem, &arenas))];
        let (mut discarded, mut changed_seen, mut unchanged_seen) = (0, 0, 0);
        for step in 0..3000 {
            let loaded = mem.loaded().unwrap();
            // A transition: operations on up to two arenas, and sometimes a
            // write of a byte with the value it has (a page written but
            // not changed).
            for _ in 0..rng.gen_range(0..=2) {
                let a = rng.gen_range(0..arenas.len());
                random_op(&mem, arenas[a], &mut blocks[a], &mut rng);
            }
            let a = rng.gen_range(0..arenas.len());
            if rng.gen_ratio(1, 3) && !blocks[a].0.is_empty() {
                let (off, size) = blocks[a].0[rng.gen_range(0..blocks[a].0.len())];
                let at = (mem.base(arenas[a]) as usize + off + rng.gen_range(0..size)) as *mut u8;
                let _in = mem.enter(arenas[a]);
                // SAFETY: inside a live block of this arena.
                unsafe { at.write_volatile(at.read_volatile()) };
            }
            let expected: Vec<bool> = arenas
                .iter()
                .map(|&x| live_bytes(&mem, x) != mem.read_state(loaded, x))
                .collect();
            assert_eq!(
                mem.changes(),
                &expected[..],
                "{tracking:?} step {step}: changes() is wrong"
            );
            // Asking again without running anything gives the same answer.
            assert_eq!(mem.changes(), &expected[..]);
            changed_seen += expected.iter().filter(|&&c| c).count();
            unchanged_seen += expected.iter().filter(|&&c| !c).count();
            match rng.gen_range(0..3) {
                0 => {
                    let s = mem.capture();
                    let now = all_live(&mem, &arenas);
                    for (i, &x) in arenas.iter().enumerate() {
                        assert_eq!(
                            mem.read_state(s, x),
                            now[i],
                            "{tracking:?} step {step}: the capture after changes() differs"
                        );
                    }
                    states.push((s, blocks.clone(), now));
                }
                choice => {
                    // Discard the transition (restore what was loaded), or
                    // go to any state.
                    let target = if choice == 1 {
                        discarded += 1;
                        loaded
                    } else {
                        states[rng.gen_range(0..states.len())].0
                    };
                    mem.restore(target);
                    let (_, b, bytes) = states.iter().find(|(s, _, _)| *s == target).unwrap();
                    blocks = b.clone();
                    assert_eq!(
                        &all_live(&mem, &arenas),
                        bytes,
                        "{tracking:?} step {step}: the restore after changes() differs"
                    );
                    for &x in &arenas {
                        assert!(
                            zero_beyond_used(&mem, x, 1 << 20),
                            "{tracking:?} step {step}: garbage beyond used"
                        );
                    }
                }
            }
        }
        assert!(
            discarded > 500 && changed_seen > 500 && unchanged_seen > 500,
            "the test did not exercise both answers ({changed_seen} changed, \
             {unchanged_seen} unchanged, {discarded} discarded)"
        );
    }
}

fn two_arenas(config: MemoryConfig) -> (Memory, ArenaId, ArenaId) {
    let mut mem = Memory::new(config);
    let a = mem
        .add_arena("process 0", ArenaConfig::new().reserve(16 << 20))
        .unwrap();
    let b = mem
        .add_arena("process 1", ArenaConfig::new().reserve(16 << 20))
        .unwrap();
    (mem, a, b)
}

#[test]
fn a_derived_state_is_the_captured_one_it_was_built_from() {
    let (mut mem, a, b) = two_arenas(MemoryConfig::default());
    let mut rng = SmallRng::seed_from_u64(11);
    let (mut ba, mut bb) = (Blocks::default(), Blocks::default());
    for _ in 0..40 {
        random_op(&mem, a, &mut ba, &mut rng);
        random_op(&mem, b, &mut bb, &mut rng);
    }
    let s = mem.capture();
    let base = mem.stats();
    // A successor that changed only arena b.
    for _ in 0..20 {
        random_op(&mem, b, &mut bb, &mut rng);
    }
    let t = mem.capture();
    let want = all_live(&mem, &[a, b]);
    let kept = mem.table_of(t, b);
    mem.keep_table(kept);
    mem.restore(s);
    mem.release(t);
    assert_ne!(all_live(&mem, &[a, b]), want, "the successor differs");
    // Built from s and b's table, with t gone: the same contents.
    let d = mem.derive(s, &[(b, kept)]);
    assert_eq!(mem.table_of(d, a), mem.table_of(s, a));
    assert_eq!(mem.table_of(d, b), kept);
    mem.restore(d);
    assert_eq!(
        all_live(&mem, &[a, b]),
        want,
        "restoring it loads t's bytes"
    );
    let again = mem.capture();
    assert_eq!(
        mem.fingerprint(again),
        mem.fingerprint(d),
        "its fingerprint is a capture's"
    );
    assert_eq!(mem.isolated(d), mem.isolated(again));
    // References: the state's, the loaded state's, the table's own.
    mem.release(again);
    mem.release(d);
    mem.drop_table(kept);
    mem.restore(s);
    let after = mem.stats();
    assert_eq!(after.pages, base.pages, "everything only d used is freed");
    assert_eq!(after.tables, base.tables);
    assert_eq!(after.states, 1);
}

#[test]
fn a_state_is_isolated_until_an_arena_points_into_another() {
    let (mut mem, a, b) = two_arenas(MemoryConfig::default());
    let root: *mut Vec<usize> = {
        let _in = mem.enter(a);
        let mut v = Vec::with_capacity(4);
        v.push(0);
        Box::into_raw(Box::new(v))
    };
    let target: *mut u64 = {
        let _in = mem.enter(b);
        Box::into_raw(Box::new(7u64))
    };
    let set = |mem: &Memory, word: usize| {
        let _in = mem.enter(a);
        // SAFETY: the live root of arena a, whose vector has one element.
        unsafe { (&mut *root)[0] = word };
    };
    let s0 = mem.capture();
    assert!(mem.isolated(s0), "nothing points across arenas yet");
    set(&mem, target as usize);
    let s1 = mem.capture();
    assert!(!mem.isolated(s1), "process 0 now points into process 1");
    set(&mem, root as usize);
    let s2 = mem.capture();
    assert!(
        mem.isolated(s2),
        "a pointer into its own arena isolates nothing"
    );
    set(&mem, target as usize + 3);
    let s3 = mem.capture();
    assert!(!mem.isolated(s3), "an interior pointer counts");
    mem.restore(s1);
    assert!(
        !mem.isolated(s1) && mem.isolated(s2),
        "isolation belongs to the state"
    );
    set(&mem, 0);
    let s4 = mem.capture();
    assert!(mem.isolated(s4), "the pointer is gone again");
}

#[test]
fn changes_among_compares_only_what_it_is_told_and_verification_catches_a_wrong_list() {
    let (mut mem, a, b) = two_arenas(MemoryConfig::default());
    let in_b: *mut u64 = {
        let _in = mem.enter(b);
        Box::into_raw(Box::new(7u64))
    };
    let s0 = mem.capture();
    let write_b = |mem: &Memory, v: u64| {
        let _in = mem.enter(b);
        // SAFETY: a live object of arena b. Volatile: the box never
        // escapes as far as the compiler can see, so a plain store could
        // be moved past the calls that compare the arenas (a build of this
        // suite did so).
        unsafe { std::ptr::write_volatile(in_b, v) };
    };
    write_b(&mem, 8);
    if std::env::var_os("CMC_VERIFY_TOUCHED").is_none_or(|v| v != "1") {
        // (Verification, when the environment asks for it, would catch
        // this very call.)
        assert_eq!(
            mem.changes_among(&[a]),
            &[false, false],
            "b was not compared"
        );
    }
    assert_eq!(mem.changes_among(&[a, b]), &[false, true]);
    assert_eq!(mem.changes(), &[false, true]);
    mem.restore(s0);
    // SAFETY: a live object of arena b.
    let restored = unsafe { std::ptr::read_volatile(in_b) };
    assert_eq!(
        restored, 7,
        "the restore after changes_among undid the write"
    );

    let (mut mem, a, b) = two_arenas(MemoryConfig::default().verify_touched(true));
    let in_b: *mut u64 = {
        let _in = mem.enter(b);
        Box::into_raw(Box::new(7u64))
    };
    let _ = mem.capture();
    {
        let _in = mem.enter(b);
        // SAFETY: a live object of arena b.
        unsafe { std::ptr::write_volatile(in_b, 9) };
    }
    let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mem.changes_among(&[a]).to_vec()
    }));
    let message = wrong.expect_err("verification must catch the write to b");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("process 1 changed"),
        "unexpected message: {message}"
    );
}

/// The chunk-hash cache (remembering the hashes of chunks of a long run by
/// the pages that hold them) never changes a hash: over random writes,
/// captures, `changes` and restores, a large vector of numbers (by its
/// `StateHash`, which chunks it) and a large string (by `write`, which
/// chunks it too) hash the same with the cache on as with it off, and the
/// cache is used once warm.
#[test]
fn remembered_chunk_hashes_give_the_hashes_computed_afresh() {
    let (mut mem, a) = memory(Tracking::Auto, 64 << 20);
    // Elements larger than a page (a chunk over several pages), which are
    // long runs themselves (a run inside a run).
    type Block = [u32; 3000];
    let (numbers, text, blocks): (*mut Vec<u64>, *mut String, *mut Vec<Block>) = {
        let _in = mem.enter(a);
        (
            Box::into_raw(Box::new(vec![0u64; 40_000])),
            Box::into_raw(Box::new("x".repeat(50_000))),
            Box::into_raw(Box::new(vec![[0u32; 3000]; 4])),
        )
    };
    let hashes = move |mem: &Memory, cached: bool| {
        // SAFETY: the objects live in the arena for the whole test, and
        // nothing writes them while they are hashed.
        let (v, s, b) = unsafe { (&*numbers, &*text, &*blocks) };
        let h = || {
            (
                cmc::identity::fingerprint(v),
                cmc::identity::fingerprint(s),
                cmc::identity::fingerprint(b),
            )
        };
        if cached {
            cmc::__bench::with_hash_cache(mem, h)
        } else {
            h()
        }
    };
    let mut rng = SmallRng::seed_from_u64(11);
    let mut states: Vec<StateId> = vec![mem.capture()];
    let (mut hashed, mut found) = (0u64, 0u64);
    let mut distinct = std::collections::HashSet::new();
    for round in 0..400 {
        match rng.gen_range(0..4) {
            0 => {
                let s = states[rng.gen_range(0..states.len())];
                mem.restore(s);
            }
            _ => {
                let _in = mem.enter(a);
                // SAFETY: the objects live in the arena; no reference to
                // them is held across this write.
                unsafe {
                    let v = &mut *numbers;
                    let i = rng.gen_range(0..v.len());
                    v[i] = rng.gen_range(0..3);
                    if rng.gen_bool(0.3) {
                        let b = &mut *blocks;
                        let k = rng.gen_range(0..b.len());
                        b[k][rng.gen_range(0..3000)] = rng.gen_range(0..3);
                    }
                    if rng.gen_bool(0.3) {
                        let t = &mut *text;
                        let at = rng.gen_range(0..t.len());
                        t.replace_range(at..at + 1, if rng.gen() { "x" } else { "y" });
                    }
                }
            }
        }
        // Capture, or find the changes without capturing: either way the
        // memory knows which pages are unchanged. (With neither, it knows
        // nothing, and the cache is not used.)
        if round % 2 == 0 {
            states.push(mem.capture());
        } else {
            mem.changes();
        }
        let fresh = hashes(&mem, false);
        let before = cmc::__bench::hash_cache_counts();
        assert_eq!(
            hashes(&mem, true),
            fresh,
            "round {round}: the cache changed a hash"
        );
        assert_eq!(hashes(&mem, true), fresh, "round {round}: warm");
        let after = cmc::__bench::hash_cache_counts();
        hashed += after.0 - before.0;
        found += after.1 - before.1;
        distinct.insert(fresh);
    }
    assert!(distinct.len() > 50, "the writes changed the hashes");
    assert!(
        found > 2 * hashed,
        "the cache was used: {found} chunks found, {hashed} hashed"
    );
}

#[test]
fn a_transition_that_changes_a_few_bytes_stores_them_as_deltas() {
    // A 64 KiB block (16 pages); a transition writes one byte in each of
    // three pages (a different byte in each: equal pages would be one). Stored as deltas, the three new pages cost tens of
    // bytes, not 12 KiB; restores in both directions give the bytes back.
    for tracking in [Tracking::Scan, Tracking::Mprotect] {
        let (mut mem, a) = memory(tracking, 16 << 20);
        let layout = Layout::from_size_align(64 << 10, 8).unwrap();
        let p = {
            let _in = mem.enter(a);
            // SAFETY: non-zero size.
            unsafe { std::alloc::alloc_zeroed(layout) }
        };
        assert!(cmc::in_any_arena(p), "the block is in the arena");
        let s0 = mem.capture();
        let before = mem.stats();
        {
            let _in = mem.enter(a);
            for page in [1, 5, 9] {
                // SAFETY: inside the live 64 KiB block. Volatile, so that
                // the compiler cannot move the store past the capture.
                unsafe { std::ptr::write_volatile(p.add(page * 4096 + 17), page as u8) };
            }
        }
        let s1 = mem.capture();
        let after = mem.stats();
        assert_eq!(after.pages, before.pages + 3, "{tracking:?}");
        assert_eq!(after.delta_pages, before.delta_pages + 3, "{tracking:?}");
        assert!(
            after.page_bytes - before.page_bytes < 64,
            "{tracking:?}: three one-byte changes took {} bytes",
            after.page_bytes - before.page_bytes
        );
        let bytes1 = live_bytes(&mem, a);
        mem.restore(s0);
        let bytes0 = live_bytes(&mem, a);
        assert!(bytes0 != bytes1);
        // SAFETY: inside the live block.
        assert_eq!(unsafe { *p.add(5 * 4096 + 17) }, 0, "{tracking:?}");
        mem.restore(s1);
        assert_eq!(live_bytes(&mem, a), bytes1, "{tracking:?}");
        assert_eq!(mem.read_state(s0, a), bytes0, "{tracking:?}");
        // The base pages stay while the deltas need them.
        mem.restore(s1);
        mem.release(s0);
        assert_eq!(mem.read_state(s1, a), bytes1, "{tracking:?}");
    }
}

#[test]
fn imported_states_with_the_same_arena_contents_share_its_table() {
    // A stream of states that come and go (a, b, a, b, ...), each written
    // against the one before: read back, the states with the same
    // contents share one table, as captured ones share their parent's;
    // and each keeps its bytes and fingerprint.
    let (mut mem, a) = memory(Tracking::Mprotect, 64 << 20);
    let mut rng = SmallRng::seed_from_u64(5);
    let mut blocks = Blocks::default();
    let mut states = Vec::new();
    for _ in 0..2 {
        for _ in 0..20 {
            random_op(&mem, a, &mut blocks, &mut rng);
        }
        let s = mem.capture();
        states.push((s, live_bytes(&mem, a), mem.fingerprint(s)));
    }
    let mut stream = Vec::new();
    let mut prev = None;
    for k in 0..6 {
        let s = states[k % 2].0;
        mem.export(s, prev, &mut stream);
        prev = Some(s);
    }
    let mut at = 0;
    let mut prev = None;
    let mut back = Vec::new();
    for k in 0..6 {
        let s = mem.import(prev, &stream, &mut at);
        let (_, bytes, fp) = &states[k % 2];
        assert_eq!(mem.fingerprint(s), *fp, "state {k}: fingerprint");
        assert_eq!(&mem.read_state(s, a), bytes, "state {k}: bytes");
        back.push(s);
        prev = Some(s);
    }
    assert_eq!(at, stream.len());
    for k in 2..6 {
        assert_eq!(
            mem.table_of(back[k], a),
            mem.table_of(back[k - 2], a),
            "state {k} shares the table of state {}",
            k - 2
        );
    }
    assert_ne!(mem.table_of(back[0], a), mem.table_of(back[1], a));
    for s in back {
        mem.release(s);
    }
}

#[test]
fn states_exported_in_a_stream_come_back_with_their_bytes_and_fingerprints() {
    // Random states of one arena, written one after the other (each
    // against the one before) and released; read back in order, each has
    // the bytes and the fingerprint it had, and restores to them.
    for tracking in [Tracking::Scan, Tracking::Mprotect] {
        let (mut mem, a) = memory(tracking, 64 << 20);
        let mut rng = SmallRng::seed_from_u64(11);
        let mut blocks = Blocks::default();
        let mut states = Vec::new();
        for _ in 0..400 {
            for _ in 0..rng.gen_range(1..4) {
                random_op(&mem, a, &mut blocks, &mut rng);
            }
            let s = mem.capture();
            states.push((s, live_bytes(&mem, a), mem.fingerprint(s)));
            if rng.gen_ratio(1, 4) {
                // Siblings: back to an earlier state before the next run.
                let (s, _, _) = &states[rng.gen_range(0..states.len())];
                mem.restore(*s);
                blocks = Blocks::default();
            }
        }
        let mut stream = Vec::new();
        let mut prev = None;
        for (s, _, _) in &states {
            mem.export(*s, prev, &mut stream);
            prev = Some(*s);
        }
        let pages_before = mem.stats().pages;
        let initial = mem.capture();
        mem.restore(initial);
        for (s, _, _) in &states {
            mem.release(*s);
        }
        assert!(
            mem.stats().pages < pages_before,
            "{tracking:?}: nothing was freed"
        );
        let mut at = 0;
        let mut prev = None;
        let mut back = Vec::new();
        for (_, bytes, fp) in &states {
            let s = mem.import(prev, &stream, &mut at);
            assert_eq!(mem.fingerprint(s), *fp, "{tracking:?}: fingerprint");
            assert_eq!(&mem.read_state(s, a), bytes, "{tracking:?}: bytes");
            if let Some(p) = prev {
                back.push(p);
            }
            prev = Some(s);
        }
        assert_eq!(at, stream.len(), "{tracking:?}: the stream read to its end");
        back.extend(prev);
        for (s, (_, bytes, _)) in back.iter().zip(&states).rev() {
            mem.restore(*s);
            assert_eq!(&live_bytes(&mem, a), bytes, "{tracking:?}: restore");
        }
        println!(
            "{tracking:?}: {} states in {} bytes",
            states.len(),
            stream.len()
        );
    }
}
