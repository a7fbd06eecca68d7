//! Two-phase commit, as Lamport's TLA+ spec `TwoPhase` (TwoPhase.tla in the
//! TLA+ examples) describes it, written as a cmc model. There is one
//! transaction manager (TM, process 0) and `N` resource managers (RMs,
//! processes `1..=N`).
//!
//! Each TLA+ action is one guarded handler, named after the action. Each
//! action instance enabled in a state is exactly one cmc transition. The
//! spec's message set `msgs` is a shared variable that is never emptied, so
//! a cmc state corresponds to exactly one TLA+ state.
//! [`reference`](mod@reference) explores the spec itself, without cmc;
//! `tests/check.rs` checks that both find the same states.
//!
//! With the feature `bug-commit-without-all-prepared`, the TM commits once
//! *any* RM is prepared, and the invariant [`consistency`] fails.

pub mod reference;

use std::collections::BTreeSet;

use cmc::{Ctx, Model, View, World};

/// A value of `rmState[rm]`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RmState {
    /// `"working"`.
    Working,
    /// `"prepared"`.
    Prepared,
    /// `"committed"`.
    Committed,
    /// `"aborted"`.
    Aborted,
}

/// A value of `tmState`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum TmState {
    /// `"init"`.
    Init,
    /// `"done"`: the TM has decided, and sent Commit or Abort.
    Done,
}

/// The name of a resource manager: RM `k` is process `k`. Names are only
/// compared for equality and kept in sets, so the RMs are interchangeable:
/// the `_symmetric` models declare it, and count each state once for all
/// its renamings of the RMs.
// ANCHOR: rm
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, cmc::ProcessId)]
pub struct Rm(pub usize);
// ANCHOR_END: rm

/// The spec's `msgs`: every message ever sent. Messages are never removed;
/// an action that an implementation would trigger by receiving a message is
/// enabled while the message is in the set.
#[derive(Debug, Default, Hash, PartialEq, Eq, cmc::StateHash)]
pub struct Msgs {
    /// The RMs `rm` with `[type |-> "Prepared", rm |-> rm]` in `msgs`.
    pub prepared: BTreeSet<Rm>,
    /// Whether `[type |-> "Commit"]` is in `msgs`.
    pub commit: bool,
    /// Whether `[type |-> "Abort"]` is in `msgs`.
    pub abort: bool,
}

/// A process: the transaction manager or a resource manager. Each holds
/// only its own variables of the spec. Its identity is its derived
/// `cmc::StateHash` (the variant and its fields), cmc's first choice; its
/// `Hash` and `Debug` would count the same states.
#[derive(Debug, Hash, PartialEq, Eq, cmc::StateHash)]
pub enum Manager {
    /// The transaction manager (process 0).
    Tm {
        /// `tmState`.
        tm_state: TmState,
        /// `tmPrepared`.
        tm_prepared: BTreeSet<Rm>,
    },
    /// A resource manager (processes `1..=N`; RM `k` is process `k`).
    Rm {
        /// `rmState[k]`.
        rm_state: RmState,
    },
}

#[cmc::process(shared = Msgs)]
impl Manager {
    /// `TMRcvPrepared(rm)`: the TM records a Prepared message. The RM is
    /// chosen among those whose Prepared message is in `msgs`: exactly the
    /// `rm`s for which the action is enabled. This includes RMs already in
    /// `tmPrepared`, for which the successor is the same state.
    #[handler(guard = Self::can_rcv_prepared)]
    fn tm_rcv_prepared(&mut self, ctx: &mut Ctx<'_, Self>) {
        let sent = &ctx.shared().prepared;
        let rm = *sent
            .iter()
            .nth(cmc::choose(sent.len()))
            .expect("the choice is below the number of Prepared messages");
        self.tm_prepared_mut().insert(rm);
    }

    fn can_rcv_prepared(&self, view: &View<'_, Self>) -> bool {
        self.tm_is_init() && !view.shared().prepared.is_empty()
    }

    /// `TMCommit`: the TM decides to commit and sends Commit.
    #[handler(guard = Self::can_commit)]
    fn tm_commit(&mut self, ctx: &mut Ctx<'_, Self>) {
        *self.tm_state_mut() = TmState::Done;
        ctx.with_shared(|msgs| msgs.commit = true);
    }

    fn can_commit(&self, view: &View<'_, Self>) -> bool {
        match self {
            Manager::Tm {
                tm_state: TmState::Init,
                tm_prepared,
            } => commit_allowed(tm_prepared, view.process_count() - 1),
            _ => false,
        }
    }

    /// `TMAbort`: the TM decides to abort and sends Abort.
    #[handler(guard = Self::tm_is_init)]
    fn tm_abort(&mut self, ctx: &mut Ctx<'_, Self>) {
        *self.tm_state_mut() = TmState::Done;
        ctx.with_shared(|msgs| msgs.abort = true);
    }

    /// `RMPrepare(rm)`: a working RM prepares and sends Prepared.
    #[handler(guard = Self::rm_is_working)]
    fn rm_prepare(&mut self, ctx: &mut Ctx<'_, Self>) {
        *self.rm_state_mut() = RmState::Prepared;
        let me = Rm(ctx.me());
        ctx.with_shared(|msgs| msgs.prepared.insert(me));
    }

    /// `RMChooseToAbort(rm)`: a working RM aborts on its own. It sends
    /// nothing: the spec represents the Abort an RM would send by the TM
    /// deciding to abort on its own.
    #[handler(guard = Self::rm_is_working)]
    fn rm_choose_to_abort(&mut self) {
        *self.rm_state_mut() = RmState::Aborted;
    }

    /// `RMRcvCommitMsg(rm)`: an RM receives Commit. It is enabled whenever
    /// Commit has been sent, even for an RM that has already committed.
    #[handler(guard = Self::rm_sees_commit)]
    fn rm_rcv_commit_msg(&mut self) {
        *self.rm_state_mut() = RmState::Committed;
    }

    fn rm_sees_commit(&self, view: &View<'_, Self>) -> bool {
        matches!(self, Manager::Rm { .. }) && view.shared().commit
    }

    /// `RMRcvAbortMsg(rm)`: an RM receives Abort. It is enabled whenever
    /// Abort has been sent.
    #[handler(guard = Self::rm_sees_abort)]
    fn rm_rcv_abort_msg(&mut self) {
        *self.rm_state_mut() = RmState::Aborted;
    }

    fn rm_sees_abort(&self, view: &View<'_, Self>) -> bool {
        matches!(self, Manager::Rm { .. }) && view.shared().abort
    }
}

impl Manager {
    fn tm_is_init(&self) -> bool {
        matches!(
            self,
            Manager::Tm {
                tm_state: TmState::Init,
                ..
            }
        )
    }

    fn rm_is_working(&self) -> bool {
        matches!(
            self,
            Manager::Rm {
                rm_state: RmState::Working
            }
        )
    }

    // The handlers below are guarded to run on one kind of process only; a
    // panic here is a wrong guard, and cmc reports it as a violation.

    fn tm_state_mut(&mut self) -> &mut TmState {
        match self {
            Manager::Tm { tm_state, .. } => tm_state,
            Manager::Rm { .. } => panic!("a TM handler ran on an RM"),
        }
    }

    fn tm_prepared_mut(&mut self) -> &mut BTreeSet<Rm> {
        match self {
            Manager::Tm { tm_prepared, .. } => tm_prepared,
            Manager::Rm { .. } => panic!("a TM handler ran on an RM"),
        }
    }

    fn rm_state_mut(&mut self) -> &mut RmState {
        match self {
            Manager::Rm { rm_state } => rm_state,
            Manager::Tm { .. } => panic!("an RM handler ran on the TM"),
        }
    }
}

/// `TMCommit`'s condition on `tmPrepared` in a model with `rms` RMs:
/// `tmPrepared = RM`.
#[cfg(not(feature = "bug-commit-without-all-prepared"))]
fn commit_allowed(tm_prepared: &BTreeSet<Rm>, rms: usize) -> bool {
    tm_prepared.len() == rms && tm_prepared.iter().all(|Rm(k)| (1..=rms).contains(k))
}

/// The seeded bug: `tmPrepared # {}`, as when a coordinator tests whether
/// *any* participant voted yes where it should test that *all* did.
#[cfg(feature = "bug-commit-without-all-prepared")]
fn commit_allowed(tm_prepared: &BTreeSet<Rm>, _rms: usize) -> bool {
    !tm_prepared.is_empty()
}

/// `TCConsistent`: no RM has committed while another has aborted.
#[cmc::invariant]
pub fn consistency(world: &World<'_, Manager>) -> Result<(), String> {
    let first = |wanted: RmState| {
        world.processes().enumerate().find_map(|(k, p)| match p {
            Manager::Rm { rm_state } if *rm_state == wanted => Some(k),
            _ => None,
        })
    };
    match (first(RmState::Committed), first(RmState::Aborted)) {
        (Some(c), Some(a)) => Err(format!("RM {c} has committed and RM {a} has aborted")),
        _ => Ok(()),
    }
}

/// `TPTypeOK`, for the parts the Rust types do not already ensure. The
/// process roles must be right (process 0 the TM, the others RMs), and
/// `tmPrepared` and the Prepared messages must name only RMs of the model.
/// Values of `rmState` and `tmState`, and the shapes of messages, hold by
/// construction.
#[cmc::invariant]
pub fn type_ok(world: &World<'_, Manager>) -> Result<(), String> {
    let rms = 1..world.process_count();
    let is_rm = |Rm(k): &Rm| rms.contains(k);
    for (k, p) in world.processes().enumerate() {
        match (k, p) {
            (0, Manager::Tm { tm_prepared, .. }) if !tm_prepared.iter().all(is_rm) => {
                return Err(format!(
                    "tmPrepared = {tm_prepared:?} is not a subset of RM"
                ));
            }
            (0, Manager::Tm { .. }) | (1.., Manager::Rm { .. }) => {}
            (0, Manager::Rm { .. }) => return Err("process 0 is an RM, not the TM".into()),
            (_, Manager::Tm { .. }) => return Err(format!("process {k} is a TM, not an RM")),
        }
    }
    let prepared = &world.shared().prepared;
    if prepared.iter().all(is_rm) {
        Ok(())
    } else {
        Err(format!(
            "msgs holds Prepared from {prepared:?}, not all RMs"
        ))
    }
}

/// The model with `rms` resource managers: process 0 is the TM, process `k`
/// (`1..=rms`) is RM `k`, and all start as in `TPInit`.
///
/// # Panics
/// When `rms` is 0.
pub fn two_phase_commit(rms: usize) -> Model<Manager> {
    named(format!("two_phase_commit_{rms}"), rms)
}

fn named(name: String, rms: usize) -> Model<Manager> {
    assert!(rms >= 1, "the model needs at least one RM, not {rms}");
    Model::new(name, rms + 1, |k| {
        if k == 0 {
            Manager::Tm {
                tm_state: TmState::Init,
                tm_prepared: BTreeSet::new(),
            }
        } else {
            Manager::Rm {
                rm_state: RmState::Working,
            }
        }
    })
    // In every reachable state some action is enabled (at the end, an RM can
    // receive the decision again), and TLC finds no deadlock. A state with no
    // handler enabled would be a modelling error, so cmc must report it.
    .quiescence_ok(false)
    // The states are small: one line each reads better in traces.
    .debug_with(|p| format!("{p:?}"))
}

/// Three RMs: the configuration for which TLC reports 288 states.
#[cmc::model]
pub fn two_phase_commit_3() -> Model<Manager> {
    two_phase_commit(3)
}

/// Four RMs.
#[cmc::model]
pub fn two_phase_commit_4() -> Model<Manager> {
    two_phase_commit(4)
}

/// Five RMs.
#[cmc::model]
pub fn two_phase_commit_5() -> Model<Manager> {
    two_phase_commit(5)
}

/// Six RMs: the configuration TwoPhase.tla says TLC checked (50,816 states).
#[cmc::model]
pub fn two_phase_commit_6() -> Model<Manager> {
    two_phase_commit(6)
}

/// Seven RMs: for the comparison with stateright (`benches/vs-stateright`).
#[cmc::model]
pub fn two_phase_commit_7() -> Model<Manager> {
    two_phase_commit(7)
}

/// Eight RMs: for the comparison with stateright.
#[cmc::model]
pub fn two_phase_commit_8() -> Model<Manager> {
    two_phase_commit(8)
}

/// The model with `rms` RMs declared interchangeable: each state is counted
/// once for all its renamings of the RMs (the orbits of
/// [`reference::Spec::orbits`]).
// ANCHOR: symmetric
pub fn two_phase_commit_symmetric(rms: usize) -> Model<Manager> {
    named(format!("two_phase_commit_{rms}_symmetric"), rms).interchangeable(1..=rms, Rm)
}
// ANCHOR_END: symmetric

/// Three interchangeable RMs.
#[cmc::model]
pub fn two_phase_commit_3_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(3)
}

/// Four interchangeable RMs.
#[cmc::model]
pub fn two_phase_commit_4_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(4)
}

/// Five interchangeable RMs.
#[cmc::model]
pub fn two_phase_commit_5_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(5)
}

/// Six interchangeable RMs.
#[cmc::model]
pub fn two_phase_commit_6_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(6)
}

/// Seven interchangeable RMs.
#[cmc::model]
pub fn two_phase_commit_7_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(7)
}

/// Eight interchangeable RMs (for the comparison with stateright).
#[cmc::model]
pub fn two_phase_commit_8_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(8)
}

/// Ten interchangeable RMs (for the comparison with stateright).
#[cmc::model]
pub fn two_phase_commit_10_symmetric() -> Model<Manager> {
    two_phase_commit_symmetric(10)
}
