//! A swarm of random walks across processes (`cargo cmc check --strategy
//! walk --processes N`): each process walks from a seed of its own and
//! shares nothing with the others but, a few times a second, one sum over
//! every process (MPI's, through [`Collective`]) that says whether any of
//! them found a violation or stopped. The first violation anywhere stops
//! every walker at its next meeting; each returns its result, and the
//! processes' results are merged as a parallel search's are (each distinct
//! violation once, with its shortest trace).
//!
//! Every process meets the others the same number of times: it meets
//! whenever its clock says a meeting is due, and once more when its own
//! walks end, with its stop raised; every process leaves at the meeting
//! where the sum shows a stop, which is the same meeting for all.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::partition::Collective;

/// How often the walkers meet.
const MEETING: Duration = Duration::from_millis(200);

/// One process's part in a swarm.
pub(crate) struct Swarm {
    net: Rc<dyn Collective>,
    last: Instant,
    /// Whether a meeting showed a stop (this process's or another's).
    over: bool,
    /// The walks every process started, as of the last meeting.
    pub(super) walks: u64,
    /// The registers of this process's sketch of the states it saw, once
    /// its walks end (see `search::sketch`), for whoever merges the
    /// results.
    pub(super) sketch: Rc<std::cell::RefCell<Option<Vec<u8>>>>,
}

impl Swarm {
    #[cfg_attr(
        not(feature = "cluster"),
        allow(dead_code, reason = "the MPI search calls it (feature `cluster`)")
    )]
    pub(crate) fn new(net: Rc<dyn Collective>) -> Swarm {
        Swarm {
            net,
            last: Instant::now(),
            over: false,
            walks: 0,
            sketch: Rc::default(),
        }
    }

    pub(super) fn rank(&self) -> usize {
        self.net.rank()
    }

    pub(super) fn size(&self) -> usize {
        self.net.size()
    }

    /// The seed of this process's walks: the model's in the first, one of
    /// its own in each other (never a worker's of `--jobs`).
    pub(super) fn seed(&self, seed: u64) -> u64 {
        match self.rank() {
            0 => seed,
            r => seed ^ crate::sys::hash::fmix64((r as u64) | 1 << 40),
        }
    }

    /// This member's depth bound, of the swarm's `bound`: the first
    /// member's is `bound`, the others' spread evenly down towards half
    /// of it. A shallower bound spends a member's walks, and its guided
    /// walks' table of explored states, on the shallower part of the
    /// space, where a bug's shortest trace is more likely found; the
    /// deepest bound still reaches everything the swarm's bound allows.
    pub(super) fn depth_bound(&self, bound: usize) -> usize {
        let (rank, size) = (self.rank(), self.size());
        (bound - bound / 2 * rank / size).max(1)
    }

    /// The share of this member's transitions that go to plain walks, as
    /// one in `n` (see `search::walk`): the first member's is `share`, and
    /// the others take turns at twice and half as many, so that the swarm
    /// runs a mix of guided and plain walks.
    pub(super) fn plain_share(&self, share: u64) -> u64 {
        match self.rank() % 3 {
            0 => share,
            1 => (share / 2).max(2),
            _ => share * 2,
        }
    }

    /// This process's share of a bound of `walks` walks for the swarm.
    pub(super) fn share(&self, walks: u64) -> u64 {
        let (rank, size) = (self.rank() as u64, self.size() as u64);
        walks / size + u64::from(rank < walks % size)
    }

    /// Whether the swarm is over: meets the others when a meeting is due
    /// (`found`: this process found a violation).
    pub(super) fn poll(&mut self, walks: u64, found: bool) -> bool {
        if !self.over && (found || self.last.elapsed() >= MEETING) {
            self.meet(walks, found);
        }
        self.over
    }

    /// Meets the others until a meeting shows a stop, this process's own
    /// raised: its walks are over.
    pub(super) fn finish(&mut self, walks: u64) {
        while !self.over {
            self.meet(walks, true);
        }
    }

    fn meet(&mut self, walks: u64, stop: bool) {
        let sum = self.net.sum(&[u64::from(stop), walks]);
        self.walks = sum[1];
        self.over = sum[0] > 0;
        self.last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// `n` processes in one thread: a meeting of one waits for the
    /// others' (the test drives them in turn), as MPI's sum does.
    struct Table {
        rank: usize,
        size: usize,
        calls: Rc<RefCell<Vec<Vec<Vec<u64>>>>>,
    }

    impl Collective for Table {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn exchange(&self, _: &[Vec<u8>]) -> Vec<Vec<u8>> {
            unreachable!("a swarm only sums")
        }
        fn sum(&self, values: &[u64]) -> Vec<u64> {
            // The k-th call of each process meets the k-th of the others:
            // the test makes every process call before reading.
            let mut calls = self.calls.borrow_mut();
            let k = calls
                .iter()
                .position(|round| round.len() < self.size && round.len() == self.rank)
                .unwrap_or_else(|| {
                    calls.push(Vec::new());
                    calls.len() - 1
                });
            calls[k].push(values.to_vec());
            let mut out = vec![0; values.len()];
            for v in &calls[k] {
                for (o, x) in out.iter_mut().zip(v) {
                    *o += x;
                }
            }
            out
        }
        fn all_gather(&self, _: &[u8]) -> Vec<Vec<u8>> {
            unreachable!("a swarm only sums")
        }
    }

    #[test]
    fn members_walk_to_depths_of_their_own_and_mix_plain_walks() {
        let calls = Rc::new(RefCell::new(Vec::new()));
        let member = |rank, size| {
            Swarm::new(Rc::new(Table {
                rank,
                size,
                calls: calls.clone(),
            }))
        };
        // One member: the swarm's bound and share, unchanged.
        assert_eq!(member(0, 1).depth_bound(60), 60);
        assert_eq!(member(0, 1).plain_share(4), 4);
        for size in 2..9 {
            let bounds: Vec<usize> = (0..size).map(|r| member(r, size).depth_bound(60)).collect();
            assert_eq!(bounds[0], 60, "the first member keeps the bound");
            assert!(
                bounds.windows(2).all(|w| w[0] > w[1]),
                "{size} members, each bound its own: {bounds:?}"
            );
            assert!(bounds.iter().all(|&b| b > 30), "{bounds:?}");
        }
        assert_eq!(member(3, 4).depth_bound(1), 1, "a bound of 1 stays 1");
        let shares: Vec<u64> = (0..3).map(|r| member(r, 3).plain_share(4)).collect();
        assert_eq!(shares, vec![4, 2, 8]);
    }

    #[test]
    fn shares_of_a_walk_bound_add_up_to_it_and_seeds_differ() {
        let calls = Rc::new(RefCell::new(Vec::new()));
        for size in 1..6 {
            for walks in [0, 1, 7, 100, 101] {
                let total: u64 = (0..size)
                    .map(|rank| {
                        let t = Table {
                            rank,
                            size,
                            calls: calls.clone(),
                        };
                        Swarm::new(Rc::new(t)).share(walks)
                    })
                    .sum();
                assert_eq!(total, walks, "{walks} walks over {size} processes");
            }
        }
        let seeds: std::collections::HashSet<u64> = (0..8)
            .map(|rank| {
                let t = Table {
                    rank,
                    size: 8,
                    calls: calls.clone(),
                };
                Swarm::new(Rc::new(t)).seed(42)
            })
            .collect();
        assert_eq!(seeds.len(), 8);
    }

    #[test]
    fn a_stop_anywhere_is_seen_by_every_process_at_the_same_meeting() {
        let calls = Rc::new(RefCell::new(Vec::new()));
        let mut swarm: Vec<Swarm> = (0..3)
            .map(|rank| {
                Swarm::new(Rc::new(Table {
                    rank,
                    size: 3,
                    calls: calls.clone(),
                }))
            })
            .collect();
        // A meeting where nobody stops: all go on, and count all walks.
        for (r, s) in swarm.iter_mut().enumerate() {
            s.meet(10 + r as u64, false);
        }
        assert!(swarm.iter().all(|s| !s.over));
        assert_eq!(swarm[2].walks, 33, "the last to arrive sees every walk");
        // Process 1 finds a violation: the meeting shows it to those after
        // it at once, and to process 0 at the same meeting's sum.
        swarm[0].meet(20, false);
        assert!(swarm[1].poll(21, true));
        swarm[2].meet(22, false);
        assert!(swarm[1].over && swarm[2].over);
        // Process 0 read the sum before the others added theirs; the test
        // table is no barrier, MPI's is: there it sees the stop too.
        assert_eq!(
            calls.borrow().len(),
            2,
            "two meetings, every process at each"
        );
        // Once over, a process meets no more.
        let before = calls.borrow().iter().map(Vec::len).sum::<usize>();
        swarm[1].finish(30);
        assert!(swarm[1].poll(31, false));
        assert_eq!(calls.borrow().iter().map(Vec::len).sum::<usize>(), before);
    }
}
