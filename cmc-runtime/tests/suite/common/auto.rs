//! A family of small generated models shared by the tests of the search
//! (parallel workers, reachability and liveness): every process runs a
//! transition table drawn from a seed, with choices and messages, and the
//! same model over plain values serves as the independent reference.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::collections::{HashMap, VecDeque};

use cmc::{Ctx, Handler, Model, NetworkConfig, Process, View};

/// States per process.
pub const M: u8 = 5;
/// Messages in flight at most.
pub const CAPACITY: usize = 2;

/// The rules of one generated model: what each process does in each of
/// its states, all drawn from a seed.
#[derive(Clone, Debug)]
pub struct Rules {
    /// `step[p][s][c]`: the next state of `p` after `step` with choice `c`
    /// (`None`: step is disabled in `s`).
    pub step: Vec<Vec<Option<[u8; 2]>>>,
    /// `send[p][s]`: the next state after sending `s` to the next process
    /// (`None`: disabled).
    pub send: Vec<Vec<Option<u8>>>,
    /// `recv[p][s][m]`: the next state after receiving `m`.
    pub recv: Vec<Vec<Vec<u8>>>,
}

pub fn rules(seed: u64, n: usize) -> Rules {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut draw = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % k) as u8
    };
    let mut r = Rules {
        step: Vec::new(),
        send: Vec::new(),
        recv: Vec::new(),
    };
    for _ in 0..n {
        r.step.push(
            (0..M)
                .map(|_| (draw(3) != 0).then(|| [draw(M as u64), draw(M as u64)]))
                .collect(),
        );
        r.send.push(
            (0..M)
                .map(|_| (draw(2) == 0).then(|| draw(M as u64)))
                .collect(),
        );
        r.recv.push(
            (0..M)
                .map(|_| (0..M).map(|_| draw(M as u64)).collect())
                .collect(),
        );
    }
    r
}

/// A process of a generated model, written as ordinary code would be: its
/// rules behind an `Rc`-free shared table it only reads.
#[derive(Debug)]
pub struct Auto<const FAIR: bool = true> {
    id: usize,
    n: usize,
    /// The process's state.
    pub s: u8,
    rules: std::sync::Arc<Rules>,
}

impl<const FAIR: bool> Auto<FAIR> {
    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        let next = self.rules.step[self.id][self.s as usize].expect("guarded");
        self.s = next[cmc::choose(2)];
    }

    fn send(&mut self, ctx: &mut Ctx<'_, Self>) {
        let to = (self.id + 1) % self.n;
        let _ = ctx.send(to, self.s);
        self.s = self.rules.send[self.id][self.s as usize].expect("guarded");
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, m)) = ctx.recv() {
            self.s = self.rules.recv[self.id][self.s as usize][m as usize];
        }
    }
}

impl<const FAIR: bool> std::hash::Hash for Auto<FAIR> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.s.hash(h);
    }
}

impl<const FAIR: bool> Process for Auto<FAIR> {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            // Fair unless asked otherwise: an execution cannot keep `step`
            // of a process enabled forever without running it (for
            // liveness properties).
            {
                let step =
                    Handler::new("step", Self::step).guard(|a: &Self, _: &View<'_, Self>| {
                        a.rules.step[a.id][a.s as usize].is_some()
                    });
                if FAIR {
                    step.fair()
                } else {
                    step
                }
            },
            Handler::new("send", Self::send)
                .guard(|a: &Self, _: &View<'_, Self>| a.rules.send[a.id][a.s as usize].is_some()),
            Handler::new("receive", Self::receive).guard(|_, v| v.has_mail()),
        ]
    }
}

/// The model, without properties.
pub fn auto(seed: u64, n: usize) -> Model<Auto> {
    auto_fair::<true>(seed, n)
}

/// The model, with `step` fair or not.
pub fn auto_fair<const FAIR: bool>(seed: u64, n: usize) -> Model<Auto<FAIR>> {
    let r = std::sync::Arc::new(rules(seed, n));
    Model::new(format!("auto_{seed}"), n, move |id| Auto {
        id,
        n,
        s: 0,
        rules: r.clone(),
    })
    .network(NetworkConfig::new().capacity(CAPACITY))
    .quiescence_ok(true)
}

/// A state over plain values: the process states and the multiset of
/// messages (to, from, value) as a sorted list.
pub type S = (Vec<u8>, Vec<(usize, usize, u8)>);

/// What a transition of the reference did: `Some(p)` for a `step` of
/// process `p` (the fair handler), `None` for the others.
pub type Label = Option<usize>;

/// The successors of `s` under the model's rules, with their labels. A
/// full network drops a send.
pub fn successors(r: &Rules, n: usize, s: &S) -> Vec<(S, Label)> {
    let mut out = Vec::new();
    for p in 0..n {
        let x = s.0[p] as usize;
        if let Some(next) = r.step[p][x] {
            for c in next {
                let mut t = s.clone();
                t.0[p] = c;
                out.push((t, Some(p)));
            }
        }
        if let Some(next) = r.send[p][x] {
            let mut t = s.clone();
            if t.1.len() < CAPACITY {
                t.1.push(((p + 1) % n, p, s.0[p]));
                t.1.sort();
            }
            t.0[p] = next;
            out.push((t, None));
        }
    }
    for i in 0..s.1.len() {
        let mut t = s.clone();
        let (to, _, m) = t.1.remove(i);
        t.0[to] = r.recv[to][s.0[to] as usize][m as usize];
        out.push((t, None));
    }
    out
}

/// Every state reachable from the initial one, with its smallest depth,
/// not expanding the states `stop` says are final.
pub fn reachable(seed: u64, n: usize, stop: impl Fn(&S) -> bool) -> HashMap<S, usize> {
    let r = rules(seed, n);
    let initial: S = (vec![0; n], Vec::new());
    let mut depth = HashMap::from([(initial.clone(), 0)]);
    let mut queue = VecDeque::from([initial]);
    while let Some(s) = queue.pop_front() {
        if stop(&s) {
            continue;
        }
        let d = depth[&s];
        for (t, _) in successors(&r, n, &s) {
            if !depth.contains_key(&t) {
                depth.insert(t.clone(), d + 1);
                queue.push_back(t);
            }
        }
    }
    depth
}
