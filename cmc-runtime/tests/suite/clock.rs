//! Clocks inside user code are the model's: `Instant::now()` and
//! `SystemTime::now()` in a handler read a fixed virtual time, so a state
//! that stores them is the same in every run, the determinism check passes
//! and traces replay; outside user code the host's clock runs on.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cmc::{Handler, Model, Process, ReplayOutcome, Verdict};

#[derive(Debug)]
struct Stamper {
    started: Option<Instant>,
    wall: Option<SystemTime>,
    waited: Duration,
    n: u8,
}

impl Process for Stamper {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("stamp", |s: &mut Stamper, _| {
            let now = Instant::now();
            s.waited = now - *s.started.get_or_insert(now);
            s.wall = Some(SystemTime::now());
            s.n += 1;
        })
        .guard(|s, _| s.n < 3)]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.debug = Some(cmc::identity::debug_hash::<Stamper>);
        fns
    }
}

fn model() -> Model<Stamper> {
    Model::new("stamper", 1, |_| Stamper {
        started: None,
        wall: None,
        waited: Duration::ZERO,
        n: 0,
    })
    .quiescence_ok(true)
    .invariant("virtual_time", |w| {
        let s = w.processes().next().unwrap();
        match s.wall {
            Some(t)
                if t.duration_since(UNIX_EPOCH).unwrap() != Duration::from_secs(1_000_000_000) =>
            {
                Err(format!("the wall clock read {t:?}"))
            }
            _ if s.n == 3 => Err("three stamps".into()),
            _ => Ok(()),
        }
    })
}

#[test]
fn clocks_in_handlers_are_virtual() {
    let host = Instant::now();
    let r = model().check_determinism(true).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.property, "virtual_time");
    assert_eq!(
        v.record.message, "three stamps",
        "the wall clock is virtual"
    );
    assert_eq!(v.trace.steps.len(), 3);
    assert_eq!(r.stats.unique, 4, "time does not pass: one state per count");
    for _ in 0..2 {
        match model().replay(&v.trace).unwrap() {
            ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record),
            other => panic!("{other:?}"),
        }
    }
    std::thread::sleep(Duration::from_millis(2));
    assert!(
        host.elapsed() >= Duration::from_millis(2),
        "the host's clock runs on outside handlers"
    );
    assert!(
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap() > Duration::from_secs(1_700_000_000)
    );
}
