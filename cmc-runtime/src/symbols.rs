//! The executable's own symbol table (`.symtab`, read from
//! `/proc/self/exe`): names for the globals cmc reports, and the addresses
//! of the few library internals it controls (see `identity::random`).

use std::ffi::CStr;

/// Every symbol of kind `kind` (1 = object, 2 = function, 6 = TLS) as (name, value,
/// size), in table order; `None` when the table cannot be read (a stripped
/// binary).
fn symbols(kind: u8, mut each: impl FnMut(&[u8], usize, usize) -> bool) -> Option<()> {
    let exe = std::fs::read("/proc/self/exe").ok()?;
    let u16_at = |o: usize| Some(u16::from_le_bytes(exe.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(exe.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(exe.get(o..o + 8)?.try_into().ok()?) as usize);
    if exe.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let shoff = u64_at(0x28)?;
    let shentsize = u16_at(0x3a)? as usize;
    let shnum = u16_at(0x3c)? as usize;
    let section = |i: usize| shoff + i * shentsize;
    for i in 0..shnum {
        let sh = section(i);
        if u32_at(sh + 4)? != 2 {
            continue; // Not SHT_SYMTAB.
        }
        let (off, size, link, entsize) = (
            u64_at(sh + 0x18)?,
            u64_at(sh + 0x20)?,
            u32_at(sh + 0x28)? as usize,
            u64_at(sh + 0x38)?.max(24),
        );
        let strtab = u64_at(section(link) + 0x18)?;
        for k in 0..size / entsize {
            let sym = off + k * entsize;
            if exe.get(sym + 4)? & 0xf != kind {
                continue;
            }
            let name_at = strtab + u32_at(sym)? as usize;
            let name = CStr::from_bytes_until_nul(exe.get(name_at..)?).ok()?;
            if !each(name.to_bytes(), u64_at(sym + 8)?, u64_at(sym + 16)?) {
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
