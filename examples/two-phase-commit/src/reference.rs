//! The TLA+ spec `TwoPhase` explored breadth-first as TLC explores it, in
//! plain Rust without cmc. It is the independent reference that the cmc
//! model's counts are compared with. It is written from the spec, not from
//! the model, and so it shares no code with it.
//!
//! The state is the spec's four variables, written as literally as Rust
//! allows: a vector of RM states, two sets and an enum. Each action instance
//! enabled in a state gives one successor, even when two instances give
//! the same state. This is how TLC counts "states generated".

use std::collections::{BTreeSet, HashSet, VecDeque};

/// A value of `rmState[rm]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// A value of `tmState`. The spec as written in the TLA+ examples
/// repository has `"committed"` and `"aborted"` where this has `"done"`.
/// Commit (Abort) is in `msgs` exactly when the TM has committed (aborted),
/// so the two versions have the same states up to renaming, and the same
/// counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmState {
    /// `"init"`.
    Init,
    /// `"done"`: the TM has decided.
    Done,
}

/// An element of `Message`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Message {
    /// `[type |-> "Prepared", rm |-> rm]`.
    Prepared(usize),
    /// `[type |-> "Commit"]`.
    Commit,
    /// `[type |-> "Abort"]`.
    Abort,
}

/// A state of the spec: its four variables. RMs are numbered `0..rms`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// `rmState`.
    pub rm_state: Vec<RmState>,
    /// `tmState`.
    pub tm_state: TmState,
    /// `tmPrepared`.
    pub tm_prepared: BTreeSet<usize>,
    /// `msgs`.
    pub msgs: BTreeSet<Message>,
}

impl State {
    /// `TCConsistent`: no RM has committed while another has aborted.
    pub fn consistent(&self) -> bool {
        !(self.rm_state.contains(&RmState::Committed) && self.rm_state.contains(&RmState::Aborted))
    }
}

/// When `TMCommit` is enabled (besides `tmState = "init"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitGuard {
    /// `tmPrepared = RM`: the spec.
    AllPrepared,
    /// `tmPrepared # {}`: the seeded bug `bug-commit-without-all-prepared`.
    AnyPrepared,
}

/// The spec for a set of `rms` resource managers.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    rms: usize,
    commit: CommitGuard,
}

/// What a breadth-first search of the spec found, counted as TLC counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exploration {
    /// Distinct states.
    pub distinct: usize,
    /// States generated: the initial state, plus one successor for each
    /// action instance that is enabled in each distinct state.
    pub generated: usize,
    /// The depth of the search: the number of breadth-first levels. The
    /// initial state alone is depth 1.
    pub depth: usize,
    /// The fewest steps from the initial state to a state that violates
    /// [`State::consistent`], if some reachable state does.
    pub shortest_violation: Option<usize>,
}

impl Spec {
    /// `TwoPhase` with `CONSTANT RM` a set of `rms` resource managers, and
    /// `TMCommit` guarded by `commit`.
    pub fn new(rms: usize, commit: CommitGuard) -> Self {
        Spec { rms, commit }
    }

    /// `TPInit`.
    pub fn init(&self) -> State {
        State {
            rm_state: vec![RmState::Working; self.rms],
            tm_state: TmState::Init,
            tm_prepared: BTreeSet::new(),
            msgs: BTreeSet::new(),
        }
    }

    /// `TPNext`: one successor for each enabled action instance, in the
    /// order of the disjuncts.
    pub fn next(&self, s: &State) -> Vec<State> {
        let mut out = Vec::new();
        // TMCommit.
        let commit_enabled = match self.commit {
            CommitGuard::AllPrepared => s.tm_prepared.len() == self.rms,
            CommitGuard::AnyPrepared => !s.tm_prepared.is_empty(),
        };
        if s.tm_state == TmState::Init && commit_enabled {
            let mut t = s.clone();
            t.tm_state = TmState::Done;
            t.msgs.insert(Message::Commit);
            out.push(t);
        }
        // TMAbort.
        if s.tm_state == TmState::Init {
            let mut t = s.clone();
            t.tm_state = TmState::Done;
            t.msgs.insert(Message::Abort);
            out.push(t);
        }
        for rm in 0..self.rms {
            // TMRcvPrepared(rm).
            if s.tm_state == TmState::Init && s.msgs.contains(&Message::Prepared(rm)) {
                let mut t = s.clone();
                t.tm_prepared.insert(rm);
                out.push(t);
            }
            // RMPrepare(rm).
            if s.rm_state[rm] == RmState::Working {
                let mut t = s.clone();
                t.rm_state[rm] = RmState::Prepared;
                t.msgs.insert(Message::Prepared(rm));
                out.push(t);
            }
            // RMChooseToAbort(rm).
            if s.rm_state[rm] == RmState::Working {
                let mut t = s.clone();
                t.rm_state[rm] = RmState::Aborted;
                out.push(t);
            }
            // RMRcvCommitMsg(rm).
            if s.msgs.contains(&Message::Commit) {
                let mut t = s.clone();
                t.rm_state[rm] = RmState::Committed;
                out.push(t);
            }
            // RMRcvAbortMsg(rm).
            if s.msgs.contains(&Message::Abort) {
                let mut t = s.clone();
                t.rm_state[rm] = RmState::Aborted;
                out.push(t);
            }
        }
        out
    }

    /// Explores every reachable state breadth-first.
    ///
    /// # Panics
    /// When a reachable state has no successor: TLC would report a
    /// deadlock, and the spec has none.
    pub fn explore(&self) -> Exploration {
        let init = self.init();
        let mut shortest_violation = (!init.consistent()).then_some(0);
        let mut seen = HashSet::from([init.clone()]);
        let mut queue = VecDeque::from([(init, 0)]);
        let mut generated = 1;
        let mut deepest = 0;
        while let Some((s, level)) = queue.pop_front() {
            deepest = level;
            let successors = self.next(&s);
            assert!(!successors.is_empty(), "deadlock in {s:?}");
            generated += successors.len();
            for t in successors {
                if !t.consistent() && shortest_violation.is_none() {
                    // Breadth-first: the first violating state found is
                    // one of the nearest.
                    shortest_violation = Some(level + 1);
                }
                if seen.insert(t.clone()) {
                    queue.push_back((t, level + 1));
                }
            }
        }
        Exploration {
            distinct: seen.len(),
            generated,
            depth: deepest + 1,
            shortest_violation,
        }
    }
}

impl State {
    /// The state with RM `i` renamed `perm[i]` everywhere: its `rmState`
    /// entry moves, and `tmPrepared` and the Prepared messages name it by
    /// its new name.
    pub fn renamed(&self, perm: &[usize]) -> State {
        let mut rm_state = self.rm_state.clone();
        for (i, &s) in self.rm_state.iter().enumerate() {
            rm_state[perm[i]] = s;
        }
        State {
            rm_state,
            tm_state: self.tm_state,
            tm_prepared: self.tm_prepared.iter().map(|&i| perm[i]).collect(),
            msgs: self
                .msgs
                .iter()
                .map(|m| match *m {
                    Message::Prepared(i) => Message::Prepared(perm[i]),
                    m => m,
                })
                .collect(),
        }
    }

    /// The orbit's canonical key under every renaming of the RMs: the
    /// smallest `Debug` image over all permutations (TLC's `SYMMETRY
    /// Permutations(RM)`, computed the slow, obvious way).
    pub fn orbit_key(&self) -> String {
        permutations(self.rm_state.len())
            .iter()
            .map(|p| format!("{:?}", self.renamed(p)))
            .min()
            .expect("there is at least the identity permutation")
    }
}

/// Every permutation of `0..n`, in lexicographic order.
pub fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn extend(prefix: &mut Vec<usize>, n: usize, out: &mut Vec<Vec<usize>>) {
        if prefix.len() == n {
            out.push(prefix.clone());
            return;
        }
        for i in 0..n {
            if !prefix.contains(&i) {
                prefix.push(i);
                extend(prefix, n, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut Vec::with_capacity(n), n, &mut out);
    out
}

impl Spec {
    /// The number of orbits of the reachable states under renaming of the
    /// RMs: breadth-first search that keeps one state per orbit (keyed by
    /// [`State::orbit_key`]), as a symmetry-reducing checker does.
    pub fn orbits(&self) -> usize {
        let init = self.init();
        let mut seen = HashSet::from([init.orbit_key()]);
        let mut queue = VecDeque::from([init]);
        while let Some(s) = queue.pop_front() {
            for t in self.next(&s) {
                if seen.insert(t.orbit_key()) {
                    queue.push_back(t);
                }
            }
        }
        seen.len()
    }

    /// The same number a third way, fast for many RMs: an RM appears in a
    /// state only through its own `rmState`, its membership of
    /// `tmPrepared` and its Prepared message, so two states are renamings
    /// of each other exactly when the rest of the state is equal and the
    /// multisets of those per-RM profiles are.
    pub fn orbits_by_profile(&self) -> usize {
        let key = |s: &State| {
            let mut profiles: Vec<(RmState, bool, bool)> = (0..self.rms)
                .map(|rm| {
                    (
                        s.rm_state[rm],
                        s.tm_prepared.contains(&rm),
                        s.msgs.contains(&Message::Prepared(rm)),
                    )
                })
                .collect();
            profiles.sort_by_key(|&(state, a, b)| (state as u8, a, b));
            let rest = (
                s.tm_state,
                s.msgs.contains(&Message::Commit),
                s.msgs.contains(&Message::Abort),
            );
            (profiles, rest)
        };
        let init = self.init();
        let mut seen = HashSet::from([key(&init)]);
        let mut queue = VecDeque::from([init]);
        while let Some(s) = queue.pop_front() {
            for t in self.next(&s) {
                if seen.insert(key(&t)) {
                    queue.push_back(t);
                }
            }
        }
        seen.len()
    }

    /// The same number the other way: every reachable state, grouped by
    /// its orbit key.
    pub fn orbits_of_all_states(&self) -> usize {
        let init = self.init();
        let mut seen = HashSet::from([init.clone()]);
        let mut queue = VecDeque::from([init]);
        while let Some(s) = queue.pop_front() {
            for t in self.next(&s) {
                if seen.insert(t.clone()) {
                    queue.push_back(t);
                }
            }
        }
        seen.iter()
            .map(State::orbit_key)
            .collect::<HashSet<_>>()
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_all_there_once() {
        let p = permutations(4);
        assert_eq!(p.len(), 24);
        assert_eq!(p.iter().collect::<HashSet<_>>().len(), 24);
        assert_eq!(p[0], [0, 1, 2, 3]);
        assert_eq!(p[23], [3, 2, 1, 0]);
    }

    #[test]
    fn orbits_counted_two_ways_agree() {
        for rms in 1..=5 {
            let spec = Spec::new(rms, CommitGuard::AllPrepared);
            assert_eq!(spec.orbits(), spec.orbits_of_all_states(), "{rms} RMs");
            assert_eq!(spec.orbits(), spec.orbits_by_profile(), "{rms} RMs");
        }
        // One RM: nothing to rename.
        assert_eq!(
            Spec::new(1, CommitGuard::AllPrepared).orbits(),
            Spec::new(1, CommitGuard::AllPrepared).explore().distinct
        );
    }

    #[test]
    fn renaming_twice_by_inverse_permutations_is_the_identity() {
        let spec = Spec::new(3, CommitGuard::AllPrepared);
        let mut s = spec.init();
        s.rm_state = vec![RmState::Prepared, RmState::Aborted, RmState::Working];
        s.tm_prepared.insert(0);
        s.msgs.insert(Message::Prepared(0));
        let p = [2, 0, 1];
        let inverse = [1, 2, 0];
        let r = s.renamed(&p);
        assert_eq!(
            r.rm_state,
            [RmState::Aborted, RmState::Working, RmState::Prepared]
        );
        assert_eq!(r.tm_prepared, BTreeSet::from([2]));
        assert_eq!(r.renamed(&inverse), s);
    }

    #[test]
    fn three_rms_give_tlcs_counts() {
        let e = Spec::new(3, CommitGuard::AllPrepared).explore();
        assert_eq!(
            (e.distinct, e.generated, e.depth),
            (288, 1146, 11),
            "TLC: 288 distinct states, 1146 generated, depth 11"
        );
        assert_eq!(e.shortest_violation, None);
    }

    #[test]
    fn six_rms_give_the_count_in_the_spec() {
        // TwoPhase.tla's closing comment: "checked with TLC for six RMs, a
        // configuration with 50816 reachable states". That version's
        // `tmState` has "committed" and "aborted" for "done" (see
        // `TmState`), which changes no count.
        let e = Spec::new(6, CommitGuard::AllPrepared).explore();
        assert_eq!(e.distinct, 50816);
        assert_eq!(e.shortest_violation, None);
    }

    #[test]
    fn committing_on_any_prepared_is_inconsistent_after_five_steps() {
        let e = Spec::new(3, CommitGuard::AnyPrepared).explore();
        assert_eq!(e.shortest_violation, Some(5));
    }
}
