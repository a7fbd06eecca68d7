//! Sleep sets with state matching (Godefroid's algorithm, for any order
//! of the frontier): which events of a state need not run, because a
//! sibling's subtree reaches what they would (see [`crate::model::por`]).
//!
//! A state's sleep set is the intersection of the sets it arrived with:
//! while it waits on the frontier, each new arrival intersects it. An
//! arrival after the state was expanded, without an event the expansion
//! left asleep, puts the state back on the frontier to run exactly the
//! events no arrival had asleep any more (a partial re-expansion), and the
//! stored set shrinks. So an event is skipped in a state only when every
//! path that reached it had it asleep — the condition under which sleep
//! sets keep every state reachable.

use std::hash::BuildHasherDefault;

use crate::identity::visited::IdentityHasher;

/// Fingerprints and state handles are hashes or small numbers already.
type Map<K, V> = hashbrown::HashMap<K, V, BuildHasherDefault<IdentityHasher>>;

use crate::engine::{Event, ENV};
use crate::memory::{Fingerprint, StateId};
use crate::model::por::{may_sleep, Footprint};

/// An event asleep in a state, with what its transitions touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sleeper {
    pub(super) event: Event,
    pub(super) print: Footprint,
}

/// What to expand in a state taken from the frontier.
pub(super) struct Plan {
    /// The events asleep in it.
    pub(super) sleep: Vec<Sleeper>,
    /// For a partial re-expansion, the only events to run.
    pub(super) only: Option<Vec<Event>>,
}

struct Stored {
    sleep: Vec<Sleeper>,
    expanded: bool,
}

struct Pending {
    fp: Fingerprint,
    /// A partial re-expansion: its plan.
    partial: Option<Plan>,
}

/// The sleep sets of a search.
#[derive(Default)]
pub(super) struct SleepSets {
    /// The states whose sleep set is not empty, by fingerprint.
    stored: Map<Fingerprint, Stored>,
    /// The states on the frontier that have a sleep set or a partial plan.
    pending: Map<StateId, Pending>,
    /// The expansion in progress: the events asleep in its state, then
    /// each event it explored (the ones before the event that runs now).
    pub(super) current: Vec<Sleeper>,
    /// The guard footprint of the event that runs now.
    pub(super) guard: Footprint,
    /// Messages in flight in the state being expanded.
    pub(super) in_flight: usize,
    /// The network's capacity.
    pub(super) capacity: usize,
    /// Events skipped because they were asleep.
    pub(super) slept: u64,
    /// Partial re-expansions.
    pub(super) reexpanded: u64,
}

fn actor(e: Event) -> Option<usize> {
    (e.actor != ENV).then_some(e.actor)
}

impl SleepSets {
    /// Bytes of checker memory its maps take (their entries; the sleep
    /// lists they own counted by their lengths).
    pub(super) fn bytes(&self) -> usize {
        let entry = |k: usize, v: usize| k + v + 1;
        self.stored.capacity() * entry(size_of::<Fingerprint>(), size_of::<Stored>())
            + self
                .stored
                .values()
                .map(|s| s.sleep.capacity() * size_of::<Sleeper>())
                .sum::<usize>()
            + self.pending.capacity() * entry(size_of::<StateId>(), size_of::<Pending>())
    }

    pub(super) fn new(capacity: usize) -> Self {
        SleepSets {
            capacity,
            ..SleepSets::default()
        }
    }

    /// The plan for `state`, taken from the frontier: its sleep set (empty
    /// when none was recorded) and, for a re-expansion, its events.
    pub(super) fn plan(&mut self, state: StateId) -> Plan {
        let Some(pending) = self.pending.remove(&state) else {
            return Plan {
                sleep: Vec::new(),
                only: None,
            };
        };
        if let Some(plan) = pending.partial {
            self.reexpanded += 1;
            return plan;
        }
        let sleep = match self.stored.get_mut(&pending.fp) {
            Some(stored) if !stored.sleep.is_empty() => {
                stored.expanded = true;
                stored.sleep.clone()
            }
            Some(_) => {
                self.stored.remove(&pending.fp);
                Vec::new()
            }
            None => Vec::new(),
        };
        Plan { sleep, only: None }
    }

    /// The sleep set of the successor by `event`, whose run touched
    /// `print`: the current sleepers that commute with it.
    pub(super) fn child(&self, event: Event, print: Footprint) -> Vec<Sleeper> {
        let taken = (actor(event), print.merge(self.guard));
        self.current
            .iter()
            .filter(|s| {
                may_sleep(
                    (actor(s.event), s.print),
                    taken,
                    self.in_flight,
                    self.capacity,
                )
            })
            .copied()
            .collect()
    }

    /// A new state, put on the frontier as `state`, arrived with `sleep`.
    pub(super) fn found(&mut self, fp: Fingerprint, state: StateId, sleep: Vec<Sleeper>) {
        if sleep.is_empty() {
            return;
        }
        self.stored.insert(
            fp,
            Stored {
                sleep,
                expanded: false,
            },
        );
        self.pending.insert(state, Pending { fp, partial: None });
    }

    /// Whether the known state `fp` has a sleep set (only then can a new
    /// arrival change anything).
    pub(super) fn known(&self, fp: Fingerprint) -> bool {
        self.stored.contains_key(&fp)
    }

    /// A known state arrived again with `sleep`: the events it must run
    /// now, if any (the state goes back on the frontier with this plan,
    /// see [`SleepSets::requeued`]).
    pub(super) fn again(&mut self, fp: Fingerprint, sleep: &[Sleeper]) -> Option<Plan> {
        let stored = self.stored.get_mut(&fp)?;
        let has = |set: &[Sleeper], e: Event| set.iter().any(|s| s.event == e);
        let woken: Vec<Event> = stored
            .sleep
            .iter()
            .filter(|s| !has(sleep, s.event))
            .map(|s| s.event)
            .collect();
        // The intersection; an event asleep in both touches what either
        // footprint says.
        stored.sleep.retain(|s| has(sleep, s.event));
        for s in &mut stored.sleep {
            if let Some(other) = sleep.iter().find(|o| o.event == s.event) {
                s.print = s.print.merge(other.print);
            }
        }
        let expanded = stored.expanded;
        if stored.sleep.is_empty() && expanded {
            self.stored.remove(&fp);
        }
        (expanded && !woken.is_empty()).then(|| Plan {
            sleep: sleep.to_vec(),
            only: Some(woken),
        })
    }

    /// A known state, captured again as `state`, is back on the frontier
    /// to run `plan`.
    pub(super) fn requeued(&mut self, fp: Fingerprint, state: StateId, plan: Plan) {
        self.pending.insert(
            state,
            Pending {
                fp,
                partial: Some(plan),
            },
        );
    }
}
