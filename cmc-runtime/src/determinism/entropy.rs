//! Controlled entropy: inside user code, the operating system's random
//! bytes — `getrandom(2)` as rand's `OsRng` and the `getrandom` crate ask
//! for them (through `syscall`), and the C library's `getrandom` and
//! `getentropy` — come from a generator seeded from the state's
//! fingerprint and the event, like the thread RNG (`determinism::random`).
//!
//! How: cmc defines the C symbols `getrandom`, `getentropy` and (on x86-64
//! and AArch64 Linux, where a variadic call passes its integer arguments
//! like a fixed one) `syscall`; the executable's own definitions take
//! precedence over the C library's. Outside user code, and for every other
//! system call, they forward to the C library's (found with
//! `dlsym(RTLD_NEXT)`).
//!
//! Not controlled: a read of `/dev/urandom`, and code that finds the C
//! library's `getrandom` with `dlsym` (the `getrandom` crate from 0.3 on,
//! std's own keys, which `determinism::random` sets instead); the determinism
//! check reports a handler whose successor they change.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha12Rng;

thread_local! {
    /// The key of the current transition (its state and event), if one
    /// is seeded.
    static KEY: Cell<Option<u128>> = const { Cell::new(None) };
    /// Whether user code drew entropy since the key was set; the generator
    /// is built from the key on the first draw.
    static DRAWN: Cell<bool> = const { Cell::new(false) };
    /// The generator user code's entropy comes from.
    static ENTROPY: RefCell<Option<ChaCha12Rng>> = const { RefCell::new(None) };
}

/// Sets the key the entropy user code draws next comes from. Costs two
/// thread-local writes: the generator is built only when user code draws.
pub(crate) fn set_key(key: u128) {
    KEY.with(|k| k.set(Some(key)));
    DRAWN.with(|d| d.set(false));
}

/// The generator's seed for `key`.
pub(crate) fn seed_of(key: u128) -> [u8; 32] {
    let mut seed = [0u8; 32];
    seed[..16].copy_from_slice(&key.rotate_left(64).to_le_bytes());
    seed[16..].copy_from_slice(&(key ^ 0x0065_6e74_726f_7079).to_le_bytes());
    seed
}

/// Whether user code drew entropy since the last [`set_key`].
pub(crate) fn drawn() -> bool {
    DRAWN.with(Cell::get)
}

/// Fills `buf` from the transition's generator if user code runs and a key
/// is set; false otherwise (the caller then asks the C library).
///
/// # Safety
/// `buf` is valid for `len` bytes of writes.
unsafe fn fill(buf: *mut u8, len: usize) -> bool {
    if !crate::sys::scope::in_user_code() {
        return false;
    }
    let Some(key) = KEY.try_with(Cell::get).ok().flatten() else {
        return false;
    };
    ENTROPY
        .try_with(|e| {
            let Ok(mut e) = e.try_borrow_mut() else {
                return false;
            };
            if !DRAWN.with(|d| d.replace(true)) {
                *e = Some(ChaCha12Rng::from_seed(seed_of(key)));
            }
            let Some(rng) = e.as_mut() else { return false };
            if len > 0 {
                // SAFETY: the caller's contract.
                rng.fill_bytes(unsafe { std::slice::from_raw_parts_mut(buf, len) });
            }
            true
        })
        .unwrap_or(false)
}

/// The C library's definitions, once found.
static REAL_GETRANDOM: AtomicUsize = AtomicUsize::new(0);
static REAL_GETENTROPY: AtomicUsize = AtomicUsize::new(0);
static REAL_SYSCALL: AtomicUsize = AtomicUsize::new(0);

/// Finds the C library's definitions now: `dlsym` takes the dynamic
/// loader's lock, which a forked child must never wait for.
pub(crate) fn warm() {
    next(&REAL_GETRANDOM, c"getrandom");
    next(&REAL_GETENTROPY, c"getentropy");
    next(&REAL_SYSCALL, c"syscall");
}

/// The next definition of `name` after this executable's (the C
/// library's), cached in `slot`.
fn next(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let mut f = slot.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the next
        // definition after this object's.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        slot.store(f, Ordering::Release);
    }
    f
}

/// `getrandom(3)`, seeded inside user code.
///
/// # Safety
/// As the C function: `buf` is valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn getrandom(
    buf: *mut libc::c_void,
    len: libc::size_t,
    flags: libc::c_uint,
) -> libc::ssize_t {
    // SAFETY: the caller's contract.
    if unsafe { fill(buf.cast(), len) } {
        return len as libc::ssize_t;
    }
    match next(&REAL_GETRANDOM, c"getrandom") {
        // SAFETY: the system call with the caller's arguments.
        0 => unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) as libc::ssize_t },
        f => {
            type F = unsafe extern "C" fn(
                *mut libc::c_void,
                libc::size_t,
                libc::c_uint,
            ) -> libc::ssize_t;
            // SAFETY: dlsym's result for `getrandom` is that function; the
            // caller's arguments, forwarded.
            unsafe { std::mem::transmute::<usize, F>(f)(buf, len, flags) }
        }
    }
}

/// `getentropy(3)`, seeded inside user code.
///
/// # Safety
/// As the C function: `buf` is valid for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn getentropy(buf: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    // The C function's limit.
    if len <= 256 {
        // SAFETY: the caller's contract.
        if unsafe { fill(buf.cast(), len) } {
            return 0;
        }
    }
    match next(&REAL_GETENTROPY, c"getentropy") {
        0 => {
            // SAFETY: errno is this thread's.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
        f => {
            type F = unsafe extern "C" fn(*mut libc::c_void, libc::size_t) -> libc::c_int;
            // SAFETY: dlsym's result for `getentropy` is that function; the
            // caller's arguments, forwarded.
            unsafe { std::mem::transmute::<usize, F>(f)(buf, len) }
        }
    }
}

/// `syscall(2)`, with `getrandom` seeded inside user code. The C function
/// is variadic; on x86-64 and AArch64 Linux a variadic callee receives its
/// integer arguments where a fixed one does (the sixth system-call argument
/// on the stack on x86-64, in a register on AArch64), and the C library's
/// `syscall` reads exactly these seven words, so this definition receives
/// and forwards every call faithfully.
///
/// # Safety
/// As the C function.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[no_mangle]
pub unsafe extern "C" fn syscall(
    number: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    if number == libc::SYS_getrandom {
        // SAFETY: getrandom's contract: `a1` points to `a2` writable bytes.
        if unsafe { fill(a1 as *mut u8, a2 as usize) } {
            return a2;
        }
    }
    let f = next(&REAL_SYSCALL, c"syscall");
    assert!(f != 0, "cmc: the C library's `syscall` was not found");
    type F = unsafe extern "C" fn(
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
        libc::c_long,
    ) -> libc::c_long;
    // SAFETY: dlsym's result for `syscall` is the C library's, which reads
    // its number and six words as passed here (see above); the caller's
    // arguments, forwarded.
    unsafe { std::mem::transmute::<usize, F>(f)(number, a1, a2, a3, a4, a5, a6) }
}
