//! One test per kind of violation the engine detects, each with a trace that
//! replay reproduces; usage errors; keep-going; hidden nondeterminism.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use cmc::{
    ArenaConfig, CheckResult, Ctx, Handler, Invariant, Model, NetworkConfig, OnFull, Process,
    ReplayOutcome, Strategy, Verdict, View, ViolationKind,
};

/// A process whose single handler misbehaves, chosen per test.
#[derive(Debug)]
struct Bad {
    steps: u8,
    kind: Kind,
    data: Vec<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Panic,
    GuardPanic,
    Invariant,
    Deadlock,
    Exhaust,
    Leak,
    Segfault,
    StackOverflow,
    Abort,
    NetworkFull,
    ChooseZero,
    HashMapOrder,
    Clock,
    StaticCounter,
    GuardReadsStatic,
    HugeAllocation,
    ThreadRng,
    OsRng,
    FileRead,
    ResumeUnwind,
    Reraise,
    PanicAny,
    DoublePanic,
    DoubleFree,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// What `GuardReadsStatic`'s handler counts and its guard reads.
static SENT: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
#[allow(unconditional_recursion, reason = "the stack overflow is the point")]
fn overflow(n: u64) -> u64 {
    let pad = std::hint::black_box([n; 64]);
    overflow(n + 1) + pad[3]
}

impl Bad {
    fn act(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.steps += 1;
        if self.steps < 2 {
            return;
        }
        match self.kind {
            Kind::Panic => panic!("handler gave up at step {}", self.steps),
            Kind::Exhaust => self.data = vec![7; 1 << 20],
            Kind::Leak => {
                // black_box: an allocation nothing reads may be elided.
                let lost = std::hint::black_box(Box::new([1u64; 4]));
                std::mem::forget(lost);
            }
            Kind::Segfault => {
                let p = std::hint::black_box(8usize) as *mut u64;
                // SAFETY: deliberately not: the crash under test.
                unsafe { p.write_volatile(1) };
            }
            Kind::StackOverflow => {
                self.data.push(overflow(1));
            }
            Kind::Abort => std::process::abort(),
            Kind::DoubleFree => {
                let block = Box::into_raw(Box::new([3u64; 4]));
                // SAFETY: deliberately not: the second free is the bug
                // under test.
                unsafe {
                    drop(Box::from_raw(block));
                    drop(Box::from_raw(std::hint::black_box(block)));
                }
            }
            Kind::NetworkFull => {
                for _ in 0..3 {
                    let _ = ctx.send(0, 1u8);
                }
            }
            Kind::ChooseZero => {
                let _ = cmc::choose(0);
            }
            Kind::HashMapOrder => {
                let map: HashMap<u64, u64> = (0..8).map(|i| (i, i)).collect();
                self.data = map.keys().copied().collect();
            }
            Kind::Clock => {
                let now = std::time::Instant::now();
                self.data =
                    vec![std::hint::black_box(now).elapsed().as_nanos() as u64 ^ now_bits(now)];
            }
            Kind::StaticCounter => self.data = vec![COUNTER.fetch_add(1, Ordering::Relaxed)],
            Kind::GuardReadsStatic => {
                SENT.fetch_add(1, Ordering::Relaxed);
            }
            Kind::HugeAllocation => {
                let v: Vec<u8> = Vec::with_capacity(1 << 46);
                std::hint::black_box(&v);
            }
            Kind::ThreadRng => {
                use rand::Rng;
                self.data = vec![rand::thread_rng().gen()];
            }
            Kind::OsRng => {
                use rand::Rng;
                self.data = vec![rand::rngs::OsRng.gen()];
            }
            Kind::FileRead => {
                use std::io::Read;
                let mut bytes = [0u8; 8];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| f.read_exact(&mut bytes))
                    .unwrap();
                self.data = vec![u64::from_le_bytes(bytes)];
            }
            Kind::ResumeUnwind => {
                std::panic::resume_unwind(Box::new(String::from("resumed: bad state")))
            }
            Kind::Reraise => {
                let caught = std::panic::catch_unwind(|| panic!("caught and raised again"));
                if let Err(payload) = caught {
                    std::panic::resume_unwind(payload);
                }
            }
            Kind::PanicAny => std::panic::panic_any(42u32),
            Kind::DoublePanic => {
                let _bomb = PanicsOnDrop;
                panic!("first panic at step {}", self.steps);
            }
            _ => {}
        }
    }

    fn enabled(&self, _: &View<'_, Self>) -> bool {
        if self.kind == Kind::GuardPanic && self.steps == 2 {
            panic!("the guard cannot decide");
        }
        if self.kind == Kind::GuardReadsStatic {
            return SENT.load(Ordering::Relaxed) < 2;
        }
        !(self.kind == Kind::Deadlock && self.steps == 2) && self.steps < 3
    }
}

/// A value whose drop panics: dropped while another panic unwinds, it makes
/// the second panic that aborts the process.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("a drop panicked while unwinding");
    }
}

/// The bits of an `Instant` (it has no public accessor; its Debug does).
fn now_bits(now: std::time::Instant) -> u64 {
    let s = format!("{now:?}");
    s.bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
}

impl Process for Bad {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("act", Bad::act).guard(Bad::enabled)]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("few_steps", |b| {
            if b.kind == Kind::Invariant && b.steps >= 2 {
                Err(format!("{} steps", b.steps))
            } else {
                Ok(())
            }
        })]
    }
}

fn model(kind: Kind) -> Model<Bad> {
    Model::new(format!("bad_{kind:?}"), 1, move |_| Bad {
        steps: 0,
        kind,
        data: Vec::new(),
    })
    .quiescence_ok(kind != Kind::Deadlock)
    .process_arena(ArenaConfig::new().reserve(4 << 20))
    .network(NetworkConfig::new().capacity(2).on_full(OnFull::Violation))
    .detect_leaks(kind == Kind::Leak)
    .debug_with(|b| format!("{b:#?}"))
}

/// Checks `kind`, expects one violation of `expected` after `steps` steps,
/// and replays its trace (isolated when it crashes).
fn expect(kind: Kind, expected: ViolationKind, steps: usize, isolated: bool) -> CheckResult {
    let m = model(kind);
    let r = if isolated {
        m.check_isolated()
    } else {
        m.check()
    }
    .unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{kind:?}");
    let v = &r.violations[0];
    assert_eq!(v.record.kind, expected, "{kind:?}: {v}");
    assert_eq!(v.trace.steps.len(), steps, "{kind:?}: {v}");
    let replayed = if isolated {
        m.replay_isolated(&v.trace)
    } else {
        m.replay(&v.trace)
    }
    .unwrap();
    assert_eq!(
        replayed,
        ReplayOutcome::Reproduced(v.record.clone()),
        "{kind:?}: replay"
    );
    // The trace survives its JSON form.
    let again = cmc::Trace::from_json(&v.trace.to_json()).unwrap();
    let replayed = if isolated {
        m.replay_isolated(&again)
    } else {
        m.replay(&again)
    }
    .unwrap();
    assert_eq!(
        replayed,
        ReplayOutcome::Reproduced(v.record.clone()),
        "{kind:?}: replay from JSON"
    );
    r
}

#[test]
fn a_panic_in_a_handler_is_reported_with_message_and_location() {
    let r = expect(Kind::Panic, ViolationKind::Panic, 2, false);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert_eq!(v.message, "process 0: handler gave up at step 2");
    assert!(
        v.location
            .as_deref()
            .unwrap()
            .starts_with(concat!(file!(), ":")),
        "{v:?}"
    );
}

#[test]
fn a_panic_in_a_guard_is_reported() {
    let r = expect(Kind::GuardPanic, ViolationKind::Panic, 2, false);
    assert_eq!(r.violations[0].record.property, "guard of act");
}

#[test]
fn a_failed_invariant_is_reported_with_its_name() {
    let r = expect(Kind::Invariant, ViolationKind::Invariant, 2, false);
    assert_eq!(r.violations[0].record.property, "few_steps");
    assert_eq!(r.violations[0].record.message, "process 0: 2 steps");
}

#[test]
fn a_deadlock_is_reported() {
    let r = expect(Kind::Deadlock, ViolationKind::Deadlock, 2, false);
    assert_eq!(
        r.violations[0].record.message,
        "no handler is enabled in any process"
    );
}

#[test]
fn quiescence_can_be_acceptable() {
    let r = model(Kind::Deadlock).quiescence_ok(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass);
    assert_eq!(r.stats.unique, 3);
}

#[test]
fn arena_exhaustion_is_reported() {
    let r = expect(Kind::Exhaust, ViolationKind::ArenaExhausted, 2, false);
    assert_eq!(
        r.violations[0].record.message,
        "process 0's arena exceeded 4 MiB (an allocation of 8388608 bytes did not fit)"
    );
}

#[test]
fn a_leak_is_reported() {
    let r = expect(Kind::Leak, ViolationKind::Leak, 2, false);
    assert_eq!(
        r.violations[0].record.message,
        "1 object(s), 32 bytes, in process 0's arena are unreachable from its root"
    );
    // Without the option, the same model passes.
    assert_eq!(
        model(Kind::Leak)
            .detect_leaks(false)
            .check()
            .unwrap()
            .verdict,
        Verdict::Pass
    );
}

#[test]
fn exceeding_the_network_bound_can_be_a_model_error() {
    let r = expect(Kind::NetworkFull, ViolationKind::ModelError, 2, false);
    assert_eq!(
        r.violations[0].record.message,
        "the network's capacity of 2 messages was exceeded"
    );
}

#[test]
fn a_segfault_in_unsafe_user_code_is_reported_with_its_trace() {
    let r = expect(Kind::Segfault, ViolationKind::Crash, 2, true);
    let v = &r.violations[0];
    assert_eq!(v.record.property, "act");
    assert!(
        v.record
            .message
            .starts_with("handler act of process 0 crashed: killed by SIGSEGV"),
        "{}",
        v.record.message
    );
}

#[test]
fn a_stack_overflow_is_reported_with_its_trace() {
    let r = expect(Kind::StackOverflow, ViolationKind::Crash, 2, true);
    let message = &r.violations[0].record.message;
    assert!(
        message.contains("SIGABRT") && message.contains("has overflowed its stack"),
        "{message}"
    );
}

/// The arena heap detects the second free inside the global allocator,
/// which cannot unwind: the process aborts, and the report says why (it
/// hung before: the panic's message was formatted in the arena whose lock
/// the failed check held).
#[test]
fn a_double_free_is_reported_with_what_the_heap_found() {
    let r = expect(Kind::DoubleFree, ViolationKind::Crash, 2, true);
    let message = &r.violations[0].record.message;
    assert!(
        message.contains("SIGABRT")
            && message.contains("a process's heap is corrupt: heap: dealloc of a"),
        "{message}"
    );
}

#[test]
fn an_abort_is_reported_with_its_trace() {
    let r = expect(Kind::Abort, ViolationKind::Crash, 2, true);
    assert!(r.violations[0]
        .record
        .message
        .starts_with("handler act of process 0 crashed: killed by SIGABRT"));
}

#[test]
fn an_isolated_check_without_a_crash_returns_the_same_result() {
    let inline = model(Kind::Invariant).check().unwrap();
    let isolated = model(Kind::Invariant).check_isolated().unwrap();
    assert_eq!(isolated.violations, inline.violations);
    assert_eq!(isolated.stats.unique, inline.stats.unique);
}

#[test]
fn choose_zero_is_a_usage_error_at_the_callers_line() {
    let r = expect(Kind::ChooseZero, ViolationKind::Panic, 2, false);
    let v = &r.violations[0].record;
    assert!(
        v.message
            .contains("cmc::choose(0): there is nothing to choose from"),
        "{v:?}"
    );
    assert!(
        v.location
            .as_deref()
            .unwrap()
            .starts_with(concat!(file!(), ":")),
        "{v:?}"
    );
}

#[test]
fn choose_outside_a_handler_is_a_usage_error() {
    let err = std::panic::catch_unwind(|| cmc::choose(3)).unwrap_err();
    let message = err.downcast_ref::<String>().unwrap();
    assert_eq!(
        message,
        "cmc::choose was called outside a handler: it is only meaningful while cmc runs a handler"
    );
}

#[test]
fn keep_going_collects_distinct_violations() {
    // Two processes, each fails the invariant: one distinct violation (same
    // kind and property), found once.
    let r = Model::new("two_bad", 2, |_| Bad {
        steps: 0,
        kind: Kind::Invariant,
        data: Vec::new(),
    })
    .quiescence_ok(true)
    .keep_going(true)
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    assert_eq!(r.violations.len(), 1);
    // Panics and invariant failures are different violations.
    let r = Model::new("mixed", 2, |i| Bad {
        steps: 0,
        kind: if i == 0 { Kind::Invariant } else { Kind::Panic },
        data: Vec::new(),
    })
    .quiescence_ok(true)
    .keep_going(true)
    .strategy(Strategy::Bfs)
    .check()
    .unwrap();
    let mut kinds: Vec<ViolationKind> = r.violations.iter().map(|v| v.record.kind).collect();
    kinds.sort();
    assert_eq!(kinds, vec![ViolationKind::Panic, ViolationKind::Invariant]);
}

/// Checks a hidden-nondeterminism case: the determinism check names the
/// handler, and replaying the trace reports the divergence at that step.
fn nondeterministic(kind: Kind) {
    let r = model(kind).check_determinism(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{kind:?}");
    let v = &r.violations[0];
    assert_eq!(
        v.record.kind,
        ViolationKind::Nondeterminism,
        "{kind:?}: {v}"
    );
    assert_eq!(v.record.property, "act");
    assert!(
        v.record.message.starts_with(
            "process 0's handler gave different successors when run twice from the same state: "
        ),
        "{}",
        v.record.message
    );
    // The cause: the global it wrote, or none, and the field that differs.
    let wrote = match kind {
        Kind::StaticCounter => {
            "it wrote the global `suite::violations::COUNTER`, which no state holds"
        }
        _ => "it wrote no global of the program: look for files, sockets, threads",
    };
    assert!(
        v.record.message.contains(wrote),
        "{kind:?}: {}",
        v.record.message
    );
    assert!(
        v.record
            .message
            .contains("its state differs in `Bad.data`: `"),
        "{kind:?}: {}",
        v.record.message
    );
    assert_eq!(v.trace.steps.len(), 2);
    match model(kind).replay(&v.trace).unwrap() {
        ReplayOutcome::Diverged {
            step,
            handler,
            message,
            detail,
            changed,
            ..
        } => {
            assert_eq!((step, handler.as_str()), (2, "act"), "{kind:?}");
            assert!(
                message
                    .starts_with("act of process 0 at step 2 reached a state whose fingerprint is"),
                "{message}"
            );
            assert_eq!(changed, None, "the model did not change");
            // The replay names the field whose Debug differs.
            let d = detail.expect("the trace records the process's Debug");
            assert!(d.contains("differs in `Bad.data`"), "{kind:?}: {d}");
        }
        other => panic!("{kind:?}: replay gave {other:?}"),
    }
    // Without the check, the search itself does not notice.
    assert_ne!(
        model(kind).check().unwrap().verdict,
        Verdict::Violation,
        "{kind:?}"
    );
}

/// Checks a source of nondeterminism cmc controls (identity::random,
/// identity::clock): the determinism check passes, every run counts the
/// same.
fn controlled(kind: Kind) {
    let r = model(kind).check_determinism(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{kind:?}: {:?}", r.violations);
    let again = model(kind).check_determinism(true).check().unwrap();
    assert_eq!(again.stats.unique, r.stats.unique, "{kind:?}");
}

#[test]
fn a_std_hashmap_iterated_in_a_handler_is_controlled() {
    controlled(Kind::HashMapOrder);
}

#[test]
fn the_clock_stored_in_state_is_controlled() {
    controlled(Kind::Clock);
}

#[test]
fn thread_rng_is_controlled() {
    controlled(Kind::ThreadRng);
}

#[test]
fn os_rng_is_controlled() {
    controlled(Kind::OsRng);
}

#[test]
fn a_file_read_is_hidden_nondeterminism() {
    nondeterministic(Kind::FileRead);
}

#[test]
fn a_static_counter_is_hidden_nondeterminism() {
    nondeterministic(Kind::StaticCounter);
}

/// A guard that reads a static a handler changes is caught by a default
/// check: the guards of a sample of the states (all, in a model this
/// small) are evaluated again after the state's transitions ran.
#[test]
fn a_guard_that_reads_a_static_is_caught_by_default() {
    let r = model(Kind::GuardReadsStatic).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Nondeterminism, "{v}");
    assert_eq!(v.record.property, "guards");
    assert!(
        v.record.message.starts_with(
            "the guards enabled different handlers when evaluated again after the state's \
             transitions ran"
        ),
        "{}",
        v.record.message
    );
    assert!(
        v.record
            .message
            .ends_with("first [act of process 0], then []"),
        "{}",
        v.record.message
    );
    assert_eq!(v.trace.steps.len(), 2, "{}", v.trace);
}

/// Random walks run the determinism check too: each step again from the
/// same state (without the check, the walks pass).
#[test]
fn random_walks_check_determinism_too() {
    let walks = || {
        model(Kind::StaticCounter)
            .strategy(Strategy::Walk)
            .max_walks(5)
    };
    let r = walks().check_determinism(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0].record;
    assert_eq!(v.kind, ViolationKind::Nondeterminism, "{v}");
    assert_eq!(v.property, "act");
    assert!(
        v.message
            .contains("it wrote the global `suite::violations::COUNTER`, which no state holds"),
        "{}",
        v.message
    );
    assert_eq!(r.violations[0].trace.steps.len(), 2);
    assert_ne!(walks().check().unwrap().verdict, Verdict::Violation);
}

#[test]
fn a_panic_resumed_with_resume_unwind_is_reported_with_its_message() {
    let r = expect(Kind::ResumeUnwind, ViolationKind::Panic, 2, false);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert_eq!(v.message, "process 0: resumed: bad state");
    assert_eq!(
        v.location.as_deref(),
        Some("unknown location: std::panic::resume_unwind runs no panic hook"),
        "{v:?}"
    );
}

#[test]
fn a_caught_panic_raised_again_is_reported_at_its_line() {
    let r = expect(Kind::Reraise, ViolationKind::Panic, 2, false);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert_eq!(v.message, "process 0: caught and raised again");
    assert!(here(v.location.as_deref().unwrap()), "{v:?}");
}

#[test]
fn a_panic_with_a_non_string_payload_is_reported_at_its_line() {
    let r = expect(Kind::PanicAny, ViolationKind::Panic, 2, false);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert_eq!(v.message, "process 0: panic with a non-string payload");
    assert!(
        v.location
            .as_deref()
            .unwrap()
            .starts_with(concat!(file!(), ":")),
        "{v:?}"
    );
}

#[test]
fn a_panic_while_panicking_is_a_crash() {
    let r = expect(Kind::DoublePanic, ViolationKind::Crash, 2, true);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert!(
        v.message
            .starts_with("handler act of process 0 crashed: killed by SIGABRT"),
        "{}",
        v.message
    );
    // Both panics, with their places.
    assert!(
        v.message.contains(
            "a panic while another unwound aborts the process: `first panic at step 2` at "
        ) && v.message.contains(
            ", then, in a destructor while it unwound, `a drop panicked while unwinding` at "
        ),
        "{}",
        v.message
    );
}

/// Whether `location` is a line of this file.
fn here(location: &str) -> bool {
    location.starts_with(concat!(file!(), ":"))
}

/// An allocation no arena can hold aborts the process (std's allocation
/// error handler): an isolated check reports it as a crash that says how
/// large the allocation was.
#[test]
fn an_impossible_allocation_is_a_crash_that_says_its_size() {
    let r = expect(Kind::HugeAllocation, ViolationKind::Crash, 2, true);
    let v = &r.violations[0].record;
    assert_eq!(v.property, "act");
    assert!(
        v.message.starts_with(
            "handler act of process 0 crashed: killed by SIGABRT (abort) (memory allocation of \
             70368744177664 bytes failed)"
        ),
        "{}",
        v.message
    );
}
