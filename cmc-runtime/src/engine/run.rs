//! Running one transition: the events enabled in a state (guards), a
//! handler or environment event run with a choice script, the seeds of
//! the randomness it draws.

use super::events::Event;
use super::events::Outcome;
use super::events::DUPLICATE;
use super::events::ENV;
use super::events::LOSE;
use super::fingerprint::Chosen;
use super::setup::Engine;
use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;

use crate::engine::isolate::{self};
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::memory::{ArenaId, StateId};
use crate::model::ctx::{self, begin_run, end_run, user_code, Run};
use crate::model::Trigger;
use crate::model::{Ctx, View};
use crate::sys::scope::system_scope;

/// The next choice script after a run that made `taken` (value, range)
/// choices: the odometer advanced at its last position that can move.
pub(crate) fn next_script(taken: &[(usize, usize)]) -> Option<Vec<usize>> {
    let i = taken.iter().rposition(|&(v, n)| v + 1 < n)?;
    let mut script: Vec<usize> = taken[..i].iter().map(|&(v, _)| v).collect();
    script.push(taken[i].0 + 1);
    Some(script)
}

impl<'m> Engine<'m, P> {
    /// Each handler with the states it was found enabled in so far.
    pub(crate) fn handler_uses(&self) -> Vec<crate::engine::trace::HandlerUse> {
        self.handlers
            .iter()
            .zip(&self.enabled_counts)
            .map(|(h, c)| crate::engine::trace::HandlerUse {
                name: h.name.to_string(),
                enabled: c.get(),
            })
            .collect()
    }

    /// The enabled events of the loaded state, or the guard that panicked.
    pub(crate) fn enabled(&self) -> Result<Vec<Event>, ViolationRecord> {
        self.enabled_with_guards().map(|(events, _)| events)
    }

    /// The enabled events, as [`Engine::enabled`], and under partial-order
    /// reduction, for each process event (they come first), what its guard
    /// read of the environment (none otherwise).
    pub(crate) fn enabled_with_guards(
        &self,
    ) -> Result<(Vec<Event>, Vec<crate::model::por::Footprint>), ViolationRecord> {
        let env = self.env();
        let _sys = system_scope();
        isolate::phase(isolate::IN_GUARD, self.at, 0, 0, 0);
        // Every guard of the state in one call of user code (one panic
        // catch, one hook check): the guard that panics, if one does, is
        // the last one started.
        let running = std::cell::Cell::new((0, 0));
        let por = self.model.por;
        let scan = || {
            let mut events =
                Vec::with_capacity((self.roots.len() * self.handlers.len() + 2).min(256));
            let mut prints = Vec::new();
            for p in 0..self.roots.len() {
                // SAFETY: a live root of the loaded state.
                let proc = unsafe { &*self.roots[p] };
                for (h, handler) in self.handlers.iter().enumerate() {
                    if handler.applies.is_some() {
                        // A handler of another kind of process (another
                        // role) is never enabled here, whatever its
                        // trigger.
                        running.set((p, h));
                        isolate::phase_args(p as u64, h as u64);
                        if !handler.applies_to(proc) {
                            continue;
                        }
                    }
                    if por {
                        crate::model::por::begin();
                    }
                    let on = match handler.trigger {
                        Trigger::Always => true,
                        Trigger::Start => false,
                        Trigger::Timer(name) => env.timer_pending(p, name),
                        Trigger::Guard(guard) => {
                            let view = View {
                                me: p,
                                count: self.roots.len(),
                                env,
                            };
                            running.set((p, h));
                            isolate::phase_args(p as u64, h as u64);
                            guard(proc, &view)
                        }
                    };
                    if on {
                        let count = &self.enabled_counts[h];
                        count.set(count.get() + 1);
                        events.push(Event {
                            actor: p,
                            handler: h,
                        });
                        if por {
                            prints.push(crate::model::por::take());
                        }
                    }
                }
            }
            (events, prints)
        };
        let (mut events, prints) = user_code(false, scan).map_err(|(message, location)| {
            let (p, h) = running.get();
            ViolationRecord {
                kind: ViolationKind::Panic,
                property: format!("guard of {}", self.handlers[h].name),
                message: format!("process {p}: {message}"),
                location: Some(location),
            }
        })?;
        let net = &self.model.network;
        let in_flight = kind_of(self.model).msgs(env).len();
        if net.loss && in_flight > 0 {
            events.push(Event {
                actor: ENV,
                handler: LOSE,
            });
        }
        if net.duplication && in_flight > 0 && in_flight < net.capacity {
            events.push(Event {
                actor: ENV,
                handler: DUPLICATE,
            });
        }
        Ok((events, prints))
    }

    /// Runs one event as [`Engine::run`] does, and describes it (the
    /// message delivered, the copies sent) from another run whose state is
    /// dropped. Describing formats messages inside the handler, which
    /// leaves other garbage on the stack than a run that does not; copied
    /// into the padding of a value the handler builds next, that garbage
    /// would make the state differ from the one the search, the
    /// determinism check and a replay reach.
    pub(crate) fn run_described(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        pre: StateId,
    ) -> Outcome {
        let described = self.run(e, script.clone(), seed, true, pre);
        if described.thread_error.is_some() {
            // A thread it left behind uses the arenas (they are frozen):
            // the step ends here, cut short.
            return described;
        }
        let _ = self.mem.take_exhaustion();
        self.mem.restore(pre);
        let mut outcome = self.run(e, script, seed, false, pre);
        outcome.delivered = described.delivered;
        outcome.sent = described.sent;
        outcome.timers = described.timers;
        outcome
    }

    /// Runs one event on the loaded state with a choice script and a
    /// random-seed variant.
    ///
    /// A run whose user code initialized a global (whose blocks were moved
    /// out of the arenas, see [`crate::memory::globals`]) is run again from the
    /// restored pre-state: the moved blocks left holes in the arena and
    /// stale words (the payload of a `None`, a freed pointer) in the state,
    /// which every later run of the same transition, the global being
    /// initialized by then, would not have. Running it again makes the
    /// successor the one every run gives (in the search, in the
    /// determinism check and in replay), whichever transition happened to
    /// touch the global first in this process.
    pub(crate) fn run(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        describe: bool,
        pre: StateId,
    ) -> Outcome {
        let cached = self.seed_base;
        let mut attempts = 0;
        let outcome = loop {
            let moves = self.globals.moves;
            ctx::take_deeper();
            let outcome = self.run_once(e, script.clone(), seed, describe, pre);
            attempts += 1;
            if attempts == 8 || outcome.global_error.is_some() || outcome.thread_error.is_some() {
                break outcome;
            }
            if ctx::take_deeper() {
                // The handler used more stack than was scrubbed.
                self.mem.restore(pre);
                continue;
            }
            if self.needs_exact_seed(pre) {
                // It drew from a provisional seed: again, from the exact one.
                self.mem.restore(pre);
                let base = self.exact_seed_base(pre);
                self.seed_base = Some((pre, base, true));
                continue;
            }
            if self.globals.moves == moves {
                break outcome;
            }
            self.mem.restore(pre);
        };
        // Choices outside a transition's run reseed nothing.
        crate::determinism::random::set_orbit(None);
        // An exact base found here serves the expansion of `pre` only.
        if cached.is_none_or(|c| c.0 != pre) {
            self.seed_base = cached;
        }
        outcome
    }

    /// Whether the run just made from `pre` drew randomness from a
    /// provisional seed.
    pub(crate) fn needs_exact_seed(&self, pre: StateId) -> bool {
        crate::determinism::random::enabled()
            && self.heap_identity()
            && !matches!(self.seed_base, Some((s, _, true)) if s == pre)
            && crate::determinism::random::drew()
    }

    pub(crate) fn run_once(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        describe: bool,
        pre: StateId,
    ) -> Outcome {
        // What ran since the last transition began (this one's guard, the
        // last one's fingerprint and invariants) is counted now: a crash
        // in this transition loses only its own counts.
        crate::sys::coverage::flush();
        // What the thread RNG draws is a function of the state and the
        // event (determinism::random).
        if crate::determinism::random::enabled() {
            let key = self.seed_key(pre, e, &script, seed);
            crate::determinism::random::seed_for(key);
        }
        begin_run(Run {
            script,
            describe,
            pick: self.pick,
            ..Run::default()
        });
        if self.model.por {
            crate::model::por::begin();
        }
        let panic = if e.actor == ENV {
            // A duplication clones a message: its padding comes from the
            // stack, so scrub as before user code (when padding matters).
            if self.scrub {
                crate::sys::stack::scrub_stack(16 * 1024);
            }
            isolate::phase(isolate::IN_HANDLER, 0, u64::MAX, e.handler as u64, 0);
            self.run_environment(e.handler);
            None
        } else {
            let handler = &self.handlers[e.handler];
            if let Trigger::Timer(name) = handler.trigger {
                // The expiry consumes the timer before the handler runs.
                let _in = self.mem.enter(self.env_arena);
                // SAFETY: the environment root is live; no other reference.
                unsafe { (*self.env).cancel_timer(e.actor, name) };
            }
            let mut ctx = Ctx {
                me: e.actor,
                count: self.roots.len(),
                env: self.env,
                mem: &self.mem,
                env_arena: self.env_arena,
                net: &self.model.network,
            };
            let root = self.roots[e.actor];
            let body = handler.body;
            let _in = self.mem.enter(self.arenas[e.actor]);
            isolate::phase(isolate::IN_HANDLER, 0, e.actor as u64, e.handler as u64, 0);
            // SAFETY: the root is a live object of the restored state and the
            // handler has the only reference to it.
            user_code(self.scrub, || body(unsafe { &mut *root }, &mut ctx)).err()
        };
        let (handler, actor) = (self.handler_name(e), self.actor_name_lazy(e.actor));
        let thread_error = crate::memory::threads::after_user_code()
            .map(|left| left.message(&format!("handler `{handler}` of {}", actor()), "handler"));
        if thread_error.is_some() {
            // The thread left behind uses the arenas as they are now.
            self.mem.freeze();
        }
        let run = end_run();
        let owned = || -> Vec<(ArenaId, usize)> {
            self.arenas
                .iter()
                .zip(&self.roots)
                .map(|(&a, &r)| (a, r as usize))
                .chain([(self.env_arena, self.env as usize)])
                .collect()
        };
        let who = || format!("{handler} of {}", actor());
        let global_error = self.globals.after_user_code(&self.mem, &owned, &who).err();
        let drew = self.model.random_seeds > 1 && crate::determinism::random::drew();
        let mut footprint = crate::model::por::Footprint::default();
        if self.model.por {
            footprint = crate::model::por::take();
            if crate::determinism::random::enabled() && (drew || crate::determinism::random::drew())
            {
                footprint.flags |= crate::model::por::DREW;
            }
        }
        Outcome {
            drew,
            footprint,
            taken: run.taken.iter().map(|&(v, _)| v).collect(),
            ranges: run.taken,
            panic,
            model_error: run.model_error,
            misfit: run.misfit,
            delivered: run.delivered,
            sent: run.sent,
            timers: run.timers,
            global_error,
            thread_error,
        }
    }

    /// The seed of the randomness a transition draws: the pre-state's
    /// identity (see [`Engine::seed_base_of`]), the event and the choice
    /// script, and the random-seed variant (variant 0 adds nothing, so a
    /// search with one seed draws what it always did).
    pub(crate) fn seed_key(&mut self, pre: StateId, e: Event, script: &[usize], seed: u32) -> u128 {
        if self.fp.symmetry.is_some() {
            return self.orbit_seed_key(pre, e, seed);
        }
        let base = match self.seed_base {
            Some((state, base, _)) if state == pre => base,
            _ => self.seed_base_of(pre).0,
        };
        // A script means its choices followed by zeros (a choice past its
        // end takes 0): the search's first run of an event has an empty
        // script, a replay or the determinism check passes the choices the
        // run took, such as [0]. Both must draw the same.
        let script = &script[..script.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1)];
        // Mixed, not hashed: a seed needs to differ, not to resist anyone
        // (this runs before every transition).
        use crate::sys::hash::fmix64;
        let mut lo = base as u64;
        let mut hi = (base >> 64) as u64;
        let words = [((e.actor as u64) << 32) ^ e.handler as u64, u64::from(seed)];
        for w in words.into_iter().chain(script.iter().map(|&c| c as u64)) {
            lo = fmix64(lo ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            hi = fmix64(hi.rotate_left(29) ^ lo);
        }
        (u128::from(hi) << 64) | u128::from(fmix64(lo ^ script.len() as u64))
    }

    /// Under symmetry reduction, the seed of a transition's draws is a
    /// function of what a renaming of the interchangeable processes does
    /// not change: the pre-state's smallest image, the colour of the
    /// event's process in it (not its index), the handler and the
    /// random-seed variant; each choice the run then makes (a message
    /// received, a value chosen) reseeds it by what it picked, named up
    /// to a renaming (`determinism::random::orbit_choice`). So a state and
    /// its image draw alike: the successors of one are the images of the
    /// other's, as the reduction assumes (and the symmetry check checks).
    /// Sets the orbit for the run's choices.
    fn orbit_seed_key(&mut self, pre: StateId, e: Event, seed: u32) -> u128 {
        let cached = match &self.orbit_seed {
            Some((s, base, colours)) if *s == pre && self.seed_base.is_some() => {
                Some((*base, colours.clone()))
            }
            _ => None,
        };
        let (base, colours) = match cached {
            Some(c) => c,
            None => {
                let mut parts = super::fingerprint::Parts {
                    mem: &mut self.mem,
                    model: self.model,
                    arenas: &self.arenas,
                    env_arena: self.env_arena,
                    roots: &self.roots,
                    env: self.env,
                };
                let (base, colours) = match parts.canonical(&mut self.fp) {
                    Ok(c) => (c.sum, c.colours),
                    // A fingerprint that panics is reported when the
                    // state's own fingerprint is taken; draw from zero.
                    Err(_) => (0, Vec::new()),
                };
                if self.seed_base.is_some() {
                    self.orbit_seed = Some((pre, base, colours.clone()));
                }
                (base, colours)
            }
        };
        use crate::sys::hash::fmix64;
        let actor = colours.get(e.actor).copied().unwrap_or(e.actor as u128);
        let mut lo = base as u64;
        let mut hi = (base >> 64) as u64;
        let words = [
            actor as u64,
            (actor >> 64) as u64,
            e.handler as u64,
            u64::from(seed),
        ];
        for w in words {
            lo = fmix64(lo ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            hi = fmix64(hi.rotate_left(29) ^ lo);
        }
        let key = (u128::from(hi) << 64) | u128::from(fmix64(lo ^ 0x006f_7262_6974));
        let masked = self
            .fp
            .symmetry
            .as_ref()
            .expect("a symmetric fingerprinter")
            .masked
            .clone();
        crate::determinism::random::set_orbit(Some((key, masked, colours)));
        key
    }

    /// The part of a transition's seed that comes from its pre-state, and
    /// whether it is exact. Under a canonical-heap identity it is
    /// provisional, the state's bytes: the exact base costs a traversal of
    /// every heap, paid only when a transition draws (see [`Engine::run`]).
    pub(crate) fn seed_base_of(&mut self, pre: StateId) -> (u128, bool) {
        if self.heap_identity() {
            return (self.mem.fingerprint(pre).0, false);
        }
        match self.fp.process {
            Chosen::Bytes => (self.mem.fingerprint(pre).0, true),
            _ => (self.state_fingerprint(pre).map_or(0, |f| f.0), true),
        }
    }

    /// Whether a type is identified by its canonical heap, whose canonical
    /// addresses depend on the states the search saw before.
    pub(crate) fn heap_identity(&self) -> bool {
        matches!(self.fp.process, Chosen::Heap) || matches!(self.fp.shared, Chosen::Heap)
    }

    /// The exact seed base of `pre` (the loaded state) under a heap
    /// identity: its fingerprint by a fresh fingerprinter, whose canonical
    /// addresses come from this state alone — the same in the search, in
    /// the determinism check and in a replay, whatever the path that led
    /// there and whatever garbage the arenas' free space holds.
    pub(crate) fn exact_seed_base(&mut self, pre: StateId) -> u128 {
        let mut fp = self.fresh_fingerprinter();
        let base = self.trace_fingerprint(&mut fp, pre).map_or(0, |f| f.0);
        fp.release(&mut self.mem);
        base
    }

    pub(crate) fn run_environment(&mut self, event: usize) {
        let distinct = {
            let _sys = system_scope();
            kind_of(self.model).distinct(self.env())
        };
        let Some(pick) = ctx::choice_internal(distinct.len()) else {
            // The trace does not fit (the run's misfit says why).
            return;
        };
        let i = distinct[pick];
        let _in = self.mem.enter(self.env_arena);
        let kind = kind_of(self.model);
        {
            let (head, msg) = kind.msgs(self.env()).get(i);
            ctx::describe(|| (head.from as usize, head.to as usize, (kind.msg_debug)(msg)));
        }
        if event == LOSE {
            // SAFETY: the environment root is live, of the kind's model,
            // with its arena entered; no other reference to it exists.
            unsafe { kind.lose(self.env, i) }
        } else {
            // SAFETY: as above.
            unsafe { kind.duplicate(self.env, i) }
        }
    }
}
