//! The executable's own symbol table (`.symtab`, read from
//! `/proc/self/exe`): names for the globals cmc reports, and the addresses
//! of the few library internals it controls (see `identity::random`).

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
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open("/proc/self/exe").ok()?;
    let file_len = file.metadata().ok()?.len() as usize;
    let read = |at: usize, len: usize| -> Option<Vec<u8>> {
        if at.checked_add(len)? > file_len {
            return None;
        }
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, at as u64).ok()?;
        Some(buf)
    };
    let u16_in = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_in = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_in =
        |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    let header = read(0, 0x40)?;
    if header.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let shoff = u64_in(&header, 0x28)?;
    let shentsize = u16_in(&header, 0x3a)? as usize;
    let shnum = u16_in(&header, 0x3c)? as usize;
    if shentsize < 0x40 || shnum > 1 << 16 {
        return None;
    }
    let sections = read(shoff, shnum * shentsize)?;
    let section = |i: usize| i * shentsize;
    for i in 0..shnum {
        let sh = section(i);
        if u32_in(&sections, sh + 4)? != 2 {
            continue; // Not SHT_SYMTAB.
        }
        let (off, size, link, entsize) = (
            u64_in(&sections, sh + 0x18)?,
            u64_in(&sections, sh + 0x20)?,
            u32_in(&sections, sh + 0x28)? as usize,
            u64_in(&sections, sh + 0x38)?.max(24),
        );
        if link >= shnum {
            return None;
        }
        let table = read(off, size)?;
        let strings = read(
            u64_in(&sections, section(link) + 0x18)?,
            u64_in(&sections, section(link) + 0x20)?,
        )?;
        for k in 0..size / entsize {
            let sym = k * entsize;
            if table.get(sym + 4)? & 0xf != kind {
                continue;
            }
            let name_at = u32_in(&table, sym)? as usize;
            let name = CStr::from_bytes_until_nul(strings.get(name_at..)?).ok()?;
            if !each(
                name.to_bytes(),
                u64_in(&table, sym + 8)?,
                u64_in(&table, sym + 16)?,
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
    symbols(1, |name, start, len| {
        let rust = name.starts_with(b"_ZN") || name.starts_with(b"_R");
        if rust && demangle(&String::from_utf8_lossy(name)) == path {
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
        let _sys = crate::ctx::system_scope();
        let mut own = Vec::new();
        for (kind, tls) in [(1, false), (6, true)] {
            symbols(kind, |name, start, len| {
                if name.starts_with(b"_ZN")
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

/// A Rust symbol (legacy or v0 mangling) as a path, without its hash;
/// other names unchanged.
pub(crate) fn demangle(name: &str) -> String {
    if let Some(path) = demangle_v0(name) {
        return path;
    }
    let Some(mut rest) = name.strip_prefix("_ZN") else {
        return name.to_string();
    };
    let mut parts = Vec::new();
    while let Some(digits) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&d| d > 0) {
        let Ok(n) = rest[..digits].parse::<usize>() else {
            break;
        };
        let Some(part) = rest.get(digits..digits + n) else {
            break;
        };
        parts.push(part);
        rest = &rest[digits + n..];
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

/// The identifiers of a v0-mangled symbol (`_R...`), joined as a path:
/// enough to name a global (generic arguments and closures are not
/// rendered).
fn demangle_v0(name: &str) -> Option<String> {
    let body = name.strip_prefix("_R")?.split('.').next()?;
    let b = body.as_bytes();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // A crate's disambiguator (`Cs<base62>_`) or a back-reference
        // (`B<base62>_`): skip it.
        if (c == b's' && i > 0 && b[i - 1] == b'C') || c == b'B' {
            i += body[i..].find('_')? + 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let n: usize = body[start..i].parse().ok()?;
            // An identifier that starts with a digit or `_` follows a `_`.
            if b.get(i) == Some(&b'_') {
                i += 1;
            }
            parts.push(body.get(i..i + n)?);
            i += n;
            continue;
        }
        i += 1;
    }
    (!parts.is_empty()).then(|| parts.join("::"))
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
}
