//! The engine: runs one transition from a state — restores it, runs a
//! handler, captures and fingerprints the successor, checks the
//! properties — and builds the traces of what it ran. The search above it
//! decides which transitions to run.
//!
//! This file only declares the layer's modules and re-exports its API.

mod checks;
mod crash;
mod divergence;
pub(crate) mod erased;
mod error;
mod events;
mod fingerprint;
pub(crate) mod isolate;
mod names;
mod properties;
mod run;
mod setup;
mod states;
pub(crate) mod symmetry;
pub(crate) mod trace;
mod traces;
pub(crate) mod tree;
pub(crate) mod twins;

pub(crate) use self::crash::*;
pub(crate) use self::divergence::*;
pub use self::error::CheckError;
pub(crate) use self::events::*;
pub(crate) use self::fingerprint::*;
pub(crate) use self::names::*;
pub(crate) use self::properties::*;
pub(crate) use self::run::*;
pub(crate) use self::setup::*;
pub(crate) use self::traces::*;
