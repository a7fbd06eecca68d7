//! The workers of one process of a search across processes (`cargo cmc
//! check --processes N --jobs J`) as members of the search's collective.
//!
//! Each process forks its `J` workers (as `--jobs` does on one machine);
//! the first initialises the engine that carries the search between
//! processes (MPI) and speaks for the others. Every worker is then a
//! member of a collective of `N·J` ([`Relay`]): what it sends another
//! member goes through memory the process's workers share, mapped before
//! the fork, and the first worker moves what crosses processes in one
//! exchange of the engine's. So the search across processes
//! (`search::cluster`) runs unchanged in every worker, with this
//! collective instead of the engine's; only the owner of a state is a
//! process, whose workers share its part of the visited set.
//!
//! A collective operation is three steps: every worker writes what it
//! gives into an area of its own and meets the others at a barrier; the
//! first worker reads the areas, takes part in the engine's operation and
//! writes what each worker gets into the worker's other area; a second
//! barrier, and every worker reads its share. The areas are written again
//! only after the next operation's first barrier, which every worker
//! reaches after reading. A barrier fails only when a worker of the
//! process ended (the parent, which watches them, says so by
//! [`Relay::halt`]); a signal does not stop a collective, which every
//! member must finish for the others to go on.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::isolate;
use crate::sys::shm::Region;

use super::coord::pause;
use super::partition::Collective;

// Words of the control region.
const ARRIVED: usize = 0;
const GENERATION: usize = 1;
const HALT: usize = 2;
/// The process's rank and the number of processes, plus one (0: not
/// known yet), written by the first worker once the engine has started.
const RANK: usize = 3;
const SIZE: usize = 4;
/// Values of a sum, at most this many.
const SUM_VALUES: usize = 64;
const SUMS_AT: usize = 16;

/// Bytes of each worker's areas (two each), at most; the system may give
/// less (see `Region::new`).
const AREA: usize = 1 << 30;

/// What the workers of one process share to act as members of one
/// collective (see the module documentation); mapped before they are
/// forked.
pub(crate) struct Shared {
    control: Region,
    data: Region,
    workers: usize,
    area: usize,
}

impl Shared {
    pub(crate) fn new(workers: usize) -> std::io::Result<Shared> {
        assert!(workers >= 1, "a process has a worker");
        let control = Region::new((SUMS_AT + (workers + 1) * SUM_VALUES) * 8, 0)?;
        let data = Region::new(2 * workers * AREA, 2 * workers * (16 << 20))?;
        let area = data.len() / (2 * workers) / 8 * 8;
        Ok(Shared {
            control,
            data,
            workers,
            area,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        self.control.word(i)
    }

    /// Tells every worker that a worker of the process ended: no
    /// collective can complete any more.
    pub(crate) fn halt(&self) {
        self.word(HALT).store(1, Ordering::Release);
    }

    fn halted(&self) -> bool {
        self.word(HALT).load(Ordering::Acquire) != 0
    }

    /// Waits until every worker of the process has arrived; false when a
    /// worker ended meanwhile.
    fn barrier(&self) -> bool {
        let generation = self.word(GENERATION).load(Ordering::Acquire);
        if self.word(ARRIVED).fetch_add(1, Ordering::AcqRel) + 1 == self.workers as u64 {
            self.word(ARRIVED).store(0, Ordering::Relaxed);
            self.word(GENERATION).fetch_add(1, Ordering::Release);
            return true;
        }
        // Waiting is the checker's own time (see `Coord::barrier`).
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
        let mut waited = 0u32;
        loop {
            if self.word(GENERATION).load(Ordering::Acquire) != generation {
                return true;
            }
            if self.halted() {
                return false;
            }
            pause(&mut waited);
        }
    }

    /// Writes `messages` into area `area`: their number, then each one's
    /// length and bytes.
    fn put(&self, area: usize, messages: &[&[u8]]) {
        let need = 8 + messages.iter().map(|m| 8 + m.len()).sum::<usize>();
        assert!(
            need <= self.area,
            "what one worker sends in one round ({need} bytes) exceeds the room the workers of \
             a process share for it ({} bytes)",
            self.area
        );
        let mut at = area * self.area;
        let mut write = |bytes: &[u8]| {
            self.data.write(at, bytes);
            at += bytes.len();
        };
        write(&(messages.len() as u64).to_le_bytes());
        for m in messages {
            write(&(m.len() as u64).to_le_bytes());
            write(m);
        }
    }

    /// The messages [`Shared::put`] wrote into area `area`.
    fn get(&self, area: usize) -> Vec<Vec<u8>> {
        let base = area * self.area;
        let mut at = base;
        let word = |at: &mut usize| {
            let mut b = [0u8; 8];
            self.data.read(*at, &mut b);
            *at += 8;
            u64::from_le_bytes(b) as usize
        };
        let n = word(&mut at);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let len = word(&mut at);
            assert!(
                at + len <= base + self.area,
                "a corrupt message in the workers' shared area"
            );
            let mut m = vec![0u8; len];
            self.data.read(at, &mut m);
            at += len;
            out.push(m);
        }
        out
    }

    /// The area a worker writes what it gives into.
    fn outbox(&self, worker: usize) -> usize {
        2 * worker
    }

    /// The area a worker reads what it gets from.
    fn inbox(&self, worker: usize) -> usize {
        2 * worker + 1
    }
}

/// One worker of a process as a member of the collective of all the
/// processes' workers (see the module documentation).
pub(crate) struct Relay {
    shared: Rc<Shared>,
    worker: usize,
    /// The engine's collective, in the first worker.
    net: Option<Rc<dyn Collective>>,
    /// The process's rank and the number of processes.
    rank: usize,
    processes: usize,
}

/// The status a worker exits with when a collective cannot complete
/// because another worker of its process ended: the consequence, not the
/// culprit.
pub(crate) const LOST: i32 = 86;

/// A collective that cannot complete: a worker of this process ended.
/// The worker leaves at once, without unwinding: the first worker's
/// engine would wait, as it ends, for the processes that wait for this
/// one.
fn lost() -> ! {
    crate::sys::process::exit_child(LOST)
}

impl Relay {
    /// Worker `worker`'s member; `net` is the engine's collective, given
    /// to the first worker (and only to it). Waits until the first worker
    /// has it (a worker leaves, as in [`lost`], when another ended
    /// before).
    pub(crate) fn new(shared: Rc<Shared>, worker: usize, net: Option<Rc<dyn Collective>>) -> Relay {
        assert_eq!(
            net.is_some(),
            worker == 0,
            "the first worker, and only it, has the engine's collective"
        );
        if let Some(net) = &net {
            shared
                .word(RANK)
                .store(net.rank() as u64 + 1, Ordering::Relaxed);
            shared
                .word(SIZE)
                .store(net.size() as u64 + 1, Ordering::Relaxed);
        }
        if !shared.barrier() {
            lost();
        }
        let rank = shared.word(RANK).load(Ordering::Relaxed) as usize;
        let processes = shared.word(SIZE).load(Ordering::Relaxed) as usize;
        assert!(
            rank >= 1 && processes > rank - 1,
            "the first worker says where the process stands"
        );
        Relay {
            shared,
            worker,
            net,
            rank: rank - 1,
            processes: processes - 1,
        }
    }

    fn workers(&self) -> usize {
        self.shared.workers
    }

    fn meet(&self) {
        if !self.shared.barrier() {
            lost();
        }
    }

    fn net(&self) -> &dyn Collective {
        self.net.as_deref().expect("the first worker's collective")
    }
}

impl Collective for Relay {
    fn rank(&self) -> usize {
        self.rank * self.workers() + self.worker
    }

    fn size(&self) -> usize {
        self.processes * self.workers()
    }

    fn exchange(&self, out: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let (j, p) = (self.workers(), self.processes);
        assert_eq!(out.len(), p * j, "one message per member");
        let s = &*self.shared;
        s.put(
            s.outbox(self.worker),
            &out.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        );
        self.meet();
        if self.worker == 0 {
            // outs[u][q·j + v]: from worker u here to worker v of process q.
            let outs: Vec<Vec<Vec<u8>>> = (0..j).map(|u| s.get(s.outbox(u))).collect();
            // To each other process, one message: every pair of a worker
            // here and a worker there, in order, each with its length.
            let frames: Vec<Vec<u8>> = (0..p)
                .map(|q| {
                    if q == self.rank {
                        return Vec::new();
                    }
                    let mut f = Vec::new();
                    for from in &outs {
                        for m in &from[q * j..(q + 1) * j] {
                            f.extend_from_slice(&(m.len() as u64).to_le_bytes());
                            f.extend_from_slice(m);
                        }
                    }
                    f
                })
                .collect();
            let incoming = self.net().exchange(&frames);
            // got[v][q·j + u]: to worker v here from worker u of process q.
            let mut got: Vec<Vec<Vec<u8>>> = vec![vec![Vec::new(); p * j]; j];
            for (q, frame) in incoming.iter().enumerate() {
                if q == self.rank {
                    for (u, from) in outs.iter().enumerate() {
                        for (v, to) in got.iter_mut().enumerate() {
                            to[q * j + u] = from[q * j + v].clone();
                        }
                    }
                    continue;
                }
                let mut at = 0;
                for u in 0..j {
                    for to in got.iter_mut() {
                        let len =
                            u64::from_le_bytes(frame[at..at + 8].try_into().expect("a length"))
                                as usize;
                        at += 8;
                        to[q * j + u] = frame[at..at + len].to_vec();
                        at += len;
                    }
                }
                assert_eq!(at, frame.len(), "process {q} sent a whole frame");
            }
            for (v, messages) in got.iter().enumerate() {
                s.put(
                    s.inbox(v),
                    &messages.iter().map(Vec::as_slice).collect::<Vec<_>>(),
                );
            }
        }
        self.meet();
        s.get(s.inbox(self.worker))
    }

    fn sum(&self, values: &[u64]) -> Vec<u64> {
        let s = &*self.shared;
        let n = values.len();
        assert!(n <= SUM_VALUES, "at most {SUM_VALUES} values in a sum");
        let slot = |w: usize, i: usize| s.word(SUMS_AT + w * SUM_VALUES + i);
        for (i, &v) in values.iter().enumerate() {
            slot(self.worker, i).store(v, Ordering::Relaxed);
        }
        self.meet();
        let result = self.workers();
        if self.worker == 0 {
            let mut here = vec![0u64; n];
            for w in 0..self.workers() {
                for (i, t) in here.iter_mut().enumerate() {
                    *t += slot(w, i).load(Ordering::Relaxed);
                }
            }
            for (i, v) in self.net().sum(&here).into_iter().enumerate() {
                slot(result, i).store(v, Ordering::Relaxed);
            }
        }
        self.meet();
        (0..n)
            .map(|i| slot(result, i).load(Ordering::Relaxed))
            .collect()
    }

    fn all_gather(&self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let s = &*self.shared;
        let j = self.workers();
        s.put(s.outbox(self.worker), &[bytes]);
        self.meet();
        if self.worker == 0 {
            let mut frame = Vec::new();
            for u in 0..j {
                let m = s.get(s.outbox(u)).pop().expect("a worker's bytes");
                frame.extend_from_slice(&(m.len() as u64).to_le_bytes());
                frame.extend_from_slice(&m);
            }
            let frames = self.net().all_gather(&frame);
            let mut all = Vec::with_capacity(self.size());
            for frame in &frames {
                let mut at = 0;
                for _ in 0..j {
                    let len = u64::from_le_bytes(frame[at..at + 8].try_into().expect("a length"))
                        as usize;
                    at += 8;
                    all.push(frame[at..at + len].to_vec());
                    at += len;
                }
            }
            let all: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
            for v in 0..j {
                s.put(s.inbox(v), &all);
            }
        }
        self.meet();
        s.get(s.inbox(self.worker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The collective of one process alone.
    struct Local {
        rank: usize,
        size: usize,
    }

    impl Collective for Local {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn exchange(&self, out: &[Vec<u8>]) -> Vec<Vec<u8>> {
            // One process: what it sends itself is empty.
            assert_eq!(self.size, 1);
            assert!(out[0].is_empty());
            vec![Vec::new()]
        }
        fn sum(&self, values: &[u64]) -> Vec<u64> {
            values.to_vec()
        }
        fn all_gather(&self, bytes: &[u8]) -> Vec<Vec<u8>> {
            vec![bytes.to_vec()]
        }
    }

    /// Two forked workers of one process exchange, sum and gather
    /// through the relay as members 0 and 1 of a collective of two.
    #[test]
    fn workers_of_one_process_are_members_of_the_collective() {
        let shared = Rc::new(Shared::new(2).unwrap());
        let run = |worker: usize| -> String {
            let net: Option<Rc<dyn Collective>> =
                (worker == 0).then(|| Rc::new(Local { rank: 0, size: 1 }) as Rc<dyn Collective>);
            let relay = Relay::new(shared.clone(), worker, net);
            assert_eq!((relay.rank(), relay.size()), (worker, 2));
            for round in 0..50u64 {
                let out: Vec<Vec<u8>> = (0..2)
                    .map(|to| {
                        if to == worker {
                            Vec::new()
                        } else {
                            vec![worker as u8; (round as usize * 977) % 5000]
                        }
                    })
                    .collect();
                let got = relay.exchange(&out);
                let other = 1 - worker;
                assert_eq!(got[worker], Vec::<u8>::new(), "round {round}");
                assert_eq!(
                    got[other],
                    vec![other as u8; (round as usize * 977) % 5000],
                    "round {round}"
                );
                let total = relay.sum(&[round, worker as u64 + 1]);
                assert_eq!(total, vec![2 * round, 3]);
                let all = relay.all_gather(&[worker as u8, round as u8]);
                assert_eq!(all, vec![vec![0, round as u8], vec![1, round as u8]]);
            }
            "ok".to_string()
        };
        let watch = isolate::Watch {
            transition_timeout: None,
            deadline: None,
        };
        let ends = isolate::run_in_children(watch, 2, run, || shared.halt()).unwrap();
        for end in ends {
            match end {
                isolate::ChildEnd::Finished(text) => assert_eq!(text, "ok"),
                isolate::ChildEnd::Ended(e) => panic!("a worker failed: {:?}", e.how),
            }
        }
    }

    /// A worker that ends makes the others' next collective fail rather
    /// than wait forever.
    #[test]
    fn a_worker_that_ends_fails_the_others_collectives() {
        let shared = Rc::new(Shared::new(2).unwrap());
        let run = |worker: usize| -> String {
            let net: Option<Rc<dyn Collective>> =
                (worker == 0).then(|| Rc::new(Local { rank: 0, size: 1 }) as Rc<dyn Collective>);
            let relay = Relay::new(shared.clone(), worker, net);
            relay.sum(&[1]);
            if worker == 1 {
                crate::sys::process::exit_child(3);
            }
            relay.sum(&[1]);
            "went on".to_string()
        };
        let watch = isolate::Watch {
            transition_timeout: None,
            deadline: None,
        };
        let ends = isolate::run_in_children(watch, 2, run, || shared.halt()).unwrap();
        assert!(
            ends.iter()
                .all(|e| matches!(e, isolate::ChildEnd::Ended(_))),
            "neither worker finished"
        );
    }
}
