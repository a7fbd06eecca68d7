//! User code that never returns, ends the process, or crashes outside a
//! handler: an isolated check survives each, names the culprit (handler,
//! guard, invariant, constructor), keeps the violations found before and
//! the statistics so far, and honours its time limit whatever the code
//! does.

use std::time::{Duration, Instant};

use cmc::{Handler, Invariant, Model, Process, ReplayOutcome, Verdict, View, ViolationKind};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The handler loops forever at its second step.
    Spin,
    /// The handler calls `std::process::exit(3)` at its second step.
    Exit,
    /// The guard segfaults in the state after two steps.
    GuardSegfault,
    /// The invariant segfaults in the state after two steps.
    InvariantSegfault,
    /// The invariant loops forever in the state after two steps.
    InvariantSpin,
    /// Process 1's constructor segfaults.
    ConstructorSegfault,
    /// Process 1's invariant fails after its first step (a violation);
    /// process 0's handler segfaults at its third: with keep-going, both
    /// are reported.
    FailThenCrash,
    /// The guard flips its answer at each evaluation.
    GuardFlip,
    /// The invariant flips its verdict at each evaluation.
    InvariantFlip,
    /// The handler stores a value that changes every third run.
    Rare,
    /// The handler stores the address of one of its locals.
    StackAddress,
    /// The handler sends SIGKILL to its own process at its second step,
    /// with `kill(getpid(), SIGKILL)` (`getpid` is virtual in user code).
    KillSelf,
    /// The handler raises SIGKILL at its second step (`raise`).
    RaiseKill,
    /// The invariant fails after two steps, and the process's `Debug`
    /// (which the trace shows) never returns in that state.
    DebugSpin,
}

static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn calls() -> u64 {
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[derive(Debug)]
struct Wild {
    id: usize,
    steps: u8,
    kind: Kind,
    data: u64,
}

#[inline(never)]
fn segfault() {
    let p = std::hint::black_box(8usize) as *mut u64;
    // SAFETY: deliberately not: the crash under test.
    unsafe { p.write_volatile(1) };
}

#[inline(never)]
fn spin() -> bool {
    let mut n = 0u64;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
        if std::hint::black_box(n) == u64::MAX {
            return true;
        }
    }
}

impl Wild {
    fn act(&mut self, _: &mut cmc::Ctx<'_, Self>) {
        self.steps += 1;
        match (self.kind, self.steps) {
            (Kind::Spin, 2) => {
                spin();
            }
            (Kind::Exit, 2) => std::process::exit(3),
            // SAFETY: plain system calls; the signal ends the process.
            (Kind::KillSelf, 2) => unsafe {
                libc::kill(std::process::id() as libc::pid_t, libc::SIGKILL);
            },
            // SAFETY: as above.
            (Kind::RaiseKill, 2) => unsafe {
                libc::raise(libc::SIGKILL);
            },
            (Kind::FailThenCrash, 3) if self.id == 0 => segfault(),
            (Kind::Rare, 2) => self.data = calls() / 3,
            (Kind::StackAddress, 2) => {
                let local = 0u8;
                self.data = std::hint::black_box(&local) as *const u8 as u64;
            }
            _ => {}
        }
    }

    fn ready(&self, _: &View<'_, Self>) -> bool {
        if self.kind == Kind::GuardSegfault && self.steps == 2 {
            segfault();
        }
        if self.kind == Kind::GuardFlip && self.steps == 1 {
            return calls() % 2 == 0;
        }
        self.steps < 4
    }
}

impl Process for Wild {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("act", Wild::act).guard(Wild::ready)]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("calm", |w| {
            match (w.kind, w.steps) {
                (Kind::InvariantSegfault, 2) => segfault(),
                (Kind::InvariantSpin, 2) => {
                    spin();
                }
                (Kind::FailThenCrash, 1) if w.id == 1 => return Err("one step".into()),
                (Kind::InvariantFlip, 1) if calls() % 2 == 1 => return Err("sometimes".into()),
                (Kind::DebugSpin, 2) => return Err("two steps".into()),
                _ => {}
            }
            Ok(())
        })]
    }
}

fn model(kind: Kind) -> Model<Wild> {
    Model::new(format!("wild_{kind:?}"), 2, move |i| {
        if kind == Kind::ConstructorSegfault && i == 1 {
            segfault();
        }
        Wild {
            id: i,
            steps: 0,
            kind,
            data: 0,
        }
    })
    .quiescence_ok(true)
    .strategy(cmc::Strategy::Bfs)
    .transition_timeout(Some(Duration::from_millis(500)))
    .debug_with(|w| {
        if w.kind == Kind::DebugSpin && w.steps == 2 {
            spin();
        }
        format!("{w:#?}")
    })
}

/// Checks `kind` isolated, expects one violation of `expected` named
/// `property` after `steps` steps, whose message starts with `message`, and
/// replays its trace isolated.
fn expect(
    kind: Kind,
    expected: ViolationKind,
    property: &str,
    steps: usize,
    message: &str,
) -> cmc::CheckResult {
    let m = model(kind);
    let r = m.check_isolated().expect("an isolated check survives");
    assert_eq!(r.verdict, Verdict::Violation, "{kind:?}: {r:?}");
    let v = r.violations.last().expect("a violation");
    assert_eq!(v.record.kind, expected, "{kind:?}: {v}");
    assert_eq!(v.record.property, property, "{kind:?}: {v}");
    assert!(
        v.record.message.starts_with(message),
        "{kind:?}: {}",
        v.record.message
    );
    assert_eq!(v.trace.steps.len(), steps, "{kind:?}: {v}");
    match m.replay_isolated(&v.trace).expect("the replay survives") {
        ReplayOutcome::Reproduced(record) => {
            assert_eq!(
                (record.kind, &record.property),
                (v.record.kind, &v.record.property),
                "{kind:?}"
            );
        }
        other => panic!("{kind:?}: replay gave {other:?}"),
    }
    r
}

#[test]
fn a_handler_that_never_returns_is_a_timeout_with_its_trace() {
    let started = Instant::now();
    let r = expect(
        Kind::Spin,
        ViolationKind::Timeout,
        "act",
        2,
        "handler act of process 0 did not return within 0.5 s",
    );
    assert!(r.stats.unique >= 3, "the statistics so far: {:?}", r.stats);
    // Two checks' worth of timeouts (the check and the replay), not more.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn an_invariant_that_never_returns_is_a_timeout_named_after_it() {
    expect(
        Kind::InvariantSpin,
        ViolationKind::Timeout,
        "calm",
        2,
        "invariant calm of process 0 did not return within 0.5 s",
    );
}

#[test]
fn exit_in_a_handler_is_a_violation_with_its_trace() {
    expect(
        Kind::Exit,
        ViolationKind::Crash,
        "act",
        2,
        "handler act of process 0 ended the checking process with exit status 3",
    );
}

#[test]
fn a_handler_that_kills_its_own_process_is_a_crash_with_its_trace() {
    // SIGKILL alone would be the kernel's out-of-memory killer, a killer
    // outside cmc: sent by the handler to its own process, it is the
    // handler's crash, and it replays.
    for kind in [Kind::KillSelf, Kind::RaiseKill] {
        expect(
            kind,
            ViolationKind::Crash,
            "act",
            2,
            "handler act of process 0 crashed: killed by SIGKILL (killed), which it sent its own process",
        );
    }
}

#[test]
fn a_crash_in_a_guard_is_pinned_on_the_guard_and_the_state_it_judged() {
    expect(
        Kind::GuardSegfault,
        ViolationKind::Crash,
        "guard of act",
        2,
        "the guard of act in process 0 crashed: killed by SIGSEGV",
    );
}

#[test]
fn a_crash_in_an_invariant_is_pinned_on_the_invariant() {
    expect(
        Kind::InvariantSegfault,
        ViolationKind::Crash,
        "calm",
        2,
        "invariant calm of process 0 crashed: killed by SIGSEGV",
    );
}

#[test]
fn a_crash_in_a_constructor_is_a_violation_not_a_tool_error() {
    expect(
        Kind::ConstructorSegfault,
        ViolationKind::Crash,
        "initialisation of process 1",
        0,
        "the constructor of process 1 crashed: killed by SIGSEGV",
    );
}

#[test]
fn keep_going_keeps_the_violations_found_before_a_crash() {
    let r = model(Kind::FailThenCrash)
        .keep_going(true)
        .check_isolated()
        .expect("an isolated check survives");
    assert_eq!(r.verdict, Verdict::Violation);
    let found: Vec<(ViolationKind, &str)> = r
        .violations
        .iter()
        .map(|v| (v.record.kind, v.record.property.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (ViolationKind::Invariant, "calm"),
            (ViolationKind::Crash, "act")
        ],
        "{r:?}"
    );
    assert_eq!(r.violations[1].trace.steps.len(), 3);
    assert!(
        r.stats.unique > 1 && r.stats.transitions > 1,
        "{:?}",
        r.stats
    );
}

#[test]
fn the_time_limit_holds_whatever_the_handler_does() {
    // No transition timeout: only the time limit can stop the spinning
    // handler. The check ends within a second or two of it, bounded, with
    // the statistics so far and the reason.
    let started = Instant::now();
    let r = model(Kind::Spin)
        .transition_timeout(None)
        .time_limit(Duration::from_secs(1))
        .check_isolated()
        .expect("an isolated check survives");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(r.verdict, Verdict::Bounded, "{r:?}");
    let why = r.stopped.as_deref().unwrap_or_default();
    assert!(
        why.contains("time limit") && why.contains("handler act of process 0"),
        "{why}"
    );
    assert!(r.stats.unique >= 3, "{:?}", r.stats);
}

/// Checks `kind` with the determinism check (`runs` runs of everything)
/// and returns its nondeterminism violation's property and message, if any.
fn nondeterminism(kind: Kind, runs: usize) -> Option<(String, String)> {
    let r = model(kind)
        .check_determinism(true)
        .determinism_runs(runs)
        .check()
        .expect("the check runs");
    r.violations
        .iter()
        .find(|v| v.record.kind == ViolationKind::Nondeterminism)
        .map(|v| (v.record.property.clone(), v.record.message.clone()))
}

#[test]
fn the_determinism_check_covers_guards() {
    let (property, message) = nondeterminism(Kind::GuardFlip, 2).expect("found");
    assert_eq!(property, "guards");
    assert!(
        message.starts_with("the guards enabled different handlers when evaluated again"),
        "{message}"
    );
}

#[test]
fn the_determinism_check_covers_invariants() {
    let (property, message) = nondeterminism(Kind::InvariantFlip, 2).expect("found");
    assert_eq!(property, "calm");
    assert!(
        message.starts_with("the invariants judged the same state differently"),
        "{message}"
    );
}

#[test]
fn more_runs_catch_a_value_that_changes_rarely() {
    // A value that changes every third run: four runs of each transition
    // always see it change.
    let (property, message) = nondeterminism(Kind::Rare, 4).expect("found with 4 runs");
    assert_eq!(property, "act");
    assert!(message.contains("wrote the global"), "{message}");
}

#[test]
fn the_determinism_check_catches_a_stack_address_in_the_state() {
    // (The canonical heap maps addresses outside the arenas to one value,
    // so under the default identity the address does not split states;
    // the raw bytes see it.)
    let r = model(Kind::StackAddress)
        .fingerprint(cmc::FingerprintMode::Bytes)
        .check_determinism(true)
        .check()
        .expect("the check runs");
    let v = r
        .violations
        .iter()
        .find(|v| v.record.kind == ViolationKind::Nondeterminism)
        .expect("found");
    let (property, message) = (&v.record.property, &v.record.message);
    assert_eq!(property, "act");
    assert!(
        message.contains("its state differs in `Wild.data`"),
        "{message}"
    );
}

#[test]
fn a_debug_that_never_returns_while_a_trace_is_built_is_a_timeout() {
    let r = model(Kind::DebugSpin)
        .check_isolated()
        .expect("an isolated check survives");
    assert_eq!(r.verdict, Verdict::Violation, "{r:?}");
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Timeout, "{v}");
    assert_eq!(v.record.property, "the debug of process 0", "{v}");
    assert!(
        v.record.message.starts_with(
            "the debug of process 0 (after act of process 0) did not return within 0.5 s"
        ),
        "{}",
        v.record.message
    );
}
