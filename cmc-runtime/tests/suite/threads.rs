//! Threads started by user code: a handler that joins the threads it
//! starts is checked like one that computes inline (the thread's
//! allocations belong to the process); a thread that outlives its handler,
//! or its constructor, stops the check with a violation that names the
//! handler and the process.

use std::thread;

use cmc::{CheckResult, Ctx, Handler, Model, ReplayOutcome, Verdict, View, ViolationKind, World};

/// How a handler computes its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// On the handler's own thread.
    Inline,
    /// On a scoped thread, joined explicitly.
    Scoped,
    /// On a scoped thread that writes into the handler's variable; the
    /// scope's end waits for it (the handle is dropped, not joined).
    ScopedDropped,
    /// On a thread from `thread::spawn`, joined.
    SpawnJoin,
    /// On sixteen scoped threads at once, each computing a part.
    Many,
    /// Inline, but the handler also starts a thread that it does not join
    /// (its handle is dropped) and that never ends.
    Leak,
    /// Inline, but the handler also starts twelve threads that it does not
    /// join and that never end.
    LeakMany,
    /// Inline, but the handler keeps the handle of a thread it started in
    /// the process's state instead of joining it.
    KeepHandle,
}

#[derive(Debug)]
struct Calc {
    how: How,
    round: u64,
    /// What each round computed: built on the other thread when there is
    /// one, so the state holds that thread's allocations.
    results: Vec<Vec<u64>>,
    total: u64,
    kept: Option<thread::JoinHandle<()>>,
}

/// A computation that allocates: a vector whose length and contents depend
/// on `x`.
fn work(x: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..=x % 5 + 2).map(|i| i * i + x).collect();
    v.push(format!("{x}").len() as u64);
    v
}

/// A thread that never ends. It sleeps rather than parks: parking writes
/// the thread's handle, which lives in the arena of the process that
/// started it.
fn forever() {
    loop {
        thread::sleep(std::time::Duration::from_secs(3600));
    }
}

impl Calc {
    fn new(how: How) -> Calc {
        Calc {
            how,
            round: 0,
            results: Vec::new(),
            total: 0,
            kept: None,
        }
    }

    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        let x = self.round * 10 + cmc::choose(3) as u64;
        let v = match self.how {
            How::Inline => work(x),
            How::Scoped => thread::scope(|s| s.spawn(|| work(x)).join().unwrap()),
            How::ScopedDropped => {
                let mut out = Vec::new();
                thread::scope(|s| {
                    s.spawn(|| out = work(x));
                });
                out
            }
            How::SpawnJoin => thread::spawn(move || work(x)).join().unwrap(),
            How::Many => thread::scope(|s| {
                let parts: Vec<_> = (0..16).map(|k| s.spawn(move || work(x + k))).collect();
                parts.into_iter().map(|p| p.join().unwrap()[0]).collect()
            }),
            How::Leak => {
                drop(thread::spawn(forever));
                work(x)
            }
            How::LeakMany => {
                for _ in 0..12 {
                    drop(thread::spawn(forever));
                }
                work(x)
            }
            How::KeepHandle => {
                self.kept = Some(thread::spawn(forever));
                work(x)
            }
        };
        self.total += v.iter().sum::<u64>();
        self.results.push(v);
        self.round += 1;
    }

    fn more(&self, _: &View<'_, Self>) -> bool {
        self.round < 2
    }
}

impl cmc::Process for Calc {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("step", Calc::step).guard(Calc::more)]
    }
}

/// Two processes that each compute two rounds of three choices: 13 states
/// each, 169 in all. Traces show what the processes computed.
fn model(how: How) -> Model<Calc> {
    Model::new(format!("threads_{how:?}"), 2, move |_| Calc::new(how))
        .quiescence_ok(true)
        .debug_with(|c| format!("{:?} {}", c.results, c.total))
}

/// Reached when process 1 chooses 2 in its second round.
fn not_twelve(w: &World<'_, Calc>) -> Result<(), String> {
    match w.process(1).results.get(1) {
        Some(r) if r[0] == 12 => Err(format!("round 2 of process 1 computed {r:?}")),
        _ => Ok(()),
    }
}

const WITH_THREADS: [How; 3] = [How::Scoped, How::ScopedDropped, How::SpawnJoin];

#[test]
fn a_handler_that_joins_its_threads_is_checked_like_inline_code() {
    let inline = model(How::Inline).check_determinism(true).check().unwrap();
    assert_eq!(inline.verdict, Verdict::Pass, "{:?}", inline.violations);
    assert_eq!(inline.stats.unique, 169);
    for how in WITH_THREADS {
        // Twice: the count is the same in every run, and the determinism
        // check (each transition run twice) finds the same successor.
        for _ in 0..2 {
            let r = model(how).check_determinism(true).check().unwrap();
            assert_eq!(r.verdict, Verdict::Pass, "{how:?}: {:?}", r.violations);
            assert_eq!(r.stats.unique, inline.stats.unique, "{how:?}");
            assert_eq!(r.stats.transitions, inline.stats.transitions, "{how:?}");
        }
    }
}

/// A trace step as the search took it: process, handler, choices, and the
/// state after it.
type PathStep = (Option<usize>, String, Vec<usize>, Option<String>);

#[test]
fn a_violation_reached_through_threads_replays() {
    let inline = model(How::Inline)
        .invariant("not_twelve", not_twelve)
        .check()
        .unwrap();
    assert_eq!(inline.verdict, Verdict::Violation);
    let expected = &inline.violations[0];
    assert_eq!(expected.record.property, "not_twelve");
    for how in WITH_THREADS {
        let m = model(how).invariant("not_twelve", not_twelve);
        let r = m.check().unwrap();
        assert_eq!(r.verdict, Verdict::Violation, "{how:?}");
        let v = &r.violations[0];
        assert_eq!(v.record, expected.record, "{how:?}");
        // The same path: the threads' results are the process's state, as
        // the inline ones are. (Not the same fingerprints: the canonical
        // heap these processes are fingerprinted by holds the garbage the
        // threads' own allocations left in freed blocks.)
        let path = |t: &cmc::Trace| -> Vec<PathStep> {
            t.steps
                .iter()
                .map(|s| {
                    (
                        s.process,
                        s.handler.clone(),
                        s.choices.clone(),
                        s.after.clone(),
                    )
                })
                .collect()
        };
        assert_eq!(path(&v.trace), path(&expected.trace), "{how:?}");
        assert_eq!(
            m.replay(&v.trace).unwrap(),
            ReplayOutcome::Reproduced(v.record.clone()),
            "{how:?}: replay"
        );
    }
}

#[test]
fn the_bookkeeping_of_a_handlers_threads_stays_out_of_its_arena() {
    // std keeps a program-wide map of threads (their stack-overflow
    // information), a B-tree to which each thread adds itself when it
    // starts and from which it removes itself when it ends. Sixteen
    // threads of a handler at once, and twelve more that never end, make
    // it grow new nodes. Had the handler's threads allocated them in the
    // process's arena, the map would point into memory the check restored
    // and, once it ends, unmapped: the threads started after the check
    // (and the program's exit) would crash.
    //
    // Threads that allocate at the same time place their objects in an
    // order that varies from run to run: the processes are identified by
    // what they computed, not by their canonical heap, which would see the
    // garbage that order leaves in spare capacity.
    let r = model(How::Many)
        .abstraction(|c| (c.round, c.results.clone(), c.total))
        .check_determinism(true)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert_eq!(r.stats.unique, 169);
    expect_thread_violation(&model(How::LeakMany).check().unwrap(), STILL_RUNNING);
    let sum: u64 = thread::scope(|s| {
        let all: Vec<_> = (0..32u64).map(|k| s.spawn(move || k)).collect();
        all.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(sum, 31 * 32 / 2);
}

/// The violation a thread that outlives `step` gives.
fn expect_thread_violation(r: &CheckResult, what: &str) {
    assert_eq!(r.verdict, Verdict::Violation, "{:?}", r.violations);
    assert_eq!(r.violations.len(), 1);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::ModelError, "{v}");
    assert_eq!(v.record.property, "step");
    assert_eq!(
        v.record.message,
        format!(
            "handler `step` of process 0 {what}: cmc cannot snapshot a state that another \
             thread is changing; join the thread inside the handler"
        )
    );
    // The path to the transition: the first step of the search.
    assert_eq!(v.trace.steps.len(), 1, "{v}");
    assert_eq!(v.trace.steps[0].handler, "step");
    assert_eq!(v.trace.steps[0].process, Some(0));
}

const STILL_RUNNING: &str = "started a thread that was still running when it returned";
const NOT_JOINED: &str =
    "started a thread and kept its handle without joining it before it returned";

#[test]
fn a_thread_that_outlives_its_handler_is_a_violation() {
    let m = model(How::Leak);
    let r = m.check().unwrap();
    expect_thread_violation(&r, STILL_RUNNING);
    let v = &r.violations[0];
    assert_eq!(
        m.replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
    // The checker goes on working after it: the same model again. And the
    // search stops there even when told to keep going: no state of the
    // process can be trusted while the thread runs.
    let r = model(How::Leak).keep_going(true).check().unwrap();
    expect_thread_violation(&r, STILL_RUNNING);
    assert_eq!(r.stats.transitions, 1);
}

#[test]
fn a_thread_that_outlives_its_handler_is_a_violation_in_an_isolated_check() {
    let m = model(How::Leak);
    let r = m.check_isolated().unwrap();
    expect_thread_violation(&r, STILL_RUNNING);
    let v = &r.violations[0];
    assert_eq!(
        m.replay_isolated(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
}

#[test]
fn a_handle_kept_in_the_state_is_a_violation() {
    let m = model(How::KeepHandle);
    let r = m.check().unwrap();
    expect_thread_violation(&r, NOT_JOINED);
    let v = &r.violations[0];
    assert_eq!(
        m.replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
}

#[test]
fn a_thread_that_outlives_a_constructor_is_a_violation() {
    let m = Model::new("threads_constructor", 2, |_| {
        drop(thread::spawn(forever));
        Calc::new(How::Inline)
    });
    let r = m.check_isolated().unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{:?}", r.violations);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::ModelError, "{v}");
    assert_eq!(v.record.property, "initialisation of process 0");
    assert_eq!(
        v.record.message,
        format!(
            "the constructor of process 0 {STILL_RUNNING}: cmc cannot snapshot a state that \
             another thread is changing; join the thread inside the constructor"
        )
    );
    assert!(v.trace.steps.is_empty());
}
