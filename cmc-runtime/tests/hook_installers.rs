//! User code that installs its own panic hook — in a handler, in its first
//! step, chained to the hook it replaces, after taking cmc's and keeping
//! it, in a constructor. cmc keeps its own hook in force: the panics are
//! reported with message and location, the search never crashes, and the
//! traces replay.
//!
//! In a file of its own, every check isolated and one at a time: a thread
//! of this test binary that panicked while another forked would leave
//! std's hook lock held in the child, where the user's `take_hook` would
//! wait forever (the `cargo cmc` harness forks from a single thread and has
//! no such hazard).

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

use cmc::{Ctx, Handler, Model, Process, ReplayOutcome, ViolationKind};

/// What user code does to the panic hook: installs its own, a closure that
/// owns heap memory (installed by a handler, the hook lives in the
/// process's arena). cmc discards such a hook when the code returns, and
/// never calls it.
fn install_own_hook(install: Install) {
    let tag = String::from("the model's own panic hook");
    match install {
        Install::FirstStep | Install::Constructor => {
            std::panic::set_hook(Box::new(move |_| called(&tag)));
        }
        Install::FirstStepChained => {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                called(&tag);
                previous(info);
            }));
        }
        Install::FirstStepTakeAndKeep => {
            // cmc's hook is taken and kept, never dropped.
            std::mem::forget(std::panic::take_hook());
            std::panic::set_hook(Box::new(move |_| called(&tag)));
        }
    }
}

/// What a hook of [`install_own_hook`] does: were one called, the check
/// would crash.
fn called(tag: &str) {
    eprintln!("{tag} was called");
    std::process::abort();
}

/// Where [`Hooked`] installs its own panic hook.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Install {
    /// In its first step.
    FirstStep,
    /// In its first step, forwarding to the hook it replaced.
    FirstStepChained,
    /// In its first step, after taking the hook it replaces and keeping it.
    FirstStepTakeAndKeep,
    /// In its constructor.
    Constructor,
}

/// A process that installs its own panic hook and then takes many steps,
/// some of which panic.
#[derive(Debug)]
struct Hooked {
    steps: u8,
    install: Install,
}

impl Hooked {
    fn tick(&mut self, _: &mut Ctx<'_, Self>) {
        self.steps += 1;
        if self.steps == 1 && self.install != Install::Constructor {
            install_own_hook(self.install);
        }
        if self.steps >= 3 && cmc::choose(2) == 1 {
            panic!("hooked process panicked at step {}", self.steps);
        }
    }
}

impl Process for Hooked {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("tick", Hooked::tick).guard(|h, _| h.steps < 8)]
    }
}

/// Three processes that install their own panic hook, nine states each
/// (729 in all) with a panic possible at every step from the third: the
/// search goes on after each panic (keep-going), never crashes, and reports
/// the panics with their message; returns their locations, each once.
fn hooked(install: Install) -> Vec<String> {
    // One check at a time: a check's fork while another test's thread
    // holds std's hook lock (a panic being reported) would leave the lock
    // held in the child, where the user's `take_hook` waits forever.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let m = Model::new(format!("hooked_{install:?}"), 3, move |_| {
        if install == Install::Constructor {
            install_own_hook(install);
        }
        Hooked { steps: 0, install }
    })
    .quiescence_ok(true)
    .keep_going(true);
    let r = m.check_isolated().unwrap();
    assert_eq!(r.stats.unique, 729, "{install:?}");
    let mut locations = Vec::new();
    for v in &r.violations {
        assert_eq!(v.record.kind, ViolationKind::Panic, "{install:?}: {v}");
        assert_eq!(v.record.property, "tick", "{install:?}: {v}");
        let message = &v.record.message;
        assert!(
            message.starts_with("process ")
                && message.contains(": hooked process panicked at step "),
            "{install:?}: {message}"
        );
        assert_eq!(
            m.replay_isolated(&v.trace).unwrap(),
            ReplayOutcome::Reproduced(v.record.clone()),
            "{install:?}: replay"
        );
        locations.push(v.record.location.clone().unwrap());
    }
    locations
}

/// Whether `location` is a line of this file.
fn here(location: &str) -> bool {
    location.starts_with("cmc-runtime/tests/hook_installers.rs:")
}

#[test]
fn a_hook_installed_in_a_first_step_does_not_hide_later_panics() {
    let locations = hooked(Install::FirstStep);
    assert!(locations.len() == 1 && here(&locations[0]), "{locations:?}");
}

#[test]
fn a_chained_hook_installed_in_a_first_step_does_not_hide_later_panics() {
    let locations = hooked(Install::FirstStepChained);
    assert!(locations.len() == 1 && here(&locations[0]), "{locations:?}");
}

#[test]
fn a_hook_installed_by_a_constructor_does_not_hide_panics() {
    let locations = hooked(Install::Constructor);
    assert!(locations.len() == 1 && here(&locations[0]), "{locations:?}");
}

#[test]
fn a_hook_installed_after_taking_cmcs_does_not_hide_later_panics() {
    let locations = hooked(Install::FirstStepTakeAndKeep);
    assert!(locations.len() == 1 && here(&locations[0]), "{locations:?}");
}
