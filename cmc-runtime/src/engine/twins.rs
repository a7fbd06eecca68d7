//! The declared symmetry checked on two states of one orbit (*twins*): a
//! state `s` the search kept, and a state `t` it merged with `s` because
//! their smallest images are equal, so that `t` is `s` with the processes
//! renamed by a permutation π. If the processes really are
//! interchangeable, `t` behaves as `s` renamed: the invariants give the
//! same verdicts, the handler of process π(i) is enabled in `t` exactly
//! when that of process `i` is in `s`, and its runs reach the same orbits.
//! A difference is reported with the permutation, the event and the first
//! line where the two processes' states differ.

use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;
use std::collections::BTreeSet;

use crate::engine::next_script;
use crate::engine::trace::ViolationRecord;
use crate::engine::{Engine, Event, ENV};
use crate::memory::StateId;

/// What a state does, for comparing twins.
pub(crate) struct Behaviour {
    /// The invariants' verdict: the property that failed, if any.
    pub(crate) verdict: Option<String>,
    /// The enabled events, each with the smallest images of its runs'
    /// successors (a run that failed counts as the kind of its failure),
    /// and whether a run drew randomness after a choice by index (twins
    /// draw alike, their seeds being the orbit's, but the k-th choice of
    /// one is not the k-th of the other: such an event's successors are
    /// not compared).
    pub(crate) events: Vec<(Event, Vec<Run>, bool)>,
}

/// A run of an event: its choices, and its successor's smallest image.
type Run = (Vec<usize>, u128);

/// The smallest images of the successors of one event's runs.
fn images(runs: &[Run]) -> BTreeSet<u128> {
    runs.iter().map(|&(_, fp)| fp).collect()
}

/// How a run that ended without a successor counts among successors.
const PANICKED: u128 = 1;
const MODEL_ERROR: u128 = 2;

impl Engine<'_, P> {
    /// What `state` does: its invariants' verdict, and for every enabled
    /// event every choice's successor (with random seed 0). `None` when a
    /// run cannot be compared (it left a thread behind or failed to run).
    pub(crate) fn behaviour(&mut self, state: StateId, node: u32) -> Option<Behaviour> {
        self.load(state);
        self.set_node(node);
        let verdict = self.check_state().map(|r| r.property);
        let events = match self.enabled() {
            Ok(events) => events,
            Err(record) => {
                return Some(Behaviour {
                    verdict: Some(format!("guards: {}", record.property)),
                    events: Vec::new(),
                })
            }
        };
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            let mut successors = Vec::new();
            let mut drew = false;
            let mut script = Vec::new();
            loop {
                self.load(state);
                self.set_node(node);
                let mut outcome = self.run(event, script.clone(), 0, false, state);
                // Twins draw alike (the seed is the orbit's), unless the
                // run chose by index before it drew.
                drew |= (outcome.drew || crate::determinism::random::drew())
                    && crate::determinism::random::chose_by_index();
                if outcome.thread_error.is_some() || outcome.global_error.is_some() {
                    return None;
                }
                let ranges = std::mem::take(&mut outcome.ranges);
                let fp = if outcome.panic.is_some() {
                    PANICKED
                } else if outcome.model_error.is_some() || self.take_exhaustion().is_some() {
                    MODEL_ERROR
                } else {
                    let succ = self.capture();
                    let fp = self.state_fingerprint(succ);
                    self.release(succ);
                    fp.map_or(PANICKED, |f| f.0)
                };
                successors.push((outcome.taken.clone(), fp));
                match next_script(&ranges) {
                    Some(next) => script = next,
                    None => break,
                }
            }
            out.push((event, successors, drew));
        }
        Some(Behaviour {
            verdict,
            events: out,
        })
    }

    /// The difference between `s` and its twin `t` = π(`s`) (process `i`
    /// of `s` is process `perm[i]` of `t`), if any: the message of a
    /// violation of the declared symmetry. `s_node` is `s`'s node in the
    /// search tree, `t_node` that of `t`'s parent.
    pub(crate) fn twins_differ(
        &mut self,
        s: StateId,
        s_node: u32,
        t: StateId,
        t_node: u32,
        perm: &[usize],
    ) -> Option<String> {
        let a = self.behaviour(s, s_node)?;
        let b = self.behaviour(t, t_node)?;
        let renaming = perm
            .iter()
            .enumerate()
            .filter(|(i, p)| i != *p)
            .map(|(i, p)| format!("{i}→{p}"))
            .collect::<Vec<_>>()
            .join(", ");
        let said = format!(
            "processes declared interchangeable behave differently: a state and its image \
             under the renaming of processes {{{renaming}}}"
        );
        if a.verdict != b.verdict {
            let show = |v: &Option<String>| match v {
                Some(p) => format!("violates `{p}`"),
                None => "satisfies every invariant".to_string(),
            };
            return Some(format!(
                "{said}: the state {}, its image {} (an invariant that names a process, or \
                 compares identifiers by order, is not symmetric)",
                show(&a.verdict),
                show(&b.verdict)
            ));
        }
        let map = |e: Event| Event {
            actor: if e.actor == ENV { ENV } else { perm[e.actor] },
            handler: e.handler,
        };
        for (event, ours, drew) in &a.events {
            let image = map(*event);
            let name = self.handler_name(*event);
            let Some((_, theirs, drew_too)) = b.events.iter().find(|(e, ..)| *e == image) else {
                return Some(format!(
                    "{said}: `{name}` of {} is enabled in the state, `{name}` of {} is not in \
                     its image",
                    self.actor_name(event.actor),
                    self.actor_name(image.actor),
                ));
            };
            let (mine, yours) = (images(ours), images(theirs));
            if *drew || *drew_too || mine == yours {
                continue;
            }
            // A run of each side whose successor the other side has not.
            let odd = |runs: &[Run], other: &BTreeSet<u128>| {
                runs.iter()
                    .find(|(_, fp)| !other.contains(fp))
                    .map(|(script, _)| script.clone())
            };
            let (odd_s, odd_t) = (odd(ours, &yours), odd(theirs, &mine));
            let effect_s = odd_s.as_ref().map(|c| self.effect(s, s_node, *event, c));
            let effect_t = odd_t.as_ref().map(|c| self.effect(t, t_node, image, c));
            let field = match (&odd_s, &odd_t) {
                (Some(cs), Some(ct)) => self
                    .first_difference((s, s_node, *event, cs), (t, t_node, image, ct), perm)
                    .map(|d| format!(". The first field where the successors differ: {d}"))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let shown =
                |e: Option<String>| e.unwrap_or_else(|| "nothing the other does not".into());
            return Some(format!(
                "{said}: `{name}` of {} reaches {} orbit(s) from the state, `{name}` of {} \
                 reaches {} from its image, {} of them other. From the state, {}; from its \
                 image, {}{field}",
                self.actor_name(event.actor),
                mine.len(),
                self.actor_name(image.actor),
                yours.len(),
                mine.symmetric_difference(&yours).count(),
                shown(effect_s),
                shown(effect_t),
            ));
        }
        if let Some((event, ..)) = b
            .events
            .iter()
            .find(|(e, ..)| !a.events.iter().any(|(f, ..)| map(*f) == *e))
        {
            let name = self.handler_name(*event);
            return Some(format!(
                "{said}: `{name}` of {} is enabled in the image, and not in the state",
                self.actor_name(event.actor)
            ));
        }
        None
    }

    /// Where the successor of run `a` (state, node, event, choices) of the
    /// state, renamed by `perm`, first differs from the successor of run
    /// `b` of its image: a process and a field, for process types walked by
    /// their type information (whose walk can show what it hashes, renamed).
    fn first_difference(
        &mut self,
        a: (StateId, u32, Event, &Vec<usize>),
        b: (StateId, u32, Event, &Vec<usize>),
        perm: &[usize],
    ) -> Option<String> {
        use crate::model::FingerprintMode;
        if !matches!(
            self.fp.process,
            super::fingerprint::Chosen::Value(FingerprintMode::Typed, _)
        ) {
            return None;
        }
        let sym = self.fp.symmetry.as_ref()?;
        let (renamed, identity) = (sym.renaming(perm), sym.identity.clone());
        let (ours, net_s) = self.dumps(a, &renamed, perm)?;
        let identity_perm: Vec<usize> = (0..perm.len()).collect();
        let (theirs, net_t) = self.dumps(b, &identity, &identity_perm)?;
        // The network: messages (renamed ends, renamed contents) and timers.
        let key = |e: &(usize, usize, u128, String)| (e.0, e.1, e.2);
        let mut pool: Vec<(usize, usize, u128)> = net_t.iter().map(key).collect();
        for m in &net_s {
            match pool.iter().position(|k| *k == key(m)) {
                Some(at) => {
                    pool.swap_remove(at);
                }
                None => {
                    let other: Vec<&str> = net_t
                        .iter()
                        .filter(|n| !net_s.iter().any(|x| key(x) == key(n)))
                        .map(|n| n.3.as_str())
                        .collect();
                    return Some(format!(
                        "in flight after the state's run: {} (renamed), which the image's \
                         successor does not hold (it holds {})",
                        m.3,
                        if other.is_empty() {
                            "nothing else".to_string()
                        } else {
                            other.join("; ")
                        }
                    ));
                }
            }
        }
        for (i, mine) in ours.iter().enumerate() {
            let yours = &theirs[perm[i]];
            // Lines of one not among the other's (maps and sets show their
            // entries in storage order).
            let mut pool: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
            for l in yours.lines() {
                *pool.entry(l).or_default() += 1;
            }
            let odd = mine.lines().find(|l| match pool.get_mut(l) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            });
            if let Some(line) = odd {
                let field = line.split(" = ").next().unwrap_or(line);
                // The other's line at that field the first does not hold.
                let at_field = |l: &&str| l.split(" = ").next() == Some(field);
                let other = yours
                    .lines()
                    .filter(at_field)
                    .find(|l| !mine.lines().any(|m| m == *l))
                    .or_else(|| yours.lines().find(at_field))
                    .unwrap_or("(no such field)");
                return Some(format!(
                    "process {i}'s `{line}` (renamed), where process {}'s successor holds `{other}`",
                    perm[i]
                ));
            }
        }
        None
    }

    /// The typed dumps of every process of the successor of a run, under
    /// `renaming`.
    #[allow(clippy::type_complexity)]
    fn dumps(
        &mut self,
        (state, node, event, choices): (StateId, u32, Event, &Vec<usize>),
        renaming: &crate::identity::rename::Renaming,
        perm: &[usize],
    ) -> Option<(Vec<String>, Vec<(usize, usize, u128, String)>)> {
        self.load(state);
        self.set_node(node);
        let outcome = self.run(event, choices.clone(), 0, false, state);
        if outcome.panic.is_some() || outcome.model_error.is_some() {
            return None;
        }
        let _sys = crate::sys::scope::system_scope();
        let mut out = Vec::with_capacity(self.roots.len());
        for &root in &self.roots {
            // SAFETY: a live root of the loaded successor.
            let p = unsafe { &*root };
            let dump = crate::identity::rename::hashing_renamed(renaming, || {
                (kind_of(self.model).process.dump)(p)
            });
            out.push(dump.ok()?);
        }
        // SAFETY: the environment root is live in every state.
        let env = unsafe { &*self.env };
        let key_fn = env.key_fn();
        let mut net = Vec::new();
        let kind = kind_of(self.model);
        for (m, msg) in kind.msgs(env).iter() {
            let h = crate::identity::rename::hashing_renamed(renaming, || {
                let mut h = crate::identity::hasher::StateHasher::default();
                key_fn(msg, &mut h);
                h.finish128()
            });
            let (to, from) = (perm[m.to as usize], perm[m.from as usize]);
            let mut shown = format!(
                "{} from process {from} to process {to}",
                (kind.msg_debug)(msg)
            );
            if let Ok(d) =
                crate::identity::rename::hashing_renamed(renaming, || (kind.msg.dump)(msg))
            {
                shown.push_str(" {{");
                shown.push_str(&d.lines().collect::<Vec<_>>().join("; "));
                shown.push_str("}}");
            }
            net.push((to, from, h, shown));
        }
        for &(p, name) in &env.timers {
            let p = perm[p as usize];
            net.push((
                p,
                usize::MAX,
                u128::from(name),
                format!("a timer of process {p}"),
            ));
        }
        Some((out, net))
    }

    /// What the run of `event` with `choices` from `state` did: the lines
    /// of its process's `Debug` it changed (when the model shows states,
    /// `Model::debug_states`) and the messages it sent.
    fn effect(&mut self, state: StateId, node: u32, event: Event, choices: &[usize]) -> String {
        self.load(state);
        self.set_node(node);
        let before = self.show(event.actor);
        let outcome = self.run(event, choices.to_vec(), 0, true, state);
        let who = format!(
            "`{}` of {} (choices {choices:?})",
            self.handler_name(event),
            self.actor_name(event.actor)
        );
        if let Some((message, _)) = &outcome.panic {
            return format!("{who} panicked: {message}");
        }
        let after = self.show(event.actor);
        let mut said = Vec::new();
        if let (Some(before), Some(after)) = (before, after) {
            // The lines between the longest common prefix and suffix.
            let old: Vec<&str> = before.lines().map(str::trim).collect();
            let new: Vec<&str> = after.lines().map(str::trim).collect();
            let p = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
            let room = old.len().min(new.len()) - p;
            let q = old
                .iter()
                .rev()
                .zip(new.iter().rev())
                .take(room)
                .take_while(|(a, b)| a == b)
                .count();
            let changed = new[p..new.len() - q].join(" ");
            said.push(if changed.is_empty() && old.len() == new.len() {
                "changed nothing in its state".to_string()
            } else {
                format!(
                    "left `{changed}` where its state held `{}`",
                    old[p..old.len() - q].join(" ")
                )
            });
        }
        said.push(if outcome.sent.is_empty() {
            "sent nothing".to_string()
        } else {
            let sent: Vec<String> = outcome
                .sent
                .iter()
                .map(|(to, m, _)| format!("{m} to {}", self.actor_name(*to)))
                .collect();
            format!("sent {}", sent.join(", "))
        });
        format!("{who} {}", said.join(" and "))
    }
}

/// What a violation of the declared symmetry is reported as.
pub(crate) fn asymmetry(message: String) -> ViolationRecord {
    ViolationRecord {
        kind: crate::engine::trace::ViolationKind::Asymmetry,
        property: "symmetry".into(),
        message,
        location: None,
    }
}
