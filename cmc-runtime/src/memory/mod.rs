//! The memory layer: arenas at fixed addresses, the allocator that routes
//! each process's allocations to its arena, dirty-page tracking, the
//! content-addressed page store, and the snapshots (states as lists of
//! pages) built on them; the threads user code starts and the globals it
//! initializes are kept out of the arenas here too.
//!
//! This file only declares the layer's modules and re-exports its API;
//! the modules import each other directly.

pub(crate) mod alloc;
pub(crate) mod arena;
mod capture;
mod delta;
mod export;
pub(crate) mod globals;
pub(crate) mod heap;
mod inspect;
mod restore;
mod snapshot;
pub(crate) mod store;
pub(crate) mod threads;
pub(crate) mod tracking;

pub use self::snapshot::*;
