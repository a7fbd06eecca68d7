//! Long traces: a violation deeper than `cmc::DESCRIBED_STEPS` steps has
//! a trace whose last steps are described and whose first steps are kept
//! as events only (`Trace::prefix`, in runs). A crash 2 million steps deep
//! made a described trace of 500 MB and an HTML report of 1.3 GB, and 17
//! million steps deep the child that described it grew until stopped.
//! Such a trace still replays, in-process and isolated, from its JSON.

use cmc::{Ctx, Handler, Model, Process, ReplayOutcome, Verdict, ViolationKind};

const DEEP: u32 = 1_200;

#[derive(Debug, Hash)]
struct Deep {
    value: u32,
    /// Every 7th step takes the other branch of a choice: the prefix has
    /// runs of different events.
    parity: usize,
    abort: bool,
}

impl Deep {
    fn bump(&mut self, _: &mut Ctx<'_, Self>) {
        self.value += 1;
        if self.value % 7 == 0 {
            self.parity = cmc::choose(2);
        }
        if self.value == DEEP {
            if self.abort {
                std::process::abort();
            }
            panic!("crashed at {}", self.value);
        }
    }
}

impl Process for Deep {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("bump", Self::bump).guard(|d, _| d.parity == 0)]
    }
}

fn model(abort: bool) -> Model<Deep> {
    Model::new(if abort { "deep_abort" } else { "deep" }, 1, move |_| {
        Deep {
            value: 0,
            parity: 0,
            abort,
        }
    })
    .quiescence_ok(true)
    .strategy(cmc::Strategy::Dfs)
}

fn long_trace_replays(abort: bool) {
    let m = model(abort);
    let r = if abort { m.check_isolated() } else { m.check() }.unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary());
    let v = &r.violations[0];
    let expected = if abort {
        ViolationKind::Crash
    } else {
        ViolationKind::Panic
    };
    assert_eq!(v.record.kind, expected, "{v}");
    let t = &v.trace;
    assert_eq!(t.len(), DEEP as usize, "{t}");
    // The last DESCRIBED_STEPS described (and, after a crash, the step
    // that crashed, added bare to the described path before it).
    let described = if abort {
        cmc::DESCRIBED_STEPS + 1
    } else {
        cmc::DESCRIBED_STEPS
    };
    assert_eq!(t.steps.len(), described);
    let skipped = DEEP as usize - described;
    assert_eq!(t.skipped(), skipped);
    assert_eq!(t.version, cmc::LONG_TRACE_VERSION);
    // Runs of bump with no choice, then with the choice 0 every 7th step.
    assert!(t.prefix.len() > 100, "{:?}", &t.prefix[..4]);
    assert!(t
        .prefix
        .iter()
        .all(|r| r.process == Some(0) && r.handler == 0));
    assert!(t.prefix.iter().any(|r| r.times > 1 && r.choices.is_empty()));
    assert!(t.prefix.iter().any(|r| r.choices == [0]));
    // The described steps are numbered after the prefix.
    let text = t.to_string();
    assert!(
        text.contains(&format!("… steps 1 to {skipped}: events only")),
        "{text}"
    );
    assert!(
        text.contains(&format!(" {}. process 0 bump", skipped + 1)),
        "{text}"
    );
    assert!(
        !text.contains(&format!(" {skipped}. process 0 bump")),
        "{text}"
    );
    let again = cmc::Trace::from_json(&t.to_json()).unwrap();
    assert_eq!(&again, t);
    for trace in [t, &again] {
        let replayed = if abort {
            m.replay_isolated(trace)
        } else {
            m.replay(trace)
        }
        .unwrap();
        assert_eq!(replayed, ReplayOutcome::Reproduced(v.record.clone()));
    }
    // A prefix 504 steps longer (a multiple of 7: the choices stay where
    // they were made) reaches the failing step inside the prefix, which
    // the recorded program did not: a divergence at that step.
    let mut longer = t.clone();
    longer.prefix[0].times += 504;
    let replayed = if abort {
        m.replay_isolated(&longer)
    } else {
        m.replay(&longer)
    }
    .unwrap();
    match replayed {
        ReplayOutcome::Diverged { step, .. } => assert_eq!(step, DEEP as usize),
        other => panic!("a longer prefix replayed as {other:?}"),
    }
}

#[test]
fn a_panic_far_down_has_a_long_trace_that_replays() {
    long_trace_replays(false);
}

#[test]
fn a_crash_far_down_has_a_long_trace_that_replays_isolated() {
    long_trace_replays(true);
}
