//! A controlled process id: inside user code that cmc runs (handlers,
//! guards, invariants, constructors), `std::process::id()` and
//! `libc::getpid()` return [`VIRTUAL_PID`], not the id of the operating
//! system's process, which differs between the search's workers, an
//! isolated check's child and a replay. A state that stores it (a temporary
//! file's name, a log line, a seed) is then the same in every run, and its
//! traces replay in a fresh process. Outside user code the real id is
//! returned.
//!
//! [`VIRTUAL_PID`] lies above the largest id Linux gives a process
//! (2^22), so it names no process: user code that signals "itself" with
//! `kill(getpid(), ...)` gets `ESRCH` instead of signalling a stranger.
//!
//! How: as for the clocks (`determinism::clock`), cmc defines the C symbol
//! `getpid`, which the standard library calls; the executable's own
//! definition takes precedence over the C library's.

/// The process id user code reads: above Linux's largest (`PID_MAX_LIMIT`,
/// 2^22), so that it is no process's.
pub const VIRTUAL_PID: u32 = 5_000_000;

/// `getpid(2)`, virtual inside user code.
#[no_mangle]
pub extern "C" fn getpid() -> libc::pid_t {
    if crate::sys::scope::in_user_code() {
        return VIRTUAL_PID as libc::pid_t;
    }
    crate::sys::real_pid()
}
