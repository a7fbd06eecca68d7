//! `Model::without_invariant`: a model leaves out a global invariant
//! registered for its process type, which still holds for the others; a
//! name that is not registered is an error.

use cmc::{CheckError, Model, Verdict, World};

#[derive(Debug, Hash)]
pub struct Tick {
    n: u8,
}

#[cmc::process]
impl Tick {
    #[handler(guard = Self::more)]
    fn tick(&mut self) {
        self.n += 1;
    }

    fn more(&self) -> bool {
        self.n < 3
    }
}

#[cmc::invariant]
fn below_two(world: &World<'_, Tick>) -> bool {
    world.processes().all(|t| t.n < 2)
}

fn ticks() -> Model<Tick> {
    Model::new("ticks", 1, |_| Tick { n: 0 }).quiescence_ok(true)
}

#[test]
fn a_model_can_leave_out_a_registered_invariant() {
    let r = ticks().check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    assert_eq!(r.violations[0].record.property, "below_two");
    let r = ticks().without_invariant("below_two").check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert_eq!(r.stats.unique, 4);
    match ticks().without_invariant("below_three").check() {
        Err(CheckError::Model(m)) => {
            assert!(
                m.contains("`below_three`") && m.contains("registered: below_two"),
                "{m}"
            )
        }
        other => panic!("expected an error naming the registered invariants, got {other:?}"),
    }
}
