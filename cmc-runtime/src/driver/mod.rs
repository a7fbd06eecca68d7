//! The check driver: the registry of models the macros register, the
//! harness `cargo cmc` runs, and replay.

pub(crate) mod protocol;
pub(crate) mod registry;
pub(crate) mod trace_replay;
