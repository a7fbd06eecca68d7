//! One breadth-first search over several processes (`cargo cmc check
//! --processes N`), possibly on several machines: owner-computes hash
//! partitioning of the visited set, as parallel Murφ, PReach and DiVinE
//! do it.
//!
//! Every state belongs to one process, chosen by its fingerprint
//! ([`owner`]). A process expands the states it owns; a successor it owns
//! goes into its own visited set as in a one-process search, and one it
//! does not own goes, with its pages, to its owner, which deduplicates it,
//! checks it and expands it in the next level. A small table of the
//! fingerprints each process already sent (`partition::Partition`'s cache) keeps
//! it from sending the same state twice.
//!
//! Levels stay whole, so the counts are exactly those of one process and
//! traces stay shortest: a process expands its states of the current
//! level in rounds of [`ROUND`] states; after each round every process
//! exchanges what it produced and all agree, by a sum over all of them,
//! whether any still holds a state of the level and whether any must
//! stop. Nothing of the transport, the barriers or the termination is
//! cmc's: those are collective operations of the engine that carries the
//! search (`partition::Collective`; MPI, in `cluster_mpi`).
//!
//! A state travels as the pages in which it differs from the state sent
//! before it to the same process in the same round (`Memory::export`),
//! so every process must run the same program at the same addresses (the
//! harness turns address-space randomization off, and the processes
//! compare their layouts before they start). With it travel its
//! fingerprint, its depth, the step that reached it and the node of the
//! sender's search tree it was reached from. The receiver records the
//! state as a child of its tree's root and remembers the link
//! (`Engine::link_node`); the path to a state is rebuilt, when a
//! violation needs it, by asking the processes along the links, in rounds
//! of exchanges, after the search ([`Search::resolve_traces`]).

use crate::engine::erased::Erased as P;
use crate::engine::isolate;
use crate::engine::trace::{Reached, Violation, ViolationRecord};
use crate::engine::{bare_trace, Event, Names, RawStep, ENV, LINK};
use crate::memory::{Fingerprint, StateId};
use crate::sys::scope::system_scope;

use super::frontier::Item;
#[cfg(test)]
use super::partition::owner;
use super::partition::Pending;
use super::searcher::{Search, Seen};

/// States a process expands between two exchanges.
pub(super) const ROUND: usize = 1024;

/// Every how many rounds the processes compare the time they spent
/// expanding (for the progress line's slowest process).
const SLOWEST_EVERY: u64 = 4;

fn put(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get(data: &[u8], at: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let byte = data[*at];
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return n;
        }
        shift += 7;
        assert!(shift < 64, "a malformed number from another process");
    }
}

fn put_step(out: &mut Vec<u8>, s: &RawStep) {
    // The environment (`ENV`) and links (`LINK`) as 0 and 1, processes
    // from 2.
    let actor = match s.event.actor {
        ENV => 0,
        LINK => 1,
        a => a as u64 + 2,
    };
    put(out, actor);
    put(out, s.event.handler as u64);
    put(out, u64::from(s.seed));
    put(out, s.choices.len() as u64);
    for &c in &s.choices {
        put(out, c as u64);
    }
}

fn get_step(data: &[u8], at: &mut usize) -> RawStep {
    let actor = match get(data, at) {
        0 => ENV,
        1 => LINK,
        a => (a - 2) as usize,
    };
    let handler = get(data, at) as usize;
    let seed = get(data, at) as u32;
    let n = get(data, at) as usize;
    let choices = (0..n).map(|_| get(data, at) as usize).collect();
    RawStep {
        event: Event { actor, handler },
        choices,
        seed,
    }
}

fn put_steps(out: &mut Vec<u8>, steps: &[RawStep]) {
    put(out, steps.len() as u64);
    for s in steps {
        put_step(out, s);
    }
}

fn get_steps(data: &[u8], at: &mut usize) -> Vec<RawStep> {
    let n = get(data, at) as usize;
    (0..n).map(|_| get_step(data, at)).collect()
}

/// A path's link to another process (its first step, when it is a
/// [`LINK`]), and the steps after it.
fn split_link(mut steps: Vec<RawStep>) -> (Option<(u32, u32)>, Vec<RawStep>) {
    match steps.first() {
        Some(s) if s.event.actor == LINK => {
            let link = (s.event.handler as u32, s.choices[0] as u32);
            steps.remove(0);
            (Some(link), steps)
        }
        _ => (None, steps),
    }
}

impl Search<'_, '_, P> {
    /// The states the search found, across processes as far as this one
    /// knows (at the last exchange).
    pub(super) fn cluster_unique(&self) -> u64 {
        self.stats.unique + self.cluster.as_ref().map_or(0, |c| c.others_unique)
    }

    /// Whether `fp` is this process's to check and expand (always, but in
    /// a search across processes).
    pub(super) fn owns(&self, fp: Fingerprint) -> bool {
        match &self.visited {
            Seen::Cluster(p) => p.owns(fp),
            _ => true,
        }
    }

    /// The successor `succ` of `item` by `step`, owned by another process
    /// and not sent to it before: written to its owner's outbox (this
    /// search keeps the reference it held until the round ends).
    pub(super) fn send_away(
        &mut self,
        item: &Item,
        step: &RawStep,
        succ: StateId,
        fp: Fingerprint,
    ) {
        let part = self.cluster.as_mut().expect("a search across processes");
        let to = part.target(fp);
        assert_ne!(
            to / part.per,
            part.process(),
            "a state this process owns is not sent away"
        );
        let out = &mut part.out[to];
        let before = out.bytes.len();
        out.bytes.extend_from_slice(&fp.0.to_le_bytes());
        put(&mut out.bytes, u64::from(item.node));
        put(&mut out.bytes, item.depth as u64 + 1);
        put_step(&mut out.bytes, step);
        self.engine.export(succ, out.prev, &mut out.bytes);
        if let Some(p) = out.prev.replace(succ) {
            self.engine.release(p);
        }
        part.sent_states += 1;
        part.raw_bytes += (out.bytes.len() - before) as u64;
    }

    /// One breadth-first search across processes, from the initial state
    /// (in the frontier of the process that owns it): level by level, each
    /// in rounds that end with an exchange of states and an agreement on
    /// whether the level, or the search, is over.
    pub(super) fn run_cluster_levels(&mut self) {
        let mut level = 0usize;
        loop {
            loop {
                let mut expanded = 0;
                let mut stop = false;
                let busy = std::time::Instant::now();
                while expanded < ROUND
                    && self.frontier.front_depth(&mut *self.engine) == Some(level)
                {
                    if self.stop_requested() {
                        stop = true;
                        break;
                    }
                    let item = self.frontier.pop(&mut *self.engine).expect("a front item");
                    self.expand(&item);
                    self.engine.release(item.state);
                    self.maybe_report_progress();
                    expanded += 1;
                }
                stop |= self.stop_requested();
                let more = self.frontier.front_depth(&mut *self.engine) == Some(level);
                let part = self.cluster.as_mut().expect("a search across processes");
                part.busy_us += busy.elapsed().as_micros() as u64;
                self.exchange();
                let open = self.open_paths();
                let part = self.cluster.as_mut().expect("a search across processes");
                let totals = part.net.sum(&[
                    u64::from(more),
                    u64::from(stop),
                    self.stats.unique,
                    part.sent_bytes,
                    self.stats.transitions,
                    self.frontier.len() as u64,
                    open,
                ]);
                part.others_unique = totals[2] - self.stats.unique;
                part.all_sent_bytes = totals[3];
                part.all_transitions = totals[4];
                part.all_frontier = totals[5];
                part.rounds += 1;
                if part.rounds % SLOWEST_EVERY == 0 {
                    part.compare_busy();
                }
                if totals[6] > 0 && totals[1] == 0 {
                    // Paths of violations found are completed while the
                    // search goes on (a process that dies later leaves
                    // them whole: `Search::note_whole`).
                    self.resolve_round();
                    self.note_whole();
                }
                if totals[1] > 0 {
                    if !stop {
                        // Another process found what ends the search, or
                        // reached a bound: its result says which.
                        self.halted = true;
                    }
                    return;
                }
                if totals[0] == 0 {
                    break;
                }
            }
            let part = self.cluster.as_ref().expect("a search across processes");
            let next = part.net.sum(&[self.frontier.len() as u64])[0];
            if next == 0 {
                return;
            }
            if part.per > 1 {
                self.even_out();
                if self.fatal.is_some() {
                    // Every member goes on to the end of the round, where
                    // this one's stop ends the search.
                    self.stopping = true;
                }
            }
            level += 1;
        }
    }

    /// Between levels, with several workers in each process: a worker
    /// holding more of the next level than its share hands the excess to
    /// workers of its process that hold less (see [`moves`]). A state it
    /// keeps claimed and checked travels as memory, with the step that
    /// reached it and where its path continues (`Engine::origin`); the
    /// receiver records it as it records a state another process sent.
    /// Every member takes part (a collective), also when it has nothing
    /// to move.
    fn even_out(&mut self) {
        let part = self.cluster.as_ref().expect("a search across processes");
        let (per, size, me) = (part.per, part.size, part.rank);
        let base = me / per * per;
        let counts = part
            .net
            .all_gather(&(self.frontier.len() as u64).to_le_bytes());
        let here: Vec<u64> = counts[base..base + per]
            .iter()
            .map(|b| u64::from_le_bytes(b[..8].try_into().expect("8 bytes from each worker")))
            .collect();
        let mut out = vec![Vec::new(); size];
        for (from, to, n) in moves(&here) {
            if base + from != me {
                continue;
            }
            let bytes = &mut out[base + to];
            let mut prev: Option<StateId> = None;
            for _ in 0..n {
                let Some(item) = self.frontier.take_back(&mut *self.engine) else {
                    break;
                };
                let e = &mut *self.engine;
                e.load(item.state);
                let Ok(fp) = e.state_fingerprint(item.state) else {
                    // It was fingerprinted when it was claimed; kept here
                    // if it cannot be again (the search reported why when
                    // it first could not).
                    self.frontier.push(item, 0, &mut *self.engine);
                    break;
                };
                let (rank, node, step) = e.origin(item.node, me as u32);
                bytes.extend_from_slice(&fp.0.to_le_bytes());
                put(bytes, item.depth as u64);
                put(bytes, u64::from(rank));
                put(bytes, u64::from(node));
                put_step(bytes, &step);
                e.export(item.state, prev, bytes);
                if let Some(p) = prev.replace(item.state) {
                    e.release(p);
                }
            }
            if let Some(p) = prev {
                self.engine.release(p);
            }
        }
        let part = self.cluster.as_ref().expect("a search across processes");
        let got = part.net.exchange(&out);
        for bytes in &got {
            let mut at = 0;
            let mut prev: Option<StateId> = None;
            while at < bytes.len() {
                let fp = Fingerprint(u128::from_le_bytes(
                    bytes[at..at + 16].try_into().expect("16 bytes"),
                ));
                at += 16;
                let depth = get(bytes, &mut at) as usize;
                let rank = get(bytes, &mut at) as u32;
                let node = get(bytes, &mut at) as u32;
                let step = get_step(bytes, &mut at);
                let e = &mut *self.engine;
                let state = e.import(prev, bytes, &mut at);
                if let Some(p) = prev.replace(state) {
                    e.release(p);
                }
                e.load(state);
                if e.state_fingerprint(state).ok() != Some(fp) {
                    self.fatal = Some(crate::engine::CheckError::Cluster(
                        "a state another worker of this process handed over has another \
                         fingerprint here: the state's identity depends on more than its \
                         memory"
                            .to_string(),
                    ));
                    break;
                }
                let root = self.root;
                let Some(mine) = e.record_node(root, step.event, &step.choices, step.seed) else {
                    // The tree is full: the search stops, bounded.
                    break;
                };
                e.link_node(mine, rank, node);
                e.retain(state);
                self.frontier.push(
                    Item {
                        node: mine,
                        state,
                        depth,
                    },
                    0,
                    &mut *self.engine,
                );
            }
            if let Some(p) = prev {
                self.engine.release(p);
            }
        }
    }

    /// Sends every outbox to its process and takes in what the others
    /// sent: each state this process has not seen is checked and put on
    /// the frontier, as a successor of its own would be.
    ///
    /// What goes to another process is compressed (LZ4, see
    /// [`compressed`]); what goes to a worker of this one is not.
    fn exchange(&mut self) {
        let part = self.cluster.as_mut().expect("a search across processes");
        let (per, here) = (part.per, part.process());
        let mut wire = 0;
        let out: Vec<Vec<u8>> = part
            .out
            .iter_mut()
            .enumerate()
            .map(|(to, o)| {
                let raw = std::mem::take(&mut o.bytes);
                if to / per == here || raw.is_empty() {
                    return raw;
                }
                let sent = compressed(&raw, part.compress);
                wire += sent.len() as u64;
                sent
            })
            .collect();
        part.sent_bytes += wire;
        let incoming = part.net.exchange(&out);
        for (from, bytes) in incoming.into_iter().enumerate() {
            let bytes = if from / per == here || bytes.is_empty() {
                bytes
            } else {
                match decompressed(&bytes) {
                    Some(raw) => raw,
                    None => {
                        self.fatal = Some(crate::engine::CheckError::Cluster(format!(
                            "process {} sent states that do not decompress",
                            from / per
                        )));
                        // Every member still takes part in what follows:
                        // the round's sum ends the search.
                        self.stopping = true;
                        continue;
                    }
                }
            };
            self.import_from(from, &bytes);
        }
    }

    /// Takes in the states process `from` sent (see [`Search::send_away`]).
    fn import_from(&mut self, from: usize, bytes: &[u8]) {
        let mut at = 0;
        let part = self.cluster.as_mut().expect("a search across processes");
        let mut prev = part.last_in[from].take();
        while at < bytes.len() {
            let fp = Fingerprint(u128::from_le_bytes(
                bytes[at..at + 16].try_into().expect("16 bytes"),
            ));
            at += 16;
            let parent = get(bytes, &mut at) as u32;
            let depth = get(bytes, &mut at) as usize;
            let step = get_step(bytes, &mut at);
            let state = self.engine.import(prev, bytes, &mut at);
            if let Some(p) = prev.replace(state) {
                self.engine.release(p);
            }
            let part = self.cluster.as_mut().expect("a search across processes");
            part.received += 1;
            let sender = from / part.per;
            assert!(
                self.owns(fp),
                "process {sender} sent a state this process does not own"
            );
            if !self.visited.insert(fp) {
                continue;
            }
            self.engine.retain(state);
            self.claim(from, parent, depth, step, state, fp);
            if self.fatal.is_some() {
                break;
            }
        }
        let part = self.cluster.as_mut().expect("a search across processes");
        part.last_in[from] = prev;
    }

    /// Drops the states kept to write and read the next ones against.
    pub(super) fn release_links(&mut self) {
        let part = self.cluster.as_mut().expect("a search across processes");
        let kept: Vec<StateId> = part
            .out
            .iter_mut()
            .filter_map(|o| o.prev.take())
            .chain(part.last_in.iter_mut().filter_map(Option::take))
            .collect();
        for state in kept {
            self.engine.release(state);
        }
    }

    /// A state another process sent, new to the search: checked against
    /// the fingerprint the sender computed (the processes must agree on
    /// states), then recorded with its link and handled as a new successor
    /// (see `Search::accept`).
    fn claim(
        &mut self,
        from: usize,
        parent: u32,
        depth: usize,
        step: RawStep,
        state: StateId,
        fp: Fingerprint,
    ) {
        let e = &mut *self.engine;
        e.load(state);
        let part = self.cluster.as_mut().expect("a search across processes");
        part.checked_imports += 1;
        {
            // Every state received is fingerprinted here again: a check
            // that the processes agree on it, and what the transition
            // cache keys its transitions by (the tag of its components).
            let here = e.state_fingerprint(state);
            if here.as_ref().ok() != Some(&fp) {
                e.release(state);
                self.fatal = Some(crate::engine::CheckError::Cluster(format!(
                    "a state process {} sent has another fingerprint in process {}: \
                     the processes do not run the same program at the same addresses, or \
                     the state's identity depends on more than its memory",
                    from / part.per,
                    part.process()
                )));
                return;
            }
            e.load(state);
        }
        if e.pruned() {
            self.stats.pruned += 1;
            e.release(state);
            return;
        }
        let root = self.root;
        let Some(node) = e.record_node(root, step.event, &step.choices, step.seed) else {
            e.release(state);
            return;
        };
        e.link_node(node, from as u32, parent);
        self.accept(node, depth, step.event, state, fp);
    }

    /// A violation (or, with `witness`, a `sometimes` property's witness)
    /// at the end of `steps`, kept until the search ends and its path is
    /// whole.
    pub(super) fn defer(&mut self, steps: Vec<RawStep>, record: ViolationRecord, witness: bool) {
        let (link, steps) = split_link(steps);
        if !witness && link.is_some() {
            // Noted at once without its trace; with it, once its path is
            // whole (`Search::note_whole`).
            let rank = self.cluster.as_ref().map_or(0, |c| c.process());
            note_found(rank, &record, None);
        }
        self.cluster
            .as_mut()
            .expect("a search across processes")
            .pending
            .push(Pending {
                link,
                steps,
                record,
                witness,
                noted: false,
            });
        self.note_whole();
    }

    /// Notes each violation whose path is whole, with a trace of its steps
    /// (not described: states are not built here), so that a run that
    /// fails before the traces are built (a process dies) still gives it.
    fn note_whole(&mut self) {
        let model = self.engine.model();
        let part = self.cluster.as_mut().expect("a search across processes");
        let rank = part.process();
        let mut names = None;
        for p in &mut part.pending {
            if p.witness || p.noted || p.link.is_some() {
                continue;
            }
            let names = names.get_or_insert_with(|| Names::of(model, model.fingerprint));
            let trace = bare_trace(names, &p.steps, p.record.clone());
            note_found(rank, &p.record, Some(&trace));
            p.noted = true;
        }
    }

    /// One round of completing the paths of the violations and witnesses
    /// found (a collective: every process calls it when any has a path
    /// that is not whole): each asks the process its path continues in for
    /// the path to the node it names, and answers what it was asked.
    fn resolve_round(&mut self) {
        let part = self.cluster.as_ref().expect("a search across processes");
        let mut asks = vec![Vec::new(); part.size];
        for (i, p) in part.pending.iter().enumerate() {
            if let Some((rank, node)) = p.link {
                put(&mut asks[rank as usize], i as u64);
                put(&mut asks[rank as usize], u64::from(node));
            }
        }
        let asked = part.net.exchange(&asks);
        let mut answers = vec![Vec::new(); part.size];
        for (from, bytes) in asked.iter().enumerate() {
            let mut at = 0;
            while at < bytes.len() {
                let i = get(bytes, &mut at);
                let node = get(bytes, &mut at) as u32;
                put(&mut answers[from], i);
                put_steps(&mut answers[from], &self.engine.path(node));
            }
        }
        let part = self.cluster.as_mut().expect("a search across processes");
        let answered = part.net.exchange(&answers);
        for bytes in &answered {
            let mut at = 0;
            while at < bytes.len() {
                let i = get(bytes, &mut at) as usize;
                let (link, mut steps) = split_link(get_steps(bytes, &mut at));
                let p = &mut part.pending[i];
                steps.append(&mut p.steps);
                p.steps = steps;
                p.link = link;
            }
        }
    }

    /// The violations and witnesses found whose paths are not whole yet.
    fn open_paths(&self) -> u64 {
        let part = self.cluster.as_ref().expect("a search across processes");
        part.pending.iter().filter(|p| p.link.is_some()).count() as u64
    }

    /// After the search, in every process: the paths of the violations and
    /// witnesses found are completed by asking, in rounds, the process each
    /// continues in for the path to the node it names; then their traces
    /// are built (by replay, from the initial state, as in a one-process
    /// search).
    pub(super) fn resolve_traces(&mut self) {
        loop {
            let part = self.cluster.as_ref().expect("a search across processes");
            if part.net.sum(&[self.open_paths()])[0] == 0 {
                break;
            }
            self.resolve_round();
        }
        let pending = std::mem::take(
            &mut self
                .cluster
                .as_mut()
                .expect("a search across processes")
                .pending,
        );
        for p in pending {
            let mut trace = self.engine.build_trace(&p.steps, p.record.clone());
            if p.witness {
                trace.violation = None;
                trace.also_violated.clear();
                self.reached.push(Reached {
                    property: p.record.property,
                    trace,
                });
                continue;
            }
            let violation = Violation {
                record: p.record,
                trace,
            };
            if isolate::isolated() {
                let _sys = system_scope();
                isolate::stream(
                    &serde_json::to_string(&violation).expect("a violation serialises"),
                );
            }
            self.violations.push(violation);
        }
    }

    /// Whether the search found a violation (in a search across processes,
    /// also one whose trace is not built yet).
    pub(super) fn found_violation(&self) -> bool {
        !self.violations.is_empty()
            || self
                .cluster
                .as_ref()
                .is_some_and(|c| c.pending.iter().any(|p| !p.witness))
    }
}

/// The message `raw` as it goes to another process: a byte that says
/// how, then LZ4 blocks (`compress`; 1) or the bytes themselves (0), which
/// a message that does not shrink keeps.
fn compressed(raw: &[u8], compress: bool) -> Vec<u8> {
    if compress {
        let mut out = vec![1];
        out.extend_from_slice(&lz4_flex::compress_prepend_size(raw));
        if out.len() < raw.len() + 1 {
            return out;
        }
    }
    let mut out = Vec::with_capacity(raw.len() + 1);
    out.push(0);
    out.extend_from_slice(raw);
    out
}

/// The message [`compressed`] made; `None` when it is not one.
fn decompressed(sent: &[u8]) -> Option<Vec<u8>> {
    match sent.split_first()? {
        (0, raw) => Some(raw.to_vec()),
        (1, lz4) => {
            // The size it says it has, which the decoder does not hold it
            // to.
            let size = u32::from_le_bytes(lz4.get(..4)?.try_into().ok()?) as usize;
            lz4_flex::decompress_size_prepended(lz4)
                .ok()
                .filter(|raw| raw.len() == size)
        }
        _ => None,
    }
}

/// How the workers of one process even out the next level (see
/// `Search::even_out`), from the states each holds: moves of `n` states
/// from one worker to another, `(from, to, n)`. A worker gives only when it
/// holds more than an eighth over its share (and 8 states), down to its
/// share, to the workers under theirs, in order; every worker computes the
/// same moves.
fn moves(counts: &[u64]) -> Vec<(usize, usize, u64)> {
    let n = counts.len() as u64;
    let total: u64 = counts.iter().sum();
    let share = |w: usize| total / n + u64::from((w as u64) < total % n);
    let mut wanting: Vec<(usize, u64)> = counts
        .iter()
        .enumerate()
        .filter(|&(w, &c)| c < share(w))
        .map(|(w, &c)| (w, share(w) - c))
        .collect();
    let mut out = Vec::new();
    let mut next = 0;
    for (w, &c) in counts.iter().enumerate() {
        let target = share(w);
        if c <= target + target / 8 + 8 {
            continue;
        }
        let mut excess = c - target;
        while excess > 0 && next < wanting.len() {
            let (to, want) = &mut wanting[next];
            let k = excess.min(*want);
            out.push((w, *to, k));
            excess -= k;
            *want -= k;
            if *want == 0 {
                next += 1;
            }
        }
    }
    out
}

/// Notes a violation this process found in the file `cargo cmc` reads
/// if the run fails before its trace is built (`CMC_CLUSTER_FOUND`, a
/// directory; one file per process, a JSON line per violation): a process
/// that dies takes its search's violations with it, and their traces
/// need the other processes. A violation is noted when it is found, and
/// again with `trace` (its steps, not described) once its path is whole.
fn note_found(rank: usize, record: &ViolationRecord, trace: Option<&crate::engine::trace::Trace>) {
    use std::io::Write;
    let Some(dir) = std::env::var_os("CMC_CLUSTER_FOUND") else {
        return;
    };
    let _sys = system_scope();
    let path = std::path::Path::new(&dir).join(format!("found-{rank}.jsonl"));
    let line = serde_json::json!({ "process": rank, "violation": record, "trace": trace });
    // A record that cannot be written is only a loss if the run fails.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = writeln!(f, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::super::partition::Partition;
    use super::*;
    use crate::memory::FingerprintWidth;

    #[test]
    fn owners_spread_evenly_and_depend_on_every_bit() {
        for size in [1usize, 2, 3, 4, 7] {
            let mut counts = vec![0u64; size];
            for i in 0..70_000u128 {
                let fp = Fingerprint(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835));
                counts[owner(fp, size)] += 1;
            }
            let expect = 70_000 / size as u64;
            for &c in &counts {
                assert!(c.abs_diff(expect) < expect / 20 + 10, "{size}: {counts:?}");
            }
        }
        // 64-bit fingerprints (the high half zero) spread too.
        let mut counts = [0u64; 4];
        for i in 0..40_000u128 {
            counts[owner(Fingerprint(i * 7919), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 9_000), "{counts:?}");
    }

    #[test]
    fn messages_round_trip_compressed_or_not() {
        let mut state_like = Vec::new();
        for i in 0..4000u32 {
            state_like.extend_from_slice(&(i % 7).to_le_bytes());
        }
        let noise: Vec<u8> = (0..3000u64)
            .map(|i| (crate::sys::hash::fmix64(i) >> 13) as u8)
            .collect();
        for raw in [&state_like[..], &noise[..], &[5][..]] {
            for compress in [true, false] {
                let sent = compressed(raw, compress);
                assert_eq!(decompressed(&sent).as_deref(), Some(raw));
                assert!(sent.len() <= raw.len() + 1, "never more than a byte larger");
            }
        }
        assert!(compressed(&state_like, true).len() < state_like.len() / 10);
        assert_eq!(decompressed(&[]), None);
        assert_eq!(decompressed(&[7, 1, 2]), None);
        assert_eq!(decompressed(&[1, 200, 0, 0, 0, 1]), None, "a corrupt block");
    }

    #[test]
    fn moves_even_out_a_level_among_workers() {
        // Against a simple reference: after the moves, no worker holds
        // more than an eighth (and 8) over its share, none holds less
        // than it held or than its share allows, and the total stays.
        let cases: &[&[u64]] = &[
            &[1000, 0],
            &[0, 1000],
            &[10, 10],
            &[500, 480],
            &[7, 0, 0],
            &[3000, 0, 0, 0],
            &[100, 2000, 50, 60],
            &[0, 0, 0, 0],
        ];
        for &counts in cases {
            let mut after = counts.to_vec();
            for (from, to, n) in moves(counts) {
                assert_ne!(from, to);
                assert!(counts[from] > counts[to], "{counts:?}: from more to fewer");
                after[from] -= n;
                after[to] += n;
            }
            let total: u64 = counts.iter().sum();
            assert_eq!(after.iter().sum::<u64>(), total, "{counts:?}");
            let n = counts.len() as u64;
            for (w, &c) in after.iter().enumerate() {
                let share = total / n + u64::from((w as u64) < total % n);
                assert!(c <= share + share / 8 + 8, "{counts:?} -> {after:?}");
            }
        }
        assert!(moves(&[500, 480]).is_empty(), "a small imbalance stays");
        assert_eq!(moves(&[1000, 0]), vec![(0, 1, 500)]);
    }

    #[test]
    fn steps_and_links_round_trip() {
        let steps = vec![
            RawStep {
                event: Event {
                    actor: LINK,
                    handler: 3,
                },
                choices: vec![77],
                seed: 0,
            },
            RawStep {
                event: Event {
                    actor: ENV,
                    handler: 1,
                },
                choices: vec![],
                seed: 2,
            },
            RawStep {
                event: Event {
                    actor: 5,
                    handler: 0,
                },
                choices: vec![0, 300, usize::MAX >> 1],
                seed: 0,
            },
        ];
        let mut bytes = Vec::new();
        put_steps(&mut bytes, &steps);
        let mut at = 0;
        let back = get_steps(&bytes, &mut at);
        assert_eq!(at, bytes.len());
        assert_eq!(back, steps);
        let (link, rest) = split_link(back);
        assert_eq!(link, Some((3, 77)));
        assert_eq!(rest, steps[1..]);
        assert_eq!(split_link(rest.clone()), (None, rest));
    }

    #[test]
    fn a_partition_sends_each_state_once_and_keeps_what_it_owns() {
        let mut p = Partition::new(FingerprintWidth::Bits128, 1, 3);
        let mut mine = 0;
        for i in 1..5_000u128 {
            let fp = Fingerprint(i.wrapping_mul(0x2545_f491_4f6c_dd1d_9e37_79b9_7f4a_7c15));
            assert!(p.insert(fp), "{i}: new");
            assert!(!p.insert(fp), "{i}: seen");
            assert!(p.contains(fp));
            mine += usize::from(p.owns(fp));
        }
        assert_eq!(p.owned(), mine);
        assert!(mine > 1_400 && mine < 1_950, "{mine}");
    }
}
