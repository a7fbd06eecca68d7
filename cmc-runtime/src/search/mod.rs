//! The search: from the initial state, expand states in the order of the
//! chosen strategy (its frontier, [`frontier`]), run every enabled handler
//! of each with every combination of choices ([`expand`]), store each
//! distinct successor once, check the properties in every new state, and
//! turn a violation into a trace. Running one transition from one state is
//! the engine's job ([`crate::engine`]); deciding which, and what follows
//! from its outcome, is this module's.
mod cluster;
#[cfg(feature = "cluster")]
mod cluster_mpi;
mod coord;
mod expand;
mod frontier;
mod novelty;
mod parallel;
mod partition;
pub(crate) mod progress;
mod properties;
#[cfg_attr(
    not(feature = "cluster"),
    allow(dead_code, reason = "its engine is a feature")
)]
mod relay;
mod searcher;
mod sketch;
mod sleep;
mod spill;
mod swarm;
mod transition_cache;
mod twins;
mod walk;

use crate::engine::erased::Erased as P;
use std::time::Instant;

use crate::engine::isolate::{self, ChildEnd};
use crate::engine::trace::CheckResult;
use crate::engine::CheckError;
use crate::model::Model;

use searcher::{ended_result, search, settings};

/// Checks a model (with several worker processes when `model.jobs` asks
/// for them).
pub(crate) fn check(model: &Model<P>) -> Result<CheckResult, CheckError> {
    if model.cluster {
        return across_processes(model);
    }
    if model.workers() > 1 {
        return parallel::check(model);
    }
    search(model, None, false, None, None)
}

/// [`check`] in a child process: a crash, an exit or a hang in user code
/// becomes a violation with its trace; the violations found before it and
/// the statistics so far are kept.
pub(crate) fn check_isolated(model: &Model<P>) -> Result<CheckResult, CheckError> {
    if model.workers() > 1 && !model.cluster {
        return parallel::check(model);
    }
    // Across processes with workers of their own in each: forked, as with
    // --jobs.
    #[cfg(feature = "cluster")]
    if model.workers() > 1 {
        return cluster_mpi::check_workers(model);
    }
    let start = Instant::now();
    settings(model)?;
    let watch = isolate::Watch {
        transition_timeout: model.transition_timeout,
        deadline: model
            .bounds
            .time_limit
            .map(|t| start + t + std::time::Duration::from_secs(1)),
    };
    let end = isolate::run_in_child(watch, || {
        let result = check(model).map_err(|e| e.to_string());
        serde_json::to_string(&result).expect("a result always serialises")
    })?;
    let ended = match end {
        ChildEnd::Finished(text) => {
            let result: Result<CheckResult, String> = serde_json::from_str(&text).map_err(|e| {
                CheckError::Isolation(format!("unreadable result from the child: {e}"))
            })?;
            return result.map_err(CheckError::Isolation);
        }
        ChildEnd::Ended(ended) => ended,
    };
    if model.cluster {
        // Its path may continue in another process, and the others wait
        // for it at their next exchange: the run ends, as cmc's failure.
        let how = ended.how.describe();
        return Err(CheckError::Cluster(format!(
            "the search of process {} ended without a result ({how}); the whole run ends. A \
             crash of the checked code is reported with its trace by a search in one process \
             (without --processes)",
            crate::sys::process::job_rank().unwrap_or(0)
        )));
    }
    ended_result(model, watch, ended, start)
}

/// One process's part of a search across processes (see `cluster`).
fn across_processes(model: &Model<P>) -> Result<CheckResult, CheckError> {
    #[cfg(feature = "cluster")]
    {
        if model.workers() > 1 {
            return Err(CheckError::Model(format!(
                "model `{}`: a search across processes with several workers in each process \
                 (--jobs) runs isolated (`Model::check_isolated`, as `cargo cmc` runs it)",
                model.name
            )));
        }
        cluster_mpi::check(model)
    }
    #[cfg(not(feature = "cluster"))]
    {
        Err(CheckError::Model(format!(
            "model `{}`: this program was built without searches across processes (the \
             runtime's `cluster` feature; `cargo cmc check --processes N` builds with it)",
            model.name
        )))
    }
}
