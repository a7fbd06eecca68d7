//! Threads that user code starts.
//!
//! cmc runs a handler on the checker's thread and captures the process's
//! arena when the handler returns. A thread the handler starts is part of
//! the handler: what it allocates belongs to the process, and it must be
//! over when the state is captured, or it changes memory the checker is
//! restoring and reusing under it.
//!
//! * **Counting.** cmc defines the C symbols `pthread_create`,
//!   `pthread_join` and `pthread_detach`, which std's threads call; the
//!   executable's own definitions take precedence over the C library's, to
//!   which they forward (found with `dlsym(RTLD_NEXT)`). A thread started
//!   while user code runs on an engine's thread, or started by such a
//!   thread, is a *thread of user code*: it gets a slot in a fixed table of
//!   atomics (no lock and no allocation, so a forked child never waits for
//!   another thread), which its join frees. After user code,
//!   [`after_user_code`] reads one atomic — the number of slots in use in
//!   the whole program — and returns when it is 0: the cost on the hot
//!   path.
//! * **Allocations.** A thread of user code runs its closure with the arena
//!   that was current where it was started (`alloc::adopt`): the process's
//!   arena, so a result it computes for the state is the process's memory,
//!   placed deterministically when the handler waits for the thread (the
//!   arena's lock serialises allocations from several threads). Only its
//!   closure: std's own bookkeeping of a new thread allocates in a
//!   program-wide map (its stack-overflow information, a B-tree of every
//!   thread), whose nodes must never land in an arena. std brackets the
//!   closure with the thread's alternate signal stack: it records the
//!   thread in that map, asks for and sets the stack, runs the closure,
//!   removes the record and disables the stack. cmc defines `sigaltstack`
//!   too: a thread of user code adopts its arena at its first call and
//!   leaves it when the stack is disabled. At start-up a probe thread
//!   checks that std calls `sigaltstack` before a thread's closure runs;
//!   when it does not, threads adopt the arena from their start.
//! * **Detached threads.** A detach of a thread of user code (std detaches
//!   when a `JoinHandle` is dropped, which is also how `thread::scope` lets
//!   go of the threads it waited for) is deferred: the thread stays
//!   joinable and [`after_user_code`] joins it, waiting at most [`GRACE`].
//!   A scoped thread has finished its closure when the scope returns and
//!   only its exit is left (its thread-local destructors, which may free
//!   arena memory), so the wait is short; the join makes sure nothing of it
//!   runs when the state is captured.
//! * **What is left** is a violation: a thread still running after the
//!   grace, or one whose handle the program kept without joining it. The
//!   checker waits until each such thread is past std's bookkeeping of a
//!   new thread (its program-wide map, under a lock a fork must not copy
//!   held), then gives up its slot (doing a detach the program asked for),
//!   so it never waits for it again, and marks the arena the thread uses
//!   as abandoned.
//! * **The arena stays the thread's.** The thread goes on reading what its
//!   creator allocated for it (std's start-up reads its closure's box, its
//!   handle and its result's packet after the last call cmc sees),
//!   allocating, and freeing when it ends, at any time. So the engine that
//!   ran the handler never writes its arenas again (`Memory::freeze`): the
//!   search stops, and the trace, which runs the steps again, is built in
//!   a forked child (which has none of the parent's other threads). An
//!   abandoned arena is never unmapped, and its control block is never
//!   freed (`Drop for Arena`): one arena per such violation is leaked.
//!
//! Not controlled on such threads: the clocks and the randomness cmc
//! controls on the handler's thread (`identity`).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::memory::arena::ArenaCtl;

/// How long [`after_user_code`] waits for a detached thread to end: a
/// thread in its exit ends within microseconds, unless the machine is
/// overloaded; one still running after this long is reported.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// How long the checker waits, at most, for a thread it reports to get
/// past std's prologue.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The most threads of user code that can be alive at once in the
/// program; `pthread_create` fails with `EAGAIN` beyond.
const MAX_THREADS: usize = 1024;

/// A slot's thread is joinable: the program holds its handle.
const JOINABLE: u8 = 1;
/// The program detached its thread; the checker joins it.
const DETACHED: u8 = 2;

struct Slot {
    /// The owner (see `OWN`) of the thread in the slot, or 0 when free.
    owner: AtomicU64,
    /// The thread, once `pthread_create` returned it.
    thread: AtomicUsize,
    /// `JOINABLE` or `DETACHED`.
    state: AtomicU8,
    /// A number unique to the slot's current thread.
    generation: AtomicU64,
    /// The generation of the last thread of the slot that got past std's
    /// prologue. (A thread whose slot was given up may write it late: it
    /// writes its own generation, which no later thread of the slot has.)
    started: AtomicU64,
    /// The arena the thread's closure allocates in (`*const ArenaCtl`).
    arena: AtomicUsize,
}

#[allow(
    clippy::declare_interior_mutable_const,
    reason = "used only to initialise the static array"
)]
const EMPTY_SLOT: Slot = Slot {
    owner: AtomicU64::new(0),
    thread: AtomicUsize::new(0),
    state: AtomicU8::new(0),
    generation: AtomicU64::new(0),
    started: AtomicU64::new(0),
    arena: AtomicUsize::new(0),
};

static SLOTS: [Slot; MAX_THREADS] = [EMPTY_SLOT; MAX_THREADS];
/// One past the highest slot ever used: scans read only this prefix.
static USED: AtomicUsize = AtomicUsize::new(0);
/// Slots in use: threads of user code not joined yet.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// Whether std calls `sigaltstack` on a new thread before its closure runs
/// (found by [`warm`]).
static STD_BRACKETS: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const BRACKETED: u8 = 1;
const NOT_BRACKETED: u8 = 2;

/// Where a thread of user code is (`PHASE`): in std's prologue, in its
/// closure (with the arena), or neither (also every other thread).
const OUTSIDE: u8 = 0;
const PROLOGUE: u8 = 1;
const BODY: u8 = 2;

thread_local! {
    /// This thread's id as the owner of the threads its user code starts
    /// (an engine runs user code on one thread), or 0 before the first.
    static OWN: Cell<u64> = const { Cell::new(0) };
    /// On a thread of user code: the owner it belongs to, whose threads
    /// it starts are that owner's too; 0 on other threads.
    static INHERITED: Cell<u64> = const { Cell::new(0) };
    /// On a thread of user code: its phase, the arena of its closure, and
    /// its slot and generation.
    static PHASE: Cell<u8> = const { Cell::new(OUTSIDE) };
    static BODY_ARENA: Cell<*const ArenaCtl> = const { Cell::new(std::ptr::null()) };
    static SLOT: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
    /// Whether this thread called `sigaltstack` (for the probe).
    static CALLED_SIGALTSTACK: Cell<bool> = const { Cell::new(false) };
}

/// What user code left running when it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// A thread was still running after [`GRACE`].
    Running,
    /// A thread whose handle the program kept (neither joined nor
    /// detached).
    NotJoined,
}

impl Leftover {
    /// The violation's message, for `who` ("handler `act` of process 0",
    /// "the constructor of process 1") and `inside` ("handler").
    pub(crate) fn message(self, who: &str, inside: &str) -> String {
        let what = match self {
            Leftover::Running => "started a thread that was still running when it returned",
            Leftover::NotJoined => {
                "started a thread and kept its handle without joining it before it returned"
            }
        };
        format!(
            "{who} {what}: cmc cannot snapshot a state that another thread is changing; \
             join the thread inside the {inside}"
        )
    }
}

/// Reaps the threads that user code run on this thread started and that
/// are over, and says what is left (and gives it up). Must run after
/// user code returns, before the state is captured.
#[inline]
pub(crate) fn after_user_code() -> Option<Leftover> {
    if LIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    let owner = OWN.with(Cell::get);
    if owner == 0 {
        return None;
    }
    reap(owner)
}

#[cold]
#[inline(never)]
fn reap(owner: u64) -> Option<Leftover> {
    let deadline = realtime_deadline(GRACE);
    loop {
        let (mut running, mut kept, mut joined) = (false, false, false);
        for (i, slot) in mine(owner) {
            if slot.state.load(Ordering::Acquire) != DETACHED {
                kept = true;
                continue;
            }
            let thread = slot.thread.load(Ordering::Acquire) as libc::pthread_t;
            // SAFETY: a detached slot's thread was published before the
            // program could detach it, and stays joinable until this join:
            // the program gave up its handle, and only this owner's thread
            // reaps the slot.
            let rc = unsafe { libc::pthread_timedjoin_np(thread, std::ptr::null_mut(), &deadline) };
            if rc == 0 {
                release(i);
                joined = true;
            } else {
                running = true;
            }
        }
        if joined {
            // The threads just joined may have started or detached others
            // of this owner before they ended: look again.
            continue;
        }
        if !running && !kept {
            return None;
        }
        wait_for_starts(owner);
        give_up(owner);
        return Some(if running {
            Leftover::Running
        } else {
            Leftover::NotJoined
        });
    }
}

/// `owner`'s slots, with their indices.
fn mine(owner: u64) -> impl Iterator<Item = (usize, &'static Slot)> {
    SLOTS[..USED.load(Ordering::Acquire)]
        .iter()
        .enumerate()
        .filter(move |(_, s)| s.owner.load(Ordering::Acquire) == owner)
}

/// Waits (up to [`START_LIMIT`]) until every thread of `owner` is past
/// std's prologue, which reads and frees what the thread's creator
/// allocated for it in the arena: after that, a thread that only waits or
/// computes leaves the arena alone.
fn wait_for_starts(owner: u64) {
    let start = Instant::now();
    while start.elapsed() < START_LIMIT
        && mine(owner)
            .any(|(_, s)| s.started.load(Ordering::Acquire) != s.generation.load(Ordering::Acquire))
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Gives up `owner`'s slots after a violation: their threads are the
/// program's again (a detach it asked for is done now).
fn give_up(owner: u64) {
    for (i, slot) in mine(owner) {
        let arena = slot.arena.load(Ordering::Acquire) as *const ArenaCtl;
        if !arena.is_null() {
            // SAFETY: the arena was current in the thread's creator, user
            // code of the engine that is reporting this violation now, so
            // it is alive.
            unsafe { (*arena).abandon() };
        }
        if slot.state.load(Ordering::Acquire) == DETACHED {
            let thread = slot.thread.load(Ordering::Acquire) as libc::pthread_t;
            // SAFETY: the slot's thread is joinable (its detach was
            // deferred) and nobody else joins or detaches it.
            unsafe { real_detach()(thread) };
        }
        release(i);
    }
}

/// In a child forked from the checker: forgets every slot. The threads
/// they stand for did not come along (only the forking thread did), and
/// the C library may give their ids to the child's new threads.
pub(crate) fn after_fork_in_child() {
    for slot in &SLOTS[..USED.load(Ordering::Acquire)] {
        slot.thread.store(0, Ordering::Relaxed);
        slot.owner.store(0, Ordering::Release);
    }
    LIVE.store(0, Ordering::Release);
}

/// `CLOCK_REALTIME` now plus `after`, as `pthread_timedjoin_np` takes it.
fn realtime_deadline(after: Duration) -> libc::timespec {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; outside user code this is the C
    // library's clock (`determinism::clock`).
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let nanos = now.tv_nsec as u64 + u64::from(after.subsec_nanos());
    libc::timespec {
        tv_sec: now.tv_sec
            + after.as_secs() as libc::time_t
            + (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    }
}

/// Takes a free slot for a thread of `owner`: its index and generation,
/// or `None` when the table is full.
fn claim(owner: u64) -> Option<(usize, u64)> {
    for (i, slot) in SLOTS.iter().enumerate() {
        if slot
            .owner
            .compare_exchange(0, owner, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
            slot.thread.store(0, Ordering::Relaxed);
            slot.generation.store(generation, Ordering::Relaxed);
            slot.state.store(JOINABLE, Ordering::Release);
            USED.fetch_max(i + 1, Ordering::AcqRel);
            LIVE.fetch_add(1, Ordering::AcqRel);
            return Some((i, generation));
        }
    }
    None
}

fn release(i: usize) {
    let slot = &SLOTS[i];
    slot.thread.store(0, Ordering::Relaxed);
    slot.owner.store(0, Ordering::Release);
    let before = LIVE.fetch_sub(1, Ordering::AcqRel);
    assert!(before > 0, "a thread slot was released twice");
}

/// The slot of `thread`, if it is a thread of user code not joined yet.
fn find(thread: libc::pthread_t) -> Option<usize> {
    SLOTS[..USED.load(Ordering::Acquire)].iter().position(|s| {
        s.owner.load(Ordering::Acquire) != 0 && s.thread.load(Ordering::Acquire) == thread as usize
    })
}

/// The owner of a thread the calling thread starts now, or 0 when it is
/// not a thread of user code.
fn creator_owner() -> u64 {
    let inherited = INHERITED.with(Cell::get);
    if inherited != 0 {
        return inherited;
    }
    if !crate::sys::scope::in_user_code() {
        return 0;
    }
    OWN.with(|own| {
        if own.get() == 0 {
            own.set(NEXT_OWNER.fetch_add(1, Ordering::Relaxed));
        }
        own.get()
    })
}

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
/// The same routine, called so that a forced unwind (`pthread_exit`) may
/// pass through the trampoline's frame, which has nothing to drop.
type StartUnwind = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;
type Create = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> libc::c_int;
type Join = unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> libc::c_int;
type Detach = unsafe extern "C" fn(libc::pthread_t) -> libc::c_int;
type SigAltStack = unsafe extern "C" fn(*const libc::stack_t, *mut libc::stack_t) -> libc::c_int;

/// The C library's definitions, once found.
static REAL_CREATE: AtomicUsize = AtomicUsize::new(0);
static REAL_JOIN: AtomicUsize = AtomicUsize::new(0);
static REAL_DETACH: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGALTSTACK: AtomicUsize = AtomicUsize::new(0);

/// Finds the C library's definitions now (`dlsym` takes the dynamic
/// loader's lock, which a forked child must never wait for), and, once,
/// whether std calls `sigaltstack` before a thread's closure runs.
pub(crate) fn warm() {
    real_create();
    real_join();
    real_detach();
    real_sigaltstack();
    if STD_BRACKETS.load(Ordering::Acquire) == UNKNOWN {
        let _sys = crate::sys::scope::system_scope();
        // Not user code: a thread of the checker's, not counted.
        let Ok(probe) = std::thread::Builder::new().spawn(|| CALLED_SIGALTSTACK.with(Cell::get))
        else {
            // No thread can start now (the system refused it): nothing
            // learnt; the next call tries again, and what needed a thread
            // reports the refusal.
            return;
        };
        let called = probe.join().unwrap_or(false);
        STD_BRACKETS.store(
            if called { BRACKETED } else { NOT_BRACKETED },
            Ordering::Release,
        );
    }
}

/// The next definition of `name` after this executable's (the C
/// library's), cached in `slot`.
fn next(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let mut f = slot.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the next
        // definition after this object's.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        assert!(
            f != 0,
            "cmc: the C library's `{}` was not found",
            name.to_string_lossy()
        );
        slot.store(f, Ordering::Release);
    }
    f
}

fn real_create() -> Create {
    let f = next(&REAL_CREATE, c"pthread_create");
    // SAFETY: dlsym's result for `pthread_create` is that function.
    unsafe { std::mem::transmute::<usize, Create>(f) }
}

fn real_join() -> Join {
    let f = next(&REAL_JOIN, c"pthread_join");
    // SAFETY: dlsym's result for `pthread_join` is that function.
    unsafe { std::mem::transmute::<usize, Join>(f) }
}

fn real_detach() -> Detach {
    let f = next(&REAL_DETACH, c"pthread_detach");
    // SAFETY: dlsym's result for `pthread_detach` is that function.
    unsafe { std::mem::transmute::<usize, Detach>(f) }
}

fn real_sigaltstack() -> SigAltStack {
    let f = next(&REAL_SIGALTSTACK, c"sigaltstack");
    // SAFETY: dlsym's result for `sigaltstack` is that function.
    unsafe { std::mem::transmute::<usize, SigAltStack>(f) }
}

/// What a thread of user code starts with, handed over by
/// `pthread_create` (in system memory).
struct Boot {
    start: StartRoutine,
    arg: *mut c_void,
    owner: u64,
    arena: *const ArenaCtl,
    slot: usize,
    generation: u64,
}

/// `pthread_create(3)`: a thread that user code starts is counted, and
/// runs its closure with the arena its creator has.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: StartRoutine,
    arg: *mut c_void,
) -> libc::c_int {
    let owner = creator_owner();
    if owner == 0 {
        // SAFETY: the caller's arguments, forwarded.
        return unsafe { real_create()(thread, attr, start, arg) };
    }
    let Some((slot, generation)) = claim(owner) else {
        return libc::EAGAIN;
    };
    let arena = crate::memory::alloc::current_arena();
    let boot = {
        let _sys = crate::sys::scope::system_scope();
        Box::into_raw(Box::new(Boot {
            start,
            arg,
            owner,
            arena,
            slot,
            generation,
        }))
    };
    // SAFETY: `trampoline` is a start routine of the C ABI that a forced
    // unwind may pass through; it takes the `Boot` it is given.
    let trampoline =
        unsafe { std::mem::transmute::<StartUnwind, StartRoutine>(trampoline as StartUnwind) };
    // SAFETY: the caller's `thread` and `attr`; `boot` is handed to the new
    // thread, which frees it.
    let rc = unsafe { real_create()(thread, attr, trampoline, boot.cast()) };
    if rc != 0 {
        // SAFETY: no thread was started: the box is still ours.
        drop(unsafe { Box::from_raw(boot) });
        release(slot);
        return rc;
    }
    // SAFETY: on success `pthread_create` wrote the new thread's id.
    let id = unsafe { *thread };
    SLOTS[slot].thread.store(id as usize, Ordering::Release);
    SLOTS[slot].arena.store(arena as usize, Ordering::Release);
    if crate::sys::scope::in_user_code() {
        // What the thread allocates counts as the handler's, for the scan
        // of globals after it (`crate::memory::globals`).
        crate::memory::alloc::count_other_thread();
    }
    0
}

/// Where a thread of user code starts: it takes its owner, its slot and
/// its creator's arena (adopted when std's prologue is over, see the
/// module's notes), zeroes the stack its routine will use (a stack the C
/// library reuses holds an earlier thread's garbage, which padding would
/// copy into the state), then runs the routine.
unsafe extern "C-unwind" fn trampoline(boot: *mut c_void) -> *mut c_void {
    // SAFETY: `pthread_create` leaked this box for this thread alone.
    let boot = unsafe { Box::from_raw(boot.cast::<Boot>()) };
    let Boot {
        start,
        arg,
        owner,
        arena,
        slot,
        generation,
    } = *boot;
    INHERITED.with(|c| c.set(owner));
    SLOT.with(|s| s.set((slot, generation)));
    let (low, len) = crate::sys::layout::thread_stack();
    let marker = 0u8;
    let here = std::hint::black_box(&marker as *const u8) as u64;
    if len > 0 && here > low {
        let room = ((here - low) / 2) as usize;
        crate::sys::stack::scrub_stack(room.min(crate::sys::stack::DEFAULT_SCRUB_BYTES));
    }
    if STD_BRACKETS.load(Ordering::Acquire) == BRACKETED {
        BODY_ARENA.with(|a| a.set(arena));
        PHASE.with(|p| p.set(PROLOGUE));
    } else {
        enter_body(arena);
    }
    // SAFETY: the routine and argument the program passed to
    // `pthread_create`, on the thread it asked for.
    unsafe { std::mem::transmute::<StartRoutine, StartUnwind>(start)(arg) }
}

/// The thread of user code's closure starts: it allocates in `arena`.
fn enter_body(arena: *const ArenaCtl) {
    PHASE.with(|p| p.set(BODY));
    // SAFETY: the arena was current in the creator, which is user code of a
    // live engine: it outlives the thread unless the thread outlives its
    // handler, which is reported (see the module's notes).
    unsafe { crate::memory::alloc::adopt(arena) };
    let (slot, generation) = SLOT.with(Cell::get);
    SLOTS[slot].started.store(generation, Ordering::Release);
}

/// `pthread_join(3)`: a joined thread of user code is over.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pthread_join(
    thread: libc::pthread_t,
    retval: *mut *mut c_void,
) -> libc::c_int {
    // Found before the join: once it returns, the C library may give the
    // same id to a new thread.
    let slot = if LIVE.load(Ordering::Acquire) != 0 {
        find(thread)
    } else {
        None
    };
    // SAFETY: the caller's arguments, forwarded.
    let rc = unsafe { real_join()(thread, retval) };
    if rc == 0 {
        if let Some(i) = slot {
            release(i);
        }
    }
    rc
}

/// `pthread_detach(3)`: deferred for a thread of user code, which the
/// checker joins when the user code returns.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn pthread_detach(thread: libc::pthread_t) -> libc::c_int {
    if LIVE.load(Ordering::Acquire) != 0 {
        if let Some(i) = find(thread) {
            SLOTS[i].state.store(DETACHED, Ordering::Release);
            return 0;
        }
    }
    // SAFETY: the caller's argument, forwarded.
    unsafe { real_detach()(thread) }
}

/// `sigaltstack(2)`: on a thread of user code, std's calls bracket the
/// thread's closure, which allocates in its creator's arena (see the
/// module's notes). Async-signal-safe, as the C function: it only reads
/// and writes thread-locals without destructors and atomics.
///
/// # Safety
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(
    stack: *const libc::stack_t,
    old: *mut libc::stack_t,
) -> libc::c_int {
    CALLED_SIGALTSTACK.with(|c| c.set(true));
    match PHASE.with(Cell::get) {
        // std has recorded the thread and now looks for its signal stack:
        // the closure comes next.
        PROLOGUE => enter_body(BODY_ARENA.with(Cell::get)),
        // SAFETY: a non-null `stack` is readable (the caller's contract).
        BODY if !stack.is_null() && unsafe { (*stack).ss_flags } & libc::SS_DISABLE != 0 => {
            // std disables the signal stack: the closure is over.
            PHASE.with(|p| p.set(OUTSIDE));
            // SAFETY: null is the system allocator.
            unsafe { crate::memory::alloc::adopt(std::ptr::null()) };
        }
        _ => {}
    }
    // SAFETY: the caller's arguments, forwarded.
    unsafe { real_sigaltstack()(stack, old) }
}
