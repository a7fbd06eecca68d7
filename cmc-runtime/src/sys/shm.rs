//! Memory shared by the worker processes of a parallel search
//! (`--jobs`): a region mapped before the workers are forked, so that it
//! is at the same address in all of them, that reserves no memory until
//! its pages are written, and a spin lock that works across processes.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::PAGE;

/// An anonymous shared mapping (see the module documentation), unmapped
/// when dropped.
pub(crate) struct Region {
    base: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory that every user accesses through
// atomics (or under a lock held through atomics); the pointer is never
// freed while a `Region` lives.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// A region of `len` bytes, or the largest power-of-two fraction of it
    /// (down to `min`) the system agrees to map.
    pub(crate) fn new(mut len: usize, min: usize) -> std::io::Result<Region> {
        len = len.next_multiple_of(PAGE);
        loop {
            // SAFETY: an anonymous mapping of our own, zero-filled, at an
            // address of the kernel's choosing; unmapped by `drop`.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Ok(Region {
                    base: p.cast(),
                    len,
                });
            }
            if len / 2 < min {
                return Err(std::io::Error::last_os_error());
            }
            len = (len / 2).next_multiple_of(PAGE);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The 64-bit word at byte offset `8 * i`.
    #[inline]
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        assert!(
            (i + 1) * 8 <= self.len,
            "shared word {i} is beyond the region ({} bytes)",
            self.len
        );
        // SAFETY: in bounds (checked above), 8-aligned (the base is page
        // aligned), zero-initialised shared memory that lives as long as
        // `self`; AtomicU64 has the layout of u64.
        unsafe { &*self.base.add(i * 8).cast::<AtomicU64>() }
    }

    /// Copies `bytes` into the region at byte offset `at`. The processes
    /// that share the region order their accesses to a range themselves
    /// (by barriers on its words): a write while another process reads the
    /// same bytes gives that reader a mix of old and new bytes.
    pub(crate) fn write(&self, at: usize, bytes: &[u8]) {
        assert!(
            at.checked_add(bytes.len())
                .is_some_and(|end| end <= self.len),
            "a write beyond the shared region"
        );
        // SAFETY: the destination lies inside our live mapping (checked
        // above) and cannot overlap `bytes`, memory of this process's own
        // that is not in the region (no reference into the region is
        // handed out but atomic words, and `bytes` is not one).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(at), bytes.len()) };
    }

    /// Copies the bytes at byte offset `at` into `out` (see
    /// [`Region::write`] for the order of accesses).
    pub(crate) fn read(&self, at: usize, out: &mut [u8]) {
        assert!(
            at.checked_add(out.len()).is_some_and(|end| end <= self.len),
            "a read beyond the shared region"
        );
        // SAFETY: the source lies inside our live mapping (checked above);
        // `out` is this process's own memory outside it.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(at), out.as_mut_ptr(), out.len()) };
    }

    /// Gives the physical memory of the whole pages in `[from, from + len)`
    /// bytes back to the system; they read as zeros afterwards.
    pub(crate) fn discard(&self, from: usize, len: usize) {
        let start = from.next_multiple_of(PAGE);
        let end = (from + len) / PAGE * PAGE;
        if end <= start {
            return;
        }
        assert!(end <= self.len, "discarding beyond the shared region");
        // SAFETY: the range lies inside our mapping, which stays mapped:
        // the caller gives the range up, and a reader that still loads
        // words from it (the visited set's lock-free `contains`) reads its
        // old contents or zeros.
        unsafe { libc::madvise(self.base.add(start).cast(), end - start, libc::MADV_REMOVE) };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference into it outlives
        // the region.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A spin lock in a shared word: 0 is free, otherwise the word holds the
/// holder's process id. Held only by the checker's own code, never across
/// user code, so the parent's watchdog never stops a holder; but a worker
/// can still be killed from outside (by a user, by the out-of-memory
/// killer) while it holds one. A waiter therefore looks now and then
/// whether the holder still lives, and when it does not, ends the run as
/// cmc's own failure ([`checker_failure`](crate::sys::process::checker_failure)):
/// the structure the lock guarded may be half changed, and waiting would
/// last forever (the watchdog then took the wait for a hang of the user
/// code that ran last).
pub(crate) struct SpinGuard<'a>(&'a AtomicU64);

/// What a waiter says of a holder that ended: the consequence of another
/// worker's end, which the merged result names instead (see
/// `search::parallel`).
pub(crate) const HOLDER_ENDED: &str = "ended while it held a lock of the workers' shared memory";

pub(crate) fn lock(word: &AtomicU64) -> SpinGuard<'_> {
    let me = crate::sys::real_pid() as u64;
    assert!(me != 0, "a process id is never 0");
    let mut spins = 0u64;
    loop {
        match word.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(holder) => {
                spins += 1;
                if spins < 100 {
                    std::hint::spin_loop();
                } else {
                    crate::sys::yield_now();
                    if spins % 4096 == 0 && holder != 0 && holder != me && !alive(holder as i32) {
                        crate::sys::process::checker_failure(&format!(
                            "a worker process (pid {holder}) {HOLDER_ENDED} (killed from \
                             outside cmc?); the search cannot go on without it"
                        ));
                    }
                }
            }
        }
    }
    if fault_dies_holding() {
        // Fault injection (tests): this worker is killed while it holds
        // the lock.
        crate::sys::process::send_signal(me as libc::pid_t, libc::SIGKILL);
    }
    SpinGuard(word)
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Whether process `pid` still runs: it exists and is not a zombie (a
/// killed worker stays a zombie until the parent reaps it).
fn alive(pid: i32) -> bool {
    match std::fs::read(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => match stat.iter().rposition(|&b| b == b')') {
            Some(at) => !matches!(stat.get(at + 2), Some(b'Z' | b'X')),
            None => true,
        },
        Err(_) => false,
    }
}

/// The locks still to take before this process dies holding one (fault
/// injection, see [`die_holding_lock`]); 0: never.
static FAULT_LEFT: AtomicU64 = AtomicU64::new(0);

/// Fault injection for tests: the `k`-th lock this process takes from now
/// on kills the process while it holds the lock, as a kill from outside
/// at the worst moment would.
pub(crate) fn die_holding_lock(k: u64) {
    FAULT_LEFT.store(k, Ordering::Relaxed);
}

fn fault_dies_holding() -> bool {
    let left = FAULT_LEFT.load(Ordering::Relaxed);
    if left == 0 {
        return false;
    }
    FAULT_LEFT.store(left - 1, Ordering::Relaxed);
    left == 1
}
