//! What the engine runs and reports: events (a process's handler or an
//! environment event), the raw steps of a path, and a transition's outcome.

use super::error::CheckError;

use crate::engine::trace::ViolationRecord;

/// The actor index of environment events in internal steps.
pub(crate) const ENV: usize = usize::MAX;
/// The actor of the step that starts a path entering a process's search
/// tree from another process's, in a search across processes (see
/// `Engine::path`): its handler is the other process's rank, its one
/// choice the node of that process's tree.
pub(crate) const LINK: usize = usize::MAX - 1;

pub(crate) const LOSE: usize = 0;

pub(crate) const DUPLICATE: usize = 1;

pub(crate) const ENV_EVENTS: [&str; 2] = ["lose message", "duplicate message"];

/// An event: a process's handler, or an environment event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Event {
    pub(crate) actor: usize,
    pub(crate) handler: usize,
}

/// A step as the engine records it: the event and its choice values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawStep {
    pub(crate) event: Event,
    pub(crate) choices: Vec<usize>,
    /// The random-seed variant (`Model::random_seeds`; 0 is the default
    /// seed).
    pub(crate) seed: u32,
}

pub(crate) struct Outcome {
    /// The choices made, as (value, range).
    pub(crate) ranges: Vec<(usize, usize)>,
    pub(crate) taken: Vec<usize>,
    pub(crate) panic: Option<(String, String)>,
    pub(crate) model_error: Option<String>,
    pub(crate) delivered: Option<(usize, usize, String)>,
    pub(crate) sent: Vec<(usize, String, &'static str)>,
    /// Timers it started or cancelled (see `ctx::Run::timers`).
    pub(crate) timers: Vec<String>,
    /// Whether the run drew randomness (looked at only with more than one
    /// random seed).
    pub(crate) drew: bool,
    /// What the run touched besides its process (partial-order reduction).
    pub(crate) footprint: crate::model::por::Footprint,
    /// A global the run initialized that could not be moved out of the
    /// arenas (see [`crate::memory::globals`]).
    pub(crate) global_error: Option<String>,
    /// A replayed choice out of its range (see `ctx::Run::misfit`).
    pub(crate) misfit: Option<String>,
    /// A thread the handler started that outlived it (see
    /// [`crate::memory::threads`]): the search cannot go on.
    pub(crate) thread_error: Option<String>,
}

impl Outcome {
    /// Whether the run gave no successor: a panic, or a thread left behind.
    pub(crate) fn cut_short(&self) -> bool {
        self.panic.is_some() || self.thread_error.is_some()
    }
}

/// Setting up failed: either the tool (an error) or the model's own code
/// during initialisation (a violation with an empty trace).
pub(crate) enum SetupFailure {
    Error(CheckError),
    Violation(ViolationRecord),
}
