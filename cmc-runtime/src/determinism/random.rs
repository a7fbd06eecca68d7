//! Controlled randomness: what a handler draws from `rand::thread_rng()`
//! (and so `rand::random()`) is a function of the state and the event being
//! run, so the same transition from the same state gives the same successor
//! in every run, in the determinism check and in replay, and randomized
//! code (a randomized election timeout) needs no pinning.
//!
//! rand 0.8's thread RNG is a ChaCha12 generator behind a reseeding
//! adapter, shared by every `ThreadRng` handle of the thread, which
//! reseeds itself from the operating system after a `fork` (rand counts
//! forks in a global, found here by name in the executable's symbol
//! table). cmc keeps the generator *pristine* between transitions: fresh,
//! its buffer empty, and the fork counter ahead of it, so its first use
//! reseeds it from the operating system — which, inside user code, is the
//! entropy cmc derives from the state's fingerprint and the event
//! ([`super::entropy`]). A transition that draws nothing costs nothing
//! more; one that draws leaves the generator used, and cmc makes it
//! pristine again before the next. When that cannot work (no fork counter
//! in a stripped binary, no interposed `syscall`), cmc installs a generator
//! seeded from the key before every transition instead. At setup cmc
//! verifies that the draws are what it expects; when they are not
//! (another rand version) randomness is left alone, and the determinism
//! check reports the handlers that draw.
//!
//! The keys of std's `RandomState` are controlled the same way: each new
//! `RandomState` (each new `HashMap`) takes its keys from a thread-local
//! cell and increments it, so a map built in a handler would get keys, and
//! an iteration order, that depend on how many maps the search built
//! before. cmc finds that cell in the executable's TLS block by what it
//! does (its words before and after a `RandomState::new()`, and the hash
//! that state gives) and sets it before each transition from the same seed.
//!
//! The operating system's random bytes (`OsRng`, `getrandom`) are seeded
//! from the same key: see [`super::entropy`].

use std::cell::{Cell, UnsafeCell};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::OnceLock;

use rand::rngs::adapter::ReseedingRng;
use rand::rngs::OsRng;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha12Core;

/// Whether transitions are seeded (on unless a benchmark measures the
/// cost).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Switches seeding off or on, to measure its cost (`tests/benches`);
/// with it off, draws and map orders depend on the search's history.
#[doc(hidden)]
pub fn set_enabled(on: bool) {
    ENABLED.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether transitions are seeded.
#[inline]
pub(crate) fn enabled() -> bool {
    ENABLED.load(std::sync::atomic::Ordering::Relaxed)
}

/// rand 0.8's thread RNG.
type Inner = ReseedingRng<ChaCha12Core, OsRng>;

/// The bytes it draws before it would reseed itself (rand's own value).
const THRESHOLD: u64 = 64 * 1024;

/// What setup found: rand's fork counter, if the thread RNG can be
/// controlled, and how.
struct Control {
    fork_counter: Option<&'static AtomicUsize>,
    /// Whether the thread RNG can be left to reseed itself, on its first
    /// use in a transition, from the entropy cmc serves user code
    /// (`determinism::entropy`): then a transition that draws nothing costs
    /// nothing.
    lazy: bool,
}

thread_local! {
    /// Whether this thread's RNG is pristine (lazy control): its buffer
    /// empty and its next use a reseed from cmc's entropy.
    static PRISTINE: Cell<bool> = const { Cell::new(false) };
}

/// Makes the thread RNG pristine: a fresh generator (its buffer empty)
/// that considers itself forked, so its first use reseeds it from the
/// operating system's entropy, which inside user code is cmc's.
///
/// The counter only ever grows here: a generator of another thread that
/// reseeded at count `n` is not disturbed, and a pristine one (which
/// counts none) always sees a fork.
fn install_pristine(control: &Control) -> bool {
    let Some(counter) = control.fork_counter else {
        return false;
    };
    counter.fetch_max(1, std::sync::atomic::Ordering::Relaxed);
    install([0; 32], control, false)
}

static CONTROL: OnceLock<Option<Control>> = OnceLock::new();

/// The thread RNG's generator, if its layout is rand 0.8's.
fn inner() -> Option<Rc<UnsafeCell<Inner>>> {
    let handle = rand::thread_rng();
    if size_of::<rand::rngs::ThreadRng>() != size_of::<Rc<UnsafeCell<Inner>>>() {
        return None;
    }
    // SAFETY: rand 0.8's `ThreadRng` is a struct of one field,
    // `Rc<UnsafeCell<ReseedingRng<ChaCha12Core, OsRng>>>` (same size, checked
    // above); a one-field struct has its field's layout. `setup` verifies
    // the result by drawing from it before cmc relies on it.
    Some(unsafe { std::mem::transmute::<rand::rngs::ThreadRng, Rc<UnsafeCell<Inner>>>(handle) })
}

/// Replaces the thread RNG by one seeded with `seed`; false when the RNG
/// cannot be controlled. A new generator counts no fork; it reseeds itself
/// on first use when rand's fork counter is above zero, so the eager
/// control clears the counter (which other threads' generators share).
fn install(seed: [u8; 32], control: &Control, clear_forks: bool) -> bool {
    let Some(rng) = inner() else { return false };
    if let (Some(counter), true) = (control.fork_counter, clear_forks) {
        counter.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    let fresh = ReseedingRng::new(ChaCha12Core::from_seed(seed), THRESHOLD, OsRng);
    // SAFETY: the generator is only used through `ThreadRng` handles on this
    // thread, none of which is inside a call now (no user code runs).
    unsafe { *rng.get() = fresh };
    true
}

/// Sets up the control of randomness now (see `engine::isolate::run_in_child`).
pub(crate) fn warm() {
    let _sys = crate::sys::scope::system_scope();
    let _ = control();
    KEYS_CELL.with(|c| {
        if c.get().is_none() {
            c.set(Some(find_keys_cell()));
        }
    });
}

fn control() -> Option<&'static Control> {
    CONTROL
        .get_or_init(|| {
            let _sys = crate::sys::scope::system_scope();
            let bias = crate::sys::layout::modules().exe_bias as usize;
            let fork_counter = crate::sys::symbols::lookup(
                "rand::rngs::adapter::reseeding::fork::RESEEDING_RNG_FORK_COUNTER",
            )
            .filter(|&(_, size)| size == size_of::<AtomicUsize>())
            // SAFETY: the symbol is rand's `static AtomicUsize` (its name
            // and size), at its load address.
            .map(|(value, _)| unsafe { &*((bias + value) as *const AtomicUsize) });
            let mut control = Control {
                fork_counter,
                lazy: false,
            };
            // Verify the lazy control: a draw in user code from a pristine
            // RNG is ChaCha12 seeded from the first 32 bytes of the
            // entropy stream of the key.
            let key = 0x636d_635f_6c61_7a79_5f63_6865_636b_2121;
            if install_pristine(&control) {
                super::entropy::set_key(key);
                let drawn = crate::sys::scope::as_user_code(|| rand::thread_rng().next_u64());
                let mut stream = rand_chacha::ChaCha12Rng::from_seed(super::entropy::seed_of(key));
                let mut core = [0u8; 32];
                stream.fill_bytes(&mut core);
                let expected = rand_chacha::ChaCha12Rng::from_seed(core).next_u64();
                control.lazy = drawn == Some(expected);
            }
            // Else verify the eager control: a draw is ChaCha12 from the
            // seed installed.
            let seed = [7u8; 32];
            let expected = rand_chacha::ChaCha12Rng::from_seed(seed).next_u64();
            let ok = control.lazy
                || (install(seed, &control, true) && rand::thread_rng().next_u64() == expected);
            ok.then_some(control)
        })
        .as_ref()
}

/// Where std's `RandomState` keys live in this thread: the address of the
/// `(k0, k1)` cell `RandomState::new` takes them from, and whether `k0` is
/// its first word.
#[derive(Clone, Copy)]
struct KeysCell {
    addr: usize,
    k0_first: bool,
}

thread_local! {
    /// This thread's keys cell: `None` until looked for.
    static KEYS_CELL: Cell<Option<Option<KeysCell>>> = const { Cell::new(None) };
}

/// The hash std's `RandomState` with keys `(k0, k1)` gives `x`
/// (`DefaultHasher` is SipHash-1-3).
fn std_hash(k0: u64, k1: u64, x: u64) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(k0, k1);
    h.write(&x.to_ne_bytes());
    h.finish()
}

/// Finds this thread's keys cell: a pair of words of the executable's TLS
/// block that a `RandomState::new()` took as its keys (the hash it gives
/// proves it) and left with `k0 + 1`.
fn find_keys_cell() -> Option<KeysCell> {
    let (start, end) = crate::sys::layout::exe_tls_block()?;
    let base = start.next_multiple_of(8);
    let words = (end & !7).saturating_sub(base) / 8;
    let read = || -> Vec<u64> {
        (0..words)
            // SAFETY: the words lie in this thread's TLS block, which is
            // mapped and readable, and are 8-aligned.
            .map(|i| unsafe { ((base + 8 * i) as *const u64).read_volatile() })
            .collect()
    };
    // The cell is initialized on first use.
    let _ = RandomState::new();
    const PROBE: u64 = 0x636d_635f_6b65_7973;
    let before = read();
    let probe = RandomState::new().hash_one(PROBE);
    let after = read();
    (0..words.saturating_sub(1)).find_map(|i| {
        [true, false].into_iter().find_map(|k0_first| {
            let (a, b) = if k0_first { (i, i + 1) } else { (i + 1, i) };
            let found = after[a] == before[a].wrapping_add(1)
                && after[b] == before[b]
                && std_hash(before[a], before[b], PROBE) == probe;
            found.then_some(KeysCell {
                addr: base + 8 * i,
                k0_first,
            })
        })
    })
}

/// Sets the keys the next `RandomState::new()` of this thread takes.
fn set_keys(cell: KeysCell, k0: u64, k1: u64) {
    let (first, second) = if cell.k0_first { (k0, k1) } else { (k1, k0) };
    let p = cell.addr as *mut u64;
    // SAFETY: `cell` is this thread's keys cell, found by its behaviour
    // (`find_keys_cell`); std touches it only inside `RandomState::new`,
    // which is not running: no reference to it is live.
    unsafe {
        p.write_volatile(first);
        p.add(1).write_volatile(second);
    }
}

/// The addresses of the words cmc sets before each transition in this
/// thread (std's keys cell, rand's fork counter), which user code then
/// changes by design.
pub(crate) fn controlled_words() -> Vec<usize> {
    let mut words = match KEYS_CELL.with(Cell::get).flatten() {
        Some(cell) => vec![cell.addr, cell.addr + 8],
        None => Vec::new(),
    };
    if let Some(counter) = CONTROL.get().and_then(|c| c.as_ref()?.fork_counter) {
        words.push(counter as *const AtomicUsize as usize);
    }
    words
}

thread_local! {
    /// What the last seeding set: the thread RNG's seed (when it is
    /// controlled) and the `k0` of std's keys, to tell whether the
    /// transition drew.
    static SEEDED: Cell<(Option<[u8; 32]>, u64)> = const { Cell::new((None, 0)) };
}

/// Whether user code drew randomness since the last [`seed_for`]: from the
/// thread RNG (which, under the lazy control, reseeds from the entropy on
/// first use; under the eager one, its next output is not the seed's
/// first), the operating system's entropy, or a new `RandomState`. Draws
/// from the thread RNG itself, which the next seeding replaces.
pub(crate) fn drew() -> bool {
    let _sys = crate::sys::scope::system_scope();
    let (seed, k0) = SEEDED.with(Cell::get);
    let keys = KEYS_CELL
        .with(Cell::get)
        .flatten()
        .is_some_and(|cell| get_k0(cell) != k0);
    let rng = seed.is_some_and(|seed| {
        rand_chacha::ChaCha12Rng::from_seed(seed).next_u64() != rand::thread_rng().next_u64()
    });
    keys || rng || super::entropy::drawn()
}

/// The `k0` the next `RandomState::new()` of this thread takes.
fn get_k0(cell: KeysCell) -> u64 {
    let p = cell.addr as *const u64;
    // SAFETY: as in `set_keys`; a read.
    unsafe {
        if cell.k0_first {
            p.read_volatile()
        } else {
            p.add(1).read_volatile()
        }
    }
}

/// Seeds the thread RNG and std's hash keys for a transition: `key`
/// identifies the state and the event. Runs before the user code.
pub(crate) fn seed_for(key: u128) {
    let _sys = crate::sys::scope::system_scope();
    let cell = KEYS_CELL.with(|c| {
        c.get().unwrap_or_else(|| {
            let found = find_keys_cell();
            c.set(Some(found));
            found
        })
    });
    let k = key ^ 0x636d_635f_7261_6e64_6f6d_5f6b_6579_7321;
    if let Some(cell) = cell {
        set_keys(cell, k as u64, (k >> 64) as u64);
    }
    // A transition that drew (or user code between transitions) used the
    // thread RNG: make it pristine again.
    // (Set up first: its verification draws with a key of its own.)
    let control = control();
    let drew_before = super::entropy::drawn();
    super::entropy::set_key(key);
    let mut eager = None;
    match control {
        Some(control) if control.lazy && (drew_before || !PRISTINE.with(Cell::get)) => {
            let pristine = install_pristine(control);
            PRISTINE.with(|p| p.set(pristine));
        }
        // Still pristine: nothing drew since it was made so.
        Some(control) if control.lazy => {}
        Some(control) => {
            let mut seed = [0u8; 32];
            seed[..16].copy_from_slice(&key.to_le_bytes());
            seed[16..].copy_from_slice(&(!key).rotate_left(17).to_le_bytes());
            eager = install(seed, control, true).then_some(seed);
        }
        None => {}
    }
    SEEDED.with(|s| s.set((eager, k as u64)));
}

/// Under symmetry reduction, what the draws of the current transition are
/// a function of: the pre-state's orbit and the event's image in it, and
/// then each choice the transition makes, up to a renaming of the
/// interchangeable processes (see `Engine::seed_key`). Then a state and
/// its image draw alike, as their successors must be images too.
struct Orbit {
    key: u128,
    /// The masked renaming: a message's hash under it names no process.
    masked: crate::identity::rename::Renaming,
    /// Each process's colour in the pre-state (renaming-invariant).
    colours: Vec<u128>,
}

thread_local! {
    static ORBIT: std::cell::RefCell<Option<Orbit>> = const { std::cell::RefCell::new(None) };
    /// Whether the transition's run made a choice by index (`cmc::choose`)
    /// under an orbit key: an index is not named up to renaming (the k-th
    /// peer of one state is not the k-th of its image), so what the run
    /// drew after it may differ between twins.
    static BY_INDEX: Cell<bool> = const { Cell::new(false) };
}

/// Whether the last run under an orbit key chose by index (see
/// `BY_INDEX`).
pub(crate) fn chose_by_index() -> bool {
    BY_INDEX.with(Cell::get)
}

/// Sets (or clears) the orbit key of the transition about to run; its
/// draws are seeded from `key` already ([`seed_for`]).
pub(crate) fn set_orbit(orbit: Option<(u128, crate::identity::rename::Renaming, Vec<u128>)>) {
    let _sys = crate::sys::scope::system_scope();
    if orbit.is_some() {
        BY_INDEX.with(|b| b.set(false));
    }
    ORBIT.with(|o| {
        *o.borrow_mut() = orbit.map(|(key, masked, colours)| Orbit {
            key,
            masked,
            colours,
        })
    });
}

/// A choice of the running transition was made: under symmetry
/// reduction, the draws after it are seeded from the orbit key and
/// `label` (given the masked renaming and the processes' colours: what
/// the choice picked, named up to a renaming). Nothing otherwise.
pub(crate) fn orbit_choice(
    by_index: bool,
    label: impl FnOnce(&crate::identity::rename::Renaming, &[u128]) -> u128,
) {
    let key = ORBIT.with(|o| {
        let mut o = o.borrow_mut();
        let o = o.as_mut()?;
        if by_index {
            BY_INDEX.with(|b| b.set(true));
        }
        let l = label(&o.masked, &o.colours);
        use crate::sys::hash::fmix64;
        let lo = fmix64(o.key as u64 ^ fmix64(l as u64));
        let hi = fmix64(((o.key >> 64) as u64).rotate_left(17) ^ fmix64((l >> 64) as u64) ^ lo);
        o.key = (u128::from(hi) << 64) | u128::from(lo);
        Some(o.key)
    });
    if let Some(key) = key {
        seed_for(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_cell_sets_what_the_next_random_state_takes() {
        let cell = find_keys_cell().expect("std's keys cell is found");
        set_keys(cell, 11, 22);
        assert_eq!(RandomState::new().hash_one(5u64), std_hash(11, 22, 5));
        assert_eq!(RandomState::new().hash_one(5u64), std_hash(12, 22, 5));
        set_keys(cell, 11, 22);
        let a: std::collections::HashSet<u32> = (0..64).collect();
        set_keys(cell, 11, 22);
        let b: std::collections::HashSet<u32> = (0..64).collect();
        assert!(a.iter().eq(b.iter()), "the same keys, the same order");
    }

    #[test]
    fn a_seed_fixes_the_thread_rng() {
        use rand::Rng;
        // Draws are controlled inside user code.
        let draw = |key| {
            seed_for(key);
            crate::sys::scope::as_user_code(|| rand::thread_rng().gen::<[u32; 4]>()).unwrap()
        };
        let (a, b, c) = (draw(42), draw(42), draw(43));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(
            control().is_some_and(|c| c.lazy),
            "the lazy control works here"
        );
        // A transition that draws nothing leaves the RNG pristine.
        seed_for(44);
        seed_for(42);
        assert_eq!(draw(42), a);
    }
}
