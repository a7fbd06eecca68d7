//! The machine, the bottom layer of the runtime: everything that talks to
//! the operating system — address-space reservation and mappings, page
//! protection, signal handlers and alternate signal stacks here; child
//! processes ([`process`]), the address map ([`layout`]), the symbol table
//! ([`symbols`]), the stack ([`stack`]), worker shared memory ([`shm`]) —
//! and what every layer above consults cheaply: the thread-locals of the
//! current arena and of user code ([`scope`]), and the hash functions
//! ([`hash`], [`reloc`]), pure arithmetic that the address map needs too.
//!
//! The rest of the runtime calls the operating system only through these
//! modules, except the interposers that replace a C function and forward
//! to the real one (`determinism::clock`, `determinism::entropy`,
//! `memory::threads`); `tests/tests/suite/layers.rs` checks it.

pub(crate) mod coverage;
pub(crate) mod hash;
pub(crate) mod job;
pub(crate) mod layout;
pub(crate) mod process;
pub(crate) mod reloc;
pub(crate) mod scope;
pub(crate) mod shm;
pub(crate) mod stack;
pub(crate) mod symbols;

use std::io;

/// The page size the runtime is built for. Dirty tracking, the page store and
/// the fingerprints all work in units of this size; `check_page_size` asserts
/// that the machine agrees.
pub(crate) const PAGE: usize = 4096;

/// Asserts that the operating system's page size is [`PAGE`].
pub(crate) fn check_page_size() {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    assert_eq!(
        size as usize, PAGE,
        "cmc assumes {PAGE}-byte pages but this machine uses {size}-byte pages"
    );
}

/// Reserves `len` bytes of address space that can be neither read nor
/// written, and that count against no memory limit until committed.
pub(crate) fn reserve(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing cannot alias any existing memory.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(ptr.cast())
    }
}

/// Reserves `len` bytes exactly at `addr`, or fails (without touching any
/// existing mapping) when something is already there.
pub(crate) fn reserve_at(addr: usize, len: usize) -> io::Result<*mut u8> {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; it
    // fails with EEXIST instead.
    let ptr = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    if ptr as usize != addr {
        // Kernels before 4.17 ignore the flag and treat the address as a
        // hint: give the mapping back and report failure.
        // SAFETY: the mapping was just created and is unused.
        unsafe { release(ptr.cast(), len) };
        return Err(io::Error::from(io::ErrorKind::AddrInUse));
    }
    Ok(ptr.cast())
}

/// Maps `len` bytes of zero-filled, readable and writable memory that
/// reserves nothing until its pages are written; `shared`: the processes
/// forked later see the same pages (worker tables, the crash log).
pub(crate) fn map_zeroed(len: usize, shared: bool) -> io::Result<*mut u8> {
    let sharing = if shared {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE
    };
    // SAFETY: an anonymous mapping at an address of the kernel's choosing
    // cannot alias any existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// Maps the first `len` bytes of the open file `fd`, read-only.
pub(crate) fn map_file(fd: std::os::fd::RawFd, len: usize) -> io::Result<*const u8> {
    // SAFETY: a private read-only mapping of a file of ours at an address
    // of the kernel's choosing; the kernel checks the arguments.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// Unmaps a mapping made by [`map_zeroed`] or [`map_file`].
///
/// # Safety
/// `ptr..ptr+len` is that whole mapping and nothing refers into it any more.
pub(crate) unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: the caller owns the whole mapping and no longer uses it.
    unsafe { libc::munmap(ptr.cast(), len) };
}

/// Whether the `n` bytes at `a` and at `b` are equal, compared by the C
/// library's `memcmp` (bytes another thread may be writing meanwhile: the
/// answer is then only a hint, which Rust's own comparison could not give
/// without a data race).
///
/// # Safety
/// Both ranges are mapped and readable.
pub(crate) unsafe fn same_bytes(a: *const u8, b: *const u8, n: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe { libc::memcmp(a.cast(), b.cast(), n) == 0 }
}

/// The id of this operating-system process, by the system call itself:
/// the C symbol `getpid` is cmc's (`determinism::process_id`), virtual
/// inside user code.
pub(crate) fn real_pid() -> libc::pid_t {
    // SAFETY: getpid(2) takes no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as libc::pid_t }
}

/// Gives the processor to another thread or process.
pub(crate) fn yield_now() {
    // SAFETY: sched_yield has no preconditions.
    unsafe { libc::sched_yield() };
}

/// Returns a reservation made by [`reserve`] to the operating system.
///
/// # Safety
/// `ptr..ptr+len` is a whole reservation from [`reserve`] and nothing refers
/// to memory inside it any more.
pub(crate) unsafe fn release(ptr: *mut u8, len: usize) {
    // SAFETY: the caller owns the whole mapping and no longer uses it.
    let rc = unsafe { libc::munmap(ptr.cast(), len) };
    assert_eq!(
        rc,
        0,
        "munmap of an arena failed: {}",
        io::Error::last_os_error()
    );
}

/// The protections cmc gives arena pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prot {
    /// Committed and write-protected so the first write is observed.
    Read,
    /// Committed and writable.
    ReadWrite,
}

/// Changes the protection of whole pages.
///
/// # Safety
/// `ptr` is page-aligned, `ptr..ptr+len` lies inside a reservation of this
/// module, and no Rust reference to the range relies on the old protection
/// (making writable memory read-only while a `&mut` is used is a crash, not
/// undefined behaviour, but it must be intended).
pub(crate) unsafe fn protect(ptr: *mut u8, len: usize, prot: Prot) -> io::Result<()> {
    let flags = match prot {
        Prot::Read => libc::PROT_READ,
        Prot::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
    };
    if len == 0 {
        return Ok(());
    }
    // SAFETY: the caller guarantees the range is page-aligned and ours.
    let rc = unsafe { libc::mprotect(ptr.cast(), len, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The raw `mprotect(ptr, PAGE, READ|WRITE)` the fault handler uses: a bare
/// system call, no allocation, no lock, no `io::Error`.
///
/// # Safety
/// `ptr` is a page-aligned address inside a reservation of this module.
pub(crate) unsafe fn unprotect_page_raw(ptr: *mut u8) -> bool {
    // SAFETY: as for `protect`; mprotect is a plain system call and safe to
    // issue from a signal handler on Linux.
    unsafe { libc::mprotect(ptr.cast(), PAGE, libc::PROT_READ | libc::PROT_WRITE) == 0 }
}

/// Writes a message to standard error with one `write` call: usable from a
/// signal handler, where `eprintln!` (which locks and may allocate) is not.
pub(crate) fn write_stderr_raw(msg: &[u8]) {
    // SAFETY: write(2) is async-signal-safe and reads only `msg`.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

/// A signal disposition saved by [`install_segv_handler`].
pub(crate) type SavedAction = libc::sigaction;

/// The signature of an `SA_SIGINFO` handler.
pub(crate) type InfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for `signal` with `SA_SIGINFO | SA_ONSTACK | SA_NODEFER`
/// and returns the action that was installed before.
///
/// `SA_NODEFER` lets a handler that forwards to the previous one re-raise the
/// same signal; the previous handler decides what a foreign fault means.
pub(crate) fn install_handler(
    signal: libc::c_int,
    handler: InfoHandler,
) -> io::Result<SavedAction> {
    // SAFETY: an all-zero sigaction is a valid value (empty mask, no flags).
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
    // SAFETY: `new.sa_mask` is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: as above, zeroed is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigaction structs for the call.
    let rc = unsafe { libc::sigaction(signal, &new, &mut old) };
    if rc == 0 {
        Ok(old)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts a saved action back (used from the fault handler when forwarding a
/// fault to a default disposition, and by tests).
///
/// # Safety
/// `action` was returned by [`install_handler`] or `sigaction` itself.
pub(crate) unsafe fn restore_handler(signal: libc::c_int, action: &SavedAction) {
    // SAFETY: sigaction is async-signal-safe; `action` is a valid struct.
    unsafe {
        libc::sigaction(signal, action, std::ptr::null_mut());
    }
}

/// The size of the alternate signal stack cmc installs on threads that have
/// none. The fault handler needs little, but a forwarded handler (Rust's
/// stack-overflow reporter, a sanitizer) may need more.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// Makes sure the calling thread has an alternate signal stack, so the fault
/// handler still runs when the fault is a stack overflow. Threads started by
/// Rust's standard library usually have one already; this adds one (and
/// leaks it for the thread's lifetime, a one-off 64 KiB) only when missing.
pub(crate) fn ensure_alt_stack() -> io::Result<()> {
    // SAFETY: an all-zero stack_t is a valid out-parameter.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying with a null new stack only writes `current`.
    let rc = unsafe { libc::sigaltstack(std::ptr::null(), &mut current) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if current.ss_flags & libc::SS_DISABLE == 0 && current.ss_size >= libc::MINSIGSTKSZ {
        return Ok(());
    }
    let mem = reserve(ALT_STACK_SIZE)?;
    // SAFETY: `mem` is a fresh reservation of exactly this length.
    unsafe { protect(mem, ALT_STACK_SIZE, Prot::ReadWrite)? };
    let stack = libc::stack_t {
        ss_sp: mem.cast(),
        ss_flags: 0,
        ss_size: ALT_STACK_SIZE,
    };
    // SAFETY: `stack` describes writable memory that stays mapped for the
    // rest of the process's life.
    let rc = unsafe { libc::sigaltstack(&stack, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
