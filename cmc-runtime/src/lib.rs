//! cmc: a model checker for real Rust protocol code.
//!
//! This crate is the runtime that `cargo cmc` links into a checking binary:
//! the user-facing API (attribute macros re-exported from `cmc-macros`,
//! [`Model`], [`Process`], [`Ctx`], [`choose`], the properties and the
//! results) and everything that runs a check — the memory layer that keeps
//! each process's heap in an arena of its own and captures states as
//! shared pages, the sources of state identity, the control of clocks and
//! randomness, the engine that runs one transition, the search strategies,
//! and replay.
//!
//! * [`Allocator`] is the global allocator a checking binary installs: it
//!   puts each process's allocations in its own arena (a fixed range of
//!   addresses reserved once);
//! * [`Model::check`] explores a model's states and returns a
//!   [`CheckResult`] with a replayable [`Trace`] per violation;
//!   [`Model::replay`] runs a trace again;
//! * [`memory::Memory`] (captures, restores, fingerprints) and
//!   [`visited::Visited`] are public for benchmarks and hand-written
//!   harnesses.
//!
//! The runtime is a stack of layers, each a folder that imports only from
//! the folders below it: `sys` (the machine), `memory`, `identity`,
//! `determinism`, `model`, `engine`, `search`, `driver`. The book's
//! architecture chapter describes each.

#![warn(missing_docs)]

// The layers, bottom first; a folder imports only from the folders above
// it in this list (the test `tests/tests/suite/layers.rs` enforces it, and the
// book's architecture chapter explains each).
pub mod determinism;
mod driver;
mod engine;
pub mod identity;
pub mod memory;
mod model;
mod search;
mod sys;

/// Heap canonicalization (see [`identity`]); the path of earlier releases.
pub mod canon {
    pub use crate::identity::canon::*;
}
/// The hash-compacted visited set; the path of earlier releases.
pub mod visited {
    pub use crate::identity::visited::*;
}
/// Progress reports of a running search.
pub mod progress {
    pub use crate::search::progress::*;
}
/// Registered models and invariants, and the options a harness applies.
pub mod registry {
    pub use crate::driver::registry::*;
}

pub use crate::driver::trace_replay::ReplayOutcome;
pub use crate::engine::trace::{
    BuildInfo, CheckResult, HandlerUse, MemoryUse, PathRun, Sent, Stats, Step, StepKind,
    SymmetryStats, Trace, Verdict, Violation, ViolationKind, ViolationRecord, DESCRIBED_STEPS,
    LONG_TRACE_VERSION, TRACE_VERSION,
};
pub use crate::engine::CheckError;
pub use crate::identity::rename::{Identifier, ProcessId};
pub use crate::identity::StateHash;
pub use crate::memory::alloc::{in_any_arena, Allocator};
pub use crate::memory::arena::{
    ArenaConfig, ArenaExhausted, Tracking, DEFAULT_RESERVE, MIN_RESERVE,
};
pub use crate::memory::FingerprintWidth;
pub use crate::model::ctx::{choose, SendError};
pub use crate::model::world::World;
pub use crate::model::{
    Body, Bounds, Check, FingerprintMode, GlobalInvariant, Guard, Handler, HashFn, HashFns,
    Invariant, Message, Model, NetworkConfig, OnFull, Process, Property, PropertyKind, StateHasher,
    Strategy, SymmetryCheck, Trigger,
};
pub use crate::model::{Ctx, View};
pub use crate::sys::hash::STATE_HASH;
pub use crate::sys::reloc::PageHasher;
pub use crate::sys::scope::Entered;
pub use crate::sys::stack::{scrub_stack, DEFAULT_SCRUB_BYTES};
pub use cmc_macros::{
    eventually, invariant, model, process, roles, sometimes, ProcessId, StateHash,
};

impl<P: Process> Model<P> {
    /// Explores the model's state space and reports what it found.
    ///
    /// Errors are the tool's (an arena could not be reserved, the model is
    /// malformed); property violations are in the result.
    pub fn check(&self) -> Result<CheckResult, CheckError> {
        search::check(&engine::erased::erase(self))
    }

    /// Re-executes a trace on a fresh instance of the model, checking every
    /// step's fingerprint, and reports whether its violation reproduces.
    pub fn replay(&self, trace: &Trace) -> Result<ReplayOutcome, CheckError> {
        driver::trace_replay::replay(&engine::erased::erase(self), trace)
    }

    /// [`Model::check`] in a child process, so that a crash in user code (a
    /// segfault, an abort, a stack overflow) is reported as a violation with
    /// the trace that led to it, instead of ending the checker.
    pub fn check_isolated(&self) -> Result<CheckResult, CheckError> {
        search::check_isolated(&engine::erased::erase(self))
    }

    /// [`Model::replay`] in a child process: a crash at the trace's last step
    /// reproduces a crash violation.
    pub fn replay_isolated(&self, trace: &Trace) -> Result<ReplayOutcome, CheckError> {
        driver::trace_replay::replay_isolated(&engine::erased::erase(self), trace)
    }
}

/// What the attribute macros generate code against. Not public API: no
/// stability promise; users never name it.
#[doc(hidden)]
pub mod __private {
    pub use crate::driver::protocol::harness_main;
    pub use crate::driver::registry::private::{check_model, replay_model};
    pub use crate::driver::registry::{InvariantEntry, ModelEntry, RunOptions};
    pub use crate::sys::coverage::{install as install_coverage, Hooks as CoverageHooks};
    pub use inventory;
    pub use std::any::TypeId;

    pub use crate::identity::probe::{
        Best, BestDebug, BestHash, BestNone, BestState, Has, HasDebug, HasHash, HasState, NoDebug,
        NoHash, NoState,
    };
    pub use crate::identity::rename::IdWord;
    pub use crate::identity::Sources;
    pub use crate::model::roles::{
        lift_handlers, lift_invariants, role_has_source, role_hash, Narrowing, Role, RoleTables,
        MAX_ENTRIES,
    };
    pub use crate::model::StateHasher;
    pub use std::sync::OnceLock;

    /// `SelfContained::<T>::VALUE`: `T`'s `StateHash::SELF_CONTAINED` when
    /// `T` implements `StateHash`, else (through [`NotStateHash`], which
    /// must be in scope) false. Answers only for a concrete `T` or one
    /// bounded by `StateHash`: an inherent constant whose bounds do not
    /// hold gives way to the trait's.
    #[derive(Debug)]
    pub struct SelfContained<T: ?Sized>(std::marker::PhantomData<T>);

    impl<T: ?Sized + crate::StateHash> SelfContained<T> {
        /// `T::SELF_CONTAINED`.
        pub const VALUE: bool = T::SELF_CONTAINED;
    }

    /// The answer of [`SelfContained`] for a type without `StateHash`.
    pub trait NotStateHash {
        /// False: the field is hashed by its `Hash` or `Debug`, which may
        /// follow pointers.
        const VALUE: bool = false;
    }

    impl<T: ?Sized> NotStateHash for T {}
}

/// Hooks for cmc's own benchmarks. Not public API: no stability promise.
#[doc(hidden)]
pub mod __bench {
    /// The fold hash pages and heap objects are hashed with.
    pub fn hash(data: &[u8]) -> u128 {
        crate::sys::hash::fold_hash(data)
    }

    /// Runs `f` with the chunk-hash cache reading `mem`'s pages, as the
    /// engine does while it fingerprints (see `identity::chunks`).
    pub fn with_hash_cache<R>(mem: &crate::memory::Memory, f: impl FnOnce() -> R) -> R {
        crate::identity::chunks::with_memory(mem, f)
    }

    /// (Chunks hashed, chunks whose remembered hash was used) on this
    /// thread so far.
    pub fn hash_cache_counts() -> (u64, u64) {
        crate::identity::chunks::counts()
    }

    /// The content-addressed page store, for measuring insertion alone.
    #[derive(Debug)]
    pub struct PageStore(crate::memory::store::PageStore);

    impl PageStore {
        /// An empty store.
        #[allow(clippy::new_without_default, reason = "a benchmark hook, not API")]
        pub fn new() -> Self {
            PageStore(crate::memory::store::PageStore::new())
        }

        /// Stores (or finds) a page whose hash is already known.
        pub fn intern(&mut self, bytes: &[u8], hash: u128) -> u32 {
            self.0
                .intern(bytes, hash, |_| 0, crate::memory::store::NO_PAGE)
        }

        /// Drops one reference.
        pub fn release(&mut self, id: u32) {
            self.0.release(id)
        }
    }
}
