//! Child processes and the signals that stop a run: forking a child whose
//! standard error and result go to pipes, waiting for it, killing it, and
//! turning SIGINT and SIGTERM into a request to stop. The engine's crash
//! log (`engine::isolate`) decides what runs in the child and what its end
//! means; this module only talks to the kernel.

use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// What [`fork_with_pipes`] returns in each process.
#[derive(Debug)]
pub(crate) enum Forked {
    /// In the child: standard error and descriptor `result_fd` are the
    /// write ends of the pipes; every other descriptor above `result_fd`
    /// but `keep` is closed.
    Child,
    /// In the parent: the child and the read ends of its standard error
    /// and of its result pipe.
    Parent {
        /// The child's process id.
        pid: libc::pid_t,
        /// What the child writes to standard error.
        err: File,
        /// What the child writes to `result_fd`.
        out: File,
    },
}

/// Forks a child that dies with this process, with its standard error and
/// descriptor `result_fd` sent to pipes the parent reads. The child keeps
/// standard input and output and `keep` (if above `result_fd`), and closes
/// every other descriptor it inherited (other children's pipes: their
/// readers would otherwise wait for this child too).
pub(crate) fn fork_with_pipes(result_fd: i32, keep: Option<i32>) -> io::Result<Forked> {
    let mut err_pipe = [0; 2];
    let mut out_pipe = [0; 2];
    // SAFETY: pipe writes two descriptors into each array.
    unsafe {
        if libc::pipe(err_pipe.as_mut_ptr()) != 0 || libc::pipe(out_pipe.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // The child starts counting coverage from zero (coverage::flush).
    crate::sys::coverage::flush();
    // SAFETY: fork has no preconditions; the caller's child side only runs
    // code on this thread and leaves with `exit_child`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: plain descriptor operations on descriptors we own, and
        // asking to die with the parent.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::dup2(err_pipe[1], 2);
            if out_pipe[1] != result_fd {
                libc::dup2(out_pipe[1], result_fd);
            }
            let keep = keep.unwrap_or(-1);
            let close = |from: i32, to: u32| {
                if from as u32 <= to
                    && libc::syscall(libc::SYS_close_range, from as u32, to, 0) != 0
                {
                    for fd in from..(to.min(4095) as i32 + 1) {
                        libc::close(fd);
                    }
                }
            };
            if keep > result_fd {
                close(result_fd + 1, keep as u32 - 1);
                close(keep + 1, u32::MAX);
            } else {
                close(result_fd + 1, u32::MAX);
            }
        }
        return Ok(Forked::Child);
    }
    // SAFETY: closing our copies of the child's ends; the read ends are
    // ours, open, and owned by the `File`s from now.
    unsafe {
        libc::close(err_pipe[1]);
        libc::close(out_pipe[1]);
        Ok(Forked::Parent {
            pid,
            err: File::from_raw_fd(err_pipe[0]),
            out: File::from_raw_fd(out_pipe[0]),
        })
    }
}

/// Ends a child at once, without running the parent's destructors or
/// atexit hooks.
pub(crate) fn exit_child(code: i32) -> ! {
    crate::sys::coverage::flush();
    // SAFETY: _exit ends the process immediately, as intended.
    unsafe { libc::_exit(code) }
}

/// How a child ended, as `waitpid` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

/// Whether `pid` (a child of ours) has ended, without waiting: `Some` once
/// it has (and it is reaped), or when it can no longer be waited for.
pub(crate) fn try_wait(pid: libc::pid_t) -> Option<Exit> {
    let mut status = 0;
    // SAFETY: polls our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r == pid || (r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
        Some(if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        })
    } else {
        None
    }
}

/// Kills `pid`, a child of ours that has not been reaped.
pub(crate) fn kill_child(pid: libc::pid_t) {
    // SAFETY: signals our own child, which has not been reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Writes all of `bytes` to descriptor `fd`, or as much as it takes.
pub(crate) fn write_all(fd: i32, bytes: &[u8]) {
    let mut written = 0;
    while written < bytes.len() {
        // SAFETY: writes from a live buffer to a descriptor of ours.
        let n = unsafe { libc::write(fd, bytes[written..].as_ptr().cast(), bytes.len() - written) };
        if n <= 0 {
            break;
        }
        written += n as usize;
    }
}

/// Where the signal user code sends its own process is noted: a word of
/// the isolated run's crash log (shared with the parent), or null.
static SELF_SIGNAL: std::sync::atomic::AtomicPtr<std::sync::atomic::AtomicU64> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Notes every signal user code sends its own process in `word` from now
/// on (in an isolated run's child: a word of its crash log, so that the
/// parent can tell a handler that killed its process from a killer
/// outside it). `word` must stay mapped for the rest of the process.
pub(crate) fn note_self_signals_in(word: &'static std::sync::atomic::AtomicU64) {
    SELF_SIGNAL.store(
        word as *const std::sync::atomic::AtomicU64 as *mut _,
        Ordering::Release,
    );
}

/// The exit status of an isolated child whose checker failed (a resource
/// cmc needed was refused): not user code's fault.
pub(crate) const CHECKER_FAILED: i32 = 86;

/// The prefix of the line such a child writes on its standard error.
pub(crate) const CHECKER_FAILURE: &str = "cmc: checker failure: ";

/// Whether this process is an isolated run's child.
static ISOLATED_CHILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks this process as an isolated run's child (see [`checker_failure`]).
pub(crate) fn enter_isolated_child() {
    ISOLATED_CHILD.store(true, Ordering::Relaxed);
}

/// Ends the run because cmc's own machinery failed (`message` names the
/// resource: a mapping refused, say), whatever user code was running: in
/// an isolated run's child, the line [`CHECKER_FAILURE`] `message` on
/// standard error and the exit status [`CHECKER_FAILED`], which the parent
/// reports as cmc's failure, never as a violation; in-process, a panic.
pub(crate) fn checker_failure(message: &str) -> ! {
    if ISOLATED_CHILD.load(Ordering::Relaxed) {
        write_all(2, CHECKER_FAILURE.as_bytes());
        write_all(2, message.as_bytes());
        write_all(2, b"\n");
        exit_child(CHECKER_FAILED);
    }
    panic!("cmc: {message}")
}

/// Notes that user code is sending `signal` to its own process.
pub(crate) fn note_self_signal(signal: i32) {
    let word = SELF_SIGNAL.load(Ordering::Acquire);
    if !word.is_null() {
        // SAFETY: `note_self_signals_in` was given a word that stays
        // mapped for the rest of the process.
        unsafe { &*word }.store(signal as u64, Ordering::Release);
    }
}

/// `kill(2)` itself, past cmc's interposed `kill`.
pub(crate) fn send_signal(pid: libc::pid_t, signal: libc::c_int) -> libc::c_int {
    // SAFETY: the kill system call takes two integers and touches no
    // memory of ours.
    unsafe { libc::syscall(libc::SYS_kill, pid, signal) as libc::c_int }
}

/// `raise(3)` itself, past cmc's interposed `raise`: the signal to this
/// thread.
pub(crate) fn raise_signal(signal: libc::c_int) -> libc::c_int {
    // SAFETY: tgkill takes three integers and touches no memory of ours;
    // the ids are this process's and this thread's.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            crate::sys::real_pid(),
            libc::gettid(),
            signal,
        ) as libc::c_int
    }
}

/// The signal that asked the run to stop, or 0.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(signal: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(signal, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set the stop request ([`stop_signal`]) instead
/// of ending the process (a forked child inherits the handlers).
pub(crate) fn catch_stop_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler
        // only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_job_stop(signal: libc::c_int) {
    // Async-signal-safe: one atomic store.
    let meant = if signal == libc::SIGUSR2 {
        libc::SIGTERM
    } else {
        libc::SIGINT
    };
    STOP.store(meant, Ordering::Relaxed);
}

/// In a process of an MPI job: makes SIGUSR1 and SIGUSR2, which `mpirun`
/// passes on to every process of the job (SIGINT and SIGTERM end the job
/// instead), set the stop request as SIGINT and SIGTERM would (`cargo
/// cmc` sends them for those).
pub(crate) fn catch_job_stop_signals() {
    for signal in [libc::SIGUSR1, libc::SIGUSR2] {
        // SAFETY: as in `catch_stop_signals`.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_job_stop as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that asked the run to stop, if one did.
#[inline]
pub(crate) fn stop_signal() -> Option<i32> {
    let s = STOP.load(Ordering::Relaxed);
    (s != 0).then_some(s)
}

/// Asks to be killed when the parent process dies.
pub(crate) fn die_with_parent() {
    // SAFETY: a prctl with no memory arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

/// Runs this program again, in this process, with address-space
/// randomization off, unless it is off already: the processes of a search
/// across processes exchange states as memory, which holds addresses into
/// the program (see `search::cluster`). Returns only when it is off (or
/// with the reason the system refused).
pub(crate) fn without_aslr() -> Result<(), String> {
    const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;
    const QUERY: libc::c_ulong = 0xffff_ffff;
    // SAFETY: personality with 0xffffffff only reads the persona.
    let now = unsafe { libc::personality(QUERY) };
    if now < 0 {
        return Err(format!(
            "cannot read the process's persona: {}",
            io::Error::last_os_error()
        ));
    }
    let now = now as libc::c_ulong;
    if now & ADDR_NO_RANDOMIZE != 0 {
        return Ok(());
    }
    // SAFETY: sets a flag of the persona, which takes effect at the next
    // exec.
    if unsafe { libc::personality(now | ADDR_NO_RANDOMIZE) } < 0 {
        return Err(format!(
            "the system refuses to turn address-space randomization off \
             (personality(ADDR_NO_RANDOMIZE): {}); a search across processes needs it off",
            io::Error::last_os_error()
        ));
    }
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(std::env::args_os().next().unwrap_or_default())
        .args(std::env::args_os().skip(1))
        .exec();
    Err(format!(
        "cannot run the program again without address-space randomization: {error}"
    ))
}

pub(crate) use super::job::job_rank;

/// Opens `path` for appending (creating it), close-on-exec, as a
/// descriptor numbered `min` or above; `None` when it cannot be opened.
pub(crate) fn open_append_above(path: &std::path::Path, min: i32) -> Option<i32> {
    use std::os::fd::IntoRawFd;
    let fd = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .ok()?
        .into_raw_fd();
    // SAFETY: duplicates a descriptor this process owns.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    // SAFETY: closes the original, which nothing else holds.
    unsafe { libc::close(fd) };
    (high >= min).then_some(high)
}
