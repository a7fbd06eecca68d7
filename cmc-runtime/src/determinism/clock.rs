//! Controlled clocks: inside user code that cmc runs (handlers, guards,
//! invariants, constructors), `Instant::now()` and `SystemTime::now()` read
//! the model's virtual time, not the host's clock, so the same transition
//! from the same state gives the same successor in every run and in replay.
//!
//! The model's time does not pass: every read inside user code returns the
//! same instant (monotonic clocks read [`VIRTUAL_MONOTONIC`], wall clocks
//! [`VIRTUAL_REALTIME`], both fixed). Timeouts are events — timer handlers
//! (`#[handler(timer = ..)]`) — not clock comparisons; a timer's expiry
//! does not move the clock. Outside user code (the checker's own progress
//! and time limits) clocks are the host's.
//!
//! How: cmc defines the C symbol `clock_gettime`, which the standard
//! library calls for both clocks; the executable's own definition takes
//! precedence over the C library's when it is linked. Outside user code it
//! forwards to the C library's (found with `dlsym(RTLD_NEXT)`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The monotonic time user code reads: 1,000,000 s after an arbitrary
/// origin (the boot of a machine that has been up for eleven days).
pub const VIRTUAL_MONOTONIC: libc::timespec = libc::timespec {
    tv_sec: 1_000_000,
    tv_nsec: 0,
};

/// The wall-clock time user code reads: 2001-09-09T01:46:40Z (10⁹ s after
/// the Unix epoch).
pub const VIRTUAL_REALTIME: libc::timespec = libc::timespec {
    tv_sec: 1_000_000_000,
    tv_nsec: 0,
};

pub(crate) type ClockGettime =
    unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int;

/// The C library's `clock_gettime`, once found.
static REAL: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn real() -> Option<ClockGettime> {
    let mut f = REAL.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the next definition
        // after this object's, the C library's.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"clock_gettime".as_ptr()) } as usize;
        REAL.store(f, Ordering::Release);
    }
    // SAFETY: a non-null result of dlsym for `clock_gettime` is that
    // function.
    (f != 0).then(|| unsafe { std::mem::transmute::<usize, ClockGettime>(f) })
}

/// `clock_gettime(2)`, virtual inside user code.
///
/// # Safety
/// As the C function: `ts` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
) -> libc::c_int {
    if crate::sys::scope::in_user_code() {
        let t = match clock {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI => {
                VIRTUAL_REALTIME
            }
            _ => VIRTUAL_MONOTONIC,
        };
        // SAFETY: the caller's contract.
        unsafe { ts.write(t) };
        return 0;
    }
    match real() {
        // SAFETY: the caller's contract, forwarded.
        Some(f) => unsafe { f(clock, ts) },
        // SAFETY: the raw system call with the caller's arguments.
        None => unsafe { libc::syscall(libc::SYS_clock_gettime, clock, ts) as libc::c_int },
    }
}
