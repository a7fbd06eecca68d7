//! Peterson's mutual exclusion for two processes, explored exhaustively with
//! cmc's memory layer driven by hand: each process's state is an ordinary
//! heap object (`Box<Proc>` with a `String` inside) in its own arena, the
//! shared variables live in an "environment" arena, and states are captured
//! and restored as pages. The same protocol over plain `Clone + Hash` values
//! ([`reference_search`]) must give exactly the same number of states.
//!
//! This predates the engine's handler tables; it shows what the engine does
//! underneath, and it is the end-to-end test of the runtime core.

use std::collections::{HashSet, VecDeque};

use cmc::memory::{ArenaId, Memory, MemoryConfig, StateId};
use cmc::visited::Visited;
use cmc::ArenaConfig;

/// Which algorithm the processes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Peterson's algorithm: mutually exclusive.
    Peterson,
    /// "Check, then set": wait until the other flag is down, then raise
    /// ours. Two processes can both pass the check.
    CheckThenSet,
}

/// A process's local state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proc {
    /// Program counter: 0 idle, 1 flag raised, 2 turn given, 3 critical.
    pub pc: u8,
    /// Times through the critical section, saturating at 2.
    pub entries: u8,
    /// A heap-allocated name, so the state is more than one flat object.
    pub name: String,
}

/// The shared variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shared {
    /// Each process's "I want to enter" flag.
    pub flag: [bool; 2],
    /// Whose turn it is to wait.
    pub turn: u8,
}

/// Runs process `p`'s next step if it is enabled; returns whether it was.
pub fn step(variant: Variant, p: usize, me: &mut Proc, shared: &mut Shared) -> bool {
    let other = 1 - p;
    match (variant, me.pc) {
        (Variant::Peterson, 0) => {
            shared.flag[p] = true;
            me.pc = 1;
        }
        (Variant::Peterson, 1) => {
            shared.turn = other as u8;
            me.pc = 2;
        }
        (Variant::Peterson, 2) => {
            if shared.flag[other] && shared.turn == other as u8 {
                return false;
            }
            me.pc = 3;
        }
        (Variant::CheckThenSet, 0) => {
            if shared.flag[other] {
                return false;
            }
            me.pc = 1;
        }
        (Variant::CheckThenSet, 1) => {
            shared.flag[p] = true;
            me.pc = 3;
        }
        (_, 3) => {
            shared.flag[p] = false;
            me.pc = 0;
            me.entries = (me.entries + 1).min(2);
        }
        _ => unreachable!("pc {} in {variant:?}", me.pc),
    }
    true
}

/// The outcome of a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Distinct states reached.
    pub unique: usize,
    /// Transitions executed (enabled steps).
    pub transitions: usize,
    /// The shortest sequence of process indices reaching a state with both
    /// processes critical, if there is one (breadth-first order).
    pub violation: Option<Vec<usize>>,
}

fn both_critical(a: &Proc, b: &Proc) -> bool {
    a.pc == 3 && b.pc == 3
}

fn initial() -> ([Proc; 2], Shared) {
    let procs = [0, 1].map(|i| Proc {
        pc: 0,
        entries: 0,
        name: format!("process {i}"),
    });
    (
        procs,
        Shared {
            flag: [false; 2],
            turn: 0,
        },
    )
}

/// Breadth-first search over plain values: the reference.
pub fn reference_search(variant: Variant) -> Outcome {
    let (procs, shared) = initial();
    let start = (procs, shared);
    let mut seen = HashSet::from([start.clone()]);
    let mut queue = VecDeque::from([(start, Vec::new())]);
    let mut transitions = 0;
    let mut violation = None;
    while let Some(((procs, shared), path)) = queue.pop_front() {
        if both_critical(&procs[0], &procs[1]) && violation.is_none() {
            violation = Some(path.clone());
        }
        for p in 0..2 {
            let (mut next_procs, mut next_shared) = (procs.clone(), shared.clone());
            if !step(variant, p, &mut next_procs[p], &mut next_shared) {
                continue;
            }
            transitions += 1;
            let next = (next_procs, next_shared);
            if seen.insert(next.clone()) {
                let mut next_path = path.clone();
                next_path.push(p);
                queue.push_back((next, next_path));
            }
        }
    }
    Outcome {
        unique: seen.len(),
        transitions,
        violation,
    }
}

/// Breadth-first search where states are arena pages. Requires
/// `cmc::Allocator` to be the global allocator.
pub fn page_search(
    variant: Variant,
    config: MemoryConfig,
    arena: ArenaConfig,
) -> std::io::Result<Outcome> {
    let mut mem = Memory::new(config.clone());
    let arenas: Vec<ArenaId> = (0..3)
        .map(|i| {
            mem.add_arena(
                if i < 2 {
                    format!("process {i}")
                } else {
                    "environment".into()
                },
                arena.clone(),
            )
        })
        .collect::<Result<_, _>>()?;
    let (procs, shared) = initial();
    // Each root object is built inside its arena; the raw pointers stay
    // valid across restores because arenas never move and allocation is
    // deterministic.
    let roots: Vec<*mut Proc> = procs
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let _in = mem.enter(arenas[i]);
            Box::into_raw(Box::new(Proc {
                name: p.name.as_str().to_owned(),
                ..p
            }))
        })
        .collect();
    let shared: *mut Shared = {
        let _in = mem.enter(arenas[2]);
        Box::into_raw(Box::new(shared))
    };
    let s0 = mem.capture();
    let mut visited = Visited::new(config.width);
    visited.insert(mem.fingerprint(s0));
    let mut queue: VecDeque<(StateId, Vec<usize>)> = VecDeque::from([(s0, Vec::new())]);
    let mut transitions = 0;
    let mut violation = None;
    while let Some((state, path)) = queue.pop_front() {
        mem.restore(state);
        // SAFETY: the roots are live objects of the restored state.
        if unsafe { both_critical(&*roots[0], &*roots[1]) } && violation.is_none() {
            violation = Some(path.clone());
        }
        for p in 0..2 {
            mem.restore(state);
            let enabled = {
                let _in = mem.enter(arenas[p]);
                let root = roots[p];
                // SAFETY: the roots point into the restored arenas, and
                // nothing else refers to them during the step.
                unsafe { step(variant, p, &mut *root, &mut *shared) }
            };
            if !enabled {
                continue;
            }
            transitions += 1;
            let next = mem.capture();
            if visited.insert(mem.fingerprint(next)) {
                let mut next_path = path.clone();
                next_path.push(p);
                queue.push_back((next, next_path));
            } else {
                mem.release(next);
            }
        }
        mem.release(state);
    }
    Ok(Outcome {
        unique: visited.len(),
        transitions,
        violation,
    })
}
