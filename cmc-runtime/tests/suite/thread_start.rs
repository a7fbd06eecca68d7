//! A thread that outlives its handler keeps using the process's arena:
//! std's start-up of the thread reads what the handler allocated for it,
//! its closure allocates and frees there, and its end frees its result's
//! packet. The checker reports it, builds the trace in a forked child, and
//! never writes that arena again nor unmaps it — also after the check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use cmc::{Ctx, Handler, Model, Verdict, ViolationKind};

/// The tests share `RELEASE` and `DONE`: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Lets the leaked threads end.
static RELEASE: AtomicBool = AtomicBool::new(false);
/// Set by a leaked thread once it allocated and freed in its arena after
/// `RELEASE`.
static DONE: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy, Debug)]
enum Leak {
    /// A thread that sleeps until `RELEASE`, then allocates, frees and
    /// ends.
    Sleeping,
    /// A thread that allocates and frees without pause until `RELEASE`,
    /// then ends.
    Busy,
}

#[derive(Debug)]
struct Starter {
    leak: Leak,
    started: Vec<u32>,
}

/// Builds and checks a list of strings in the arena.
fn allocate() {
    let v: Vec<String> = (0..100).map(|i| format!("entry {i}")).collect();
    assert_eq!(v.iter().map(String::len).sum::<usize>(), 790);
}

fn sleep_then_allocate() {
    while !RELEASE.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(1));
    }
    allocate();
    DONE.store(true, Ordering::SeqCst);
}

fn allocate_until_released() {
    while !RELEASE.load(Ordering::SeqCst) {
        allocate();
    }
    allocate();
    DONE.store(true, Ordering::SeqCst);
}

impl Starter {
    fn start(&mut self, _: &mut Ctx<'_, Self>) {
        let body = match self.leak {
            Leak::Sleeping => sleep_then_allocate,
            Leak::Busy => allocate_until_released,
        };
        drop(thread::spawn(body));
        self.started.push(self.started.len() as u32);
    }
}

impl cmc::Process for Starter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("start", Starter::start)]
    }
}

fn model(leak: Leak) -> Model<Starter> {
    Model::new(format!("thread_start_{leak:?}"), 1, move |_| Starter {
        leak,
        started: Vec::new(),
    })
    .debug_with(|s| format!("{s:?}"))
}

fn expect_leak_violation(r: &cmc::CheckResult) {
    assert_eq!(r.verdict, Verdict::Violation, "{:?}", r.violations);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::ModelError, "{v}");
    assert!(
        v.record
            .message
            .contains("started a thread that was still running when it returned"),
        "{v}"
    );
}

/// Checks `leak`'s model twice (the same arenas are never reused), then
/// lets the threads left behind allocate, free and end.
fn check_then_release(leak: Leak) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    RELEASE.store(false, Ordering::SeqCst);
    DONE.store(false, Ordering::SeqCst);
    for _ in 0..2 {
        let m = model(leak);
        let r = m.check().unwrap();
        expect_leak_violation(&r);
        // The trace was built by running the step again (in a child): it
        // shows the state before it, and the step was cut short.
        let trace = &r.violations[0].trace;
        assert!(!trace.initial_fingerprint.is_empty(), "{trace:?}");
        assert_eq!(trace.steps.len(), 1);
        let step = &trace.steps[0];
        assert_eq!(step.handler, "start");
        assert!(
            step.before
                .as_deref()
                .is_some_and(|b| b.contains("started: []")),
            "{step:?}"
        );
        assert_eq!(step.after, None);
        // The trace replays (a third thread, in the replay's arena).
        assert_eq!(
            m.replay(&r.violations[0].trace).unwrap(),
            cmc::ReplayOutcome::Reproduced(r.violations[0].record.clone())
        );
    }
    // The checks and their engines are gone; the threads now allocate and
    // free in the arenas their handlers gave them, then end (which frees
    // their results' packets there too). Had an arena been restored to
    // another state under its thread, or unmapped, this would corrupt or
    // kill the test program.
    RELEASE.store(true, Ordering::SeqCst);
    let start = Instant::now();
    while !DONE.load(Ordering::SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the leaked threads did not end"
        );
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(100));
}

#[test]
fn a_sleeping_thread_left_behind_ends_after_the_check_in_its_own_arena() {
    check_then_release(Leak::Sleeping);
}

#[test]
fn a_thread_left_behind_that_allocates_all_along_never_sees_a_restore() {
    check_then_release(Leak::Busy);
}
