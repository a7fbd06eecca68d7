//! Arenas: fixed reservations of address space that hold one process's heap
//! each, and the global registry the allocator and the fault handler use to
//! find the arena an address belongs to.
//!
//! An arena's *control block* ([`ArenaCtl`]) lives in checker memory (the
//! system allocator), never inside the arena, because restoring the arena's
//! pages must not roll back the dirty bitmap or the exhaustion record.

use std::alloc::Layout;
use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

use crate::memory::heap::{Backing, Heap, HEADER_SIZE};
use crate::sys::{self, Prot, PAGE};

/// The default reservation of an arena: 256 MiB of address space. It costs
/// nothing until used (pages are committed as the heap grows); it bounds how
/// far one process's heap may grow before cmc reports arena exhaustion.
pub const DEFAULT_RESERVE: usize = 256 << 20;

/// The smallest reservation cmc accepts (the heap header must fit, and a
/// usable heap needs room to grow).
pub const MIN_RESERVE: usize = 64 << 10;

/// Arenas are placed at fixed addresses from here on, in creation order, so
/// that a program creating the same arenas in the same order gets the same
/// addresses in every run: pointers stored in a state, and therefore its
/// fingerprint, are then reproducible across runs (a replayed trace checks
/// them). The region between 32 TiB and 96 TiB is far from where Linux puts
/// the executable, the brk heap and mmap regions.
const FIXED_START: usize = 0x2000_0000_0000;
const FIXED_END: usize = 0x6000_0000_0000;
/// Each arena's fixed address is aligned to this, so that over-aligned
/// allocations land at the same offsets in every arena.
const FIXED_ALIGN: usize = 1 << 30;
static NEXT_FIXED: AtomicUsize = AtomicUsize::new(FIXED_START);

/// Reserves an arena's address space: at the next fixed address when it is
/// free, otherwise wherever the kernel chooses (fingerprints of states that
/// hold pointers are then still correct within the run, but not reproducible
/// across runs).
fn reserve_arena(reserve: usize) -> io::Result<*mut u8> {
    let stride = reserve.next_multiple_of(FIXED_ALIGN);
    let at = NEXT_FIXED.fetch_add(stride, Ordering::Relaxed);
    if at + stride <= FIXED_END {
        if let Ok(p) = sys::reserve_at(at, reserve) {
            return Ok(p);
        }
    }
    sys::reserve(reserve)
}

/// Committed memory grows in steps of this size, so a growing heap does not
/// call `mprotect` for every page.
const COMMIT_STEP: usize = 64 << 10;

/// How the runtime finds the pages a transition wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tracking {
    /// Pick per arena and per transition, from the arena's size and the
    /// number of pages recent transitions dirtied (the default).
    #[default]
    Auto,
    /// Compare every used page with the loaded state after the transition:
    /// cheapest for small arenas (about 0.05 µs per page).
    Scan,
    /// Write-protect the pages and record the first write to each with a
    /// fault (about 9 µs per written page, nothing per clean page).
    Mprotect,
}

/// The configuration of one arena.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ArenaConfig {
    /// Bytes of address space reserved (rounded up to whole pages).
    pub reserve: usize,
    /// How writes are tracked.
    pub tracking: Tracking,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig {
            reserve: DEFAULT_RESERVE,
            tracking: Tracking::Auto,
        }
    }
}

impl ArenaConfig {
    /// The default configuration: [`DEFAULT_RESERVE`] bytes, automatic tracking.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the reservation in bytes.
    pub fn reserve(mut self, bytes: usize) -> Self {
        self.reserve = bytes;
        self
    }

    /// Sets the write-tracking mode.
    pub fn tracking(mut self, tracking: Tracking) -> Self {
        self.tracking = tracking;
        self
    }
}

/// An arena ran out of its reservation: the model's error, reported by the
/// engine with the arena's name, e.g. "process 2's arena exceeded 256 MiB".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaExhausted {
    /// The arena's name, e.g. "process 2" or "environment".
    pub arena: String,
    /// Its reservation in bytes.
    pub reserve: usize,
    /// The size of the allocation request that did not fit.
    pub request: usize,
}

impl fmt::Display for ArenaExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}'s arena exceeded {} (an allocation of {} bytes did not fit)",
            self.arena,
            human_bytes(self.reserve),
            self.request
        )
    }
}

/// Formats a byte count the way a user configured it: "256 MiB", "64 KiB".
pub(crate) fn human_bytes(n: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

/// The state of an arena that must survive restores, shared with the
/// allocator and the fault handler. It is boxed and never moves while
/// registered.
#[derive(Debug)]
pub(crate) struct ArenaCtl {
    pub(crate) base: NonNull<u8>,
    pub(crate) reserve: usize,
    pub(crate) committed: AtomicUsize,
    /// Serialises heap operations: process code runs on one thread, but a
    /// checker thread could free an object of this arena concurrently.
    lock: AtomicBool,
    /// When set, write faults inside the committed range are ours.
    pub(crate) tracking: AtomicBool,
    /// One bit per page of the reservation: written since the last protect.
    pub(crate) dirty_bits: Box<[AtomicU64]>,
    /// The pages whose bit is set, in fault order.
    pub(crate) dirty_list: Box<[AtomicU32]>,
    pub(crate) dirty_len: AtomicUsize,
    /// The size of the first request that did not fit, or 0.
    exhausted: AtomicUsize,
    /// Set when a thread of user code that outlived its handler may still
    /// use the arena (`crate::memory::threads`): dropping the arena then keeps its
    /// memory mapped and registered, and this block alive.
    abandoned: AtomicBool,
    pub(crate) name: String,
}

// SAFETY: every field is either immutable after construction (`base`,
// `reserve`, `name`) or atomic; the arena memory `base` points to is accessed
// only under `lock` (heap operations) or through the snapshot layer, which
// the engine drives from one thread.
unsafe impl Sync for ArenaCtl {}
// SAFETY: as above; the control block owns nothing tied to a thread.
unsafe impl Send for ArenaCtl {}

impl ArenaCtl {
    pub(crate) fn heap(&self) -> Heap {
        // SAFETY: `Arena::new` initialised the heap at `base` before the
        // control block became reachable.
        unsafe { Heap::attach(self.base.as_ptr()) }
    }

    fn lock(&self) -> LockGuard<'_> {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        LockGuard(self)
    }

    /// Marks the arena as still used by a thread the checker let go of:
    /// it outlives its owner (see `Drop for Arena`).
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
    }

    fn note_exhausted(&self, request: usize) {
        // Keep the first request: it is the one the report should name.
        let _ = self.exhausted.compare_exchange(
            0,
            request.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    pub(crate) fn take_exhausted(&self) -> Option<ArenaExhausted> {
        // A plain load first: the swap is a locked instruction, and this
        // runs for every arena after every transition.
        if self.exhausted.load(Ordering::Relaxed) == 0 {
            return None;
        }
        match self.exhausted.swap(0, Ordering::Relaxed) {
            0 => None,
            request => Some(ArenaExhausted {
                arena: self.name.clone(),
                reserve: self.reserve,
                request,
            }),
        }
    }

    /// Allocates in this arena; on exhaustion records the request and returns
    /// null.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    pub(crate) unsafe fn alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let _guard = self.lock();
        let heap = self.heap();
        // SAFETY: the lock serialises heap access; the layout is the caller's.
        let p = unsafe {
            if zeroed {
                heap.alloc_zeroed(layout, self)
            } else {
                heap.alloc(layout, self)
            }
        };
        if p.is_null() {
            self.note_exhausted(layout.size());
        }
        p
    }

    /// # Safety
    /// `ptr` was allocated in this arena with `layout` and not freed.
    pub(crate) unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _guard = self.lock();
        // SAFETY: the caller's contract; the lock serialises heap access.
        unsafe { self.heap().dealloc(ptr, layout) }
    }

    /// Reallocates within this arena; on exhaustion records the request and
    /// returns null, leaving the old block intact.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`, for a block of this arena.
    pub(crate) unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _guard = self.lock();
        // SAFETY: the caller's contract; the lock serialises heap access.
        let p = unsafe { self.heap().realloc(ptr, layout, new_size, self) };
        if p.is_null() {
            self.note_exhausted(new_size);
        }
        p
    }
}

struct LockGuard<'a>(&'a ArenaCtl);

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        self.0.lock.store(false, Ordering::Release);
    }
}

impl Backing for ArenaCtl {
    fn ensure_committed(&self, end: usize) -> bool {
        let committed = self.committed.load(Ordering::Acquire);
        if end <= committed {
            return true;
        }
        if end > self.reserve {
            return false;
        }
        let new = end.next_multiple_of(COMMIT_STEP).min(self.reserve);
        // SAFETY: [committed, new) is page-aligned (COMMIT_STEP and the
        // reservation are multiples of PAGE) and inside our reservation.
        let ok = unsafe {
            sys::protect(
                self.base.as_ptr().add(committed),
                new - committed,
                Prot::ReadWrite,
            )
            .is_ok()
        };
        if ok {
            self.committed.store(new, Ordering::Release);
            note_taken(new - committed);
        }
        ok
    }
}

/// Memory taken by this process since it started, in bytes: the pages
/// arenas committed, and every system allocation of at least
/// [`LARGE`](crate::memory::alloc::LARGE) bytes (a large allocation can take what thousands of
/// transitions take). Never lowered by a free: it is the trigger of a
/// reading of the resident memory (the search reads it whenever this
/// grew by a 64th of the budget), not a measure of it.
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// Memory taken since the process started (see [`TAKEN`]).
#[inline]
pub(crate) fn taken() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

/// Counts `bytes` as taken (see [`TAKEN`]).
#[inline]
pub(crate) fn note_taken(bytes: usize) {
    TAKEN.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// The most arenas that can exist at once in one process.
pub(crate) const MAX_ARENAS: usize = 256;

/// A registered arena. Lookups (the allocator's frees, the fault handler)
/// run on every thread and never lock, while other threads register and
/// drop arenas; the three fields are therefore written under a sequence
/// lock: `seq` is odd while a writer changes them, and a reader that saw
/// a match accepts it only if `seq` was even and unchanged around its
/// reads. Without it a lookup could pair one arena's base with another's
/// end (a slot being re-registered: base still 0, end already the new
/// arena's) and route a free to the wrong heap.
struct Slot {
    /// Whether an arena owns the slot (taken before `seq` is written).
    claimed: AtomicBool,
    seq: AtomicUsize,
    base: AtomicUsize,
    end: AtomicUsize,
    ctl: AtomicPtr<ArenaCtl>,
}

impl Slot {
    /// Writes the slot's fields under the sequence lock. Only the slot's
    /// owner (who claimed it) writes, so writers never race each other.
    fn write(&self, base: usize, end: usize, ctl: *mut ArenaCtl) {
        let s = self.seq.load(Ordering::Relaxed);
        assert!(s % 2 == 0, "cmc: two writers on one arena slot");
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.base.store(base, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.ctl.store(ctl, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }

    /// The slot's arena if it holds `addr` in a consistent reading.
    #[inline]
    fn lookup(&self, addr: usize) -> Option<*mut ArenaCtl> {
        let s1 = self.seq.load(Ordering::Acquire);
        let base = self.base.load(Ordering::Relaxed);
        #[cfg(test)]
        tests::widen_race_window();
        let end = self.end.load(Ordering::Relaxed);
        if addr < base || addr >= end {
            return None;
        }
        let ctl = self.ctl.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        // A slot that changes during the reading is being registered (its
        // arena is not in use yet) or dropped (its arena is not in use any
        // more): an address in use never belongs to it.
        (s1 == s2 && s1 % 2 == 0 && !ctl.is_null()).then_some(ctl)
    }
}

#[allow(
    clippy::declare_interior_mutable_const,
    reason = "used only to initialise the static array"
)]
const EMPTY_SLOT: Slot = Slot {
    claimed: AtomicBool::new(false),
    seq: AtomicUsize::new(0),
    base: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    ctl: AtomicPtr::new(std::ptr::null_mut()),
};

/// The registered arenas. Lookups read only atomics and never lock, so the
/// allocator and the signal handler can use them.
static SLOTS: [Slot; MAX_ARENAS] = [EMPTY_SLOT; MAX_ARENAS];
/// One past the highest slot ever used: lookups scan only this prefix.
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);
/// Bounds of all registered arenas, for a quick rejection of the (frequent)
/// addresses that belong to the system allocator.
static LOW: AtomicUsize = AtomicUsize::new(usize::MAX);
static HIGH: AtomicUsize = AtomicUsize::new(0);

/// `[low, high)`: every registered arena lies inside.
pub(crate) fn bounds() -> (usize, usize) {
    (LOW.load(Ordering::Relaxed), HIGH.load(Ordering::Relaxed))
}

/// Whether `addr` is a word of the arena registry itself (which holds arena
/// addresses by design), for the scan of globals.
pub(crate) fn is_registry(addr: usize) -> bool {
    let within = |start: usize, len: usize| addr >= start && addr < start + len;
    within(SLOTS.as_ptr() as usize, size_of_val(&SLOTS))
        || within(&LOW as *const _ as usize, size_of_val(&LOW))
        || within(&HIGH as *const _ as usize, size_of_val(&HIGH))
        || within(&NEXT_FIXED as *const _ as usize, size_of_val(&NEXT_FIXED))
}

/// The arena containing `addr`, if any. Async-signal-safe: atomics only.
#[inline]
pub(crate) fn find(addr: usize) -> Option<&'static ArenaCtl> {
    if addr < LOW.load(Ordering::Relaxed) || addr >= HIGH.load(Ordering::Relaxed) {
        return None;
    }
    let used = SLOTS_USED.load(Ordering::Acquire);
    for slot in &SLOTS[..used] {
        if let Some(ctl) = slot.lookup(addr) {
            // SAFETY: a registered control block stays alive until
            // `Arena::drop` clears the slot; an address inside the arena
            // can only be used while the arena is alive.
            return Some(unsafe { &*ctl });
        }
    }
    None
}

/// In a child forked from the checker: frees every arena's lock. Only the
/// forking thread came along, and it holds none (it forks outside heap
/// operations); a lock held at the fork belonged to a thread of user code
/// left behind in an abandoned arena (`crate::memory::threads`), whose heap the
/// child restores from a snapshot before it allocates there.
pub(crate) fn after_fork_in_child() {
    for slot in &SLOTS[..SLOTS_USED.load(Ordering::Acquire)] {
        let ctl = slot.ctl.load(Ordering::Acquire);
        if !ctl.is_null() {
            // SAFETY: a registered control block is alive (see `find`).
            unsafe { (*ctl).lock.store(false, Ordering::Release) };
        }
    }
}

/// An arena: owns the reservation and its registration.
#[derive(Debug)]
pub(crate) struct Arena {
    /// Dropped with the arena, unless the arena was abandoned.
    ctl: ManuallyDrop<Box<ArenaCtl>>,
    slot: usize,
}

impl Arena {
    /// Reserves and initialises an arena.
    pub(crate) fn new(name: String, config: &ArenaConfig) -> io::Result<Arena> {
        sys::check_page_size();
        let reserve = config.reserve.next_multiple_of(PAGE);
        if reserve < MIN_RESERVE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{name}'s arena reservation of {} is below the minimum of {}",
                    human_bytes(config.reserve),
                    human_bytes(MIN_RESERVE)
                ),
            ));
        }
        let base = reserve_arena(reserve).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot reserve {} for {name}'s arena: {e}",
                    human_bytes(reserve)
                ),
            )
        })?;
        let pages = reserve / PAGE;
        let ctl = Box::new(ArenaCtl {
            base: NonNull::new(base).expect("mmap returned null"),
            reserve,
            committed: AtomicUsize::new(0),
            lock: AtomicBool::new(false),
            tracking: AtomicBool::new(false),
            dirty_bits: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            dirty_list: (0..pages).map(|_| AtomicU32::new(0)).collect(),
            dirty_len: AtomicUsize::new(0),
            exhausted: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
            name,
        });
        if !ctl.ensure_committed(HEADER_SIZE) {
            // SAFETY: the reservation was never shared.
            unsafe { sys::release(base, reserve) };
            return Err(io::Error::other("cannot commit the first page of an arena"));
        }
        // SAFETY: the first HEADER_SIZE bytes are committed, fresh and zero.
        unsafe { Heap::init(base) };
        let slot = register(&ctl)?;
        Ok(Arena {
            ctl: ManuallyDrop::new(ctl),
            slot,
        })
    }

    pub(crate) fn ctl(&self) -> &ArenaCtl {
        &self.ctl
    }

    /// The control block with a `'static` lifetime, for the thread-local
    /// "current arena" pointer.
    pub(crate) fn ctl_ptr(&self) -> *const ArenaCtl {
        &**self.ctl
    }
}

fn register(ctl: &ArenaCtl) -> io::Result<usize> {
    let ptr = ctl as *const ArenaCtl as *mut ArenaCtl;
    for (i, slot) in SLOTS.iter().enumerate() {
        if slot
            .claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let base = ctl.base.as_ptr() as usize;
            slot.write(base, base + ctl.reserve, ptr);
            SLOTS_USED.fetch_max(i + 1, Ordering::AcqRel);
            LOW.fetch_min(base, Ordering::AcqRel);
            HIGH.fetch_max(base + ctl.reserve, Ordering::AcqRel);
            return Ok(i);
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_ARENAS} arenas exist at once"
    )))
}

impl Drop for Arena {
    fn drop(&mut self) {
        sys::scope::forget(self.ctl_ptr() as *const ());
        if self.ctl.abandoned.load(Ordering::Acquire) {
            // A thread of user code that outlived its handler may still
            // read, allocate and free here (its start-up reads what its
            // creator allocated; its end frees it): the memory stays
            // mapped and registered, so its writes are still tracked and
            // its frees find their heap, and the control block stays alive.
            // Arena addresses are never handed out twice, so nothing else
            // will be placed here. One arena per such violation is leaked.
            // Write tracking is over (its owner is gone): pages it left
            // read-only become writable again.
            let committed = self.ctl.committed.load(Ordering::Acquire);
            // SAFETY: [base, base + committed) is this arena's committed
            // range, page-aligned (`ensure_committed`).
            let writable =
                unsafe { sys::protect(self.ctl.base.as_ptr(), committed, Prot::ReadWrite) };
            assert!(
                writable.is_ok(),
                "cmc: cannot make an abandoned arena writable: {writable:?}"
            );
            return;
        }
        let slot = &SLOTS[self.slot];
        // LOW and HIGH stay wide: they are only a quick filter.
        slot.write(0, 0, std::ptr::null_mut());
        slot.claimed.store(false, Ordering::Release);
        // SAFETY: the arena is unregistered and its owner is being dropped;
        // objects still pointing into it are the owner's bug, documented on
        // `Memory`.
        unsafe { sys::release(self.ctl.base.as_ptr(), self.ctl.reserve) };
        // SAFETY: the control block is unregistered, so no lookup returns
        // it any more, and it is dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.ctl) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lookups by address while other threads register and drop arenas
    /// always find the arena that holds the address. (A slot read
    /// without the sequence lock paired a re-registered slot's cleared
    /// base with its new end and returned the new arena for an address of
    /// an older one: a free routed to the wrong heap, seen as an abort in
    /// a test binary that ran three searches at once.)
    /// Set by the test below: lookups pause between reading a slot's base
    /// and its end, where a registration on another thread could slip in.
    static WIDEN: AtomicBool = AtomicBool::new(false);

    pub(super) fn widen_race_window() {
        if WIDEN.load(Ordering::Relaxed) {
            for _ in 0..200 {
                std::hint::spin_loop();
            }
        }
    }

    #[test]
    fn lookups_stay_right_while_other_threads_register_and_drop_arenas() {
        WIDEN.store(true, Ordering::Relaxed);
        let config = ArenaConfig::new().reserve(MIN_RESERVE);
        // Lookups scan the slots in order: the churning arenas take the
        // slots before the live one's, freed here.
        let before: Vec<Arena> = (0..2)
            .map(|_| Arena::new("placeholder".into(), &config).unwrap())
            .collect();
        let live = Arena::new("live".into(), &config).unwrap();
        drop(before);
        let addr = live.ctl().base.as_ptr() as usize + 0x180;
        let expected = live.ctl_ptr();
        let stop = AtomicBool::new(false);
        let done = AtomicUsize::new(0);
        let (mut lookups, mut churned, mut wrong) = (0u64, 0u64, None);
        std::thread::scope(|scope| {
            let churners: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        // Bounded: every arena takes a fixed address for
                        // good, and the other tests of this binary want some.
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) && n < 3000 {
                            drop(Arena::new("churn".into(), &config).unwrap());
                            n += 1;
                        }
                        done.fetch_add(1, Ordering::Release);
                        n
                    })
                })
                .collect();
            let start = std::time::Instant::now();
            'lookups: while done.load(Ordering::Acquire) < 2
                && start.elapsed() < std::time::Duration::from_secs(10)
            {
                for _ in 0..1000 {
                    let found = find(addr).map(|c| c as *const ArenaCtl);
                    if found != Some(expected) {
                        wrong = Some((lookups, found));
                        break 'lookups;
                    }
                    lookups += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
            churned = churners.into_iter().map(|t| t.join().unwrap()).sum();
        });
        WIDEN.store(false, Ordering::Relaxed);
        assert_eq!(wrong, None, "(lookup, arena found) for {expected:?}");
        assert!(churned > 1000, "{churned} arenas registered and dropped");
        eprintln!("{lookups} lookups while {churned} arenas came and went");
    }

    #[test]
    fn human_bytes_matches_how_sizes_are_configured() {
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(3 << 30), "3 GiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }

    #[test]
    fn exhaustion_message_names_the_arena_and_its_size() {
        let e = ArenaExhausted {
            arena: "process 2".into(),
            reserve: 256 << 20,
            request: 300 << 20,
        };
        assert_eq!(
            e.to_string(),
            "process 2's arena exceeded 256 MiB (an allocation of 314572800 bytes did not fit)"
        );
    }
}
