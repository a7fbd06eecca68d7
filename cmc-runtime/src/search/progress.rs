//! Progress of a running search, reported to whoever installed a sink (the
//! harness that `cargo cmc` runs prints it as JSON lines).

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often a running search reports: every 250 ms, or every
/// `CMC_PROGRESS_INTERVAL_MS` milliseconds when that is set.
pub(crate) fn interval() -> Duration {
    static INTERVAL: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *INTERVAL.get_or_init(|| {
        std::env::var("CMC_PROGRESS_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_millis(250), Duration::from_millis)
    })
}

/// A snapshot of a running search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Progress {
    /// The model's name.
    pub model: String,
    /// Unique states so far.
    pub unique: u64,
    /// Transitions so far.
    pub transitions: u64,
    /// The deepest state so far.
    pub max_depth: usize,
    /// States waiting to be expanded.
    pub frontier: usize,
    /// The search process's resident memory (RSS), in bytes.
    pub memory_bytes: usize,
    /// Of which the visited set's table.
    #[serde(default)]
    pub visited_bytes: usize,
    /// Of which the page store's contents.
    #[serde(default)]
    pub page_bytes: usize,
    /// The memory budget, in bytes (0: none).
    #[serde(default)]
    pub budget_bytes: u64,
    /// Bytes of the frontier on disk (see `CMC_SPILL`).
    #[serde(default)]
    pub disk_bytes: u64,
    /// Seconds since the search started.
    pub elapsed_s: f64,
    /// Under symmetry reduction: the interchangeable processes (0: no
    /// reduction), and the successors merged so far with another state
    /// of their orbit (this worker's).
    #[serde(default)]
    pub symmetric: usize,
    /// See `symmetric`.
    #[serde(default)]
    pub merged: u64,
    /// Across processes (`--processes`): how many (0: one search in one
    /// process).
    #[serde(default)]
    pub processes: usize,
    /// Across processes: the bytes every process sent, as of the last
    /// exchange.
    #[serde(default)]
    pub sent_bytes: u64,
    /// Across processes: the process that spent the longest expanding
    /// states in the last rounds (the others wait for it at each
    /// exchange), and its time over the mean of all.
    #[serde(default)]
    pub slowest: Option<(usize, f64)>,
}

/// The resident memory of this process (RSS), in bytes, from
/// `/proc/self/statm` (0 where it cannot be read).
pub(crate) fn resident_bytes() -> u64 {
    let _sys = crate::sys::scope::system_scope();
    let Ok(text) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // The runtime asserts at start-up that the machine's pages are these.
    let page = crate::sys::PAGE as u64;
    pages * page
}

/// The proportional resident memory of this process (PSS, `Pss:` in
/// `/proc/self/smaps_rollup`), in bytes: its private pages, and each page
/// it shares with other processes divided by their number (None where it
/// cannot be read). The workers of a parallel search share the visited
/// set and what they inherited from the forking process; their PSS adds
/// up to what they hold together, where their RSS counts a shared page
/// once per worker. Reading it walks the process's mappings: dearer than
/// [`resident_bytes`], so it is read only when that is near the budget.
pub(crate) fn proportional_bytes() -> Option<u64> {
    let _sys = crate::sys::scope::system_scope();
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// The most resident memory this process ever held (`VmHWM` in
/// `/proc/self/status`), in bytes (0 where it cannot be read).
pub(crate) fn peak_resident_bytes() -> u64 {
    let _sys = crate::sys::scope::system_scope();
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The default memory budget: 80 % of the memory available when the
/// search starts (`MemAvailable` in `/proc/meminfo`), or none where that
/// cannot be read.
pub(crate) fn default_budget() -> Option<u64> {
    let _sys = crate::sys::scope::system_scope();
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024 / 10 * 8)
}

type Sink = fn(&Progress);

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// Sends progress of every search in this process to `sink` (none by
/// default).
pub fn set_sink(sink: Option<Sink>) {
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = sink;
}

pub(crate) fn report(progress: &Progress) {
    let sink = *SINK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(sink) = sink {
        let _sys = crate::sys::scope::system_scope();
        sink(progress);
    }
}

/// Receives each re-executed step of a replay (1-based index).
pub type StepSink = fn(usize, &crate::engine::trace::Step);

static STEP_SINK: Mutex<Option<StepSink>> = Mutex::new(None);
static REPLAY_STOP: Mutex<Option<usize>> = Mutex::new(None);

/// Sends every step a replay re-executes, described, to `sink`.
pub fn set_step_sink(sink: Option<StepSink>) {
    *STEP_SINK.lock().unwrap_or_else(|e| e.into_inner()) = sink;
}

/// Makes replays stop after step `step` (1-based), or run to the end.
pub fn set_replay_stop(step: Option<usize>) {
    *REPLAY_STOP.lock().unwrap_or_else(|e| e.into_inner()) = step;
}

pub(crate) fn stepping() -> bool {
    STEP_SINK
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some()
}

pub(crate) fn replay_stop() -> Option<usize> {
    *REPLAY_STOP.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn step(index: usize, step: &crate::engine::trace::Step) {
    let sink = *STEP_SINK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(sink) = sink {
        let _sys = crate::sys::scope::system_scope();
        sink(index, step);
    }
}
