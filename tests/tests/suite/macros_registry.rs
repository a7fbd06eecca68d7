//! `#[cmc::model]` and `#[cmc::invariant]` register what
//! cmc-runtime/tests/suite/registry.rs registers by hand, with the same results;
//! per-process and global invariants of both return forms report their
//! messages. The crate denies `unused_qualifications` with the runtime's
//! names imported, so generated paths must not trip it.
#![deny(unused_qualifications)]

use cmc::registry::{models, RunOptions};
use cmc::{Check, Model, ReplayOutcome, Strategy, Verdict, ViolationKind, World};

#[derive(Debug)]
struct Tally {
    n: u8,
}

#[cmc::process]
impl Tally {
    #[handler(guard = below_three)]
    fn bump(&mut self) {
        self.n += 1;
    }

    fn below_three(&self) -> bool {
        self.n < 3
    }
}

#[cmc::model]
fn tallies() -> Model<Tally> {
    Model::new("ignored: the registered path wins", 2, |_| Tally { n: 0 }).quiescence_ok(true)
}

/// A global invariant over every model of `Tally` processes.
#[cmc::invariant]
fn sum_below_five(world: &World<'_, Tally>) -> Check {
    let sum: u8 = world.processes().map(|t| t.n).sum();
    if sum < 5 {
        Ok(())
    } else {
        Err(format!("the tallies sum to {sum}"))
    }
}

#[test]
fn registered_models_are_found_by_path_and_checked_with_overrides() {
    let all = models();
    let entry = all
        .iter()
        .find(|m| m.path == "suite::macros_registry::tallies")
        .expect("the model is registered");
    assert!(entry.file.ends_with("tests/suite/macros_registry.rs"));
    assert_eq!(entry.line, 28, "the line of #[cmc::model]");
    let mut bfs = RunOptions::default();
    bfs.strategy = Some(Strategy::Bfs);
    let r = entry.check(&bfs).unwrap();
    assert_eq!(r.model, "suite::macros_registry::tallies");
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(
        (v.record.kind, v.record.property.as_str()),
        (ViolationKind::Invariant, "sum_below_five")
    );
    assert_eq!(v.record.message, "the tallies sum to 5");
    assert_eq!(
        v.trace.steps.len(),
        5,
        "BFS: the shortest way to a sum of 5"
    );
    assert!(v.trace.steps.iter().all(|s| s.handler == "bump"));
    assert_eq!(
        entry.replay(&RunOptions::default(), &v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
    let mut shallow = RunOptions::default();
    shallow.max_depth = Some(2);
    assert_eq!(entry.check(&shallow).unwrap().verdict, Verdict::Bounded);
}

#[test]
fn a_registered_invariant_applies_to_unregistered_models_of_its_type() {
    let r = Model::new("direct", 2, |_| Tally { n: 0 })
        .quiescence_ok(true)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    assert_eq!(r.violations[0].record.property, "sum_below_five");
}

/// A process with an invariant that returns `Result`.
#[derive(Debug)]
struct Gauge {
    level: u8,
}

#[cmc::process]
impl Gauge {
    #[handler]
    fn up(&mut self) {
        self.level += 1;
    }

    #[invariant]
    fn below_two(&self) -> Result<(), String> {
        if self.level < 2 {
            Ok(())
        } else {
            Err(format!("level {}", self.level))
        }
    }
}

/// The same with an invariant that returns `bool`.
#[derive(Debug)]
struct Meter {
    level: u8,
}

#[cmc::process]
impl Meter {
    #[handler]
    fn up(&mut self) {
        self.level += 1;
    }

    #[invariant]
    fn below_two(&self) -> bool {
        self.level < 2
    }
}

#[test]
fn per_process_invariants_report_their_messages() {
    let r = Model::new("gauge", 1, |_| Gauge { level: 0 })
        .check()
        .unwrap();
    let v = &r.violations[0];
    assert_eq!(
        (v.record.property.as_str(), v.record.message.as_str()),
        ("below_two", "process 0: level 2")
    );
    assert_eq!(v.trace.steps.len(), 2);
    let r = Model::new("meter", 1, |_| Meter { level: 0 })
        .check()
        .unwrap();
    let v = &r.violations[0];
    assert_eq!(
        (v.record.property.as_str(), v.record.message.as_str()),
        ("below_two", "process 0: returned false")
    );
    assert_eq!(v.trace.steps.len(), 2);
}

/// A process whose global invariants return `bool`.
#[derive(Debug)]
struct Flag {
    up: bool,
}

#[cmc::process]
impl Flag {
    #[handler(guard = down)]
    fn raise(&mut self) {
        self.up = true;
    }

    fn down(&self) -> bool {
        !self.up
    }
}

#[cmc::invariant]
fn not_all_up(world: &World<'_, Flag>) -> bool {
    !world.processes().all(|f| f.up)
}

#[test]
fn a_global_invariant_returning_false_is_a_violation() {
    let r = Model::new("flags", 2, |_| Flag { up: false })
        .quiescence_ok(true)
        .strategy(Strategy::Bfs)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(
        (v.record.property.as_str(), v.record.message.as_str()),
        ("not_all_up", "returned false")
    );
    assert_eq!(v.trace.steps.len(), 2);
}
