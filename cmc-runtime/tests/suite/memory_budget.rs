//! The memory budget (`Model::max_memory`, `--max-memory`) holds whatever
//! the model's states look like: here each state has 25 successors (one
//! handler that draws `choose(25)`) and grows by a word per step, so a
//! search's memory grows fast and, depth-first, its states get large.
//! The search must end `bounded` by the budget, not run on to the
//! kernel's out-of-memory killer; it did for this model before the reason
//! to stop was remembered between the stop checks.

use cmc::{Ctx, Handler, Model, Process, Strategy, Verdict};

#[derive(Debug, Hash)]
struct Walker {
    steps: Vec<u32>,
}

impl Walker {
    fn step(&mut self, _: &mut Ctx<'_, Self>) {
        self.steps.push(cmc::choose(25) as u32);
    }
}

impl Process for Walker {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("step", Self::step)]
    }
}

const BUDGET: u64 = 96 << 20;

fn model() -> Model<Walker> {
    Model::new("chooser", 1, |_| Walker { steps: Vec::new() })
        .max_memory(BUDGET)
        // A bound that is not the budget, should the budget not hold: the
        // test then fails on the verdict instead of taking the machine.
        .time_limit(std::time::Duration::from_secs(60))
}

fn holds(strategy: Strategy, jobs: usize) {
    let r = model().strategy(strategy).jobs(jobs).check().unwrap();
    assert_eq!(r.verdict, Verdict::Bounded, "{}", r.summary());
    let why = r.stopped.clone().unwrap_or_default();
    assert!(
        why.contains("the memory budget (96.0 MiB) was reached"),
        "{strategy:?} with {jobs} jobs stopped for another reason: {why}"
    );
    println!("{why}; peak {} MiB", r.stats.peak_memory_bytes >> 20);
    if jobs > 1 {
        // Each worker stops at its share of the budget; the peak the
        // result reports adds up the workers' resident memory, which
        // counts the pages they share (the visited set, what they
        // inherited from the forking process) once per worker, so it
        // says nothing about the budget.
        return;
    }
    // Within the budget and the margin the checks allow: the resident
    // memory is read every 4096 transitions (here a page or two of new
    // state each: up to about 32 MiB between two readings), and the result
    // is built after the stop. Measured: 117 to 123 MiB. Without the stop
    // remembered, the search ran on into gigabytes.
    let peak = r.stats.peak_memory_bytes;
    assert!(
        peak <= BUDGET + (BUDGET / 2),
        "{strategy:?} with {jobs} jobs peaked at {} MiB of a {} MiB budget",
        peak >> 20,
        BUDGET >> 20
    );
}

#[test]
fn depth_first_on_one_worker() {
    holds(Strategy::Dfs, 1);
}

#[test]
fn breadth_first_on_one_worker() {
    holds(Strategy::Bfs, 1);
}

#[test]
fn breadth_first_on_two_workers() {
    holds(Strategy::Bfs, 2);
}

#[test]
fn depth_first_on_two_workers() {
    holds(Strategy::Dfs, 2);
}
