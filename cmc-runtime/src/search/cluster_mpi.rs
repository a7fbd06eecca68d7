//! The engine that carries a search across processes: MPI (Open MPI from
//! the system's packages, through the `mpi` crate). It launches the
//! processes (`mpirun`, Slurm's `srun`, Kubernetes' MPI operator), moves
//! the bytes, and provides the collectives the search meets at; it also
//! ends the whole run, naming the culprit, when a process dies. See
//! [`super::cluster`] for the search itself.
//!
//! MPI is initialised in the process that searches: the child of an
//! isolated check (the harness that `mpirun` started forks it), which
//! makes no MPI call before it and none after it returns.

use crate::engine::erased::Erased as P;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition as Displaced, PartitionMut};
use mpi::traits::*;
use mpi::Count;

use crate::engine::isolate::{self, ChildEnd};
use crate::engine::trace::CheckResult;
use crate::engine::CheckError;
use crate::model::{Model, PropertyKind, Strategy};

use super::coord::{Coord, Par};
use super::partition::{Collective, Part};
use super::relay::{Relay, Shared};

/// The processes of an MPI job, as the search's [`Collective`].
struct Mpi {
    world: mpi::topology::SimpleCommunicator,
}

/// The offsets of consecutive blocks of `counts` bytes.
fn offsets(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let here = *at;
            *at += c;
            Some(here)
        })
        .collect()
}

fn count(len: usize) -> Count {
    Count::try_from(len).expect("a message of less than 2 GiB (a round's states)")
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn exchange(&self, out: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let size = self.size();
        assert_eq!(out.len(), size, "one message per process");
        let counts: Vec<Count> = out.iter().map(|o| count(o.len())).collect();
        let mut got = vec![0 as Count; size];
        self.world.all_to_all_into(&counts[..], &mut got[..]);
        // Never an empty buffer: its pointer would be dangling, which MPI
        // may refuse even for a count of 0.
        let mut flat = Vec::with_capacity(out.iter().map(Vec::len).sum::<usize>() + 1);
        for o in out {
            flat.extend_from_slice(o);
        }
        flat.push(0);
        let total: usize = got.iter().map(|&c| c as usize).sum();
        let mut back = vec![0u8; total + 1];
        {
            let send = Displaced::new(&flat[..], counts.clone(), offsets(&counts));
            let mut recv = PartitionMut::new(&mut back[..], got.clone(), offsets(&got));
            self.world.all_to_all_varcount_into(&send, &mut recv);
        }
        let mut at = 0;
        got.iter()
            .map(|&c| {
                let part = back[at..at + c as usize].to_vec();
                at += c as usize;
                part
            })
            .collect()
    }

    fn sum(&self, values: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; values.len()];
        self.world
            .all_reduce_into(values, &mut out[..], SystemOperation::sum());
        out
    }

    fn all_gather(&self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let size = self.size();
        let mine = count(bytes.len());
        let mut counts = vec![0 as Count; size];
        self.world.all_gather_into(&mine, &mut counts[..]);
        let mut padded = bytes.to_vec();
        padded.push(0);
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u8; total + 1];
        {
            let mut recv = PartitionMut::new(&mut all[..], counts.clone(), offsets(&counts));
            self.world
                .all_gather_varcount_into(&padded[..bytes.len()], &mut recv);
        }
        let mut at = 0;
        counts
            .iter()
            .map(|&c| {
                let part = all[at..at + c as usize].to_vec();
                at += c as usize;
                part
            })
            .collect()
    }
}

/// What every process must share for states to travel as memory: the
/// program (its length and a hash of its bytes) and where it, the stack
/// and the arenas are.
fn layout() -> Vec<u8> {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x636d_6363, 0x6c75_7374);
    let mut len = 0u64;
    if let Ok(mut f) = std::fs::File::open("/proc/self/exe") {
        use std::io::Read;
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            h.write(&buf[..n]);
            len += n as u64;
        }
    }
    let code = layout as *const () as usize as u64;
    let data = &ANCHOR as *const u8 as usize as u64;
    let stack = {
        let here = 0u8;
        (&here as *const u8 as usize as u64) >> 24
    };
    serde_json::to_vec(&[len, h.finish(), code, data, stack]).expect("numbers serialise")
}

static ANCHOR: u8 = 0;

/// Checks that every process runs the same program at the same addresses.
fn same_layout(net: &dyn Collective) -> Result<(), CheckError> {
    let mine = layout();
    let all = net.all_gather(&mine);
    for (rank, theirs) in all.iter().enumerate() {
        if *theirs != all[0] {
            let read = |b: &[u8]| serde_json::from_slice::<Vec<u64>>(b).unwrap_or_default();
            let (a, b) = (read(&all[0]), read(theirs));
            let what = if a.first() != b.first() || a.get(1) != b.get(1) {
                "runs another program (every process must run the same build)"
            } else {
                "has the program at other addresses (address-space randomization must be off: \
                 `cargo cmc` turns it off, a launcher that re-randomizes does not work)"
            };
            return Err(CheckError::Cluster(format!(
                "process {rank} {what}: {a:x?} against process 0's {b:x?}"
            )));
        }
    }
    Ok(())
}

/// What a search across processes does not do yet.
fn refuse(model: &Model<P>) -> Result<(), CheckError> {
    let no = |what: &str| {
        Err(CheckError::Model(format!(
            "model `{}`: {what} does not run across processes yet (use --jobs on one machine)",
            model.name
        )))
    };
    if !matches!(model.strategy, Strategy::Bfs | Strategy::Walk) {
        return no(&format!("the {:?} strategy", model.strategy));
    }
    if model.por {
        return no("partial-order reduction (--por)");
    }
    if crate::engine::property_fns(model)
        .iter()
        .any(|p| p.kind == PropertyKind::Eventually)
    {
        return no("an `eventually` property (liveness)");
    }
    Ok(())
}

/// Checks `model` as one process of a search across the processes of an
/// MPI job: every process returns the merged result.
pub(super) fn check(model: &Model<P>) -> Result<CheckResult, CheckError> {
    let start = Instant::now();
    super::searcher::settings(model)?;
    refuse(model)?;
    let universe = mpi::initialize().ok_or_else(|| {
        CheckError::Cluster("MPI was initialised before, in this process".to_string())
    })?;
    let net: Rc<dyn Collective> = Rc::new(Mpi {
        world: universe.world(),
    });
    let result = search_and_merge(model, net, None, 1, start);
    // MPI ends here (the universe's drop), before the process exits.
    drop(universe);
    result
}

/// Checks `model` as one process of a search across the processes of an
/// MPI job, with `model.workers()` workers of its own (`--processes N
/// --jobs J`): forked children of this process, as with `--jobs` on one
/// machine, the first of which initialises MPI and speaks for the others
/// (see `search::relay`). Every process returns the merged result.
pub(super) fn check_workers(model: &Model<P>) -> Result<CheckResult, CheckError> {
    let start = Instant::now();
    super::searcher::settings(model)?;
    refuse(model)?;
    let jobs = model.workers();
    let coord = Coord::new(jobs, model.width).map_err(|e| {
        CheckError::Isolation(format!("cannot map the workers' shared memory: {e}"))
    })?;
    let shared = Rc::new(Shared::new(jobs).map_err(|e| {
        CheckError::Isolation(format!("cannot map the workers' shared memory: {e}"))
    })?);
    let watch = isolate::Watch {
        transition_timeout: model.transition_timeout,
        deadline: model
            .bounds
            .time_limit
            .map(|t| start + t + Duration::from_secs(1)),
    };
    let ends = isolate::run_in_children(
        watch,
        jobs,
        |worker| {
            let result =
                in_worker(model, &coord, &shared, worker, start).map_err(|e| e.to_string());
            serde_json::to_string(&result).expect("a result always serialises")
        },
        || {
            shared.halt();
            coord.halt();
        },
    )
    .map_err(|e| CheckError::Isolation(format!("cannot start the workers: {e}")))?;
    let rank = crate::sys::process::job_rank().unwrap_or(0);
    let mut result = None;
    let mut failed: Option<(usize, isolate::How)> = None;
    // A worker that ended because another had (it could not go on, or
    // did not stop in time) is not the culprit.
    let lost = |how: &isolate::How| {
        matches!(
            how,
            isolate::How::Exit(super::relay::LOST) | isolate::How::Abandoned
        )
    };
    for (worker, end) in ends.into_iter().enumerate() {
        match end {
            ChildEnd::Finished(text) => {
                result.get_or_insert(text);
            }
            ChildEnd::Ended(ended) => {
                if failed
                    .as_ref()
                    .is_none_or(|(_, how)| lost(how) && !lost(&ended.how))
                {
                    failed = Some((worker, ended.how));
                }
            }
        }
    }
    if let Some((worker, how)) = failed.filter(|(_, how)| !lost(how) || result.is_none()) {
        return Err(CheckError::Cluster(format!(
            "the search of process {rank} (its worker {worker}) ended without a result ({}); \
             the whole run ends. A crash of the checked code is reported with its trace by a \
             search in one process (without --processes)",
            how.describe()
        )));
    }
    let text = result.expect("every worker finished");
    let result: Result<CheckResult, String> = serde_json::from_str(&text)
        .map_err(|e| CheckError::Isolation(format!("unreadable result from a worker: {e}")))?;
    result.map_err(CheckError::Cluster)
}

/// One worker of [`check_workers`]: the first starts MPI; every one is a
/// member of the collective of all the processes' workers, and returns
/// the merged result of all.
fn in_worker(
    model: &Model<P>,
    coord: &Coord,
    shared: &Rc<Shared>,
    worker: usize,
    start: Instant,
) -> Result<CheckResult, CheckError> {
    let universe = if worker == 0 {
        match mpi::initialize() {
            Some(u) => Some(u),
            None => {
                // The others wait for the first to start.
                shared.halt();
                return Err(CheckError::Cluster(
                    "MPI was initialised before, in this process".to_string(),
                ));
            }
        }
    } else {
        None
    };
    let net = universe
        .as_ref()
        .map(|u| Rc::new(Mpi { world: u.world() }) as Rc<dyn Collective>);
    let relay = Relay::new(shared.clone(), worker, net);
    let par = Par { coord, worker };
    let result = search_and_merge(model, Rc::new(relay), Some(par), model.workers(), start);
    drop(universe);
    result
}

/// The search across the members of `net` (`per` of them in each
/// process; `par`, this one's place among its process's workers), and the
/// results of all members merged (every member takes part, and returns
/// the same).
fn search_and_merge(
    model: &Model<P>,
    net: Rc<dyn Collective>,
    par: Option<Par<'_>>,
    per: usize,
    start: Instant,
) -> Result<CheckResult, CheckError> {
    same_layout(&*net)?;
    let size = net.size();
    let (result, sketch) = if model.strategy == Strategy::Walk {
        let swarm = super::swarm::Swarm::new(net.clone());
        let sketch = swarm.sketch.clone();
        let result = super::searcher::search(model, par, false, None, Some(swarm));
        let sketch = sketch.take();
        (result, sketch)
    } else {
        let part = Part::new(net.clone(), per);
        (
            super::searcher::search(model, par, false, Some(part), None),
            None,
        )
    };
    let text = serde_json::to_string(&result.map_err(|e| e.to_string()))
        .expect("a result always serialises");
    let all = net.all_gather(text.as_bytes());
    // A swarm's processes saw states in common: their sketches merged
    // count each once.
    // Every process takes part in the gathering (one whose walks never
    // started gives an empty sketch).
    let sketches =
        (model.strategy == Strategy::Walk).then(|| net.all_gather(&sketch.unwrap_or_default()));
    drop(net);
    let mut parts = Vec::with_capacity(size);
    for (member, bytes) in all.iter().enumerate() {
        let rank = member / per;
        let part: Result<CheckResult, String> = serde_json::from_slice(bytes).map_err(|e| {
            CheckError::Cluster(format!("unreadable result from process {rank}: {e}"))
        })?;
        parts.push(part.map_err(|e| CheckError::Cluster(format!("process {rank}: {e}")))?);
    }
    let complete = parts.iter().all(|p| p.stats.complete);
    let mut merged = super::parallel::merge(model, parts);
    merged.stats.complete = complete;
    if let Some(sketches) = sketches {
        let all = super::sketch::Sketch::union(
            sketches.iter().filter(|s| !s.is_empty()).map(Vec::as_slice),
        );
        merged.stats.unique = all.estimate();
    }
    super::searcher::never_reached(model, &mut merged);
    merged.stats.elapsed = start.elapsed();
    merged.stats.processes = size / per;
    merged.stats.jobs = per;
    Ok(merged)
}
