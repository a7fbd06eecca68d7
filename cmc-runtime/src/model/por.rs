//! Partial-order reduction by sleep sets: what a transition touched, and
//! when two transitions of different processes commute.
//!
//! Every handler run records its *footprint*: the processes it sent to,
//! how many sends it attempted, whether it consumed a message or saw an
//! empty mailbox, whether it read or wrote the shared variables, read the
//! number of messages in flight, or drew randomness. A guard's reads are
//! part of its handler's footprint. Nothing else of the environment is
//! visible to a handler: its own state, its own timers, and the message it
//! receives are its process's alone.
//!
//! The search ([`crate::search`]) uses footprints for sleep sets
//! (Godefroid): after a state's event `e` has been explored, a later event
//! `t` of another process that commutes with `e` leads to a successor in
//! which `e` is asleep — running `e` there reaches what running `t` after
//! `e` reaches, which the successor of `e` explores. Sleep sets never skip
//! a state, only transitions: every reachable state is still visited (and
//! every invariant checked in it), which the tests compare with a search
//! without reduction.
//!
//! [`may_sleep`] is the commutation test. It is conservative: environment
//! events (loss, duplication) and transitions that draw randomness (whose
//! draws depend on the whole state) commute with nothing.

use std::cell::Cell;

/// It received a message (from its own mailbox).
pub(crate) const CONSUMED: u8 = 1;
/// It saw its mailbox empty (`has_mail` false, `recv` none): a message
/// another process sends would change what it does.
pub(crate) const SAW_EMPTY: u8 = 2;
/// It read the shared variables.
pub(crate) const READ_SHARED: u8 = 4;
/// It changed (or could have changed) the shared variables.
pub(crate) const WROTE_SHARED: u8 = 8;
/// It read the number of messages in flight (`View::in_flight`).
pub(crate) const READ_COUNT: u8 = 16;
/// It drew randomness, whose values depend on the whole state.
pub(crate) const DREW: u8 = 32;

/// What a transition (or, merged, every transition of an event in one
/// state) touched besides its own process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Footprint {
    /// The processes it sent to: bit `p` for process `p`; bit 63 stands for
    /// every process from 63 on.
    pub(crate) sent_to: u64,
    /// Sends it attempted (the most of an event's transitions).
    pub(crate) sends: u32,
    /// The flags above.
    pub(crate) flags: u8,
}

/// The bit that stands for process `p` in [`Footprint::sent_to`].
pub(crate) fn bit(p: usize) -> u64 {
    1 << p.min(63)
}

impl Footprint {
    /// Both footprints at once: what either touched.
    pub(crate) fn merge(self, other: Footprint) -> Footprint {
        Footprint {
            sent_to: self.sent_to | other.sent_to,
            sends: self.sends.max(other.sends),
            flags: self.flags | other.flags,
        }
    }

    /// Whether it changes the number of messages in flight.
    fn moves_count(&self) -> bool {
        self.sends > 0 || self.flags & CONSUMED != 0
    }
}

thread_local! {
    /// The footprint of the handler or guard running on this thread.
    static CURRENT: Cell<Footprint> = const {
        Cell::new(Footprint { sent_to: 0, sends: 0, flags: 0 })
    };
}

/// Starts recording a footprint (before a handler or a guard runs).
pub(crate) fn begin() {
    CURRENT.with(|c| c.set(Footprint::default()));
}

/// What was recorded since [`begin`].
pub(crate) fn take() -> Footprint {
    CURRENT.with(Cell::take)
}

/// Records a flag.
pub(crate) fn note(flag: u8) {
    CURRENT.with(|c| {
        let mut f = c.get();
        f.flags |= flag;
        c.set(f);
    });
}

/// Records an attempted send to `to`.
pub(crate) fn note_send(to: usize) {
    CURRENT.with(|c| {
        let mut f = c.get();
        f.sent_to |= bit(to);
        f.sends = f.sends.saturating_add(1);
        c.set(f);
    });
}

/// Whether event `sleeper` (its process and its merged footprint), asleep or
/// explored in state `s`, may sleep in the successor of `s` by transition
/// `taken`: both commute in `s`, and `taken` changes nothing `sleeper`'s
/// transitions read, so they are the same transitions after it.
/// `in_flight` is the number of messages in flight in `s`, `capacity` the
/// network's. `None` as an actor is the environment.
pub(crate) fn may_sleep(
    sleeper: (Option<usize>, Footprint),
    taken: (Option<usize>, Footprint),
    in_flight: usize,
    capacity: usize,
) -> bool {
    let (Some(p), Some(q)) = (sleeper.0, taken.0) else {
        return false;
    };
    let (a, b) = (sleeper.1, taken.1);
    if p == q || (a.flags | b.flags) & DREW != 0 {
        return false;
    }
    let touches_shared = |f: Footprint| f.flags & (READ_SHARED | WROTE_SHARED) != 0;
    if (a.flags & WROTE_SHARED != 0 && touches_shared(b))
        || (b.flags & WROTE_SHARED != 0 && touches_shared(a))
    {
        return false;
    }
    // A message to the sleeper's process is a new transition of an event
    // that receives, and changes one that saw no mail. A message from the
    // sleeper to the taken transition's process leaves a receipt as it was
    // (the same message is still there) but not an empty mailbox.
    if b.sent_to & bit(p) != 0 && a.flags & (CONSUMED | SAW_EMPTY) != 0 {
        return false;
    }
    if a.sent_to & bit(q) != 0 && b.flags & SAW_EMPTY != 0 {
        return false;
    }
    if (a.flags & READ_COUNT != 0 && b.moves_count())
        || (b.flags & READ_COUNT != 0 && a.moves_count())
    {
        return false;
    }
    // Sends check the network's capacity: in either order, none may see
    // it full (or a multicast choose which copies get in).
    if (a.sends > 0 || b.sends > 0) && in_flight + a.sends as usize + b.sends as usize > capacity {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(sent_to: &[usize], sends: u32, flags: u8) -> Footprint {
        Footprint {
            sent_to: sent_to.iter().map(|&p| bit(p)).fold(0, |a, b| a | b),
            sends,
            flags,
        }
    }

    #[test]
    fn independent_local_steps_commute() {
        let local = fp(&[], 0, 0);
        assert!(may_sleep((Some(0), local), (Some(1), local), 0, 4));
        assert!(!may_sleep((Some(0), local), (Some(0), local), 0, 4));
        assert!(!may_sleep((None, local), (Some(1), local), 0, 4));
        assert!(!may_sleep((Some(0), local), (None, local), 0, 4));
    }

    #[test]
    fn randomness_and_shared_writes_conflict() {
        let local = fp(&[], 0, 0);
        assert!(!may_sleep(
            (Some(0), fp(&[], 0, DREW)),
            (Some(1), local),
            0,
            4
        ));
        assert!(!may_sleep(
            (Some(0), local),
            (Some(1), fp(&[], 0, DREW)),
            0,
            4
        ));
        let reads = fp(&[], 0, READ_SHARED);
        let writes = fp(&[], 0, WROTE_SHARED);
        assert!(may_sleep((Some(0), reads), (Some(1), reads), 0, 4));
        assert!(!may_sleep((Some(0), reads), (Some(1), writes), 0, 4));
        assert!(!may_sleep((Some(0), writes), (Some(1), reads), 0, 4));
        assert!(may_sleep((Some(0), writes), (Some(1), local), 0, 4));
    }

    #[test]
    fn mail_to_a_receiver_conflicts_with_it() {
        let receives = fp(&[], 0, CONSUMED);
        let sends_to_0 = fp(&[0], 1, 0);
        // A new message for process 0: its receiving event changes.
        assert!(!may_sleep((Some(0), receives), (Some(1), sends_to_0), 1, 4));
        // Process 0's receipt of a message that is there stays as it was
        // after process 1 sends it another.
        assert!(may_sleep((Some(1), sends_to_0), (Some(0), receives), 1, 4));
        // Unless process 0 saw no mail.
        let saw_empty = fp(&[], 0, SAW_EMPTY);
        assert!(!may_sleep(
            (Some(1), sends_to_0),
            (Some(0), saw_empty),
            0,
            4
        ));
        assert!(!may_sleep(
            (Some(0), saw_empty),
            (Some(1), sends_to_0),
            0,
            4
        ));
        // Mail to a third process changes neither.
        let sends_to_2 = fp(&[2], 1, 0);
        assert!(may_sleep((Some(0), receives), (Some(1), sends_to_2), 1, 4));
    }

    #[test]
    fn sends_near_capacity_conflict() {
        let one = fp(&[2], 1, 0);
        let two = fp(&[3, 2], 2, 0);
        assert!(may_sleep((Some(0), one), (Some(1), two), 1, 4));
        assert!(!may_sleep((Some(0), one), (Some(1), two), 2, 4));
        let counts = fp(&[], 0, READ_COUNT);
        assert!(!may_sleep((Some(0), counts), (Some(1), one), 0, 4));
        assert!(!may_sleep(
            (Some(0), fp(&[], 0, CONSUMED)),
            (Some(1), counts),
            1,
            4
        ));
        assert!(may_sleep((Some(0), counts), (Some(1), fp(&[], 0, 0)), 0, 4));
    }

    #[test]
    fn processes_past_63_share_a_bit() {
        let receives = fp(&[], 0, CONSUMED);
        assert!(!may_sleep(
            (Some(70), receives),
            (Some(1), fp(&[64], 1, 0)),
            0,
            4
        ));
    }
}
