//! The write-tracking SIGSEGV handler must not swallow real crashes: a fault
//! that is not a write to a tracked page reaches the handler that was
//! installed before cmc's, or kills the process as it would have without cmc.
//!
//! Each scenario runs in a child process (this test binary re-executed with
//! `CMC_SIGNAL_CHILD` naming the scenario), because it ends the process.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

use cmc::memory::{Memory, MemoryConfig};
use cmc::{ArenaConfig, Tracking};

const CHILD: &str = "CMC_SIGNAL_CHILD";

/// Runs `scenario` in a child process and returns its output.
fn run_child(scenario: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(module_path!(), "::child")),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, scenario)
        .output()
        .unwrap()
}

/// Makes a memory whose arena is tracked by faults, performs a tracked write
/// (so the handler is installed and demonstrably working), and returns it.
fn tracked_memory() -> Memory {
    let mut mem = Memory::new(MemoryConfig::default());
    let a = mem
        .add_arena(
            "process 0",
            ArenaConfig::new()
                .reserve(1 << 20)
                .tracking(Tracking::Mprotect),
        )
        .unwrap();
    let root: *mut [u8; 10_000] = {
        let _in = mem.enter(a);
        Box::into_raw(Box::new([0u8; 10_000]))
    };
    let s0 = mem.capture();
    mem.restore(s0);
    {
        let _in = mem.enter(a);
        // SAFETY: the root object of the restored arena; the write faults
        // once and is recorded. Volatile: the box never escapes as far as
        // the compiler can see, so a plain store to it may be removed as
        // dead (it was, in some builds of this binary).
        unsafe { std::ptr::write_volatile(&mut (*root)[5000], 1) };
    }
    let s1 = mem.capture();
    assert_ne!(
        mem.fingerprint(s0),
        mem.fingerprint(s1),
        "the tracked write was not seen"
    );
    println!("tracked write seen");
    mem
}

static PREVIOUS_RAN: AtomicBool = AtomicBool::new(false);

extern "C" fn previous_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    PREVIOUS_RAN.store(true, Ordering::SeqCst);
    let msg = b"previous handler reached\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(1, msg.as_ptr().cast(), msg.len());
        libc::_exit(42);
    }
}

fn install_previous_handler() {
    // SAFETY: a zeroed sigaction is valid; we fill in a SA_SIGINFO handler.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            previous_handler;
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()),
            0
        );
    }
}

#[inline(never)]
fn wild_write(addr: usize) {
    // SAFETY: deliberately not: this is the crash under test.
    unsafe { std::ptr::write_volatile(addr as *mut u64, 1) };
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let buf = std::hint::black_box([n; 512]);
    if n == 0 {
        buf[0]
    } else {
        recurse(n + 1) + buf[1]
    }
}

/// The child side: does nothing unless this process is a child.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD) else {
        return;
    };
    match scenario.as_str() {
        "previous-handler" => {
            install_previous_handler();
            let _mem = tracked_memory();
            wild_write(16);
            unreachable!("the null write returned");
        }
        "default-action" => {
            let _mem = tracked_memory();
            wild_write(16);
            unreachable!("the null write returned");
        }
        "uncommitted-arena-space" => {
            install_previous_handler();
            let mem = tracked_memory();
            // Inside the arena's reservation but beyond what is committed:
            // not a tracked page, so a real crash.
            let beyond = mem.base(cmc::memory::ArenaId(0)) as usize + (1 << 20) - 8;
            wild_write(beyond);
            unreachable!("the write to uncommitted arena space returned");
        }
        "stack-overflow" => {
            let _mem = tracked_memory();
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(|| recurse(1))
                .unwrap()
                .join()
                .unwrap();
            unreachable!("the recursion returned");
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn a_foreign_fault_reaches_the_previous_handler() {
    let out = run_child("previous-handler");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tracked write seen"), "{stdout}");
    assert!(stdout.contains("previous handler reached"), "{stdout}");
    assert_eq!(out.status.code(), Some(42), "{out:?}");
}

#[test]
fn a_foreign_fault_without_a_previous_handler_kills_with_sigsegv() {
    use std::os::unix::process::ExitStatusExt;
    let out = run_child("default-action");
    assert!(String::from_utf8_lossy(&out.stdout).contains("tracked write seen"));
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
}

#[test]
fn a_write_to_uncommitted_arena_space_is_a_crash() {
    let out = run_child("uncommitted-arena-space");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("previous handler reached"),
        "{out:?}"
    );
    assert_eq!(out.status.code(), Some(42));
}

#[test]
fn a_stack_overflow_is_still_reported_by_rust() {
    use std::os::unix::process::ExitStatusExt;
    let out = run_child("stack-overflow");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("has overflowed its stack"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
}
