//! Write tracking with `mprotect` and a SIGSEGV handler.
//!
//! After a restore, the used pages of an arena in `Mprotect` mode are made
//! read-only. The first write to one raises SIGSEGV; [`on_fault`] records the
//! page in the arena's dirty bitmap and list, makes it writable and returns,
//! and the write is retried by the CPU. Everything it touches is atomic and
//! pre-allocated: it never allocates and never takes a lock.
//!
//! A fault that is not a write to a tracked page (a null dereference in user
//! code, a stack overflow, a wild pointer into an arena's uncommitted space)
//! is passed to the handler that was installed before cmc's, so a real crash
//! stays a crash that Rust, a sanitizer or the engine's crash reporter sees.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Once;

use crate::memory::arena::{self, ArenaCtl};
use crate::sys::{self, PAGE};

/// The action that was installed for SIGSEGV before cmc's. Written once,
/// before `INSTALLED` is set; read by the handler only after it is set.
static PREVIOUS: AtomicPtr<sys::SavedAction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALLED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// Installs the fault handler once per process (idempotent) and gives the
/// calling thread an alternate signal stack if it has none.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        let previous = sys::install_handler(libc::SIGSEGV, on_fault)
            .unwrap_or_else(|e| panic!("cmc cannot install its SIGSEGV handler: {e}"));
        // Leaked on purpose: the handler may read it until the process ends.
        PREVIOUS.store(Box::into_raw(Box::new(previous)), Ordering::Release);
        INSTALLED.store(true, Ordering::Release);
    });
    sys::ensure_alt_stack()
        .unwrap_or_else(|e| panic!("cmc cannot install an alternate signal stack: {e}"));
}

/// Records page `page` of `ctl` as dirty. Returns false when it already was,
/// which means this fault is not a first write (see `on_fault`).
#[inline]
pub(crate) fn mark_dirty(ctl: &ArenaCtl, page: usize) -> bool {
    let bit = 1u64 << (page % 64);
    let old = ctl.dirty_bits[page / 64].fetch_or(bit, Ordering::AcqRel);
    if old & bit != 0 {
        return false;
    }
    let at = ctl.dirty_len.fetch_add(1, Ordering::AcqRel);
    // The list has one entry per page of the reservation and each page enters
    // it at most once between clears, so `at` is in bounds.
    ctl.dirty_list[at].store(page as u32, Ordering::Release);
    true
}

/// The page indices recorded dirty since the last [`clear_dirty`].
pub(crate) fn dirty_pages(ctl: &ArenaCtl) -> impl Iterator<Item = usize> + '_ {
    let n = ctl.dirty_len.load(Ordering::Acquire);
    ctl.dirty_list[..n]
        .iter()
        .map(|p| p.load(Ordering::Acquire) as usize)
}

pub(crate) fn is_dirty(ctl: &ArenaCtl, page: usize) -> bool {
    ctl.dirty_bits[page / 64].load(Ordering::Acquire) & (1u64 << (page % 64)) != 0
}

/// Forgets the dirty pages, in time proportional to their number.
pub(crate) fn clear_dirty(ctl: &ArenaCtl) {
    let n = ctl.dirty_len.load(Ordering::Acquire);
    for p in &ctl.dirty_list[..n] {
        let page = p.load(Ordering::Relaxed) as usize;
        ctl.dirty_bits[page / 64].store(0, Ordering::Relaxed);
    }
    ctl.dirty_len.store(0, Ordering::Release);
}

extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(ctl) = arena::find(addr) {
        let base = ctl.base.as_ptr() as usize;
        let offset = addr - base;
        if ctl.tracking.load(Ordering::Acquire) && offset < ctl.committed.load(Ordering::Acquire) {
            let page = offset / PAGE;
            // A fault on a page already marked dirty cannot be a first write
            // (the page is writable): it is an execute or a genuine error, and
            // unprotecting again would loop forever.
            if mark_dirty(ctl, page) {
                // SAFETY: the page lies in the committed part of our arena.
                if unsafe { sys::unprotect_page_raw((base + page * PAGE) as *mut u8) } {
                    return;
                }
                sys::write_stderr_raw(b"cmc: mprotect failed in the write-tracking handler\n");
            }
        }
    }
    forward(signal, info, context);
}

/// Passes a fault to the handler that was there before cmc's.
fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = if INSTALLED.load(Ordering::Acquire) {
        PREVIOUS.load(Ordering::Acquire)
    } else {
        std::ptr::null_mut()
    };
    if previous.is_null() {
        reset_to_default(signal);
        return;
    }
    // SAFETY: PREVIOUS points to a leaked, never-freed action.
    let previous = unsafe { &*previous };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Returning re-executes the faulting instruction, which now meets
        // the default action: the process dies of SIGSEGV as it would have
        // without cmc. (Ignoring SIGSEGV would spin forever, so SIG_IGN is
        // treated as the default too.)
        reset_to_default(signal);
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the saved value is a three-argument handler.
        let f: sys::InfoHandler =
            unsafe { std::mem::transmute::<usize, sys::InfoHandler>(handler) };
        f(signal, info, context);
    } else {
        // SAFETY: without SA_SIGINFO the saved value is a one-argument handler.
        let f: extern "C" fn(libc::c_int) =
            unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(handler) };
        f(signal);
    }
}

fn reset_to_default(signal: libc::c_int) {
    // SAFETY: an all-zero sigaction with SIG_DFL (0) is the default action.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: sigaction is async-signal-safe.
    unsafe { sys::restore_handler(signal, &dfl) };
}
