//! What the current thread is doing, as the allocator and the interposed
//! functions need to know it cheaply: which arena its allocations go to
//! (an opaque pointer that the memory layer owns), and whether user code
//! runs under the engine.
//!
//! These thread-locals sit at the bottom of the runtime because code of
//! every layer — the symbol table, the address map, the engine's
//! bookkeeping — allocates in a *system scope* while a handler's arena is
//! current.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// The arena allocations on this thread go to (the memory layer's
    /// `ArenaCtl`, opaque here), or null. A `const` initialiser without a
    /// destructor: reading it never allocates and never fails, even during
    /// thread teardown.
    static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    /// The deepest stack address at which checker code inside user code
    /// called the C library's allocator since the last scrub, or
    /// `usize::MAX` (see [`after_system_call`]).
    static LOWEST_SYSTEM_CALL: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Set while user code runs under the engine; the panic hook then
    /// records the panic instead of printing it, and clocks are virtual.
    static IN_USER_CODE: Cell<bool> = const { Cell::new(false) };
}

/// The arena allocations on this thread go to now (opaque), or null.
#[inline]
pub(crate) fn current() -> *const () {
    CURRENT.with(Cell::get)
}

/// Sends this thread's allocations to `ctl` (null: the system allocator)
/// from now on, without a guard: for a thread that user code started,
/// whose closure allocates where its creator did.
///
/// # Safety
/// `ctl` is null, or an arena registered with the memory layer and alive
/// whenever this thread allocates.
pub(crate) unsafe fn adopt(ctl: *const ()) {
    CURRENT.with(|c| c.set(ctl));
}

/// Called when an arena is destroyed: if it is current on this thread, the
/// thread falls back to the system allocator rather than using freed memory.
pub(crate) fn forget(ctl: *const ()) {
    CURRENT.with(|c| {
        if c.get() == ctl {
            c.set(std::ptr::null());
        }
    });
}

/// Whether user code is running under the engine on this thread (clocks are
/// then virtual, see `determinism::clock`).
pub(crate) fn in_user_code() -> bool {
    IN_USER_CODE.try_with(Cell::get).unwrap_or(false)
}

/// Marks the start (`true`) or the end of user code on this thread.
pub(crate) fn set_in_user_code(on: bool) {
    IN_USER_CODE.with(|c| c.set(on));
}

/// Runs `f` as if it were user code (what it draws from clocks and random
/// sources is then interposed), for the runtime's own probes of that
/// interposition; `None` if it panicked. Not for running handlers: the
/// model layer's `model::ctx::user_code` does that, with panic capture and stack
/// scrubbing.
pub(crate) fn as_user_code<R>(f: impl FnOnce() -> R) -> Option<R> {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            set_in_user_code(self.0);
        }
    }
    let _reset = Reset(in_user_code());
    set_in_user_code(true);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// After a call into the C library's allocator from inside user code: the
/// C library's functions leave their stack-protector canary and heap
/// addresses on the stack, values of this process that the handler's next
/// values would copy into their padding. Called from inside checker code (a
/// system scope, such as the hashing of a message `send` does), the call
/// only records how deep the stack was: the scope zeroes that stack when it
/// returns to the handler (see [`Entered`]), once for all its calls. Called
/// from the handler itself (a free of system memory, routed by address),
/// it zeroes the stack the call used now.
#[cold]
#[inline(never)]
pub(crate) fn after_system_call() {
    if !in_user_code() {
        return;
    }
    if current().is_null() {
        let marker = 0u8;
        let here = std::hint::black_box(&marker as *const u8) as usize;
        LOWEST_SYSTEM_CALL.with(|l| l.set(l.get().min(here)));
    } else {
        super::stack::scrub_stack(SCRUB_AFTER_SYSTEM);
    }
}

/// Bytes of stack zeroed below the deepest call into the C library's
/// allocator: it uses a few hundred.
const SCRUB_AFTER_SYSTEM: usize = 2 * 1024;

/// While alive, allocations on this thread go to one arena. Created by
/// [`Memory::enter`](crate::memory::Memory::enter); restores the previous
/// current arena when dropped, so entries nest.
#[derive(Debug)]
pub struct Entered<'m> {
    previous: *const (),
    /// Tied to the thread (the thread-local it changed) and to the memory
    /// that owns the arena.
    _marker: PhantomData<(&'m (), *const ())>,
}

impl Entered<'_> {
    /// # Safety
    /// `ctl` is null or an arena registered with the memory layer, and stays
    /// alive for the guard's lifetime `'m`.
    pub(crate) unsafe fn new(ctl: *const ()) -> Self {
        let previous = CURRENT.with(|c| c.replace(ctl));
        Entered {
            previous,
            _marker: PhantomData,
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
        // Back in a handler after checker code that called the C library's
        // allocator: zero the stack down to below the deepest such call.
        if !self.previous.is_null() {
            let lowest = LOWEST_SYSTEM_CALL.with(|l| l.replace(usize::MAX));
            if lowest != usize::MAX {
                super::stack::scrub_down_to(lowest.saturating_sub(SCRUB_AFTER_SYSTEM));
            }
        }
    }
}

/// Makes allocations on this thread go to the system allocator until the
/// guard drops (checker bookkeeping done while a handler's arena is current).
pub(crate) fn system_scope() -> Entered<'static> {
    // SAFETY: a null current arena is the system allocator; nothing to keep
    // alive.
    unsafe { Entered::new(std::ptr::null()) }
}
