//! The first engine of a process builds the same initial state as every
//! later one, even for a process type with padding bytes (they are copied
//! from the stack, which is scrubbed right up to the frame the constructor
//! runs in). This file holds a single test so that its check really is the
//! first engine of its process.

use cmc::{Ctx, Handler, Model, Process, ReplayOutcome, View};

/// Two bytes and a vector: six bytes of padding.
struct Padded {
    steps: u8,
    limit: u8,
    log: Vec<u64>,
}

impl Padded {
    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        self.steps += 1;
        self.log.push(self.steps as u64);
    }

    fn can_step(&self, _: &View<'_, Self>) -> bool {
        self.steps < self.limit
    }
}

impl Process for Padded {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("step", Padded::step).guard(Padded::can_step)]
    }
}

#[test]
fn check_and_replay_in_one_process_agree_from_the_first_engine_on() {
    let model = Model::new("padded", 2, |_| Padded {
        steps: 0,
        limit: 2,
        log: Vec::new(),
    });
    for round in 0..3 {
        let r = model.check().unwrap();
        let v = &r.violations[0];
        assert_eq!(v.record.property, "deadlock");
        assert_eq!(
            model.replay(&v.trace).unwrap(),
            ReplayOutcome::Reproduced(v.record.clone()),
            "round {round}: replay diverged"
        );
    }
}
