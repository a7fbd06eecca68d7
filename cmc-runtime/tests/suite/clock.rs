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

/// A process that stores the process id, as code that names a temporary
/// file or a log after it does.
#[derive(Debug)]
struct Pid {
    ids: Vec<u32>,
}

impl Process for Pid {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("note", |p: &mut Pid, _| p.ids.push(std::process::id()))
                .guard(|p, _| p.ids.len() < 3),
        ]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.debug = Some(cmc::identity::debug_hash::<Pid>);
        fns
    }
}

fn pid_model() -> Model<Pid> {
    Model::new("pid", 1, |_| Pid {
        ids: vec![std::process::id()],
    })
    .quiescence_ok(true)
    .invariant("noted_twice", |w| {
        let p = w.processes().next().unwrap();
        if p.ids.len() == 3 {
            Err(format!("noted {:?}", p.ids))
        } else {
            Ok(())
        }
    })
}

/// `std::process::id()` in user code is one virtual id, in the search's
/// child process (an isolated check) as in this one, so the trace found
/// there replays here; outside user code it is the real one.
#[test]
fn the_process_id_in_user_code_is_virtual() {
    let virtual_pid = cmc::determinism::process_id::VIRTUAL_PID;
    let r = pid_model()
        .check_determinism(true)
        .check_isolated()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.property, "noted_twice");
    assert_eq!(
        v.record.message,
        format!("noted {:?}", [virtual_pid; 3]),
        "the constructor and both handlers read the virtual id"
    );
    match pid_model().replay(&v.trace).unwrap() {
        ReplayOutcome::Reproduced(record) => assert_eq!(record, v.record),
        other => panic!("the trace of another process does not replay here: {other:?}"),
    }
    let real: u32 = std::fs::read_link("/proc/self")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(std::process::id(), real, "outside user code, the real id");
}
