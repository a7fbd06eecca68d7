//! The coordination block parallel workers share (see `search::parallel`):
//! the flags by which they stop together and meet at barriers, their
//! statistics, the merged sketch of a swarm's walks, and the queue of
//! paths through which they hand each other work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::engine::isolate;
use crate::engine::trace::Stats;
use crate::engine::{RawStep, ENV};
use crate::identity::visited::SharedVisited;
use crate::memory::{Fingerprint, FingerprintWidth};
use crate::model::MAX_WORKERS;
use crate::sys::shm::{lock, Region};

// Words of the coordination block.
pub(super) const STOP: usize = 0;
pub(super) const QUEUE_LOCK: usize = 1;
pub(super) const IDLE: usize = 2;
pub(super) const FINISHED: usize = 3;
pub(super) const QUEUED: usize = 4;
pub(super) const QUEUE_TOP: usize = 5;
pub(super) const ARRIVED: usize = 6;
pub(super) const GENERATION: usize = 7;
pub(super) const WALKS: usize = 8;
/// Per-worker slots: unique, transitions, depth, frontier, level count.
pub(super) const SLOTS: usize = 16;
pub(super) const SLOT_WORDS: usize = 8;
pub(super) const UNIQUE: usize = 0;
pub(super) const TRANSITIONS: usize = 1;
pub(super) const DEPTH: usize = 2;
pub(super) const FRONTIER: usize = 3;
pub(super) const COUNT: usize = 4;
/// The queue of paths: a stack of records, each followed by its length.
pub(super) const SKETCH_AT: usize = SLOTS + MAX_WORKERS * SLOT_WORDS;
/// The workers' walk sketches merged (a swarm of random walks): one word
/// per register.
pub(super) const SKETCH_WORDS: usize = 1 << super::sketch::Sketch::BITS;
pub(super) const QUEUE_AT: usize = SKETCH_AT + SKETCH_WORDS;
pub(super) const QUEUE_WORDS: usize = 1 << 21;
pub(super) const WORDS: usize = QUEUE_AT + QUEUE_WORDS;

/// What the workers of one parallel search share (see the module
/// documentation).
pub(crate) struct Coord {
    words: Region,
    pub(crate) visited: SharedVisited,
    pub(crate) workers: usize,
}

impl Coord {
    pub(crate) fn new(workers: usize, width: FingerprintWidth) -> std::io::Result<Coord> {
        assert!(
            (1..=MAX_WORKERS).contains(&workers),
            "between 1 and {MAX_WORKERS} workers"
        );
        Ok(Coord {
            words: Region::new(WORDS * 8, WORDS * 8)?,
            // Address space only: pages cost memory when written.
            visited: SharedVisited::new(width, 1 << 38)?,
            workers,
        })
    }

    pub(super) fn word(&self, i: usize) -> &AtomicU64 {
        self.words.word(i)
    }

    pub(super) fn slot(&self, worker: usize, field: usize) -> &AtomicU64 {
        self.word(SLOTS + worker * SLOT_WORDS + field)
    }

    /// Tells every worker to stop at its next transition.
    pub(crate) fn halt(&self) {
        self.word(STOP).store(1, Ordering::Release);
    }

    pub(crate) fn halted(&self) -> bool {
        self.word(STOP).load(Ordering::Relaxed) != 0
    }

    /// Publishes a worker's figures (for the others' bounds and progress).
    pub(crate) fn publish(&self, worker: usize, stats: &Stats, frontier: usize) {
        self.slot(worker, UNIQUE)
            .store(stats.unique, Ordering::Relaxed);
        self.slot(worker, TRANSITIONS)
            .store(stats.transitions, Ordering::Relaxed);
        self.slot(worker, DEPTH)
            .store(stats.max_depth as u64, Ordering::Relaxed);
        self.slot(worker, FRONTIER)
            .store(frontier as u64, Ordering::Relaxed);
    }

    /// The workers' figures added up: unique states, transitions, the
    /// deepest state, the frontier.
    pub(crate) fn totals(&self) -> (u64, u64, u64, u64) {
        (0..self.workers).fold((0, 0, 0, 0), |(u, t, d, f), w| {
            let v = |field| self.slot(w, field).load(Ordering::Relaxed);
            (
                u + v(UNIQUE),
                t + v(TRANSITIONS),
                d.max(v(DEPTH)),
                f + v(FRONTIER),
            )
        })
    }

    /// Counts a walk a worker starts; the walks started before it.
    pub(crate) fn start_walk(&self) -> u64 {
        self.word(WALKS).fetch_add(1, Ordering::Relaxed)
    }

    /// Merges a worker's sketch of the states its walks saw.
    pub(super) fn add_sketch(&self, sketch: &super::sketch::Sketch) {
        for (i, &r) in sketch.registers.iter().enumerate() {
            self.word(SKETCH_AT + i)
                .fetch_max(u64::from(r), Ordering::Relaxed);
        }
    }

    /// The distinct states all workers' walks saw, estimated.
    pub(super) fn sketch_estimate(&self) -> u64 {
        let mut sketch = super::sketch::Sketch::new();
        for (i, r) in sketch.registers.iter_mut().enumerate() {
            *r = self.word(SKETCH_AT + i).load(Ordering::Relaxed) as u8;
        }
        sketch.estimate()
    }

    /// Whether an idle worker waits for work that nobody has offered yet.
    pub(super) fn wanted(&self) -> bool {
        self.word(IDLE).load(Ordering::Relaxed) > self.word(QUEUED).load(Ordering::Relaxed)
    }

    /// Offers a path; false when the queue has no room for it.
    pub(super) fn offer(&self, record: &[u64]) -> bool {
        let _guard = lock(self.word(QUEUE_LOCK));
        let top = self.word(QUEUE_TOP).load(Ordering::Relaxed) as usize;
        if top + record.len() + 1 > QUEUE_WORDS {
            return false;
        }
        for (i, &w) in record.iter().enumerate() {
            self.word(QUEUE_AT + top + i).store(w, Ordering::Relaxed);
        }
        self.word(QUEUE_AT + top + record.len())
            .store(record.len() as u64, Ordering::Relaxed);
        self.word(QUEUE_TOP)
            .store((top + record.len() + 1) as u64, Ordering::Relaxed);
        self.word(QUEUED).fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Takes the path offered last, with the queue's lock held.
    pub(super) fn take_locked(&self) -> Option<Vec<u64>> {
        let top = self.word(QUEUE_TOP).load(Ordering::Relaxed) as usize;
        if top == 0 {
            return None;
        }
        let len = self.word(QUEUE_AT + top - 1).load(Ordering::Relaxed) as usize;
        assert!(len < top, "a corrupt record in the work queue");
        let from = top - 1 - len;
        let record = (from..top - 1)
            .map(|i| self.word(QUEUE_AT + i).load(Ordering::Relaxed))
            .collect();
        self.word(QUEUE_TOP).store(from as u64, Ordering::Relaxed);
        self.word(QUEUED).fetch_sub(1, Ordering::Relaxed);
        Some(record)
    }

    pub(super) fn take(&self) -> Option<Vec<u64>> {
        let _guard = lock(self.word(QUEUE_LOCK));
        self.take_locked()
    }

    /// A depth-first worker without work: a path to adopt, `Wait` while
    /// others still work, `Done` when every worker is idle and nothing is
    /// offered (the search is complete). `idle` says whether this worker
    /// already counts as idle.
    pub(super) fn next_work(&self, idle: &mut bool) -> Work {
        let _guard = lock(self.word(QUEUE_LOCK));
        if let Some(record) = self.take_locked() {
            if *idle {
                self.word(IDLE).fetch_sub(1, Ordering::Relaxed);
                *idle = false;
            }
            return Work::Path(record);
        }
        if self.word(FINISHED).load(Ordering::Relaxed) != 0 {
            return Work::Done;
        }
        if !*idle {
            *idle = true;
            let now = self.word(IDLE).fetch_add(1, Ordering::Relaxed) + 1;
            if now == self.workers as u64 {
                self.word(FINISHED).store(1, Ordering::Relaxed);
                return Work::Done;
            }
        }
        Work::Wait
    }

    /// Waits until every worker has arrived; false when the search was
    /// stopped meanwhile.
    pub(super) fn barrier(&self) -> bool {
        let generation = self.word(GENERATION).load(Ordering::Acquire);
        if self.word(ARRIVED).fetch_add(1, Ordering::AcqRel) + 1 == self.workers as u64 {
            self.word(ARRIVED).store(0, Ordering::Relaxed);
            self.word(GENERATION).fetch_add(1, Ordering::Release);
            return true;
        }
        // Waiting is the checker's own time: the parent's watchdog must not
        // take the last phase of user code, unchanged, for a hang.
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
        let mut waited = 0u32;
        loop {
            if self.word(GENERATION).load(Ordering::Acquire) != generation {
                return true;
            }
            if self.halted() || isolate::stop_signal().is_some() {
                return false;
            }
            pause(&mut waited);
        }
    }
}

/// Spins a little, then yields, then sleeps.
pub(super) fn pause(waited: &mut u32) {
    *waited += 1;
    if *waited < 64 {
        std::hint::spin_loop();
    } else if *waited < 256 {
        crate::sys::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(100));
    }
}

pub(super) enum Work {
    Path(Vec<u64>),
    Wait,
    Done,
}

/// A worker's place in a parallel search.
#[derive(Clone, Copy)]
pub(super) struct Par<'c> {
    pub(super) coord: &'c Coord,
    pub(super) worker: usize,
}

/// A path as it travels: the state's fingerprint, its depth, then each
/// step (process, handler, seed, number of choices, the choices).
pub(super) fn encode(fp: Fingerprint, depth: usize, steps: &[RawStep]) -> Vec<u64> {
    let mut r = vec![fp.0 as u64, (fp.0 >> 64) as u64, depth as u64];
    for s in steps {
        r.push(if s.event.actor == ENV {
            u64::MAX
        } else {
            s.event.actor as u64
        });
        r.push(s.event.handler as u64);
        r.push(u64::from(s.seed));
        r.push(s.choices.len() as u64);
        r.extend(s.choices.iter().map(|&c| c as u64));
    }
    r
}

pub(super) fn decode(r: &[u64]) -> (Fingerprint, usize, Vec<RawStep>) {
    assert!(
        r.len() >= 3,
        "a path record holds a fingerprint and a depth"
    );
    let fp = Fingerprint(u128::from(r[0]) | (u128::from(r[1]) << 64));
    let depth = r[2] as usize;
    let mut steps = Vec::new();
    let mut i = 3;
    while i < r.len() {
        let n = r[i + 3] as usize;
        steps.push(RawStep {
            event: crate::engine::Event {
                actor: if r[i] == u64::MAX { ENV } else { r[i] as usize },
                handler: r[i + 1] as usize,
            },
            seed: r[i + 2] as u32,
            choices: r[i + 4..i + 4 + n].iter().map(|&c| c as usize).collect(),
        });
        i += 4 + n;
    }
    assert_eq!(steps.len(), depth, "a path record's steps are its depth");
    (fp, depth, steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Event;

    #[test]
    fn paths_travel_intact() {
        let steps = vec![
            RawStep {
                event: Event {
                    actor: 2,
                    handler: 1,
                },
                choices: vec![3, 0, 7],
                seed: 0,
            },
            RawStep {
                event: Event {
                    actor: ENV,
                    handler: 0,
                },
                choices: vec![],
                seed: 5,
            },
        ];
        let fp = Fingerprint(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
        let (fp2, depth, back) = decode(&encode(fp, 2, &steps));
        assert_eq!((fp2, depth), (fp, 2));
        assert_eq!(back.len(), 2);
        for (a, b) in steps.iter().zip(&back) {
            assert_eq!((a.event, &a.choices, a.seed), (b.event, &b.choices, b.seed));
        }
    }

    /// The work queue hands out what was offered, last first, and the
    /// idle count ends the search only when every worker is idle and
    /// nothing is offered.
    #[test]
    fn queue_and_termination() {
        let c = Coord::new(2, FingerprintWidth::Bits64).unwrap();
        let (mut a, mut b) = (false, false);
        assert!(matches!(c.next_work(&mut a), Work::Wait));
        assert!(a && c.wanted());
        assert!(c.offer(&[1, 2, 3]));
        assert!(c.offer(&[4]));
        assert!(!c.wanted());
        assert!(matches!(c.next_work(&mut a), Work::Path(r) if r == vec![4]));
        assert!(!a);
        assert!(matches!(c.next_work(&mut b), Work::Path(r) if r == vec![1, 2, 3]));
        assert!(matches!(c.next_work(&mut a), Work::Wait));
        assert!(matches!(c.next_work(&mut b), Work::Done));
        assert!(matches!(c.next_work(&mut a), Work::Done));
        c.halt();
        assert!(!c.barrier(), "a stopped search does not wait at a barrier");
    }
}
