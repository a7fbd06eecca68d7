//! Guided walks against plain ones: a combination lock whose bug needs
//! eight exact presses in a row, at the depth bound, while two other
//! processes tick. A plain walk makes the eight presses right with
//! probability (1/3 · 1/4)^8 (about 2 · 10^-9); guided walks, which enter
//! only states no walk entered at that depth or shallower, cover the few
//! thousand states within the bound and open it.

use cmc::{choose, Ctx, Handler, Model, Process, Strategy, Verdict};

const SECRET: [usize; 8] = [3, 1, 0, 1, 2, 0, 2, 3];

#[derive(Debug, Hash)]
enum Part {
    /// How many digits of the secret were pressed in a row.
    Lock(usize),
    /// A counter modulo 3: noise.
    Ticker(u8),
}

impl Part {
    fn press(&mut self, _: &mut Ctx<'_, Self>) {
        if let Part::Lock(right) = self {
            let digit = choose(4);
            *right = if digit == SECRET[*right] {
                *right + 1
            } else {
                0
            };
        }
    }

    fn tick(&mut self, _: &mut Ctx<'_, Self>) {
        if let Part::Ticker(n) = self {
            *n = (*n + 1) % 3;
        }
    }
}

impl Process for Part {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("press", Self::press)
                .guard(|p, _| matches!(p, Part::Lock(n) if *n < SECRET.len())),
            Handler::new("tick", Self::tick).guard(|p, _| matches!(p, Part::Ticker(_))),
        ]
    }
}

fn model() -> Model<Part> {
    unchecked().invariant("locked", |w| match w.process(0) {
        Part::Lock(n) if *n == SECRET.len() => Err("the lock is open".to_string()),
        _ => Ok(()),
    })
}

/// The lock with no property.
fn unchecked() -> Model<Part> {
    Model::new("lock", 3, |i| match i {
        0 => Part::Lock(0),
        _ => Part::Ticker(0),
    })
    .max_depth(SECRET.len())
}

fn walks(seed: u64, guided: bool) -> cmc::CheckResult {
    model()
        .strategy(Strategy::Walk)
        .guided_walks(guided)
        .max_walks(2_000)
        .seed(seed)
        .jobs(1)
        .check()
        .unwrap()
}

#[test]
fn guided_walks_open_the_lock_that_plain_walks_miss() {
    let bfs = model().strategy(Strategy::Bfs).check().unwrap();
    assert_eq!(bfs.verdict, Verdict::Violation, "{}", bfs.summary());
    assert_eq!(bfs.violations[0].trace.steps.len(), SECRET.len());
    for seed in 0..4 {
        let r = walks(seed, true);
        assert_eq!(
            r.verdict,
            Verdict::Violation,
            "seed {seed}: {}",
            r.summary()
        );
        let v = &r.violations[0];
        assert_eq!(v.record.property, "locked", "{v}");
        assert_eq!(v.trace.steps.len(), SECRET.len(), "{}", v.trace);
        assert_eq!(
            model().replay(&v.trace).unwrap(),
            cmc::ReplayOutcome::Reproduced(v.record.clone())
        );
        let plain = walks(seed, false);
        assert_eq!(
            plain.verdict,
            Verdict::Bounded,
            "seed {seed}: plain walks opened the lock: {}",
            plain.summary()
        );
        assert_eq!(plain.stats.walks, 2_000);
    }
}

/// Guided walks see every state within the bound: on the lock with no
/// property, as many distinct states as breadth-first search stores
/// (estimated by the walks' sketch, within a few percent).
#[test]
fn guided_walks_see_every_state_within_the_bound() {
    let bfs = unchecked().strategy(Strategy::Bfs).check().unwrap();
    assert_eq!(bfs.verdict, Verdict::Bounded, "{}", bfs.summary());
    let r = unchecked()
        .strategy(Strategy::Walk)
        .max_walks(2_000)
        .seed(1)
        .jobs(1)
        .check()
        .unwrap();
    let (walked, all) = (r.stats.unique as f64, bfs.stats.unique as f64);
    assert!(
        (walked - all).abs() / all < 0.05,
        "walks saw about {walked} states, breadth-first search {all}"
    );
}
