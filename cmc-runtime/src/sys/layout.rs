//! Layout-independent identity: a word that points into a loaded module
//! (the executable's or a shared library's text, read-only data or data)
//! is hashed as (module, offset), never as its address, so that a state
//! holding a string literal, a vtable or a function pointer fingerprints
//! the same in every process that runs the same build, whatever address
//! randomization did.
//!
//! The modules are listed once, in the order the dynamic linker reports
//! them (the executable first), which is the same in every run of a build.
//!
//! A word inside a function or a static of the executable that its symbol
//! table names is hashed as (symbol name, offset) instead, which is also
//! the same in another executable built from the same code — the test
//! `cargo cmc check --emit-test` writes is one: a function pointer in a
//! state then fingerprints alike in the checker and in the emitted test.
//! Words with no symbol (vtables, string literals, other constants) stay
//! (module, offset): the same build only.

use std::sync::OnceLock;

/// Marks a module-relative word, so it never hashes like the same small
/// integer or an arena-relative pointer.
const MODULE_TAG: u64 = 0x9e6c_63d0_676a_9a99;

/// Marks a symbol-relative word.
const SYMBOL_TAG: u64 = 0x73d1_a8b3_5c2e_0f47;

/// The loaded modules' address ranges.
#[derive(Debug)]
pub(crate) struct Modules {
    /// `(start, end, module index)`, sorted by start.
    ranges: Vec<(u64, u64, u64)>,
    /// `[low, low + span)` covers every range: the quick rejection test.
    pub(crate) low: u64,
    pub(crate) span: u64,
    /// Where the executable is loaded: symbol values are relative to it.
    pub(crate) exe_bias: u64,
    /// The executable's functions and statics with a size, as absolute
    /// `(start, end, hash of the demangled name)`, sorted by start; empty
    /// for a stripped binary.
    symbols: Vec<(u64, u64, u64)>,
}

static MODULES: OnceLock<Modules> = OnceLock::new();

/// The modules of this process (listed on first use, in checker memory).
pub(crate) fn modules() -> &'static Modules {
    MODULES.get_or_init(|| {
        let _sys = crate::sys::scope::system_scope();
        Modules::list()
    })
}

impl Modules {
    fn list() -> Modules {
        struct Found {
            ranges: Vec<(u64, u64, u64)>,
            exe_bias: Option<u64>,
        }
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: `data` is the `Found` passed below; `info` is valid for
            // this call (dl_iterate_phdr's contract).
            let (found, info) = unsafe { (&mut *(data as *mut Found), &*info) };
            let index = found.ranges.last().map_or(0, |r| r.2 + 1);
            let bias = info.dlpi_addr;
            // The executable comes first.
            found.exe_bias.get_or_insert(bias);
            // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
            let phdrs =
                unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
            let loads = phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
            let start = loads.clone().map(|p| bias + p.p_vaddr).min();
            let end = loads.map(|p| bias + p.p_vaddr + p.p_memsz).max();
            if let (Some(start), Some(end)) = (start, end) {
                found.ranges.push((start, end, index));
            }
            0
        }
        let mut found = Found {
            ranges: Vec::new(),
            exe_bias: None,
        };
        // SAFETY: `each` matches the callback type and only reads the
        // headers during the call.
        unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut Found as *mut libc::c_void) };
        let mut ranges = found.ranges;
        ranges.sort_unstable();
        let low = ranges.first().map_or(0, |r| r.0);
        let high = ranges.iter().map(|r| r.1).max().unwrap_or(low);
        let exe_bias = found.exe_bias.unwrap_or(0);
        Modules {
            ranges,
            low,
            span: high - low,
            exe_bias,
            symbols: exe_symbols(exe_bias),
        }
    }

    /// `w` as (module, offset), tagged, if it points into a module;
    /// otherwise `w`.
    #[inline]
    pub(crate) fn relocate(&self, w: u64) -> u64 {
        if w.wrapping_sub(self.low) < self.span {
            self.locate(w)
        } else {
            w
        }
    }

    #[cold]
    fn locate(&self, w: u64) -> u64 {
        let k = self.symbols.partition_point(|&(s, _, _)| s <= w);
        if let Some(&(start, end, name)) = k.checked_sub(1).map(|k| &self.symbols[k]) {
            if w < end {
                return crate::sys::hash::fmix64(
                    name ^ (w - start).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                ) ^ SYMBOL_TAG;
            }
        }
        let i = self.ranges.partition_point(|&(s, _, _)| s <= w);
        match i.checked_sub(1).map(|i| self.ranges[i]) {
            Some((start, end, index)) if w < end => ((index << 40) | (w - start)) ^ MODULE_TAG,
            _ => w,
        }
    }
}

/// The executable's sized functions and statics (see [`Modules`]).
fn exe_symbols(bias: u64) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    let mut path = String::new();
    crate::sys::symbols::sized_code_and_data(|name, value, size| {
        crate::sys::symbols::demangle_into(&String::from_utf8_lossy(name), &mut path);
        let h = crate::sys::hash::fold_hash(path.as_bytes()) as u64;
        out.push((bias + value as u64, bias + (value + size) as u64, h));
    });
    out.sort_unstable();
    // Overlapping symbols (aliases): keep the first of each start.
    out.dedup_by_key(|s| s.0);
    out
}

/// The calling thread's stack as `(low, length)`: how deep the stack
/// scrub before user code may go (`model::ctx::user_code`).
///
/// Found once per thread, like [`exe_tls_block`], before any fork.
pub(crate) fn thread_stack() -> (u64, u64) {
    thread_local! {
        static STACK: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
    }
    STACK.with(|s| {
        s.get().unwrap_or_else(|| {
            let found = find_thread_stack();
            s.set(Some(found));
            found
        })
    })
}

fn find_thread_stack() -> (u64, u64) {
    let _sys = crate::sys::scope::system_scope();
    // SAFETY: `attr` is initialized by pthread_getattr_np before it is read
    // and destroyed after; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            (addr as u64, size as u64)
        } else {
            (0, 0)
        }
    }
}

/// The executable's TLS block in the calling thread, as `[start, end)`:
/// where std's and rand's thread-locals live.
/// Found once per thread: `dl_iterate_phdr` takes the dynamic loader's
/// lock, which a forked child must never wait for (see
/// `engine::isolate::run_in_child`).
pub(crate) fn exe_tls_block() -> Option<(usize, usize)> {
    thread_local! {
        static BLOCK: std::cell::Cell<Option<Option<(usize, usize)>>> =
            const { std::cell::Cell::new(None) };
    }
    BLOCK.with(|b| {
        b.get().unwrap_or_else(|| {
            let found = find_exe_tls_block();
            b.set(Some(found));
            found
        })
    })
}

fn find_exe_tls_block() -> Option<(usize, usize)> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Option` passed below; `info` is valid for
        // this call (dl_iterate_phdr's contract).
        let (found, info) = unsafe { (&mut *(data as *mut Option<(usize, usize)>), &*info) };
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        if let Some(p) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) {
            if !info.dlpi_tls_data.is_null() {
                let start = info.dlpi_tls_data as usize;
                *found = Some((start, start + p.p_memsz as usize));
            }
        }
        1 // Stop: the executable comes first.
    }
    let mut found: Option<(usize, usize)> = None;
    // SAFETY: `each` matches the callback type and only reads the headers
    // during the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(each),
            &mut found as *mut Option<(usize, usize)> as *mut libc::c_void,
        )
    };
    found
}

/// Calls `f(bias, program headers)` for each loaded module, the executable
/// first, until `f` returns false (`dl_iterate_phdr`, which takes the
/// dynamic loader's lock: a forked child must not call it, see
/// `engine::isolate::run_in_children`).
pub(crate) fn each_module<F: FnMut(usize, &[libc::Elf64_Phdr]) -> bool>(mut f: F) {
    unsafe extern "C" fn each<F: FnMut(usize, &[libc::Elf64_Phdr]) -> bool>(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the closure passed below; `info` is valid for
        // this call (dl_iterate_phdr's contract).
        let (f, info) = unsafe { (&mut *(data as *mut F), &*info) };
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        if f(info.dlpi_addr as usize, phdrs) {
            0
        } else {
            1
        }
    }
    // SAFETY: `each::<F>` matches the callback type and only uses the
    // closure and the headers during the call.
    unsafe { libc::dl_iterate_phdr(Some(each::<F>), &mut f as *mut F as *mut libc::c_void) };
}

/// Whether the byte at `addr` can be read, asked of the kernel (copied with
/// `process_vm_readv`, which fails instead of faulting).
pub(crate) fn byte_readable(addr: usize) -> bool {
    let mut byte = 0u8;
    let local = libc::iovec {
        iov_base: &mut byte as *mut u8 as *mut libc::c_void,
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: reads one byte of our own address space into `byte`; the
    // kernel reports an unmapped or unreadable address as an error.
    unsafe { libc::process_vm_readv(super::real_pid(), &local, 1, &remote, 1, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DATA: u64 = 7;

    #[test]
    fn pointers_into_the_program_are_relative() {
        let m = modules();
        let f = pointers_into_the_program_are_relative as fn() as usize as u64;
        let d = &DATA as *const u64 as u64;
        let s = "a literal".as_ptr() as u64;
        for p in [f, d, s] {
            assert_ne!(m.relocate(p), p, "{p:#x} should be inside a module");
        }
        // A function and a static are named by the symbol table: (name,
        // offset), the offset counting.
        assert_ne!(m.relocate(f), m.relocate(f + 1));
        assert_ne!(
            m.relocate(f) ^ MODULE_TAG,
            (m.relocate(f) ^ MODULE_TAG) & ((1 << 48) - 1)
        );
        // A literal is not: (module, offset), the executable being module 0.
        let r = m.relocate(s) ^ MODULE_TAG;
        assert_eq!(r, r & ((1 << 48) - 1));
        assert_eq!(r >> 40, 0);
        let local = 5u64;
        let (low, len) = thread_stack();
        let at = &local as *const u64 as u64;
        assert!(
            at - low < len,
            "{at:#x} should be inside the thread's stack {low:#x}+{len:#x}"
        );
        let heap = Box::new(1u64);
        let h = &*heap as *const u64 as u64;
        assert_eq!(m.relocate(h), h, "the heap is no module");
        assert_eq!(m.relocate(42), 42);
    }
}
