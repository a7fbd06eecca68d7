//! Registration by hand, in exactly the form `#[cmc::model]` and
//! `#[cmc::invariant]` generate: through `cmc::__private` only.

use cmc::registry::{models, RunOptions};
use cmc::{Ctx, Handler, Model, Process, ReplayOutcome, Strategy, Verdict, ViolationKind, World};

#[derive(Debug)]
struct Tally {
    n: u8,
}

impl Tally {
    fn bump(&mut self, _: &mut Ctx<'_, Self>) {
        self.n += 1;
    }
}

impl Process for Tally {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("bump", Tally::bump).guard(|t, _| t.n < 3)]
    }
}

fn tallies() -> Model<Tally> {
    Model::new("ignored: the registered path wins", 2, |_| Tally { n: 0 }).quiescence_ok(true)
}

// What `#[cmc::model] fn tallies() -> Model<Tally>` registers:
::cmc::__private::inventory::submit! {
    ::cmc::__private::ModelEntry::new(
        concat!(module_path!(), "::tallies"),
        file!(),
        line!(),
        |path, options| ::cmc::__private::check_model(path, tallies, options),
        |path, options, trace| ::cmc::__private::replay_model(path, tallies, options, trace),
    )
}

/// A global invariant over every model of `Tally` processes.
fn sum_below_five(world: &World<'_, Tally>) -> cmc::Check {
    let sum: u8 = world.processes().map(|t| t.n).sum();
    if sum < 5 {
        Ok(())
    } else {
        Err(format!("the tallies sum to {sum}"))
    }
}

// What `#[cmc::invariant] fn sum_below_five(world: &World<Tally>) -> Check` registers:
::cmc::__private::inventory::submit! {
    ::cmc::__private::InvariantEntry::new(
        "sum_below_five",
        ::cmc::__private::TypeId::of::<Tally>,
        {
            unsafe fn erased(world: *const ()) -> ::cmc::Check {
                // SAFETY: the engine passes a `World` over `Tally`, the type
                // this entry is registered for.
                sum_below_five(unsafe { &*(world as *const ::cmc::World<'_, Tally>) })
            }
            erased
        },
    )
}

#[test]
fn registered_models_are_found_by_path_and_checked_with_overrides() {
    let all = models();
    let entry = all
        .iter()
        .find(|m| m.path == "suite::registry::tallies")
        .expect("the model is registered");
    assert!(entry.file.ends_with("tests/suite/registry.rs"));
    let mut bfs = RunOptions::default();
    bfs.strategy = Some(Strategy::Bfs);
    let r = entry.check(&bfs).unwrap();
    assert_eq!(r.model, "suite::registry::tallies");
    assert_eq!(
        r.verdict,
        Verdict::Violation,
        "the registered global invariant applies"
    );
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
    assert_eq!(
        entry.replay(&RunOptions::default(), &v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
    // Options override the model's settings.
    let mut shallow = RunOptions::default();
    shallow.max_depth = Some(2);
    let bounded = entry.check(&shallow).unwrap();
    assert_eq!(bounded.verdict, Verdict::Bounded);
    // Isolated, the same result.
    let mut isolated = bfs.clone();
    isolated.isolate = true;
    let isolated = entry.check(&isolated);
    assert_eq!(isolated.unwrap().violations, r.violations);
}
