//! The view global invariants, prune predicates and priorities get: every
//! process and the environment, read-only.

use std::fmt;

use crate::model::env::Env;
use crate::model::process::Process;

/// Every process of the current state, and the environment.
#[repr(C)] // the same layout for every `P` (see `engine::erased`)
pub struct World<'a, P: Process> {
    pub(crate) procs: &'a [*mut P],
    pub(crate) env: &'a Env<P::Msg, P::Shared>,
}

impl<P: Process> fmt::Debug for World<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("processes", &self.procs.len())
            .finish_non_exhaustive()
    }
}

impl<'a, P: Process> World<'a, P> {
    /// The number of processes.
    pub fn process_count(&self) -> usize {
        self.procs.len()
    }

    /// Process `i`.
    ///
    /// # Panics
    /// When `i` is not a process of the model.
    #[track_caller]
    pub fn process(&self, i: usize) -> &'a P {
        assert!(
            i < self.procs.len(),
            "process {i}, but the model has {} processes",
            self.procs.len()
        );
        // SAFETY: the roots are live objects of the state the engine has
        // loaded, and nothing mutates them while the world is borrowed.
        unsafe { &*self.procs[i] }
    }

    /// Every process, in index order.
    pub fn processes(&self) -> impl Iterator<Item = &'a P> + '_ {
        (0..self.procs.len()).map(|i| self.process(i))
    }

    /// The messages in flight as (sender, receiver, message), in the
    /// network's canonical order.
    pub fn in_flight(&self) -> impl Iterator<Item = (usize, usize, &'a P::Msg)> + 'a {
        self.env
            .msgs
            .iter()
            .map(|e| (e.from as usize, e.to as usize, &e.msg))
    }

    /// The shared variables.
    pub fn shared(&self) -> &'a P::Shared {
        &self.env.shared
    }

    /// Whether process `p`'s timer `name` is pending.
    pub fn timer_pending(&self, p: usize, name: &str) -> bool {
        self.env.timer_pending(p, name)
    }
}
