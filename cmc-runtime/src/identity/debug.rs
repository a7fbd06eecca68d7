//! The canonical `Debug` source: a value's `{:?}` output, hashed so that
//! the entries of every anonymous `{ … }` group count as an unordered
//! collection.
//!
//! Maps and sets print as `{k: v, …}` and `{a, …}` with no type name, in
//! whatever order they iterate (for a `HashMap`, an order that depends on
//! its random keys and its history); structs print as `Name { field: v, …
//! }`, in declaration order. So a `{` that follows an identifier opens a
//! struct, any other `{` an anonymous group, and each entry of an anonymous
//! group (split at its top-level `, `) is hashed on its own and the entry
//! hashes are summed (a commutative combination, which needs no sorting and
//! no buffering). String and character literals are copied verbatim, so
//! braces and commas inside them are text.
//!
//! What this cannot see: a `Debug` that leaves out part of the value (a
//! `finish_non_exhaustive`, a hand-written impl) merges states that differ
//! in what it hides, and a type that prints an *ordered* collection in
//! anonymous braces (an `IndexMap`) loses its order. Types for which that
//! matters implement `Hash` or `cmc::StateHash`, which take precedence.

use std::cell::RefCell;
use std::fmt::{Debug, Write};
use std::hash::Hasher;

use crate::identity::hasher::StateHasher;
use crate::sys::scope::system_scope;

thread_local! {
    /// The formatting buffer, reused (it lives in checker memory).
    static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Feeds `value`'s canonical `Debug` to `h` (see the module's doc).
pub fn debug_hash<T: Debug + ?Sized>(value: &T, h: &mut StateHasher) {
    // The buffer and anything the `Debug` implementation allocates are the
    // checker's, never a process's: this may run while an arena is current
    // (a message sent from a handler is hashed as it is inserted).
    let _sys = system_scope();
    let mut text = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
    text.clear();
    // A `Debug` that fails leaves what it wrote: still a function of the
    // value.
    let _ = write!(text, "{value:?}");
    h.write_u128(canonical_hash(text.as_bytes()));
    BUFFER.with(|b| *b.borrow_mut() = text);
}

/// An anonymous group being read: the sum of its finished entries' hashes,
/// their count, and the hasher of the entry in progress.
struct Group {
    sum: u128,
    count: u64,
    entry: StateHasher,
    /// Whether the entry in progress has any text.
    started: bool,
    /// Brackets opened inside the entry and not yet closed.
    depth: u32,
}

impl Group {
    fn new() -> Self {
        Group {
            sum: 0,
            count: 0,
            entry: StateHasher::default(),
            started: false,
            depth: 0,
        }
    }

    fn finish_entry(&mut self) {
        if self.started {
            let entry = std::mem::take(&mut self.entry);
            self.sum = self.sum.wrapping_add(entry.finish128());
            self.count += 1;
            self.started = false;
        }
    }
}

/// The canonical hash of `Debug` text.
pub(crate) fn canonical_hash(text: &[u8]) -> u128 {
    // The outermost level is a group of one entry that never splits.
    let mut stack: Vec<Group> = Vec::new();
    let mut top = StateHasher::default();
    let mut top_depth = 0u32;
    let mut last_significant = b' ';
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        let literal_end = match b {
            b'"' => Some(string_end(text, i)),
            b'\'' => char_end(text, i),
            _ => None,
        };
        let (out, depth): (&mut StateHasher, &mut u32) = match stack.last_mut() {
            Some(g) => {
                g.started = true;
                (&mut g.entry, &mut g.depth)
            }
            None => (&mut top, &mut top_depth),
        };
        if let Some(end) = literal_end {
            out.write(&text[i..end]);
            last_significant = b'"';
            i = end;
            continue;
        }
        match b {
            b'{' if !is_ident_byte(last_significant) => {
                stack.push(Group::new());
                last_significant = b'{';
                i += 1;
                continue;
            }
            b'(' | b'[' | b'{' => *depth += 1,
            b')' | b']' => *depth = depth.saturating_sub(1),
            b'}' if *depth > 0 => *depth -= 1,
            b'}' => {
                if let Some(mut g) = stack.pop() {
                    g.finish_entry();
                    let out = match stack.last_mut() {
                        Some(parent) => {
                            parent.started = true;
                            &mut parent.entry
                        }
                        None => &mut top,
                    };
                    out.write_u8(0xfb);
                    out.write_u64(g.count);
                    out.write_u128(g.sum);
                    out.write_u8(0xfd);
                    last_significant = b'}';
                    i += 1;
                    continue;
                }
            }
            b',' => {
                if let Some(g) = stack.last_mut() {
                    if g.depth == 0 {
                        // The separator is not part of either entry.
                        g.finish_entry();
                        i += 1;
                        if text.get(i) == Some(&b' ') {
                            i += 1;
                        }
                        last_significant = b',';
                        continue;
                    }
                }
            }
            _ => {}
        }
        if b == b'0' && text.get(i + 1) == Some(&b'x') && !is_ident_byte(last_significant) {
            // A hexadecimal number: an address (`{:p}`, a function pointer)
            // that points into the program hashes as (module, offset).
            let end = i
                + 2
                + text[i + 2..]
                    .iter()
                    .take_while(|c| c.is_ascii_hexdigit())
                    .count();
            if let Some(v) = std::str::from_utf8(&text[i + 2..end])
                .ok()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                let out = match stack.last_mut() {
                    Some(g) => {
                        g.started = true;
                        &mut g.entry
                    }
                    None => &mut top,
                };
                out.write_u8(b'#');
                out.write_u64(crate::sys::layout::modules().relocate(v));
                last_significant = b'0';
                i = end;
                continue;
            }
        }
        let out = match stack.last_mut() {
            Some(g) => {
                if b == b' ' && !g.started {
                    // Leading space of an entry (`{ a }` forms).
                    i += 1;
                    continue;
                }
                &mut g.entry
            }
            None => &mut top,
        };
        out.write_u8(b);
        if b != b' ' {
            last_significant = b;
        }
        i += 1;
    }
    // Unbalanced text (a hand-written `Debug`): close what is open.
    while let Some(mut g) = stack.pop() {
        g.finish_entry();
        let out = match stack.last_mut() {
            Some(parent) => &mut parent.entry,
            None => &mut top,
        };
        out.write_u8(0xfb);
        out.write_u64(g.count);
        out.write_u128(g.sum);
    }
    top.finish128()
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The end (exclusive) of the string literal starting at `start`: `Debug`
/// escapes `"` and `\` inside strings.
fn string_end(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The end (exclusive) of the character literal starting at `start`, if
/// one starts there: `'x'` (one character, of up to four bytes) or an
/// escape `'\…'`. An apostrophe in other text is not a literal.
fn char_end(text: &[u8], start: usize) -> Option<usize> {
    let rest = &text[start + 1..];
    if rest.first() == Some(&b'\\') {
        // The escaped character, then the closing quote: `\n`, `\'`,
        // `\u{10ffff}` (escapes are short).
        let close = rest.get(2..)?.iter().take(10).position(|&b| b == b'\'')?;
        return Some(start + 1 + 2 + close + 1);
    }
    let len = match *rest.first()? {
        b if b < 0x80 => 1,
        b if b >= 0xf0 => 4,
        b if b >= 0xe0 => 3,
        _ => 2,
    };
    (rest.get(len) == Some(&b'\'')).then_some(start + 1 + len + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> u128 {
        canonical_hash(s.as_bytes())
    }

    #[test]
    fn anonymous_groups_are_unordered() {
        assert_eq!(h("{1: 2, 3: 4}"), h("{3: 4, 1: 2}"));
        assert_eq!(
            h("S { m: {1: [2, 3], 4: [5]} }"),
            h("S { m: {4: [5], 1: [2, 3]} }")
        );
        assert_ne!(h("{1: 2, 3: 4}"), h("{1: 4, 3: 2}"));
        assert_ne!(
            h("{1, 2}"),
            h("{1, 2, 2}"),
            "a group is a multiset, not a set"
        );
    }

    #[test]
    fn structs_and_sequences_keep_their_order() {
        assert_ne!(h("S { a: 1, b: 2 }"), h("S { a: 2, b: 1 }"));
        assert_ne!(h("[1, 2]"), h("[2, 1]"));
        assert_ne!(h("(1, 2)"), h("(2, 1)"));
        assert_ne!(h("Some({1})"), h("Some({2})"));
    }

    #[test]
    fn commas_inside_entries_do_not_split_them() {
        assert_ne!(h("{(1, 2), (3, 4)}"), h("{(1, 4), (3, 2)}"));
        assert_eq!(h("{(1, 2), (3, 4)}"), h("{(3, 4), (1, 2)}"));
        assert_ne!(
            h("{A { x: 1, y: 2 }, A { x: 3, y: 4 }}"),
            h("{A { x: 1, y: 4 }, A { x: 3, y: 2 }}")
        );
    }

    #[test]
    fn literals_are_text() {
        assert_ne!(h(r#"{"a, b", "c"}"#), h(r#"{"a", "b, c"}"#));
        assert_eq!(h(r#"{"}", "{"}"#), h(r#"{"{", "}"}"#));
        assert_ne!(h(r#"["\"{", "x"]"#), h(r#"["\"{x", ""]"#));
        assert_eq!(h("{',', '}'}"), h("{'}', ','}"));
        assert_eq!(h(r"{'\'', 'a'}"), h(r"{'a', '\''}"));
        assert_eq!(h("{'é', 'a'}"), h("{'a', 'é'}"));
        // An apostrophe in free text is not a literal.
        assert_eq!(h("X { s: it's, m: {1, 2} }"), h("X { s: it's, m: {2, 1} }"));
    }

    #[test]
    fn nested_groups() {
        assert_eq!(h("{1: {2, 3}, 4: {}}"), h("{4: {}, 1: {3, 2}}"));
        assert_ne!(h("{1: {2, 3}, 4: {}}"), h("{1: {}, 4: {2, 3}}"));
        assert_ne!(h("{}"), h("{{}}"));
    }
}
