//! Page deltas: a page stored as the runs of bytes in which it differs
//! from another page of the same length (its base), which the page store
//! keeps for it.
//!
//! A transition changes a few bytes of the pages it writes (a counter, a
//! routing entry, a message in a queue); the page it leaves differs from
//! the page it found in tens of bytes, not in 4 KiB. Stored as a delta
//! against that page, a changed page costs what changed.
//!
//! The encoding is a sequence of runs, each `skip, len` (two LEB128
//! numbers: equal bytes to skip, then bytes that follow) and the `len` new
//! bytes. Differences closer than [`JOIN`] bytes apart share a run (a
//! second header would cost about as much as the equal bytes between
//! them).

/// Equal bytes shorter than this between two differences are copied with
/// them rather than skipped.
const JOIN: usize = 8;
// `encode` compares words: a word of equal bytes ends a run, and the
// gaps inside one word (at most 6 bytes) never do.
const _: () = assert!(JOIN == 8);

/// Appends `n` as LEB128.
fn put(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a LEB128 number at `*at`, advancing it.
fn get(data: &[u8], at: &mut usize) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let byte = data[*at];
        *at += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return n;
        }
        shift += 7;
        assert!(shift < usize::BITS, "a page delta holds a malformed number");
    }
}

/// The delta that turns `base` into `page` (same length), into `out`
/// (cleared first); `None`, and `out` unspecified, when it would take
/// more than `limit` bytes.
pub(crate) fn encode(base: &[u8], page: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<()> {
    assert_eq!(
        base.len(),
        page.len(),
        "a page delta between pages of different lengths"
    );
    out.clear();
    let n = page.len();
    // The XOR of the two pages' words at `i` (8 bytes, little-endian).
    let word = |i: usize| {
        let w = |b: &[u8]| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        w(base) ^ w(page)
    };
    let mut pos = 0; // the end of the last run written
    let mut i = 0;
    while i < n {
        // Skip equal words, then equal bytes, to the first difference.
        while i + 8 <= n {
            let x = word(i);
            if x != 0 {
                i += (x.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < n && base[i] == page[i] {
            i += 1;
        }
        if i == n {
            break;
        }
        // A run starts at i; it ends before JOIN equal bytes in a row.
        let start = i;
        let mut end = i + 1;
        let mut j = i + 1;
        loop {
            if j + 8 <= n {
                let x = word(j);
                if x == 0 {
                    // Eight equal bytes from j: at least JOIN after `end`.
                    break;
                }
                let first = j + (x.trailing_zeros() / 8) as usize;
                if first - end >= JOIN {
                    break;
                }
                end = j + 8 - (x.leading_zeros() / 8) as usize;
                j += 8;
                continue;
            }
            while j < n {
                if base[j] != page[j] {
                    end = j + 1;
                } else if j - end >= JOIN {
                    break;
                }
                j += 1;
            }
            break;
        }
        put(out, start - pos);
        put(out, end - start);
        out.extend_from_slice(&page[start..end]);
        if out.len() > limit {
            return None;
        }
        pos = end;
        i = end;
    }
    Some(())
}

/// Writes the runs of `delta` over `dst`, which holds its base.
pub(crate) fn apply(delta: &[u8], dst: &mut [u8]) {
    let mut at = 0;
    let mut pos = 0;
    while at < delta.len() {
        pos += get(delta, &mut at);
        let len = get(delta, &mut at);
        assert!(
            pos + len <= dst.len() && at + len <= delta.len(),
            "a page delta runs past its page"
        );
        dst[pos..pos + len].copy_from_slice(&delta[at..at + len]);
        at += len;
        pos += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Random edits of random pages: the delta applied to the base gives
    /// the page back, and it is no longer than the bytes that differ plus
    /// their headers.
    #[test]
    fn a_delta_applied_to_its_base_gives_the_page() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut out = Vec::new();
        for round in 0..2000 {
            let len = if round % 5 == 0 {
                rng.gen_range(0..4096)
            } else {
                4096
            };
            let base: Vec<u8> = (0..len)
                .map(|_| if rng.gen_bool(0.7) { 0 } else { rng.gen() })
                .collect();
            let mut page = base.clone();
            let edits = rng.gen_range(0..if round % 7 == 0 { 2000 } else { 12 });
            for _ in 0..edits.min(len) {
                let at = rng.gen_range(0..len);
                let span = rng.gen_range(1..=16).min(len - at);
                for b in &mut page[at..at + span] {
                    *b = rng.gen();
                }
            }
            encode(&base, &page, usize::MAX, &mut out).unwrap();
            let mut dst = base.clone();
            apply(&out, &mut dst);
            assert_eq!(dst, page, "round {round}");
            let differing = base.iter().zip(&page).filter(|(a, b)| a != b).count();
            if differing == 0 {
                assert!(out.is_empty(), "an empty delta for equal pages");
            }
            // Each run carries its differing bytes, fewer than JOIN equal
            // ones between two of them, and a header of at most 2 + 2
            // bytes for a page.
            let runs = out.len().saturating_sub(differing) / (JOIN + 4) + 1;
            assert!(
                out.len() <= differing * (JOIN + 1) + 4 * runs + 4,
                "round {round}: {} bytes for {differing} differing",
                out.len()
            );
        }
    }

    #[test]
    fn a_small_change_costs_a_few_bytes_and_a_big_one_is_refused() {
        let base = vec![0u8; 4096];
        let mut page = base.clone();
        page[1000] = 1;
        page[1003] = 2;
        page[3000..3008].copy_from_slice(&[9; 8]);
        let mut out = Vec::new();
        encode(&base, &page, 64, &mut out).unwrap();
        // Two runs: 1000..1004 and 3000..3008, headers of 2 + 1 and 2 + 1.
        assert_eq!(out.len(), 3 + 4 + 3 + 8);
        let noisy: Vec<u8> = (0..4096).map(|i| (i % 251) as u8 + 1).collect();
        assert!(encode(&base, &noisy, 1024, &mut out).is_none());
    }
}
