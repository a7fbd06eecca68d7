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
//! (2^22), so it names no other process. User code that signals itself
//! with `kill(getpid(), ...)` reaches its own process: cmc's `kill` sends a
//! signal for [`VIRTUAL_PID`] to the real id, and notes, as `raise` does,
//! a signal user code sends its own process, so that a handler that kills
//! its process (even with SIGKILL) is reported as a crash of that handler
//! with its trace, not as the kernel's out-of-memory killer.
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

/// `kill(2)`: inside user code, [`VIRTUAL_PID`] is this process, and a
/// signal to this process (or its group) is noted first.
#[no_mangle]
pub extern "C" fn kill(pid: libc::pid_t, signal: libc::c_int) -> libc::c_int {
    let real = crate::sys::real_pid();
    let user = crate::sys::scope::in_user_code();
    let pid = if user && pid == VIRTUAL_PID as libc::pid_t {
        real
    } else {
        pid
    };
    if user && signal != 0 && (pid == real || pid == 0) {
        crate::sys::process::note_self_signal(signal);
    }
    crate::sys::process::send_signal(pid, signal)
}

/// `raise(3)`: inside user code the signal is noted first.
#[no_mangle]
pub extern "C" fn raise(signal: libc::c_int) -> libc::c_int {
    if crate::sys::scope::in_user_code() && signal != 0 {
        crate::sys::process::note_self_signal(signal);
    }
    crate::sys::process::raise_signal(signal)
}
