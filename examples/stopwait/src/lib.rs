//! A reliable, in-order link over an unreliable datagram channel: the
//! alternating-bit protocol (stop-and-wait ARQ), without I/O.
//!
//! A [`Sender`] transmits one payload at a time, tagged with a one-bit
//! sequence number, and retransmits it on every timeout until the
//! [`Receiver`] acknowledges that bit; the receiver delivers each payload
//! once, in order, and acknowledges everything it receives. Neither does
//! any I/O: every call returns the [`Action`]s the caller must perform —
//! packets to transmit, the retransmission timer to arm or disarm,
//! payloads to hand to the application.
//!
//! # The channel
//!
//! The channel may lose packets and deliver a packet more than once, but
//! must not reorder them: the protocol's single bit cannot tell an old
//! packet overtaken by two newer ones from a new one. Run it over a link
//! that keeps order (one path, a serial line, a radio link), not over a
//! routed network.
//!
//! ```
//! use stopwait::{Action, Packet, Receiver, Sender};
//!
//! let mut sender = Sender::new();
//! let mut receiver = Receiver::new();
//! let actions = sender.send("hello");
//! let Action::Transmit(packet) = &actions[0] else { panic!() };
//! let actions = receiver.on_packet(packet.clone());
//! assert_eq!(actions[0], Action::Deliver("hello".to_string()));
//! let Action::Transmit(ack) = &actions[1] else { panic!() };
//! assert_eq!(sender.on_packet(ack.clone()), vec![Action::DisarmTimer]);
//! assert_eq!(sender.pending(), 0);
//! ```

use std::collections::VecDeque;

// ANCHOR: packet
/// What goes over the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// A payload, with the sender's sequence bit.
    Data { seq: bool, payload: String },
    /// The receiver got the payload with this sequence bit.
    Ack { seq: bool },
}

/// What the caller must do after a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Transmit this packet to the peer.
    Transmit(Packet),
    /// Arm the retransmission timer (again, if it is armed), and call
    /// [`Sender::on_timeout`] when it expires.
    ArmTimer,
    /// Disarm the retransmission timer: nothing is waiting for an
    /// acknowledgement.
    DisarmTimer,
    /// Hand this payload to the application: it is the next one, in order.
    Deliver(String),
}
// ANCHOR_END: packet

/// The sending end of a link.
#[derive(Clone, Debug, Default)]
pub struct Sender {
    /// Payloads accepted by [`Sender::send`] and not transmitted yet.
    queue: VecDeque<String>,
    /// The payload transmitted and not acknowledged yet, with its bit.
    in_flight: Option<(bool, String)>,
    /// The bit of the next payload.
    next_seq: bool,
    /// How many times a payload was transmitted again (for metrics).
    retransmissions: u64,
}

impl Sender {
    /// A sender with nothing to send.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `payload`; transmits it at once when nothing is in flight.
    pub fn send(&mut self, payload: impl Into<String>) -> Vec<Action> {
        self.queue.push_back(payload.into());
        if self.in_flight.is_none() {
            self.transmit_next()
        } else {
            Vec::new()
        }
    }

    /// Handles a packet from the receiver.
    pub fn on_packet(&mut self, packet: Packet) -> Vec<Action> {
        let Packet::Ack { seq } = packet else {
            return Vec::new();
        };
        match &self.in_flight {
            Some((in_flight, _)) if acknowledges(seq, *in_flight) => {
                self.in_flight = None;
                self.transmit_next()
            }
            // A duplicate of an acknowledgement already taken.
            _ => Vec::new(),
        }
    }

    /// The retransmission timer expired: transmits the payload in flight
    /// again.
    pub fn on_timeout(&mut self) -> Vec<Action> {
        match &self.in_flight {
            Some((seq, payload)) => {
                self.retransmissions += 1;
                vec![
                    Action::Transmit(Packet::Data {
                        seq: *seq,
                        payload: payload.clone(),
                    }),
                    Action::ArmTimer,
                ]
            }
            None => Vec::new(),
        }
    }

    /// Payloads accepted and not acknowledged yet.
    pub fn pending(&self) -> usize {
        self.queue.len() + usize::from(self.in_flight.is_some())
    }

    /// How many times a payload was transmitted again.
    pub fn retransmissions(&self) -> u64 {
        self.retransmissions
    }

    fn transmit_next(&mut self) -> Vec<Action> {
        let Some(payload) = self.queue.pop_front() else {
            return vec![Action::DisarmTimer];
        };
        let seq = self.next_seq;
        self.next_seq = !seq;
        self.in_flight = Some((seq, payload.clone()));
        vec![
            Action::Transmit(Packet::Data { seq, payload }),
            Action::ArmTimer,
        ]
    }
}

// ANCHOR: bug
/// Whether an acknowledgement of `ack` is one for the payload in flight.
fn acknowledges(ack: bool, in_flight: bool) -> bool {
    if cfg!(feature = "bug-stale-ack") {
        // The seeded bug: "only one payload is ever in flight, so an
        // acknowledgement must be for it". A late duplicate of the
        // previous payload's acknowledgement is not.
        true
    } else {
        ack == in_flight
    }
}
// ANCHOR_END: bug

/// The receiving end of a link.
#[derive(Clone, Debug, Default)]
pub struct Receiver {
    /// The bit of the next payload to deliver.
    expected: bool,
}

impl Receiver {
    /// A receiver that has delivered nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles a packet from the sender: delivers a new payload, and
    /// acknowledges every payload, new or repeated.
    pub fn on_packet(&mut self, packet: Packet) -> Vec<Action> {
        let Packet::Data { seq, payload } = packet else {
            return Vec::new();
        };
        let ack = Action::Transmit(Packet::Ack { seq });
        if seq == self.expected {
            self.expected = !seq;
            vec![Action::Deliver(payload), ack]
        } else {
            vec![ack]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transmitted(actions: &[Action]) -> Vec<Packet> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Transmit(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn two_payloads_over_a_perfect_channel() {
        let (mut s, mut r) = (Sender::new(), Receiver::new());
        let mut wire = transmitted(&s.send("a"));
        assert!(s.send("b").is_empty(), "b waits for a's acknowledgement");
        let mut delivered = Vec::new();
        while let Some(data) = wire.pop() {
            for action in r.on_packet(data) {
                match action {
                    Action::Deliver(p) => delivered.push(p),
                    Action::Transmit(ack) => wire.extend(transmitted(&s.on_packet(ack))),
                    _ => {}
                }
            }
        }
        assert_eq!(delivered, ["a", "b"]);
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn a_lost_payload_is_retransmitted_and_a_duplicate_not_delivered() {
        let (mut s, mut r) = (Sender::new(), Receiver::new());
        let first = transmitted(&s.send("a")).remove(0);
        let again = transmitted(&s.on_timeout()).remove(0);
        assert_eq!(first, again);
        assert_eq!(s.retransmissions(), 1);
        assert!(r.on_packet(first).contains(&Action::Deliver("a".into())));
        assert_eq!(
            r.on_packet(again),
            vec![Action::Transmit(Packet::Ack { seq: false })]
        );
    }
}
