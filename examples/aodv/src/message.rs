//! AODV control messages and their byte encodings (RFC 3561 §5). All
//! multi-byte fields are big-endian (network order); reserved fields are
//! written as zero and ignored on receipt, as §5 requires.

use std::fmt;

/// An IPv4 address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, cmc::ProcessId)]
pub struct Addr(pub u32);

impl Addr {
    /// The address `a.b.c.d`.
    pub const fn new(a: u8, b: u8, c: u8, d: u8) -> Addr {
        Addr(u32::from_be_bytes([a, b, c, d]))
    }
}

impl fmt::Debug for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0.to_be_bytes();
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Route Request (§5.1, type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
pub struct Rreq {
    /// J: join flag (multicast; carried, not used).
    pub join: bool,
    /// R: repair flag (multicast; carried, not used).
    pub repair: bool,
    /// G: the originator asks for a gratuitous RREP to the destination.
    pub gratuitous: bool,
    /// D: only the destination may reply.
    pub dest_only: bool,
    /// U: the destination sequence number is unknown.
    pub unknown_seq: bool,
    /// Hops from the originator to the node handling the request.
    pub hop_count: u8,
    /// With the originator, identifies the request.
    pub rreq_id: u32,
    /// The destination sought.
    pub dest: Addr,
    /// The latest sequence number the originator knew for the destination.
    pub dest_seq: u32,
    /// The originator.
    pub orig: Addr,
    /// The originator's own sequence number.
    pub orig_seq: u32,
}

/// Route Reply (§5.2, type 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
pub struct Rrep {
    /// R: repair flag (multicast; carried, not used).
    pub repair: bool,
    /// A: acknowledgment required.
    pub ack_required: bool,
    /// Prefix size (5 bits; 0 here: routes are to hosts).
    pub prefix_size: u8,
    /// Hops from the originator of the RREP (or the node replying for it)
    /// to the destination.
    pub hop_count: u8,
    /// The destination the route leads to.
    pub dest: Addr,
    /// Its sequence number.
    pub dest_seq: u32,
    /// The originator of the RREQ, towards whom the RREP travels.
    pub orig: Addr,
    /// Milliseconds the route is valid for.
    pub lifetime: u32,
}

/// Route Error (§5.3, type 3).
#[derive(Clone, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
pub struct Rerr {
    /// N: no delete (local repair in progress).
    pub no_delete: bool,
    /// The unreachable destinations with their sequence numbers (at least
    /// one, at most 255).
    pub unreachable: Vec<(Addr, u32)>,
}

/// An AODV control message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, cmc::StateHash)]
pub enum Message {
    /// Route Request.
    Rreq(Rreq),
    /// Route Reply.
    Rrep(Rrep),
    /// Route Error.
    Rerr(Rerr),
    /// Route Reply Acknowledgment (§5.4, type 4).
    RrepAck,
}

/// Why bytes are not an AODV message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No bytes.
    Empty,
    /// An unknown message type.
    UnknownType(u8),
    /// The length does not match the type (or the destination count).
    BadLength,
    /// A RERR with a destination count of 0 (§5.3 requires at least 1).
    NoDestinations,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => f.write_str("empty packet"),
            DecodeError::UnknownType(t) => write!(f, "unknown message type {t}"),
            DecodeError::BadLength => f.write_str("length does not match the message type"),
            DecodeError::NoDestinations => f.write_str("RERR with no destinations"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// RREQ flag bits in byte 1.
const J: u8 = 0x80;
const R: u8 = 0x40;
const G: u8 = 0x20;
const D: u8 = 0x10;
const U: u8 = 0x08;
/// RREP flag bits in byte 1.
const RREP_R: u8 = 0x80;
const RREP_A: u8 = 0x40;
/// RERR flag bit in byte 1.
const RERR_N: u8 = 0x80;

impl Message {
    /// The message type (§5).
    pub fn kind(&self) -> u8 {
        match self {
            Message::Rreq(_) => 1,
            Message::Rrep(_) => 2,
            Message::Rerr(_) => 3,
            Message::RrepAck => 4,
        }
    }

    /// The wire encoding, reserved fields zero.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        match self {
            Message::Rreq(q) => {
                let mut flags = 0;
                for (set, bit) in [
                    (q.join, J),
                    (q.repair, R),
                    (q.gratuitous, G),
                    (q.dest_only, D),
                    (q.unknown_seq, U),
                ] {
                    if set {
                        flags |= bit;
                    }
                }
                out.extend_from_slice(&[self.kind(), flags, 0, q.hop_count]);
                put_u32(&mut out, q.rreq_id);
                put_u32(&mut out, q.dest.0);
                put_u32(&mut out, q.dest_seq);
                put_u32(&mut out, q.orig.0);
                put_u32(&mut out, q.orig_seq);
            }
            Message::Rrep(p) => {
                let mut flags = 0;
                if p.repair {
                    flags |= RREP_R;
                }
                if p.ack_required {
                    flags |= RREP_A;
                }
                out.extend_from_slice(&[self.kind(), flags, p.prefix_size & 0x1f, p.hop_count]);
                put_u32(&mut out, p.dest.0);
                put_u32(&mut out, p.dest_seq);
                put_u32(&mut out, p.orig.0);
                put_u32(&mut out, p.lifetime);
            }
            Message::Rerr(e) => {
                let flags = if e.no_delete { RERR_N } else { 0 };
                out.extend_from_slice(&[self.kind(), flags, 0, e.unreachable.len() as u8]);
                for (d, s) in &e.unreachable {
                    put_u32(&mut out, d.0);
                    put_u32(&mut out, *s);
                }
            }
            Message::RrepAck => out.extend_from_slice(&[self.kind(), 0]),
        }
        out
    }

    /// Decodes a packet; reserved bits are ignored (§5).
    pub fn decode(b: &[u8]) -> Result<Message, DecodeError> {
        let kind = *b.first().ok_or(DecodeError::Empty)?;
        match kind {
            1 => {
                if b.len() != 24 {
                    return Err(DecodeError::BadLength);
                }
                Ok(Message::Rreq(Rreq {
                    join: b[1] & J != 0,
                    repair: b[1] & R != 0,
                    gratuitous: b[1] & G != 0,
                    dest_only: b[1] & D != 0,
                    unknown_seq: b[1] & U != 0,
                    hop_count: b[3],
                    rreq_id: get_u32(b, 4),
                    dest: Addr(get_u32(b, 8)),
                    dest_seq: get_u32(b, 12),
                    orig: Addr(get_u32(b, 16)),
                    orig_seq: get_u32(b, 20),
                }))
            }
            2 => {
                if b.len() != 20 {
                    return Err(DecodeError::BadLength);
                }
                Ok(Message::Rrep(Rrep {
                    repair: b[1] & RREP_R != 0,
                    ack_required: b[1] & RREP_A != 0,
                    prefix_size: b[2] & 0x1f,
                    hop_count: b[3],
                    dest: Addr(get_u32(b, 4)),
                    dest_seq: get_u32(b, 8),
                    orig: Addr(get_u32(b, 12)),
                    lifetime: get_u32(b, 16),
                }))
            }
            3 => {
                if b.len() < 4 {
                    return Err(DecodeError::BadLength);
                }
                let n = b[3] as usize;
                if n == 0 {
                    return Err(DecodeError::NoDestinations);
                }
                if b.len() != 4 + 8 * n {
                    return Err(DecodeError::BadLength);
                }
                Ok(Message::Rerr(Rerr {
                    no_delete: b[1] & RERR_N != 0,
                    unreachable: (0..n)
                        .map(|i| (Addr(get_u32(b, 4 + 8 * i)), get_u32(b, 8 + 8 * i)))
                        .collect(),
                }))
            }
            4 => {
                if b.len() != 2 {
                    return Err(DecodeError::BadLength);
                }
                Ok(Message::RrepAck)
            }
            t => Err(DecodeError::UnknownType(t)),
        }
    }

    /// Whether every reserved bit of an encoded message is zero (a check on
    /// the bytes a sender produced; receivers ignore these bits).
    pub fn reserved_bits_zero(b: &[u8]) -> bool {
        match b.first() {
            Some(1) if b.len() >= 4 => b[1] & 0x07 == 0 && b[2] == 0,
            Some(2) if b.len() >= 4 => b[1] & 0x3f == 0 && b[2] & 0xe0 == 0,
            Some(3) if b.len() >= 4 => b[1] & 0x7f == 0 && b[2] == 0,
            Some(4) if b.len() >= 2 => b[1] == 0,
            _ => false,
        }
    }

    /// The hop count field, for the messages that have one.
    pub fn hop_count(&self) -> Option<u8> {
        match self {
            Message::Rreq(q) => Some(q.hop_count),
            Message::Rrep(p) => Some(p.hop_count),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(d: u8) -> Addr {
        Addr::new(10, 0, 0, d)
    }

    fn samples() -> Vec<Message> {
        vec![
            Message::Rreq(Rreq {
                join: false,
                repair: false,
                gratuitous: true,
                dest_only: false,
                unknown_seq: true,
                hop_count: 3,
                rreq_id: 0xdead_beef,
                dest: a(4),
                dest_seq: 0,
                orig: a(1),
                orig_seq: u32::MAX,
            }),
            Message::Rreq(Rreq {
                join: true,
                repair: true,
                gratuitous: false,
                dest_only: true,
                unknown_seq: false,
                hop_count: 0,
                rreq_id: 1,
                dest: a(2),
                dest_seq: 7,
                orig: a(3),
                orig_seq: 9,
            }),
            Message::Rrep(Rrep {
                repair: false,
                ack_required: true,
                prefix_size: 0,
                hop_count: 2,
                dest: a(4),
                dest_seq: 5,
                orig: a(1),
                lifetime: 6000,
            }),
            Message::Rerr(Rerr {
                no_delete: false,
                unreachable: vec![(a(4), 6), (a(5), 1)],
            }),
            Message::RrepAck,
        ]
    }

    #[test]
    fn round_trip_with_reserved_zero() {
        for m in samples() {
            let bytes = m.encode();
            assert!(Message::reserved_bits_zero(&bytes), "{m:?}");
            assert_eq!(Message::decode(&bytes), Ok(m.clone()));
            assert_eq!(bytes[0], m.kind());
        }
    }

    #[test]
    fn wire_layout_matches_rfc() {
        let m = &samples()[0];
        let b = m.encode();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[..4], &[1, G | U, 0, 3]);
        assert_eq!(&b[4..8], &0xdead_beefu32.to_be_bytes());
        assert_eq!(&b[8..12], &[10, 0, 0, 4]);
        assert_eq!(samples()[2].encode().len(), 20);
        assert_eq!(samples()[3].encode().len(), 4 + 16);
        assert_eq!(samples()[4].encode(), vec![4, 0]);
    }

    #[test]
    fn malformed_packets_are_rejected() {
        assert_eq!(Message::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(Message::decode(&[9, 0]), Err(DecodeError::UnknownType(9)));
        assert_eq!(Message::decode(&[1, 0, 0]), Err(DecodeError::BadLength));
        assert_eq!(
            Message::decode(&[3, 0, 0, 0]),
            Err(DecodeError::NoDestinations)
        );
        assert_eq!(
            Message::decode(&[3, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1]),
            Err(DecodeError::BadLength)
        );
    }

    #[test]
    fn reserved_bits_are_ignored_on_receipt_but_detected() {
        let mut b = samples()[2].encode();
        b[1] |= 0x01;
        assert!(!Message::reserved_bits_zero(&b));
        assert_eq!(Message::decode(&b), Ok(samples()[2].clone()));
    }
}
