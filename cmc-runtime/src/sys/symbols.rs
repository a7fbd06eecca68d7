//! The executable's own symbol table (`.symtab`, read from
//! `/proc/self/exe`): names for the globals cmc reports, and the addresses
//! of the few library internals it controls (see `determinism::random`).

use std::ffi::CStr;

/// Every symbol of kind `kind` (1 = object, 2 = function, 6 = TLS) as (name, value,
/// size), in table order; `None` when the table cannot be read (a stripped
/// binary).
///
/// Reads only the ELF header, the section headers, `.symtab` and its string
/// table (about half a megabyte for a harness), never the whole executable:
/// with debug information that is tens of megabytes, and the peak resident
/// memory of the search would count it.
fn symbols(kind: u8, mut each: impl FnMut(&[u8], usize, usize) -> bool) -> Option<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open("/proc/self/exe").ok()?;
    let file_len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if file_len == 0 {
        return None;
    }
    // The file is read through a private read-only mapping, not copied to
    // the heap: the symbol and string tables are large (hundreds of KiB),
    // and heap buffers that size would leave the checker's heap (and the
    // resident memory of every search forked from it) that much larger.
    // SAFETY: a fresh read-only private mapping of an open file; it is
    // unmapped by `Unmap` below, after the last use of the slice.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            file_len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    struct Unmap(*mut libc::c_void, usize);
    impl Drop for Unmap {
        fn drop(&mut self) {
            // SAFETY: the mapping made above, of this length, no longer
            // borrowed (`bytes` is declared after this guard, so it is
            // dropped first).
            unsafe { libc::munmap(self.0, self.1) };
        }
    }
    let _unmap = Unmap(base, file_len);
    // SAFETY: `file_len` readable bytes at `base`, alive until `_unmap`
    // drops. The executable is not rewritten while it runs (a rebuild
    // replaces the file, leaving this inode as it was).
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(base.cast::<u8>(), file_len) };
    let read = |at: usize, len: usize| -> Option<&[u8]> { bytes.get(at..at.checked_add(len)?) };
    let u16_in = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_in = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_in =
        |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    let header = read(0, 0x40)?;
    if header.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let shoff = u64_in(header, 0x28)?;
    let shentsize = u16_in(header, 0x3a)? as usize;
    let shnum = u16_in(header, 0x3c)? as usize;
    if shentsize < 0x40 || shnum > 1 << 16 {
        return None;
    }
    let sections = read(shoff, shnum * shentsize)?;
    let section = |i: usize| i * shentsize;
    for i in 0..shnum {
        let sh = section(i);
        if u32_in(sections, sh + 4)? != 2 {
            continue; // Not SHT_SYMTAB.
        }
        let (off, size, link, entsize) = (
            u64_in(sections, sh + 0x18)?,
            u64_in(sections, sh + 0x20)?,
            u32_in(sections, sh + 0x28)? as usize,
            u64_in(sections, sh + 0x38)?.max(24),
        );
        if link >= shnum {
            return None;
        }
        let table = read(off, size)?;
        let strings = read(
            u64_in(sections, section(link) + 0x18)?,
            u64_in(sections, section(link) + 0x20)?,
        )?;
        for k in 0..size / entsize {
            let sym = k * entsize;
            if table.get(sym + 4)? & 0xf != kind {
                continue;
            }
            let name_at = u32_in(table, sym)? as usize;
            let name = CStr::from_bytes_until_nul(strings.get(name_at..)?).ok()?;
            if !each(
                name.to_bytes(),
                u64_in(table, sym + 8)?,
                u64_in(table, sym + 16)?,
            ) {
                return Some(());
            }
        }
    }
    Some(())
}

/// Every function and data symbol with a size, as (name, value, size).
pub(crate) fn sized_code_and_data(mut each: impl FnMut(&[u8], usize, usize)) {
    for kind in [1, 2] {
        symbols(kind, |name, value, size| {
            if size > 0 && value > 0 {
                each(name, value, size);
            }
            true
        });
    }
}

/// The symbol that contains `value` (an address relative to the load bias,
/// or an offset in the TLS segment when `tls`), demangled, with the offset
/// into it.
pub(crate) fn symbol_at(value: usize, tls: bool) -> Option<(String, usize)> {
    let mut found = None;
    symbols(if tls { 6 } else { 1 }, |name, start, len| {
        if value >= start && value < start + len.max(1) {
            found = Some((demangle(&String::from_utf8_lossy(name)), value - start));
            false
        } else {
            true
        }
    })?;
    found
}

/// The value (address relative to the load bias) and size of the data
/// symbol whose demangled path is `path`.
pub(crate) fn lookup(path: &str) -> Option<(usize, usize)> {
    let mut found = None;
    // Both manglings spell each identifier out: a name without the path's
    // last one is not demangled.
    let last = path.rsplit("::").next().unwrap_or(path).as_bytes();
    let mut buf = String::new();
    symbols(1, |name, start, len| {
        let rust = name.starts_with(b"_ZN") || name.starts_with(b"_R");
        if rust && contains(name, last) && {
            demangle_into(&String::from_utf8_lossy(name), &mut buf);
            buf == path
        } {
            found = Some((start, len));
            false
        } else {
            true
        }
    })?;
    found
}

/// cmc's own globals, as (TLS?, value, size): its bookkeeping, which may
/// hold dead bytes that look like pointers into an arena (the payload of a
/// `None`, a value moved out) and is never a user's global. Read once.
pub(crate) fn own_globals() -> &'static [(bool, usize, usize)] {
    static OWN: std::sync::OnceLock<Vec<(bool, usize, usize)>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        let _sys = crate::sys::scope::system_scope();
        let mut own = Vec::new();
        for (kind, tls) in [(1, false), (6, true)] {
            symbols(kind, |name, start, len| {
                // `cmc` is spelled `3cmc` in both manglings.
                if name.starts_with(b"_ZN")
                    && contains(name, b"3cmc")
                    && demangle(&String::from_utf8_lossy(name)).starts_with("cmc::")
                {
                    own.push((tls, start, len));
                }
                true
            });
        }
        own
    })
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A Rust symbol (legacy or v0 mangling) as a path, without its hash;
/// other names unchanged.
pub(crate) fn demangle(name: &str) -> String {
    let mut out = String::new();
    demangle_into(name, &mut out);
    out
}

/// [`demangle`] into `out` (cleared first), which a caller demangling many
/// names reuses: the executable's symbol table is demangled whole when a
/// check starts, and a segment without escapes (nearly all) is copied as
/// it is.
pub(crate) fn demangle_into(name: &str, out: &mut String) {
    out.clear();
    if demangle_v0(name, out) {
        return;
    }
    out.clear();
    let Some(mut rest) = name.strip_prefix("_ZN") else {
        out.push_str(name);
        return;
    };
    let mut parts: [&str; 32] = [""; 32];
    let mut count = 0;
    let mut more = Vec::new();
    while let Some(digits) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&d| d > 0) {
        let Ok(n) = rest[..digits].parse::<usize>() else {
            break;
        };
        let Some(part) = rest.get(digits..digits + n) else {
            break;
        };
        if count < parts.len() {
            parts[count] = part;
        } else {
            more.push(part);
        }
        count += 1;
        rest = &rest[digits + n..];
    }
    let part = |k: usize| if k < 32 { parts[k] } else { more[k - 32] };
    if count > 0 && {
        let p = part(count - 1);
        p.len() == 17 && p.starts_with('h') && p[1..].chars().all(|c| c.is_ascii_hexdigit())
    } {
        count -= 1;
    }
    if count == 0 {
        out.push_str(name);
        return;
    }
    for k in 0..count {
        if k > 0 {
            out.push_str("::");
        }
        let p = part(k);
        if p.contains(['$', '.']) {
            out.push_str(
                &p.replace("$LT$", "<")
                    .replace("$GT$", ">")
                    .replace("$u7b$", "{")
                    .replace("$u7d$", "}")
                    .replace("..", "::"),
            );
        } else {
            out.push_str(p);
        }
    }
}

/// The identifiers of a v0-mangled symbol (`_R...`), joined as a path into
/// `out`: enough to name a global (generic arguments and closures are not
/// rendered). False when `name` is not one.
fn demangle_v0(name: &str, out: &mut String) -> bool {
    let Some(body) = name.strip_prefix("_R").and_then(|b| b.split('.').next()) else {
        return false;
    };
    let b = body.as_bytes();
    let mut any = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // A crate's disambiguator (`Cs<base62>_`) or a back-reference
        // (`B<base62>_`): skip it.
        if (c == b's' && i > 0 && b[i - 1] == b'C') || c == b'B' {
            let Some(end) = body[i..].find('_') else {
                return false;
            };
            i += end + 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let Ok(n) = body[start..i].parse::<usize>() else {
                return false;
            };
            // An identifier that starts with a digit or `_` follows a `_`.
            if b.get(i) == Some(&b'_') {
                i += 1;
            }
            let Some(part) = body.get(i..i + n) else {
                return false;
            };
            if any {
                out.push_str("::");
            }
            out.push_str(part);
            any = true;
            i += n;
            continue;
        }
        i += 1;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn v0_symbols_demangle_to_their_path() {
        assert_eq!(
            demangle("_RNvNvMNtNtCsjrHSEGnQ3l9_3std6thread2idNtB4_8ThreadId3new7COUNTER"),
            "std::thread::id::ThreadId::new::COUNTER"
        );
        assert_eq!(
            demangle("_RNvNtNtCs1234_7mycrate3net5CACHE.2"),
            "mycrate::net::CACHE"
        );
    }

    #[test]
    fn legacy_rust_symbols_demangle_without_their_hash() {
        assert_eq!(
            demangle("_ZN7mycrate5CACHE17h0123456789abcdefE"),
            "mycrate::CACHE"
        );
        assert_eq!(demangle("plain_c_symbol"), "plain_c_symbol");
    }

    /// The straightforward demangler (a vector of parts, a chain of
    /// replacements) the fast one must agree with.
    fn reference(name: &str) -> String {
        if let Some(body) = name.strip_prefix("_R").and_then(|b| b.split('.').next()) {
            let b = body.as_bytes();
            let mut parts = Vec::new();
            let mut i = 0;
            let mut ok = true;
            while i < b.len() {
                let c = b[i];
                if (c == b's' && i > 0 && b[i - 1] == b'C') || c == b'B' {
                    match body[i..].find('_') {
                        Some(e) => i += e + 1,
                        None => {
                            ok = false;
                            break;
                        }
                    }
                    continue;
                }
                if c.is_ascii_digit() {
                    let start = i;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                    let n: usize = body[start..i].parse().unwrap();
                    if b.get(i) == Some(&b'_') {
                        i += 1;
                    }
                    match body.get(i..i + n) {
                        Some(p) => parts.push(p),
                        None => {
                            ok = false;
                            break;
                        }
                    }
                    i += n;
                    continue;
                }
                i += 1;
            }
            if ok && !parts.is_empty() {
                return parts.join("::");
            }
        }
        let Some(mut rest) = name.strip_prefix("_ZN") else {
            return name.to_string();
        };
        let mut parts = Vec::new();
        while let Some(d) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&d| d > 0) {
            let Ok(n) = rest[..d].parse::<usize>() else {
                break;
            };
            let Some(part) = rest.get(d..d + n) else {
                break;
            };
            parts.push(part);
            rest = &rest[d + n..];
        }
        if parts.last().is_some_and(|p| {
            p.len() == 17 && p.starts_with('h') && p[1..].chars().all(|c| c.is_ascii_hexdigit())
        }) {
            parts.pop();
        }
        if parts.is_empty() {
            return name.to_string();
        }
        parts
            .iter()
            .map(|p| {
                p.replace("$LT$", "<")
                    .replace("$GT$", ">")
                    .replace("$u7b$", "{")
                    .replace("$u7d$", "}")
                    .replace("..", "::")
            })
            .collect::<Vec<_>>()
            .join("::")
    }

    #[test]
    fn every_symbol_of_this_program_demangles_as_the_reference_does() {
        let mut buf = String::new();
        let mut seen = 0;
        super::sized_code_and_data(|name, _, _| {
            let name = String::from_utf8_lossy(name);
            super::demangle_into(&name, &mut buf);
            assert_eq!(buf, reference(&name), "{name}");
            seen += 1;
        });
        assert!(seen > 1000, "only {seen} symbols");
    }

    #[test]
    fn escapes_are_rendered_and_a_reused_buffer_holds_only_the_last_path() {
        let mut buf = String::from("left over");
        super::demangle_into(
            "_ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h0123456789abcdefE",
            &mut buf,
        );
        assert_eq!(
            buf,
            "_<alloc::vec::Vec<T$C$A>$u20$as$u20$core::ops::drop::Drop>::drop"
        );
        super::demangle_into("_RNvCs1234_3cmc4LOCK", &mut buf);
        assert_eq!(buf, "cmc::LOCK");
        super::demangle_into(
            "_ZN1a1b1c1d1e1f1g1h1i1j1k1l1m1n1o1p1q1r1s1t1u1v1w1x1y1z1A1B1C1D1E1F1G1HE",
            &mut buf,
        );
        assert_eq!(
            buf.matches("::").count(),
            33,
            "more than 32 segments: {buf}"
        );
        assert!(super::contains(
            b"_ZN3std9panicking4HOOK17h0123456789abcdefE",
            b"HOOK"
        ));
        assert!(!super::contains(b"_ZN3std4HOO", b"HOOK"));
    }
}
