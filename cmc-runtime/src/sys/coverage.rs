//! Coverage of the user's code by a check (`cargo cmc check --coverage`).
//!
//! `cargo cmc` builds the harness with the toolchain's source-based
//! coverage (`-C instrument-coverage`) on the crates whose coverage is
//! asked for: the compiler gives every region of their code a 64-bit
//! counter, in the program's section `__llvm_prf_cnts`, which the code
//! increments as it runs. The harness hands the runtime the profiler
//! runtime's functions ([`Hooks`]); this module makes the counters survive
//! what a check does to a process:
//!
//! * The search runs in forked children (the isolated run, its workers),
//!   which leave with `_exit`: what they count would die with them. Before
//!   the harness forks for the first time, a zeroed *shared* array of as
//!   many counters is mapped. Every process adds its own counters into it
//!   and zeroes them ([`flush`]): before every transition, before it forks
//!   (so that a child does not count its parent's counts again) and when it
//!   ends. A child that crashes loses at most what ran since its last
//!   transition began.
//! * A global is part of no state: the counters are never restored with a
//!   state, and `memory::globals` does not scan them.
//!
//! At the end of the check ([`finish`]) the harness's counters are set to
//! the totals and the profiler runtime writes them as a raw profile, which
//! `cargo cmc` turns into lcov with the toolchain's `llvm-profdata` and
//! `llvm-cov`. The counts are the executions of each region summed over
//! every transition, guard, invariant and fingerprint the search ran, in
//! every worker.

use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The profiler runtime's functions, as the coverage harness declares them
/// (they are linked into a program built with `-C instrument-coverage`).
#[derive(Debug, Clone, Copy)]
pub struct Hooks {
    /// `__llvm_profile_begin_counters`: the first counter.
    pub begin_counters: unsafe extern "C" fn() -> *mut c_char,
    /// `__llvm_profile_end_counters`: one past the last counter.
    pub end_counters: unsafe extern "C" fn() -> *mut c_char,
    /// `__llvm_profile_set_filename`: where the next write goes.
    pub set_filename: unsafe extern "C" fn(*const c_char),
    /// `__llvm_profile_write_file`: writes the raw profile (0: written).
    pub write_file: unsafe extern "C" fn() -> c_int,
}

/// The environment variable that names the raw profile a check writes.
pub const FILE_VAR: &str = "CMC_COVERAGE_FILE";

/// The process's counters (`[LOCAL, LOCAL + 8 * COUNT)`) and the shared
/// totals (`SHARED`); 0 while coverage is off.
static LOCAL: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static SHARED: AtomicUsize = AtomicUsize::new(0);
/// The hooks and the profile's path, for [`finish`].
static FINISH: std::sync::OnceLock<(Hooks, CString)> = std::sync::OnceLock::new();

/// Turns coverage on when the harness was asked for it (`CMC_COVERAGE_FILE`
/// set): maps the shared totals. Call once, before anything forks. Without
/// the variable (the harness's `list`, a replay) it does nothing, and
/// neither does the rest of the collection.
pub fn install(hooks: Hooks) -> Result<(), String> {
    let Some(file) = std::env::var_os(FILE_VAR) else {
        return Ok(());
    };
    let _sys = crate::sys::scope::system_scope();
    // SAFETY: the profiler runtime's section bounds; no arguments.
    let (begin, end) = unsafe { ((hooks.begin_counters)(), (hooks.end_counters)()) };
    let (begin, end) = (begin as usize, end as usize);
    assert!(
        begin <= end && begin % 8 == 0 && (end - begin) % 8 == 0,
        "the coverage counters are 64-bit words: [{begin:#x}, {end:#x})"
    );
    let count = (end - begin) / 8;
    let shared = crate::sys::map_zeroed((count * 8).max(8), true)
        .map_err(|e| format!("cannot map the shared coverage counters ({count}): {e}"))?;
    // In a search across processes, each writes a profile of its own
    // (process 0 the file named, process r the same name with `.r`), which
    // `cargo cmc` merges.
    let mut file = file;
    if let Some(rank) = crate::sys::job::job_rank().filter(|&r| r > 0) {
        file.push(format!(".{rank}"));
    }
    let path = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(file.as_os_str()))
        .map_err(|_| format!("{FILE_VAR} holds a NUL byte"))?;
    FINISH
        .set((hooks, path))
        .map_err(|_| "coverage is installed twice".to_string())?;
    SHARED.store(shared as usize, Ordering::Relaxed);
    COUNT.store(count, Ordering::Relaxed);
    LOCAL.store(begin, Ordering::Release);
    Ok(())
}

/// The counters' address range, which `memory::globals` leaves out.
pub(crate) fn counters_range() -> Option<(usize, usize)> {
    let local = LOCAL.load(Ordering::Acquire);
    (local != 0).then(|| (local, local + 8 * COUNT.load(Ordering::Relaxed)))
}

/// Adds this process's counters into the shared totals and zeroes them.
/// Async-signal-safe (loads, stores and atomic additions); a no-op while
/// coverage is off.
#[inline]
pub(crate) fn flush() {
    let local = LOCAL.load(Ordering::Relaxed);
    if local == 0 {
        return;
    }
    flush_from(local);
}

#[cold]
fn flush_from(local: usize) {
    let count = COUNT.load(Ordering::Relaxed);
    let shared = SHARED.load(Ordering::Relaxed) as *const AtomicU64;
    let local = local as *mut u64;
    for i in 0..count {
        // SAFETY: `local` is the profiler's counter array of `count` words
        // (install checked its bounds), which instrumented code on this
        // thread increments with plain stores; volatile, because the
        // compiler does not know that code elsewhere writes them.
        let c = unsafe { local.add(i).read_volatile() };
        if c != 0 {
            // SAFETY: `shared` maps `count` zeroed words, shared with every
            // process forked since, and lives as long as the program.
            unsafe {
                (*shared.add(i)).fetch_add(c, Ordering::Relaxed);
                local.add(i).write_volatile(0);
            }
        }
    }
}

/// Ends the collection in the harness, after the check: sets the
/// counters to the totals of every process and has the profiler runtime
/// write them to the file [`FILE_VAR`] named. `Ok(None)` when coverage
/// is off.
pub(crate) fn finish() -> Result<Option<String>, String> {
    let local = LOCAL.load(Ordering::Acquire);
    let Some((hooks, path)) = FINISH.get().filter(|_| local != 0) else {
        return Ok(None);
    };
    flush_from(local);
    let count = COUNT.load(Ordering::Relaxed);
    let shared = SHARED.load(Ordering::Relaxed) as *const AtomicU64;
    for i in 0..count {
        // SAFETY: as in `flush_from`; the workers have ended.
        unsafe {
            let total = (*shared.add(i)).load(Ordering::Relaxed);
            (local as *mut u64).add(i).write_volatile(total);
        }
    }
    // Counting stops here: what runs after (writing the result) is not
    // the check's.
    LOCAL.store(0, Ordering::Release);
    // SAFETY: a NUL-terminated path that outlives the call (the profiler
    // runtime keeps the pointer: the string is in a static).
    let written = unsafe {
        (hooks.set_filename)(path.as_ptr());
        (hooks.write_file)()
    };
    let shown = path.to_string_lossy().into_owned();
    if written != 0 {
        return Err(format!("cannot write the coverage profile {shown}"));
    }
    Ok(Some(shown))
}
