//! Randomness inside user code is a function of the state and the event:
//! a handler that draws an election timeout from `rand::thread_rng()` gets
//! the same value whenever the same transition runs from the same state, so
//! counts are the same in every run and in every process, the determinism
//! check passes and a trace through a draw replays.

use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use cmc::{FingerprintMode, Handler, Model, Process, ReplayOutcome, Verdict};
use rand::Rng;

/// The timeouts the invariant has seen, as a bit set (bit `t`).
static SEEN: AtomicU8 = AtomicU8::new(0);

#[derive(Debug, Clone, Hash)]
struct Node {
    timeout: u8,
    elections: u8,
}

impl Process for Node {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("elect", |n: &mut Node, _| {
                n.timeout = rand::thread_rng().gen_range(1..=3);
                n.elections += 1;
            })
            .guard(|n, _| n.timeout == 0 && n.elections < 4),
            Handler::new("tick", |n: &mut Node, _| n.timeout -= 1).guard(|n, _| n.timeout > 0),
        ]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|n: &Node, s| std::hash::Hash::hash(n, s));
        fns.process.debug = Some(cmc::identity::debug_hash::<Node>);
        fns
    }
}

/// Two nodes; the invariant fails when both wait the longest timeout.
fn model(mode: FingerprintMode) -> Model<Node> {
    nodes(mode).invariant("no_late_split_vote", |w| {
        let nodes: Vec<&Node> = w.processes().collect();
        for n in &nodes {
            SEEN.fetch_or(1 << n.timeout, Ordering::Relaxed);
        }
        let (a, b) = (nodes[0], nodes[1]);
        if a.timeout == 3 && b.timeout == 3 {
            Err("both drew 3".into())
        } else {
            Ok(())
        }
    })
}

fn nodes(mode: FingerprintMode) -> Model<Node> {
    Model::new("timeouts", 2, |_| Node {
        timeout: 0,
        elections: 0,
    })
    .fingerprint(mode)
    .quiescence_ok(true)
}

/// The unique count, and the trace of the violation, under `mode`.
fn outcome(mode: FingerprintMode) -> String {
    let r = model(mode)
        .strategy(cmc::Strategy::Bfs)
        .check_determinism(true)
        .check()
        .expect("the check runs");
    assert_eq!(r.verdict, Verdict::Violation, "{:?}", r.stats);
    let v = &r.violations[0];
    for _ in 0..2 {
        match model(mode).replay(&v.trace).unwrap() {
            ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record),
            other => panic!("{}: {other:?}", mode.name()),
        }
    }
    let prints: Vec<&str> = v.trace.steps.iter().map(|s| &*s.fingerprint).collect();
    format!(
        "{}: {} states, trace {}",
        mode.name(),
        r.stats.unique,
        prints.join(" ")
    )
}

const MODES: [FingerprintMode; 3] = [
    FingerprintMode::Hash,
    FingerprintMode::Debug,
    FingerprintMode::Heap,
];

#[test]
fn draws_are_a_function_of_state_and_event() {
    let child = std::env::var_os("CMC_RANDOM_CHILD").is_some();
    let mine: Vec<String> = MODES.iter().map(|&m| outcome(m)).collect();
    if child {
        for line in &mine {
            println!("{line}");
        }
        return;
    }
    // The same in this process...
    for (m, line) in MODES.iter().zip(&mine) {
        assert_eq!(&outcome(*m), line, "a second run in the same process");
    }
    // ...and in others (the seed is the state's identity, which does not
    // depend on address layout).
    let exe = std::env::current_exe().unwrap();
    for _ in 0..2 {
        let out = Command::new(&exe)
            .args([
                "--exact",
                crate::exact(concat!(
                    module_path!(),
                    "::draws_are_a_function_of_state_and_event"
                )),
                "--nocapture",
            ])
            .env("CMC_RANDOM_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for line in &mine {
            assert!(
                text.lines().any(|l| l == line),
                "{line}\nnot in the other process's output:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // Draws depend on the state: more than one timeout was drawn.
    let seen = SEEN.load(Ordering::Relaxed) >> 1;
    assert!(seen.count_ones() == 3, "timeouts seen: {seen:#b}");
}

/// Without control the draws would follow the search's order; with it, the
/// state count lies between the model with one fixed draw and the model
/// where every draw is a nondeterministic choice (a reference BFS of both).
#[test]
fn counts_lie_between_a_fixed_and_a_free_draw() {
    fn reference(draws: &[u8]) -> usize {
        use std::collections::{HashSet, VecDeque};
        type S = [(u8, u8); 2];
        let start: S = [(0, 0); 2];
        let mut seen: HashSet<S> = HashSet::from([start]);
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for i in 0..2 {
                let (t, e) = s[i];
                let mut next = Vec::new();
                if t == 0 && e < 4 {
                    next.extend(draws.iter().map(|&d| (d, e + 1)));
                }
                if t > 0 {
                    next.push((t - 1, e));
                }
                for n in next {
                    let mut s2 = s;
                    s2[i] = n;
                    if seen.insert(s2) {
                        queue.push_back(s2);
                    }
                }
            }
        }
        seen.len()
    }
    let r = nodes(FingerprintMode::Hash)
        .check()
        .expect("the check runs");
    assert_eq!(r.verdict, Verdict::Pass);
    let fixed = reference(&[2]);
    let free = reference(&[1, 2, 3]);
    let n = r.stats.unique as usize;
    assert!(fixed < n && n < free, "{fixed} < {n} < {free}");
}

/// A handler that picks "any" member of a map it builds: which one is the
/// first in iteration order, which depends on the map's hash keys.
#[derive(Debug, Clone, Hash)]
struct Picker {
    picked: Vec<u32>,
}

impl Process for Picker {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("pick", |p: &mut Picker, _| {
            let candidates: std::collections::HashMap<u32, &str> =
                (0..16).map(|i| (i, "candidate")).collect();
            let first = *candidates.keys().next().unwrap();
            p.picked.push(first);
        })
        .guard(|p, _| p.picked.len() < 3)]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|p: &Picker, s| std::hash::Hash::hash(p, s));
        fns
    }
}

#[test]
fn hash_map_order_is_a_function_of_state_and_event() {
    let run = || {
        Model::new("picker", 2, |_| Picker { picked: Vec::new() })
            .fingerprint(FingerprintMode::Hash)
            .quiescence_ok(true)
            .check_determinism(true)
            .check()
            .expect("the check runs")
    };
    let r = run();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    // Two nodes, three picks each: (3 + 1)^2 states if every pick were the
    // same value. The pick depends on the whole state (both nodes), so the
    // same counts of picks reached in different orders differ.
    assert!(r.stats.unique > 16, "{} states", r.stats.unique);
    assert_eq!(run().stats.unique, r.stats.unique, "the same in every run");
}

/// A node that takes its values from the operating system's entropy, as
/// rand's `OsRng` and the C library's `getrandom` give it, in its
/// constructor and in a handler.
#[derive(Debug, Clone, Hash)]
struct Entropic {
    values: Vec<u8>,
}

fn os_byte() -> u8 {
    let mut b = 0u8;
    // SAFETY: one writable byte.
    let n = unsafe { libc::getrandom((&raw mut b).cast(), 1, 0) };
    assert_eq!(n, 1);
    b
}

impl Process for Entropic {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("draw", |p: &mut Entropic, _| {
            let v = rand::rngs::OsRng.gen_range(0..3) + os_byte() % 2 * 3;
            p.values.push(v);
        })
        .guard(|p, _| p.values.len() < 3)]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|p: &Entropic, s| std::hash::Hash::hash(p, s));
        fns
    }
}

/// The unique count and the initial state of the entropic model.
fn entropic() -> String {
    // The first state the invariant sees is the initial one.
    static INITIAL: AtomicU64 = AtomicU64::new(0);
    INITIAL.store(0, Ordering::Relaxed);
    let r = Model::new("entropy", 2, |_| Entropic {
        values: vec![os_byte(), rand::rngs::OsRng.gen()],
    })
    .quiescence_ok(true)
    .check_determinism(true)
    .invariant("record_initial", |w| {
        let word = w
            .processes()
            .flat_map(|p| p.values.iter())
            .fold(1u64, |h, &v| h << 8 | u64::from(v));
        let _ = INITIAL.compare_exchange(0, word, Ordering::Relaxed, Ordering::Relaxed);
        Ok(())
    })
    .check()
    .expect("the check runs");
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    let initial = INITIAL.load(Ordering::Relaxed);
    format!("entropy: {} states, initial {initial:x}", r.stats.unique)
}

#[test]
fn os_entropy_is_a_function_of_state_and_event() {
    let mine = entropic();
    if std::env::var_os("CMC_RANDOM_CHILD").is_some() {
        println!("{mine}");
        return;
    }
    assert_eq!(entropic(), mine, "a second run in the same process");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(
                module_path!(),
                "::os_entropy_is_a_function_of_state_and_event"
            )),
            "--nocapture",
        ])
        .env("CMC_RANDOM_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l == mine), "{mine}\nnot in:\n{text}");
    // Outside user code the entropy is the operating system's.
    let draws: Vec<u64> = (0..4).map(|_| rand::rngs::OsRng.gen()).collect();
    assert!(draws.windows(2).all(|w| w[0] != w[1]), "{draws:?}");
}

/// The reference count of the timeouts model when every draw may be any
/// of `draws`.
fn timeouts_reference(draws: &[u8]) -> usize {
    use std::collections::{HashSet, VecDeque};
    type S = [(u8, u8); 2];
    let start: S = [(0, 0); 2];
    let mut seen: HashSet<S> = HashSet::from([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(s) = queue.pop_front() {
        for i in 0..2 {
            let (t, e) = s[i];
            let mut next = Vec::new();
            if t == 0 && e < 4 {
                next.extend(draws.iter().map(|&d| (d, e + 1)));
            }
            if t > 0 {
                next.push((t - 1, e));
            }
            for n in next {
                let mut s2 = s;
                s2[i] = n;
                if seen.insert(s2) {
                    queue.push_back(s2);
                }
            }
        }
    }
    seen.len()
}

/// `random_seeds(k)` runs a drawing transition with k seeds: with enough
/// seeds every timeout value is drawn from every state, and the count is
/// the model's with a free choice of timeout; a violation found through a
/// non-default seed replays.
#[test]
fn random_seeds_widen_a_draw_to_several_successors() {
    let one = nodes(FingerprintMode::Hash).check().unwrap();
    let four = nodes(FingerprintMode::Hash)
        .random_seeds(4)
        .check()
        .unwrap();
    let many = nodes(FingerprintMode::Hash)
        .random_seeds(32)
        .check()
        .unwrap();
    let free = timeouts_reference(&[1, 2, 3]);
    let (n1, n4, n32) = (one.stats.unique, four.stats.unique, many.stats.unique);
    assert!(n1 < n4 && n4 <= n32, "{n1} < {n4} <= {n32}");
    assert_eq!(n32 as usize, free, "32 seeds reach every draw");
    let again = nodes(FingerprintMode::Hash)
        .random_seeds(32)
        .check()
        .unwrap()
        .stats;
    assert_eq!(
        (again.unique, again.transitions),
        (many.stats.unique, many.stats.transitions),
        "the same in every run"
    );
    // The split vote, found at its shortest through the seeds, replays.
    let r = model(FingerprintMode::Hash)
        .random_seeds(32)
        .strategy(cmc::Strategy::Bfs)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.trace.steps.len(), 2, "{}", v.trace);
    assert!(v.trace.steps.iter().any(|s| s.seed != 0), "{}", v.trace);
    let text = v.trace.to_json();
    let reloaded = cmc::Trace::from_json(&text).unwrap();
    match model(FingerprintMode::Hash).replay(&reloaded).unwrap() {
        ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record),
        other => panic!("{other:?}"),
    }
}

#[derive(Debug, Clone, Hash)]
struct Counter(u8);

impl Process for Counter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("bump", |c: &mut Counter, _| c.0 += 1).guard(|c, _| c.0 < 5)]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|c: &Counter, s| std::hash::Hash::hash(c, s));
        fns
    }
}

/// A process that draws nothing runs each transition once, whatever the
/// number of seeds.
#[test]
fn random_seeds_leave_a_transition_without_draws_alone() {
    let run = |k| {
        Model::new("counters", 2, |_| Counter(0))
            .quiescence_ok(true)
            .random_seeds(k)
            .check()
            .unwrap()
            .stats
    };
    let (one, many) = (run(1), run(8));
    assert_eq!(one.unique, many.unique);
    assert_eq!(one.transitions, many.transitions);
}

/// A receiver that draws after taking a message: the search runs the
/// delivery with an empty choice script, the determinism check and a
/// replay with the choice it took ([0]); all three must draw alike.
#[derive(Debug, Clone, Hash)]
struct Listener {
    sent: u8,
    heard: Vec<(u8, u8)>,
}

impl Process for Listener {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("ping", |n: &mut Listener, ctx| {
                n.sent += 1;
                let _ = ctx.send(1, n.sent);
            })
            .guard(|n, v| v.me() == 0 && n.sent < 2),
            Handler::new("hear", |n: &mut Listener, ctx| {
                if let Some((_, m)) = ctx.recv() {
                    n.heard.push((m, rand::thread_rng().gen_range(0..100)));
                }
            })
            .guard(|_, v| v.has_mail()),
        ]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|n: &Listener, s| std::hash::Hash::hash(n, s));
        fns.process.debug = Some(cmc::identity::debug_hash::<Listener>);
        fns
    }
}

#[test]
fn a_draw_after_a_choice_passes_the_determinism_check() {
    for mode in MODES {
        let model = || {
            Model::new("listener", 2, |_| Listener {
                sent: 0,
                heard: Vec::new(),
            })
            .fingerprint(mode)
            .quiescence_ok(true)
            .strategy(cmc::Strategy::Bfs)
        };
        let r = model()
            .check_determinism(true)
            .check()
            .expect("the check runs");
        assert_eq!(r.verdict, Verdict::Pass, "{}: {r:?}", mode.name());
        // Two pings, heard in either order of arrival... one path each way:
        // the draws add no states of their own.
        let plain = model().check().expect("the check runs");
        assert_eq!(r.stats.unique, plain.stats.unique, "{}", mode.name());
    }
}

#[test]
fn a_recorded_choice_out_of_range_is_a_trace_that_does_not_fit() {
    let model = || {
        Model::new("listener", 2, |_| Listener {
            sent: 0,
            heard: Vec::new(),
        })
        .quiescence_ok(true)
        .strategy(cmc::Strategy::Bfs)
        .invariant("hears_little", |w| {
            if w.processes().any(|n| n.heard.len() == 2) {
                Err("heard both".into())
            } else {
                Ok(())
            }
        })
    };
    let r = model().check().expect("the check runs");
    assert_eq!(r.verdict, Verdict::Violation);
    let mut trace = r.violations[0].trace.clone();
    let at = trace
        .steps
        .iter()
        .position(|s| s.handler == "hear")
        .expect("a delivery");
    let good = trace.clone();
    assert!(
        good.handlers.len() == 32 && !good.sources.is_empty(),
        "a trace records the model's shape and its types' sources"
    );
    trace.steps[at].choices = vec![5];
    match model().replay(&trace).expect("the replay runs") {
        ReplayOutcome::Misfit {
            step,
            message,
            changed,
            ..
        } => {
            assert_eq!(step, at + 1);
            assert!(message.contains("is 5, out of its range 0.."), "{message}");
            assert_eq!(changed, None, "the model did not change");
        }
        other => panic!("expected a trace that does not fit, got {other:?}"),
    }
    // A handler the model does not have, in a trace recorded on a model of
    // another shape: it does not fit, and the replay says the model changed.
    let mut renamed = good.clone();
    renamed.steps[at].handler = "listen".into();
    renamed.handlers = "0".repeat(32);
    match model().replay(&renamed).expect("the replay runs") {
        ReplayOutcome::Misfit {
            step,
            message,
            changed,
            ..
        } => {
            assert_eq!(step, at + 1);
            assert!(
                message.contains("runs `listen`") && message.contains("its handlers: "),
                "{message}"
            );
            assert!(
                changed.is_some_and(|c| c.contains("the model's shape changed")),
                "the recorded shape differs"
            );
        }
        other => panic!("expected a trace that does not fit, got {other:?}"),
    }
    // A trace recorded by a cmc that hashed states with another function
    // (traces before the hash was named: SipHash-1-3): its fingerprints
    // cannot match, and the replay says why.
    assert_eq!(good.state_hash, cmc::STATE_HASH);
    let mut old = good.clone();
    old.state_hash = String::new();
    old.initial_fingerprint = "9bb7f0c34afcb27c".into();
    match model().replay(&old).expect("the replay runs") {
        ReplayOutcome::Diverged { step, changed, .. } => {
            assert_eq!(step, 0);
            let changed = changed.expect("the replay names the change");
            assert!(
                changed.contains("hashed states with siphash-1-3")
                    && changed.contains(cmc::STATE_HASH)
                    && changed.contains("record the trace again"),
                "{changed}"
            );
        }
        other => panic!("expected a divergence at the initial state, got {other:?}"),
    }
    // Read from its JSON (a saved trace, or the trace of a test emitted by
    // an older cmc, which reads it with `Trace::from_json(..).expect(..)`
    // and used to pass on anything but a reproduction), it is refused with
    // what to do.
    let refused = cmc::Trace::from_json(&old.to_json()).expect_err("a stale trace is refused");
    assert!(
        refused.contains("recorded by an older cmc")
            && refused.contains("hashed states with siphash-1-3")
            && refused.contains("emit it again"),
        "{refused}"
    );
    cmc::Trace::from_json(&good.to_json()).expect("this cmc's trace reads");
    // A process the model does not have.
    let mut far = good;
    far.steps[at].process = Some(7);
    match model().replay(&far).expect("the replay runs") {
        ReplayOutcome::Misfit { message, .. } => {
            assert!(
                message.contains("names process 7; the model has 2"),
                "{message}"
            )
        }
        other => panic!("expected a trace that does not fit, got {other:?}"),
    }
}

#[test]
fn a_trace_found_by_any_strategy_replays() {
    // Every strategy's trace is a sequence of events with their choices
    // and seed variants: replaying it does not depend on how it was found.
    for strategy in [
        cmc::Strategy::Dfs,
        cmc::Strategy::Bfs,
        cmc::Strategy::Random,
        cmc::Strategy::BestFirst,
    ] {
        let model = || {
            Model::new("listener", 2, |_| Listener {
                sent: 0,
                heard: Vec::new(),
            })
            .quiescence_ok(true)
            .strategy(strategy)
            .seed(7)
            .priority(|w| w.processes().map(|n| n.heard.len() as i64).sum())
            .invariant("hears_little", |w| {
                if w.processes().any(|n| n.heard.len() == 2) {
                    Err("heard both".into())
                } else {
                    Ok(())
                }
            })
        };
        let r = model().keep_going(true).check().expect("the check runs");
        assert_eq!(r.verdict, Verdict::Violation, "{strategy:?}");
        for v in &r.violations {
            match model().replay(&v.trace).expect("the replay runs") {
                ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record, "{strategy:?}"),
                other => panic!("{strategy:?}: the trace gave {other:?}"),
            }
        }
    }
}
