//! The breadth-first frontier on disk (`Model::frontier_in_memory`): the
//! states beyond what memory keeps are written to files and read back in
//! order. The search must find exactly what it finds with the whole
//! frontier in memory (the same states, one by one, the same counts, the
//! same violations and shortest traces), on one worker and on two; and a
//! search whose frontier needs about three times its memory budget must
//! complete under it, where the frontier in memory stops it.

use crate::common;

use cmc::{Ctx, Handler, Model, Process, Strategy, Verdict};
use common::auto::{auto, Auto, M};
use common::probe::{auto_probe, run};

fn generated(seed: u64, n: usize) -> Model<Auto> {
    auto(seed, n)
        .strategy(Strategy::Bfs)
        .invariant("probe", auto_probe)
        .invariant("not_all_last", |w| {
            if w.processes().all(|p| p.s == M - 1) {
                Err("every process is in its last state".into())
            } else {
                Ok(())
            }
        })
}

#[test]
fn a_frontier_on_disk_finds_what_one_in_memory_finds() {
    let mut spilled = 0;
    for seed in 0..8 {
        let n = 2 + (seed as usize % 3);
        let memory = run(generated(seed, n).frontier_in_memory(0));
        let disk = run(generated(seed, n).frontier_in_memory(16));
        let what = format!("seed {seed}, {n} processes");
        assert_eq!(disk.unique, memory.unique, "{what}: unique");
        assert_eq!(disk.states, memory.states, "{what}: states");
        assert_eq!(disk.transitions, memory.transitions, "{what}: transitions");
        assert_eq!(disk.violated, memory.violated, "{what}: violations");
        assert_eq!(disk.verdict, memory.verdict, "{what}: verdict");
        assert_eq!(disk.first_trace, memory.first_trace, "{what}: trace");
        let r = generated(seed, n).frontier_in_memory(16).check().unwrap();
        if r.stats.memory.disk_entries > 0 {
            spilled += 1;
        }
    }
    assert!(spilled >= 4, "only {spilled} of 8 searches used the disk");
}

#[test]
fn two_workers_with_the_frontier_on_disk_count_what_one_counts() {
    for seed in [3, 7, 11] {
        // Complete searches count the same; with a violation, a shortest
        // trace is as long (where each worker stopped is its own).
        let complete = || auto(seed, 3).strategy(Strategy::Bfs);
        let one = complete().frontier_in_memory(0).jobs(1).check().unwrap();
        assert_eq!(one.verdict, Verdict::Pass, "seed {seed}");
        let violating = || generated(seed, 3);
        let shortest = violating().frontier_in_memory(0).jobs(1).check().unwrap();
        for jobs in [1, 2] {
            let r = complete()
                .frontier_in_memory(64)
                .jobs(jobs)
                .check()
                .unwrap();
            assert_eq!(r.verdict, Verdict::Pass, "seed {seed}, {jobs} jobs");
            assert_eq!(r.stats.unique, one.stats.unique, "seed {seed}, {jobs} jobs");
            assert!(
                r.stats.memory.disk_entries > 0,
                "seed {seed}, {jobs} jobs: no disk"
            );
            let v = violating()
                .frontier_in_memory(64)
                .jobs(jobs)
                .check()
                .unwrap();
            assert_eq!(v.verdict, shortest.verdict, "seed {seed}, {jobs} jobs");
            if v.verdict == Verdict::Violation {
                assert_eq!(
                    v.violations[0].trace.steps.len(),
                    shortest.violations[0].trace.steps.len(),
                    "seed {seed}, {jobs} jobs: a shortest trace"
                );
            }
        }
    }
}

/// Twelve flags set one at a time in any order (4,096 states, levels of
/// up to 924), and 64 KiB of bytes that depend on them all, made again
/// after each flag: no page of one state is a page of another, nor a
/// small change of one, so the widest level needs about 58 MiB of pages.
struct Noisy {
    flags: u16,
    noise: Vec<u8>,
}

const FLAGS: u16 = 12;
const NOISE: usize = 64 << 10;

fn noise_of(flags: u16) -> Vec<u8> {
    let mut x = u64::from(flags).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..NOISE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

impl Noisy {
    fn set(&mut self, _: &mut Ctx<'_, Self>) {
        let unset: Vec<u16> = (0..FLAGS).filter(|i| self.flags & (1 << i) == 0).collect();
        let i = unset[cmc::choose(unset.len())];
        self.flags |= 1 << i;
        self.noise = noise_of(self.flags);
    }

    fn can_set(&self, _: &cmc::View<'_, Self>) -> bool {
        self.flags != (1 << FLAGS) - 1
    }
}

impl Process for Noisy {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("set", Self::set).guard(Self::can_set)]
    }
}

impl std::hash::Hash for Noisy {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // The noise is a function of the flags.
        self.flags.hash(h);
    }
}

fn noisy() -> Model<Noisy> {
    Model::new("noisy", 1, |_| Noisy {
        flags: 0,
        noise: noise_of(0),
    })
    .strategy(Strategy::Bfs)
    .quiescence_ok(true)
    .jobs(1)
    .time_limit(std::time::Duration::from_secs(120))
}

#[test]
fn a_frontier_three_times_the_budget_completes_on_disk() {
    // The budget: what the process holds after a search of a few states
    // (the engine's own start: its tables, the program's type
    // information), and 20 MiB.
    noisy().max_states(8).check().unwrap();
    let before = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(64 << 20, |pages| pages * 4096);
    let budget = before + (20 << 20);
    // On disk first: the process's resident memory does not shrink
    // after a search (freed memory stays with the allocator).
    let r = noisy()
        .frontier_in_memory(64)
        .max_memory(budget)
        .check()
        .unwrap();
    assert_eq!(
        r.verdict,
        Verdict::Pass,
        "{} {:?} {:?}",
        r.summary(),
        r.stopped,
        r.stats.memory
    );
    assert_eq!(r.stats.unique, 1 << FLAGS);
    assert!(
        r.stats.memory.disk_peak > 2 * (20 << 20),
        "the frontier on disk peaked at {} bytes",
        r.stats.memory.disk_peak
    );
    let in_memory = noisy()
        .frontier_in_memory(0)
        .max_memory(budget)
        .check()
        .unwrap();
    assert_eq!(
        in_memory.verdict,
        Verdict::Bounded,
        "with the frontier in memory the budget stops it: {}",
        in_memory.summary()
    );
    assert!(
        in_memory
            .stopped
            .as_deref()
            .unwrap_or("")
            .contains("memory budget"),
        "{:?}",
        in_memory.stopped
    );
    println!(
        "budget {} MiB: resident at most {} MiB, {} MiB on disk at most, {} entries written",
        budget >> 20,
        r.stats.peak_memory_bytes >> 20,
        r.stats.memory.disk_peak >> 20,
        r.stats.memory.disk_entries
    );
}

const UNWRITABLE: &str = "CMC_SPILL_UNWRITABLE_CHILD";

/// A frontier that cannot go to disk (its directory cannot be made: here
/// it would lie under a regular file) ends the check as cmc's own failure
/// naming the directory, never as a violation of the user's code.
#[test]
fn a_frontier_that_cannot_be_written_is_cmcs_failure() {
    if std::env::var_os(UNWRITABLE).is_some() {
        let r = noisy()
            .frontier_in_memory(16)
            .check_isolated()
            .expect("the check ends");
        println!("verdict={:?}", r.verdict);
        println!("violations={}", r.violations.len());
        println!("stopped={}", r.stopped.unwrap_or_default());
        return;
    }
    let file = std::env::temp_dir().join(format!("cmc-spill-file-{}", std::process::id()));
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(
                module_path!(),
                "::a_frontier_that_cannot_be_written_is_cmcs_failure"
            )),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(UNWRITABLE, "1")
        .env("CMC_SPILL_DIR", file.join("spill"))
        .output()
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("verdict=Interrupted"), "{stdout}");
    assert!(stdout.contains("violations=0"), "{stdout}");
    assert!(
        stdout.contains(
            "stopped=cmc's own machinery failed, not user code: cannot make the directory "
        ) && stdout.contains("for the frontier on disk"),
        "{stdout}"
    );
}
