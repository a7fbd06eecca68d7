//! `cmc::Allocator`: the global allocator that sends a process's allocations
//! to its arena.
//!
//! While the checking thread runs a process's code it has a *current arena*
//! (a thread-local pointer set by [`Entered`]); every allocation on that thread
//! goes there. A thread that the process's code starts allocates where its
//! creator did while it runs its closure (see `crate::memory::threads`). Everywhere
//! else (the checker, other threads, progress output) the current arena is
//! null and allocations go to the system allocator.
//! Frees and reallocations are routed by address, whatever arena is current,
//! so an object of arena A freed while B is current returns to A.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::memory::arena::{self, ArenaCtl};
use crate::sys::scope::{self, after_system_call};

thread_local! {
    /// Allocations made in arenas on this thread: a global can only come
    /// to point into an arena when this moves (see `crate::memory::globals`).
    static ARENA_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations made in arenas on this thread so far.
pub(crate) fn arena_allocations() -> u64 {
    ARENA_ALLOCATIONS.with(Cell::get)
}

#[inline]
fn count_arena_allocation() {
    ARENA_ALLOCATIONS.with(|c| c.set(c.get().wrapping_add(1)));
}

/// A system allocation this large counts as memory taken (see
/// [`arena::taken`]): a large allocation can take what thousands of
/// transitions take.
pub(crate) const LARGE: usize = 64 << 10;

/// Counts a system allocation of `size` bytes if it is large.
#[inline]
fn note_system(size: usize) {
    if size >= LARGE {
        arena::note_taken(size);
    }
}

/// The arena allocations on this thread go to now, or null.
#[inline]
pub(crate) fn current() -> *const ArenaCtl {
    scope::current() as *const ArenaCtl
}

/// The arena allocations on this thread go to now, or null.
pub(crate) fn current_arena() -> *const ArenaCtl {
    current()
}

/// Sends this thread's allocations to `ctl` (null: the system allocator)
/// from now on, without a guard: for a thread that user code started,
/// whose closure allocates where its creator did (`crate::memory::threads`).
///
/// # Safety
/// `ctl` is null, or registered and alive whenever this thread allocates.
pub(crate) unsafe fn adopt(ctl: *const ArenaCtl) {
    // SAFETY: forwarded contract.
    unsafe { scope::adopt(ctl as *const ()) }
}

/// Counts the arena allocations of a thread this thread's user code just
/// started as this thread's: a global that thread initializes is then
/// scanned for like one the handler initializes (`crate::memory::globals`).
pub(crate) fn count_other_thread() {
    count_arena_allocation();
}

/// The global allocator of a checking binary.
///
/// ```
/// #[global_allocator]
/// static ALLOC: cmc::Allocator = cmc::Allocator;
/// ```
///
/// Without it the runtime still works, but objects a process allocates land
/// in the system heap, outside every snapshot, and states are not captured
/// correctly.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allocator;

// SAFETY: every method forwards to either the system allocator or an arena
// heap, each of which satisfies the GlobalAlloc contract; a block is always
// freed by the allocator that produced it because routing is by address and
// arena addresses never overlap system ones.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let cur = current();
        if cur.is_null() {
            note_system(layout.size());
            // SAFETY: forwarded contract.
            let p = unsafe { System.alloc(layout) };
            after_system_call();
            return p;
        }
        // SAFETY: a current arena is registered and alive (see `Entered`).
        let p = unsafe { (*cur).alloc(layout, false) };
        count_arena_allocation();
        if p.is_null() {
            // The arena recorded its exhaustion for the engine to report; the
            // process keeps running on system memory until its handler
            // returns, because a global allocator must not unwind and a null
            // here would abort the whole checker.
            // SAFETY: forwarded contract.
            return unsafe { System.alloc(layout) };
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let cur = current();
        if cur.is_null() {
            note_system(layout.size());
            // SAFETY: forwarded contract.
            let p = unsafe { System.alloc_zeroed(layout) };
            after_system_call();
            return p;
        }
        // SAFETY: as in `alloc`.
        let p = unsafe { (*cur).alloc(layout, true) };
        count_arena_allocation();
        if p.is_null() {
            // SAFETY: forwarded contract.
            return unsafe { System.alloc_zeroed(layout) };
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match arena::find(ptr as usize) {
            // SAFETY: `ptr` lies in this arena, so it was allocated there.
            Some(ctl) => unsafe { ctl.dealloc(ptr, layout) },
            None => {
                // SAFETY: not in any arena, so it came from the system
                // allocator.
                unsafe { System.dealloc(ptr, layout) };
                after_system_call();
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(ctl) = arena::find(ptr as usize) else {
            if new_size > layout.size() {
                note_system(new_size);
            }
            // SAFETY: not in any arena, so it came from the system allocator.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            after_system_call();
            return p;
        };
        // SAFETY: `ptr` lies in this arena, so it was allocated there.
        let p = unsafe { ctl.realloc(ptr, layout, new_size) };
        count_arena_allocation();
        if !p.is_null() {
            return p;
        }
        // Exhausted: move the object to system memory (see `alloc`).
        // SAFETY: `new_size` with the old alignment is a valid layout per the
        // realloc contract.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: forwarded contract.
        let q = unsafe { System.alloc(new_layout) };
        if !q.is_null() {
            // SAFETY: both blocks are valid for the copied length and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                ctl.dealloc(ptr, layout);
            }
        }
        q
    }
}

/// Whether an address belongs to any arena (for tests and assertions).
pub fn in_any_arena(ptr: *const u8) -> bool {
    arena::find(ptr as usize).is_some()
}
