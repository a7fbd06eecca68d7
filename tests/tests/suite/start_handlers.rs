//! Start handlers (`#[handler(start)]`): a process arms its first timers
//! and sends its first messages when the model starts, as part of the
//! initial state.

use cmc::{Ctx, Model, ReplayOutcome, Strategy, Verdict, ViolationKind};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    Hello(u8),
}

/// Process 0 greets process 1 when the model starts and arms a timer that
/// greets again (up to twice); process 1 counts greetings.
#[derive(Debug, Hash)]
pub struct Beacon {
    greeted: u8,
    heard: u8,
}

#[cmc::process(msg = Msg)]
impl Beacon {
    #[handler(start)]
    fn boot(&mut self, ctx: &mut Ctx<'_, Self>) {
        if ctx.me() == 0 {
            let _ = ctx.send(1, Msg::Hello(0));
            self.greeted = 1;
            ctx.set_timer("again");
        }
    }

    #[handler(timer = "again")]
    fn again(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(1, Msg::Hello(self.greeted));
        self.greeted += 1;
        if self.greeted < 2 {
            ctx.set_timer("again");
        }
    }

    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if ctx.recv().is_some() {
            self.heard += 1;
        }
    }

    fn has_mail(&self, view: &cmc::View<'_, Self>) -> bool {
        view.has_mail()
    }
}

fn beacons() -> Model<Beacon> {
    Model::new("beacons", 2, |_| Beacon {
        greeted: 0,
        heard: 0,
    })
    .quiescence_ok(true)
}

/// The initial state already holds the greeting and the timer: the first
/// steps can deliver it or fire the timer, and the state space is the one
/// a hand count gives, as (greeted, heard, in flight, timer pending):
/// (1, 0, {H0}, yes); firing gives (2, 0, {H0, H1}, no), delivering
/// (1, 1, {}, yes); from those, (2, 1, {H1}, no) and (2, 1, {H0}, no)
/// (either greeting may arrive first), then (2, 2, {}, no). Six states.
#[test]
fn a_start_handler_sends_and_arms_a_timer_before_the_search() {
    let r = beacons().check().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
    assert_eq!(r.stats.unique, 6);
    // A property that needs the greeting to arrive: one step.
    let m = || {
        beacons().strategy(Strategy::Bfs).invariant("unheard", |w| {
            if w.process(1).heard == 0 {
                Ok(())
            } else {
                Err("heard".into())
            }
        })
    };
    let r = m().check().unwrap();
    let v = &r.violations[0];
    assert_eq!(v.trace.steps.len(), 1, "{v}");
    assert_eq!(v.trace.steps[0].handler, "receive");
    assert_eq!(
        m().replay(&v.trace).unwrap(),
        ReplayOutcome::Reproduced(v.record.clone())
    );
}

#[derive(Debug, Hash)]
pub struct Chooser {
    x: usize,
}

#[cmc::process]
impl Chooser {
    #[handler(start)]
    fn boot(&mut self) {
        self.x = cmc::choose(2);
    }

    #[handler(guard = Self::small)]
    fn bump(&mut self) {
        self.x += 1;
    }

    fn small(&self) -> bool {
        self.x < 3
    }
}

#[derive(Debug, Hash)]
pub struct Faulty {
    ok: bool,
}

#[cmc::process]
impl Faulty {
    #[handler(start)]
    fn boot(&mut self) {
        assert!(self.ok, "the start handler found a broken process");
    }

    #[handler]
    fn idle(&mut self) {}
}

/// A start handler that chooses is refused (the initial state is one
/// state); one that panics is a violation before any step.
#[test]
fn a_start_handler_cannot_choose_and_its_panic_is_reported() {
    let err = Model::new("chooser", 1, |_| Chooser { x: 0 })
        .quiescence_ok(true)
        .check()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("start handler boot of process 0 made a choice"),
        "{err}"
    );
    let r = Model::new("faulty", 2, |i| Faulty { ok: i == 0 })
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.kind, ViolationKind::Panic);
    assert_eq!(v.record.property, "start handler boot of process 1");
    assert!(v.record.message.contains("broken process"), "{}", v.record);
    assert!(v.trace.steps.is_empty());
}
