//! The transition cache (`Model::transition_cache`) against the search
//! without it, on randomly generated small models: exactly the same
//! states (compared one by one, by a probe invariant that records every
//! state it is evaluated in), the same transition counts, the same
//! violations and the same shortest traces — while the cache answers for
//! most transitions. The models send, broadcast and receive, choose, read
//! and write a shared counter, set timers, grow a `Vec` on the heap, and
//! draw from `thread_rng()` (whose runs are never cached).

use crate::common;

use std::sync::Arc;

use cmc::{Ctx, Handler, Invariant, Model, NetworkConfig, Process, Strategy, Verdict};
use common::auto::{auto, reachable, M};
use common::probe::{auto_probe, probe, run, Found};
use rand::Rng;

/// Runs `model` with and without the cache; they must agree on
/// everything but how many transitions the cache answered. Returns the
/// cached search's result.
fn agree<P: Process>(model: impl Fn() -> Model<P>, what: &str) -> Found {
    let without = run(model().transition_cache(false));
    let with = run(model());
    assert_eq!(without.cached, 0, "{what}: nothing cached when off");
    assert!(with.derived <= with.cached, "{what}: derived within cached");
    assert_eq!(with.unique, without.unique, "{what}: unique count");
    assert_eq!(with.states, without.states, "{what}: states");
    assert_eq!(with.transitions, without.transitions, "{what}: transitions");
    assert_eq!(with.violated, without.violated, "{what}: violations");
    assert_eq!(with.verdict, without.verdict, "{what}: verdict");
    assert_eq!(
        with.first_trace, without.first_trace,
        "{what}: trace length"
    );
    with
}

/// The shared family of generated models (choices, sends, receives), every
/// strategy, with a probe and with an invariant that fails in some: the
/// same as without the cache, and the reference's states.
#[test]
fn the_cache_changes_nothing_on_generated_models() {
    let (mut cached, mut derived, mut transitions) = (0, 0, 0);
    for seed in 0..16u64 {
        let n = 2 + (seed % 2) as usize;
        let all = reachable(seed, n, |_| false);
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let what = format!("seed {seed}, {strategy:?}");
            let found = agree(
                || {
                    auto(seed, n)
                        .strategy(strategy)
                        .invariant("probe", auto_probe)
                },
                &what,
            );
            assert_eq!(found.unique as usize, all.len(), "{what}");
            cached += found.cached;
            derived += found.derived;
            transitions += found.transitions;
            agree(
                || {
                    auto(seed, n)
                        .strategy(strategy)
                        .invariant("not_all_last", |w| {
                            if w.processes().all(|p| p.s == M - 1) {
                                Err("every process is in its last state".into())
                            } else {
                                Ok(())
                            }
                        })
                },
                &format!("{what}, failing"),
            );
        }
    }
    eprintln!("{cached} of {transitions} transitions cached, {derived} successors built");
    assert!(
        cached * 3 > transitions,
        "the cache answered only {cached} of {transitions} transitions"
    );
    assert!(derived > 0, "no successor was built from the cache");
}

/// A richer family: per process and state, which handlers are enabled and
/// where they lead.
#[derive(Debug)]
struct Rules {
    next: Vec<Vec<[Option<u8>; 8]>>,
    /// The (state, log length) a process must never have, if any: a
    /// per-process invariant that fails in some models.
    bad: Option<(u8, usize)>,
}

const MS: u8 = 3;

fn rules(seed: u64, n: usize) -> Rules {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut draw = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % k
    };
    Rules {
        bad: (seed % 4 == 1).then(|| (draw(MS as u64) as u8, draw(2) as usize)),
        next: (0..n)
            .map(|_| {
                (0..MS)
                    .map(|_| std::array::from_fn(|_| (draw(5) < 2).then(|| draw(MS as u64) as u8)))
                    .collect()
            })
            .collect(),
    }
}

/// A process of the richer family: a small state, and a log on the heap
/// that some handlers grow and clear.
#[derive(Debug)]
struct Mix {
    id: usize,
    s: u8,
    log: Vec<u8>,
    rules: Arc<Rules>,
}

impl std::hash::Hash for Mix {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.s.hash(h);
        self.log.hash(h);
    }
}

impl Mix {
    fn next(&self, h: usize) -> Option<u8> {
        self.rules.next[self.id][self.s as usize][h]
    }

    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        let next = self.next(0).expect("guarded");
        self.s = [next, (next + 1) % MS][cmc::choose(2)];
    }

    fn send(&mut self, ctx: &mut Ctx<'_, Self>) {
        let to = (self.id + 1 + self.s as usize) % (ctx.process_count() + 1);
        let _ = if to == ctx.process_count() || to == self.id {
            ctx.broadcast(self.s)
        } else {
            ctx.send(to, self.s)
        };
        self.s = self.next(1).expect("guarded");
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, m)) = ctx.recv() {
            self.s = (self.s + m + 1) % MS;
            if self.log.is_empty() {
                self.log.push(m);
            }
        }
    }

    fn bump(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.with_shared(|c: &mut u8| *c += 1);
        self.s = self.next(3).expect("guarded");
    }

    fn look(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.s = (self.next(4).expect("guarded") + *ctx.shared()) % MS;
    }

    fn forget(&mut self, _: &mut Ctx<'_, Self>) {
        self.log.clear();
        self.log.shrink_to_fit();
        self.s = self.next(5).expect("guarded");
    }

    fn arm(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer("t");
        self.s = self.next(6).expect("guarded");
    }

    fn expire(&mut self, _: &mut Ctx<'_, Self>) {
        self.s = (self.s + 2) % MS;
    }

    fn dice(&mut self, _: &mut Ctx<'_, Self>) {
        self.s = rand::thread_rng().gen_range(0..MS);
    }
}

impl Process for Mix {
    type Msg = u8;
    type Shared = u8;
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("not_bad", |m| {
            if m.rules.bad == Some((m.s, m.log.len())) {
                Err(format!(
                    "process {} in state {} with {:?}",
                    m.id, m.s, m.log
                ))
            } else {
                Ok(())
            }
        })]
    }
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("step", Self::step).guard(|m, _| m.next(0).is_some()),
            Handler::new("send", Self::send).guard(|m, _| m.next(1).is_some()),
            Handler::new("receive", Self::receive).guard(|_, v| v.has_mail()),
            Handler::new("bump", Self::bump).guard(|m, v| m.next(3).is_some() && *v.shared() < 2),
            Handler::new("look", Self::look).guard(|m, _| m.next(4).is_some()),
            Handler::new("forget", Self::forget)
                .guard(|m, _| m.next(5).is_some() && !m.log.is_empty()),
            Handler::new("arm", Self::arm).guard(|m, _| m.next(6).is_some()),
            Handler::new("expire", Self::expire).on_timer("t"),
            Handler::new("dice", Self::dice).guard(|m, _| m.next(7).is_some() && m.s == 0),
        ]
    }
}

fn mix(seed: u64, n: usize) -> Model<Mix> {
    let rules = Arc::new(rules(seed, n));
    Model::new(format!("mix_{seed}"), n, move |id| Mix {
        id,
        s: 0,
        log: Vec::new(),
        rules: rules.clone(),
    })
    .network(
        NetworkConfig::new()
            .capacity(2)
            .lossy(seed % 3 == 0)
            .duplicating(seed % 5 == 0),
    )
    .quiescence_ok(true)
    .invariant("probe", |w| {
        probe(format!(
            "{:?} {:?} {} {:?}",
            w.processes().map(|p| (p.s, &p.log)).collect::<Vec<_>>(),
            w.in_flight().collect::<Vec<_>>(),
            w.shared(),
            (0..w.process_count())
                .map(|p| w.timer_pending(p, "t"))
                .collect::<Vec<_>>()
        ))
    })
}

/// The richer family, every strategy, with one and several random seeds,
/// with an invariant that fails in some: the same as without the cache.
#[test]
fn the_cache_changes_nothing_on_models_that_share_draw_and_allocate() {
    let (mut cached, mut derived, mut transitions, mut failing) = (0, 0, 0, 0);
    for seed in 0..20u64 {
        let n = 2;
        for strategy in [Strategy::Dfs, Strategy::Bfs, Strategy::Random] {
            let what = format!("seed {seed}, {strategy:?}");
            let found = agree(|| mix(seed, n).strategy(strategy), &what);
            cached += found.cached;
            derived += found.derived;
            transitions += found.transitions;
            if seed % 4 == 0 {
                agree(
                    || mix(seed, n).strategy(strategy).random_seeds(2),
                    &format!("{what}, two seeds"),
                );
            }
            let found = agree(
                || {
                    mix(seed, n)
                        .strategy(strategy)
                        .invariant("not_all_last", |w| {
                            if w.processes().all(|p| p.s == MS - 1) && *w.shared() == 2 {
                                Err("every process in its last state, the counter at 2".into())
                            } else {
                                Ok(())
                            }
                        })
                },
                &format!("{what}, failing"),
            );
            failing += usize::from(found.verdict == Verdict::Violation);
        }
    }
    eprintln!(
        "{cached} of {transitions} transitions cached, {derived} successors built; \
         {failing} searches fail"
    );
    assert!(failing > 0);
    assert!(derived > 0, "no successor was built from the cache");
    assert!(
        cached * 3 > transitions,
        "the cache answered only {cached} of {transitions} transitions"
    );
}

/// The cache is off where it cannot be sound or cannot help: under
/// partial-order reduction (which needs every run's footprint) and with
/// the determinism check (which runs every transition twice).
#[test]
fn the_cache_stays_off_under_reduction_and_the_determinism_check() {
    let reduced = run(mix(3, 2).por(true));
    assert_eq!(reduced.cached, 0);
    let checked = run(mix(3, 2).check_determinism(true));
    assert_eq!(checked.cached, 0);
    let plain = run(mix(3, 2));
    assert!(plain.cached > 0, "{plain:?}");
    assert_eq!(checked.unique, plain.unique);
}
