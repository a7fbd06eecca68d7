//! Sequence numbers (RFC 3561 §6.1): 32-bit, compared as signed 32-bit
//! differences so that comparison survives wrap-around.

/// Whether `a` is newer than `b`: `(a - b) as i32 > 0` (§6.1).
pub fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The larger (newer) of two sequence numbers under §6.1 comparison.
pub fn max(a: u32, b: u32) -> u32 {
    if newer(b, a) {
        b
    } else {
        a
    }
}

/// A node's own sequence number after an increment. §6.1 says to increment
/// as an unsigned number; this port also skips 0 on wrap-around, because 0
/// means "unknown" in an RREQ (§5.1, U flag) and a node must never claim it.
pub fn increment(s: u32) -> u32 {
    match s.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

/// A stored destination sequence number after an invalidation (§6.11: the
/// number is incremented). Plain wrapping increment: the stored number is
/// about another node.
pub fn bump(s: u32) -> u32 {
    s.wrapping_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_wraps() {
        assert!(newer(1, 0));
        assert!(!newer(0, 1));
        assert!(!newer(5, 5));
        assert!(newer(0, u32::MAX));
        assert!(newer(3, u32::MAX - 2));
        assert!(!newer(u32::MAX, 3));
        assert_eq!(max(u32::MAX, 2), 2);
        assert_eq!(max(7, 9), 9);
    }

    #[test]
    fn own_increment_skips_zero() {
        assert_eq!(increment(1), 2);
        assert_eq!(increment(u32::MAX), 1);
        assert_eq!(bump(u32::MAX), 0);
    }
}
