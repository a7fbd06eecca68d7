//! Stack scrubbing.
//!
//! Rust copies whole values, padding included, so a struct built on the stack
//! and moved into the heap carries whatever bytes were on the stack before it.
//! If those bytes differ between two runs of the same transition, the same
//! logical state gets two fingerprints. The engine therefore zeroes the stack
//! region below its own frame before every transition: the same transition
//! from the same state then sees the same stack garbage (zeros).

use std::hint::black_box;

/// Bytes of stack the engine scrubs before each transition unless a model
/// says otherwise.
pub const DEFAULT_SCRUB_BYTES: usize = 64 * 1024;

/// Zeroes about `bytes` bytes of the calling thread's stack below the
/// caller's frame. `bytes` must be well below the thread's stack size (the
/// default for spawned threads is 2 MiB).
///
/// On x86-64 the region is zeroed in one contiguous `rep stosb` right below
/// the stack pointer, so no byte of it is skipped: the next call's frame
/// starts on zeroed memory. (This function has no locals, so it uses no red
/// zone.) Elsewhere it recurses through frames holding
/// zeroed buffers, which leaves the frames' own bookkeeping slots unscrubbed.
#[inline(never)]
pub fn scrub_stack(bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the memory below the stack pointer belongs to this thread's
    // stack and holds no live data: nothing below the current frame is in
    // use while this function runs, and it has no locals in a red zone. The
    // assembly changes no register other than those declared, and does not
    // touch the stack pointer.
    unsafe {
        std::arch::asm!(
            "mov rdi, rsp",
            "sub rdi, rcx",
            "xor eax, eax",
            "rep stosb",
            inout("rcx") bytes => _,
            out("rdi") _,
            out("eax") _,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    scrub_frames(bytes.div_ceil(FRAME));
}

/// Zeroes the stack below the caller's frame down to address `target`
/// (nothing when `target` is above this frame).
#[inline(never)]
pub(crate) fn scrub_down_to(target: usize) {
    let marker = 0u8;
    let here = black_box(&marker as *const u8) as usize;
    if target < here {
        scrub_stack(here - target);
    }
}

/// Whether the `band` bytes that lie `depth` bytes below the caller's frame
/// are still zero, as [`scrub_stack`]`(depth + band)` left them: sampled
/// every 128 bytes (a frame that reached the band wrote into it). False when
/// code that ran since went deeper than `depth`. `stack` is the thread's
/// stack as `(low, length)` (`sys::layout::thread_stack`).
#[inline(never)]
pub(crate) fn band_is_clean(depth: usize, band: usize, stack: (u64, u64)) -> bool {
    let marker = 0u8;
    let here = black_box(&marker as *const u8) as usize & !7;
    // This frame sits a few dozen bytes below the one `scrub_stack` had:
    // keep a margin at both ends of the band.
    const MARGIN: usize = 256;
    assert!(
        band > 2 * MARGIN && depth > MARGIN,
        "a guard band of {band} bytes below {depth} is too small to check"
    );
    let top = here.saturating_sub(depth + MARGIN);
    let bottom = here.saturating_sub(depth + band - MARGIN);
    let (low, len) = stack;
    if (bottom as u64) < low || len == 0 {
        return true;
    }
    (bottom..top).step_by(128).all(|at| {
        // SAFETY: `at` lies inside this thread's stack (checked above) and
        // below this frame: mapped memory no other thread writes; a volatile
        // read of a word of it.
        unsafe { std::ptr::read_volatile(at as *const u64) == 0 }
    })
}

#[cfg(not(target_arch = "x86_64"))]
const FRAME: usize = 4096;

#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
fn scrub_frames(frames: usize) {
    let mut buf = [0u8; FRAME];
    // `black_box` keeps the zeroing: without it the compiler could drop the
    // writes to a buffer nothing reads.
    black_box(&mut buf);
    if frames > 1 {
        scrub_frames(frames - 1);
    }
    // Using `buf` after the call keeps this frame alive during the recursive
    // call, so it is not turned into a loop that reuses one frame.
    black_box(&buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn leave_garbage(pattern: u8) {
        let mut buf = [pattern; 32 * 1024];
        black_box(&mut buf);
    }

    /// Reads 4 KiB of the stack starting 12 KiB below this function's frame,
    /// a region that `leave_garbage` and `scrub_stack`, called from the same
    /// caller, both cover.
    #[inline(never)]
    fn stack_below() -> [u8; 4096] {
        let marker = 0u8;
        let here = black_box(&marker as *const u8) as usize;
        let from = (here - 12 * 1024) & !7;
        let mut out = [0u8; 4096];
        for (k, byte) in out.iter_mut().enumerate() {
            // SAFETY: test threads have fully mapped 2 MiB stacks, so 16 KiB
            // below the current frame is mapped, readable memory; no function
            // call happens during the loop, so nothing else writes there.
            *byte = unsafe { std::ptr::read_volatile((from + k) as *const u8) };
        }
        out
    }

    #[test]
    fn scrubbing_replaces_stack_garbage_with_zeros() {
        // Control: without scrubbing the garbage is visible, so the check
        // below observes real stack memory.
        leave_garbage(0xAB);
        let before = stack_below();
        assert!(
            before.iter().filter(|&&b| b == 0xAB).count() > 2048,
            "test cannot see stack garbage"
        );
        leave_garbage(0xAB);
        scrub_stack(DEFAULT_SCRUB_BYTES);
        let after = stack_below();
        let left = after.iter().filter(|&&b| b == 0xAB).count();
        assert_eq!(left, 0, "{left} bytes of garbage survived scrub_stack");
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Padded {
        a: u8,
        // 7 bytes of padding here
        b: u64,
    }

    #[inline(never)]
    fn build_and_copy(dst: &mut [u8; 16]) {
        let v = black_box(Padded { a: 1, b: 2 });
        // SAFETY: Padded is 16 bytes; reading its bytes, padding included,
        // is what a memcpy into the heap does.
        let bytes: [u8; 16] = unsafe { std::mem::transmute(v) };
        *dst = bytes;
    }

    #[test]
    fn padding_copied_from_a_scrubbed_stack_is_the_same_every_time() {
        let mut first = [0u8; 16];
        let mut second = [0u8; 16];
        leave_garbage(0x11);
        scrub_stack(DEFAULT_SCRUB_BYTES);
        build_and_copy(&mut first);
        leave_garbage(0x77);
        scrub_stack(DEFAULT_SCRUB_BYTES);
        build_and_copy(&mut second);
        assert_eq!(
            first, second,
            "padding bytes differ between two runs of the same code"
        );
    }
}
