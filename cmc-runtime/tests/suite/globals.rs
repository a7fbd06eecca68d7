//! Globals that handler code initializes lazily: a `OnceLock`, a `LazyLock`
//! and a `thread_local!` buffer, each first touched inside a handler. cmc
//! moves what they allocated out of the process's arena (a global is part
//! of no state), so later restores leave them intact: no false violation,
//! no corrupted memory, and the same count as when they are initialized
//! before the check. A global that shares an object with the process's
//! state is a clear error naming the global.
//!
//! One test function: the globals are the process's, so the order of the
//! steps matters.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use cmc::{CheckError, Handler, Model, Process, Verdict};

static NAMES: OnceLock<HashMap<u32, String>> = OnceLock::new();
static GREETING: LazyLock<Vec<String>> =
    LazyLock::new(|| vec!["hello".to_string(), "world".repeat(20)]);
thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn names() -> &'static HashMap<u32, String> {
    NAMES.get_or_init(|| (0..8).map(|i| (i, format!("node-{i}"))).collect())
}

/// Counts to 3 twice; every step reads the globals, and the invariant
/// checks that they still hold what they were initialized with.
#[derive(Debug)]
struct Counter {
    a: u8,
    b: u8,
    label: String,
}

impl Counter {
    fn step_a(&mut self, _: &mut cmc::Ctx<'_, Self>) {
        self.a += 1;
        self.relabel();
        SCRATCH.with(|s| s.borrow_mut().extend_from_slice(&[self.a; 64]));
    }
    fn step_b(&mut self, _: &mut cmc::Ctx<'_, Self>) {
        self.b += 1;
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            s.truncate(16);
            s.push(self.b);
        });
        self.relabel();
    }
    /// A label built from both counters and the globals.
    fn relabel(&mut self) {
        self.label = format!(
            "{} {} {}",
            names()[&u32::from(self.a)],
            GREETING[0],
            &GREETING[1][..5 * usize::from(self.b)]
        );
    }
}

impl Process for Counter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("step_a", Counter::step_a).guard(|c, _| c.a < 3),
            Handler::new("step_b", Counter::step_b).guard(|c, _| c.b < 3),
        ]
    }
}

fn intact(_: &cmc::World<'_, Counter>) -> cmc::Check {
    let n = names();
    if n.len() != 8 || n[&3] != "node-3" || GREETING[1] != "world".repeat(20) {
        return Err(format!("a global changed: {n:?}"));
    }
    Ok(())
}

fn model() -> Model<Counter> {
    Model::new("counters", 1, |_| Counter {
        a: 0,
        b: 0,
        label: String::new(),
    })
    .invariant("globals_intact", intact)
    .quiescence_ok(true)
}

/// Shares an object between a global and its own state.
#[derive(Debug)]
struct Sharer {
    kept: Option<Arc<String>>,
}

static SHARED: OnceLock<Arc<String>> = OnceLock::new();

impl Process for Sharer {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("share", |s: &mut Sharer, _| {
            s.kept = Some(SHARED.get_or_init(|| Arc::new("x".repeat(100))).clone());
        })
        .guard(|s, _| s.kept.is_none())]
    }
}

#[test]
fn lazily_initialized_globals_are_part_of_no_state() {
    // First check: the globals are initialized inside handlers.
    for strategy in [cmc::Strategy::Dfs, cmc::Strategy::Bfs] {
        let r = model().strategy(strategy).check().expect("the check runs");
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations.first());
        assert_eq!(r.stats.unique, 16, "a, b in 0..=3");
    }
    // The same count once the globals exist before the check.
    assert_eq!(model().check().unwrap().stats.unique, 16);
    // Determinism and replay see the same.
    let r = model().check_determinism(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations.first());
    assert_eq!(r.stats.unique, 16);
    assert_eq!(names()[&7], "node-7");
    assert!(SCRATCH.with(|s| !s.borrow().is_empty()));

    // A global that shares an object with the state is a clear error.
    let err = Model::new("sharer", 1, |_| Sharer { kept: None })
        .quiescence_ok(true)
        .check()
        .expect_err("sharing is refused");
    let CheckError::Model(message) = err else {
        panic!("expected a model error, got {err:?}")
    };
    assert!(message.contains("share of process 0"), "{message}");
    assert!(message.contains("globals::SHARED"), "{message}");
    assert!(message.contains("reaches the same object"), "{message}");
}
