//! A trace whose environment step (a loss, a duplication) names a message
//! that is not there is a misfit, reported as such by replay and rejected
//! by the shortening of a random walk's trace — never a crash of the
//! checker (the environment's choice is the engine's own code, which no
//! panic catch surrounds).

use cmc::{Ctx, Handler, Model, NetworkConfig, Process, ReplayOutcome, Strategy, Verdict};

#[derive(Debug, Hash)]
struct Peer {
    sent: bool,
    got: bool,
}

impl Peer {
    fn send(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(1, 7);
        self.sent = true;
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.got = ctx.recv().is_some();
    }
}

impl Process for Peer {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("send", Self::send).guard(|p, v| v.me() == 0 && !p.sent),
            Handler::new("receive", Self::receive).guard(|_, v| v.has_mail()),
        ]
    }
}

/// Process 0 sends one message to process 1 over a lossy link; losing it
/// violates `delivered`.
fn model() -> Model<Peer> {
    Model::new("lost", 2, |_| Peer {
        sent: false,
        got: false,
    })
    .network(NetworkConfig::new().capacity(2).lossy(true))
    .quiescence_ok(true)
    .invariant("delivered", |w| {
        if w.process(0).sent && w.in_flight().count() == 0 && !w.process(1).got {
            Err("the message was lost".into())
        } else {
            Ok(())
        }
    })
}

#[test]
fn a_loss_of_a_message_that_is_not_there_is_a_misfit() {
    let r = model().strategy(Strategy::Bfs).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let mut trace = r.violations[0].trace.clone();
    assert_eq!(trace.steps.len(), 2, "{trace}");
    assert_eq!(
        model().replay(&trace).unwrap(),
        ReplayOutcome::Reproduced(r.violations[0].record.clone())
    );
    // The loss names the second distinct message in flight; there is one.
    trace.steps[1].choices = vec![1];
    match model().replay(&trace).unwrap() {
        ReplayOutcome::Misfit { step, message, .. } => {
            assert_eq!(step, 2);
            assert!(message.contains("out of its range 0..1"), "{message}");
        }
        other => panic!("expected a misfit, got {other:?}"),
    }
}

#[test]
fn random_walks_find_the_loss_and_shorten_it() {
    let r = model()
        .strategy(Strategy::Walk)
        .max_walks(200)
        .max_depth(10)
        .check()
        .unwrap();
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary());
    let v = &r.violations[0];
    assert_eq!(v.record.property, "delivered", "{v}");
    assert_eq!(v.trace.steps.len(), 2, "{}", v.trace);
}
