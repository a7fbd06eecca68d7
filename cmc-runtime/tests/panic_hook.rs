//! A panic hook the program installs between two checks. In a file of its
//! own: the panic hook belongs to the whole test binary, and replacing it
//! would disturb the tests running on other threads.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

use std::cell::Cell;

use cmc::{Ctx, Handler, Model, Process, ViolationKind, ViolationRecord};

/// A process whose second step panics.
#[derive(Debug)]
struct GivesUp {
    steps: u8,
}

impl GivesUp {
    fn act(&mut self, _: &mut Ctx<'_, Self>) {
        self.steps += 1;
        if self.steps == 2 {
            panic!("gave up at step 2");
        }
    }
}

impl Process for GivesUp {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("act", GivesUp::act).guard(|p, _| p.steps < 3)]
    }
}

fn violation() -> ViolationRecord {
    let r = Model::new("gives_up", 1, |_| GivesUp { steps: 0 })
        .check()
        .unwrap();
    r.violations[0].record.clone()
}

thread_local! {
    /// The panics the program's hook saw on this thread.
    static SEEN: Cell<u32> = const { Cell::new(0) };
}

#[test]
fn a_hook_the_program_installs_between_checks_sees_the_panics_outside_user_code() {
    let first = violation();
    assert_eq!(first.kind, ViolationKind::Panic);
    assert_eq!(first.message, "process 0: gave up at step 2");
    assert!(
        first
            .location
            .as_deref()
            .unwrap()
            .starts_with("cmc-runtime/tests/panic_hook.rs:"),
        "{first:?}"
    );
    // The program replaces cmc's hook (dropping it).
    std::panic::set_hook(Box::new(|_| SEEN.with(|s| s.set(s.get() + 1))));
    // The next check reports the handler's panic as the first did: cmc's
    // hook is back for user code, and the program's did not see the panic.
    assert_eq!(violation(), first);
    assert_eq!(SEEN.with(Cell::get), 0);
    // A panic outside user code goes to the program's hook.
    assert!(std::panic::catch_unwind(|| panic!("the program's own panic")).is_err());
    assert_eq!(SEEN.with(Cell::get), 1);
}
