//! The engine: runs one transition from a state — restores it, runs a
//! handler, captures and fingerprints the successor, checks the
//! properties — and builds the traces of what it ran. The search above it
//! decides which transitions to run.
//!
//! This file only declares the layer's modules and re-exports its API.

pub(crate) mod isolate;
mod run;
pub(crate) mod trace;
pub(crate) mod tree;

pub use self::run::*;
