//! Attribute macros of cmc.
//!
//! The attributes (`#[cmc::process]`, `#[handler]`, `#[invariant]`,
//! `#[cmc::model]`) are built on top of the engine's handler tables; until the
//! engine exists this crate exports nothing, so no attribute can be used by
//! mistake before it does what its documentation says.
