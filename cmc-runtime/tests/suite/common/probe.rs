//! A probe that records every state the search evaluates invariants in,
//! and a search's result in the terms the comparison tests use: the
//! states (one by one, as the probe saw them), the properties violated,
//! the counts, the verdict and the first trace's length.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::cell::RefCell;
use std::collections::BTreeSet;

use cmc::{Check, Model, Process, Verdict};

use super::auto::Auto;

thread_local! {
    /// The states the probe invariant saw on this thread.
    static SEEN: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
}

/// Records a state (by a key that names it).
pub fn probe(key: String) -> Check {
    SEEN.with(|s| s.borrow_mut().insert(key));
    Ok(())
}

/// The states recorded since the last call.
pub fn take_seen() -> BTreeSet<String> {
    SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// The probe of the generated models (`auto`): process states and
/// messages in flight.
pub fn auto_probe(w: &cmc::World<'_, Auto>) -> Check {
    probe(format!(
        "{:?} {:?}",
        w.processes().map(|p| p.s).collect::<Vec<_>>(),
        w.in_flight().collect::<Vec<_>>()
    ))
}

/// What a search found.
#[derive(Debug)]
pub struct Found {
    pub states: BTreeSet<String>,
    pub violated: BTreeSet<String>,
    pub unique: u64,
    pub transitions: u64,
    pub cached: u64,
    pub derived: u64,
    pub verdict: Verdict,
    pub first_trace: Option<usize>,
}

/// Checks `model`, with the probe's record of its states.
pub fn run<P: Process>(model: Model<P>) -> Found {
    take_seen();
    let r = model.check().unwrap();
    Found {
        states: take_seen(),
        violated: r
            .violations
            .iter()
            .map(|v| v.record.property.clone())
            .collect(),
        unique: r.stats.unique,
        transitions: r.stats.transitions,
        cached: r.stats.cached,
        derived: r.stats.derived,
        verdict: r.verdict,
        first_trace: r.violations.first().map(|v| v.trace.steps.len()),
    }
}
