//! cmc against stateright 0.31 on two-phase commit (Lamport's TwoPhase
//! spec, as `examples/two-phase-commit` models it), in one run, one thread
//! each: CPU time and unique states, DFS and BFS.
//!
//! stateright checks its own model of the spec, written here the way
//! stateright models are written (a state struct cloned per action); cmc
//! checks `examples/two-phase-commit` through `cargo cmc check` (which must
//! be installed: `cargo install --locked --path cargo-cmc`). The CPU time of
//! a cmc run is that of `cargo cmc check` and the processes it waits for,
//! less that of `cargo cmc list` on the same project (building and
//! starting the harness).
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml
//! ```
//!
//! `CMC_VS_N=5,6` chooses the RM counts (default 7,8), `CMC_VS_RUNS` the runs
//! of each measurement (default 5: this machine's timings vary by a fifth from run to run; the median is printed). Prints one line
//! per configuration:
//! `bench vs_stateright n=7 strategy=dfs unique=… stateright_cpu_s=… cmc_cpu_s=… ratio=… stateright_bytes_per_state=… cmc_bytes_per_state=…`
//! (ratio: cmc's CPU time over stateright's; bytes per state: the peak
//! resident memory of the process that searched over the unique states —
//! stateright runs in a child process of this bench for that), and exits
//! with 1 when the counts differ. With more than one RM count, one more
//! line per strategy and consecutive pair of counts:
//! `bench vs_stateright_marginal from_n=7 n=8 strategy=dfs stateright_bytes_per_added_state=… cmc_bytes_per_added_state=…`:
//! the growth of the peak memory over the growth of the unique count,
//! which leaves out what each process holds whatever it searches (its
//! code, its libraries, its start-up).
//!
//! # `symmetry`: stateright's `.symmetry()` against cmc's
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- symmetry
//! ```
//!
//! See [`symmetry`].
//!
//! # `jobs`: the speed-up on several cores
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- jobs
//! ```
//!
//! Wall-clock time of the search on 1 and on `CMC_VS_JOBS` workers (default:
//! the machine's cores), two-phase commit with `CMC_VS_N` RMs (default 7),
//! DFS and BFS, median of `CMC_VS_RUNS`: cmc's `--jobs` (the `elapsed_s` of
//! its JSON result: the search, its workers' start included, not the
//! build) and stateright's `threads(n)`. One line per strategy:
//! `bench parallel n=7 strategy=dfs jobs=2 unique=… cmc_1_s=… cmc_n_s=… cmc_speedup=… stateright_1_s=… stateright_n_s=… stateright_speedup=…`,
//! exit 1 when any count differs.
//!
//! # `memory`: bytes per state by owner
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- memory
//! ```
//!
//! Resident bytes per state by owner on two-phase commit (against
//! stateright), `membership_3`, `aodv_4_nodes` and `raft_3_crash`, each
//! against the same search with pages stored full and the frontier in
//! memory; see [`memory`]. `CMC_MEM_STATES` bounds the last two (10 M by
//! default), `CMC_MEM_MODELS=aodv,raft` keeps the models whose names
//! contain one of the words, `CMC_MEM_BEFORE=skip` leaves out the runs
//! before the cuts.
//!
//! # `spill`: a frontier three times the memory budget
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- spill
//! ```
//!
//! `aodv_3_nodes` (or `CMC_SPILL_MODEL`) breadth-first on one worker,
//! first with the frontier in memory and no budget, then with a third of
//! that run's peak as `--max-memory` and the frontier on disk:
//! `bench spill model=… in_memory: verdict=… unique=… peak_bytes=… cpu_s=…; budget_bytes=…; on_disk: verdict=… unique=… peak_bytes=… disk_peak_bytes=… cpu_s=…`,
//! exit 1 unless both end the same way with the same count and the second
//! within its budget (and an eighth).
//!
//! # `deep`: a crash twenty million steps down one path
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- deep
//! ```
//!
//! `benches/vs-stateright/deep-crash`, whose handler panics `CMC_DEEP` steps
//! deep (20 M by default), depth-first on one worker, then its trace
//! replayed: `bench deep depth=… found=yes unique=… trace_len=… trace_bytes=… check_cpu_s=… peak_bytes=… bytes_per_state=… replay_cpu_s=… reproduced=yes`;
//! exit 1 unless the trace has every step and reproduces.
//!
//! # `big`: the cost of a transition against the size of the state
//!
//! ```sh
//! cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- big
//! ```
//!
//! One process holds a `Vec<u64>` of 512, 8192 or 131072 cells (4 KiB,
//! 64 KiB, 1 MiB); a transition bumps one of six cells spread evenly across
//! it, modulo 3: 729 states and 4374 transitions whatever the size. cmc
//! checks `benches/vs-stateright/big-state` (models `big_state_4k`,
//! `big_state_64k`, `big_state_1m`) with `--strategy bfs` and each
//! `--fingerprint` source in turn (`state`, `hash`, `debug`, `typed`, `heap`,
//! `bytes`); stateright checks the same model, written as a stateright
//! `Model` in [`big`], breadth-first on one thread in a child process. CPU
//! time is measured as above, the median of `CMC_VS_RUNS` runs. Prints one
//! line per size and source:
//! `bench big_state cells=512 bytes=4096 source=state unique=729 transitions=4374 stateright_us_per_transition=… cmc_us_per_transition=… speedup=…`
//! (speedup: stateright's time per transition over cmc's; transitions:
//! cmc's count, while stateright's time is divided by its own count), then
//! one line per source:
//! `bench big_state_growth source=state stateright_x=… cmc_x=…`
//! (the time per transition at 1 MiB over that at 4 KiB: how it grows when
//! the state grows 256 times). cmc's time includes what a check costs
//! beyond `cargo cmc list` (starting the search), a few milliseconds that
//! weigh most on the cheapest runs. Exits with 1 when a unique count
//! differs from stateright's or a cmc run fails (the line says how).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stateright::{Checker, Model, Property, Representative, Rewrite, RewritePlan};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum RmState {
    Working,
    Prepared,
    Committed,
    Aborted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TmState {
    Init,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Message {
    Prepared(usize),
    Commit,
    Abort,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    rm_state: Vec<RmState>,
    tm_state: TmState,
    tm_prepared: BTreeSet<usize>,
    msgs: BTreeSet<Message>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    TmCommit,
    TmAbort,
    TmRcvPrepared(usize),
    RmPrepare(usize),
    RmChooseToAbort(usize),
    RmRcvCommitMsg(usize),
    RmRcvAbortMsg(usize),
}

/// The TwoPhase spec with `rms` resource managers: each enabled action
/// instance is one transition.
struct TwoPhase {
    rms: usize,
}

impl Model for TwoPhase {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            rm_state: vec![RmState::Working; self.rms],
            tm_state: TmState::Init,
            tm_prepared: BTreeSet::new(),
            msgs: BTreeSet::new(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.tm_state == TmState::Init && s.tm_prepared.len() == self.rms {
            actions.push(Action::TmCommit);
        }
        if s.tm_state == TmState::Init {
            actions.push(Action::TmAbort);
        }
        for rm in 0..self.rms {
            if s.tm_state == TmState::Init && s.msgs.contains(&Message::Prepared(rm)) {
                actions.push(Action::TmRcvPrepared(rm));
            }
            if s.rm_state[rm] == RmState::Working {
                actions.push(Action::RmPrepare(rm));
                actions.push(Action::RmChooseToAbort(rm));
            }
            if s.msgs.contains(&Message::Commit) {
                actions.push(Action::RmRcvCommitMsg(rm));
            }
            if s.msgs.contains(&Message::Abort) {
                actions.push(Action::RmRcvAbortMsg(rm));
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut t = s.clone();
        match action {
            Action::TmCommit => {
                t.tm_state = TmState::Done;
                t.msgs.insert(Message::Commit);
            }
            Action::TmAbort => {
                t.tm_state = TmState::Done;
                t.msgs.insert(Message::Abort);
            }
            Action::TmRcvPrepared(rm) => {
                t.tm_prepared.insert(rm);
            }
            Action::RmPrepare(rm) => {
                t.rm_state[rm] = RmState::Prepared;
                t.msgs.insert(Message::Prepared(rm));
            }
            Action::RmChooseToAbort(rm) | Action::RmRcvAbortMsg(rm) => {
                t.rm_state[rm] = RmState::Aborted;
            }
            Action::RmRcvCommitMsg(rm) => t.rm_state[rm] = RmState::Committed,
        }
        Some(t)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always("consistency", |_, s: &State| {
            !(s.rm_state.contains(&RmState::Committed) && s.rm_state.contains(&RmState::Aborted))
        })]
    }
}

/// stateright's symmetry reduction as its own two-phase commit example
/// writes it: the RMs sorted by their states, their indices rewritten in
/// `tmPrepared` and the messages.
impl Representative for State {
    fn representative(&self) -> Self {
        let plan = RewritePlan::<usize, _>::from_values_to_sort(&self.rm_state);
        State {
            rm_state: plan.reindex(&self.rm_state),
            tm_state: self.tm_state,
            tm_prepared: self.tm_prepared.iter().map(|rm| plan.rewrite(rm)).collect(),
            msgs: self
                .msgs
                .iter()
                .map(|m| match m {
                    Message::Prepared(rm) => Message::Prepared(plan.rewrite(rm)),
                    other => *other,
                })
                .collect(),
        }
    }
}

impl<T> Rewrite<T> for RmState {
    fn rewrite<S>(&self, _: &RewritePlan<T, S>) -> Self {
        *self
    }
}

/// CPU time (user and system) of this process, or of its waited-for
/// children.
fn cpu(who: i32) -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs this bench with `args` in a child process (so that its peak memory
/// is its own); returns the child's CPU time, standard output and peak
/// resident memory in bytes.
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its resource usage"
)]
fn child(args: &[&str]) -> (Duration, String, u64) {
    let child = Command::new(std::env::current_exe().expect("this bench's path"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the bench runs itself");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("piped");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut text).expect("the child's output");
    let mut status = 0;
    // SAFETY: waits for our own child, once, filling a zeroed rusage.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut u);
        u
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the stateright run {args:?} failed"
    );
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (
        tv(usage.ru_utime) + tv(usage.ru_stime),
        text,
        usage.ru_maxrss as u64 * 1024,
    )
}

/// The `n`th word of a child's output, a number.
fn word(text: &str, n: usize) -> usize {
    text.split_whitespace()
        .nth(n)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("word {n} of the child's output {text:?} is a number"))
}

/// Runs [`stateright`] in a child process of this bench; returns its CPU
/// time, unique count and peak resident memory in bytes.
fn stateright_child(rms: usize, bfs: bool) -> (Duration, usize, u64) {
    let (cpu, text, peak) = child(&[
        "--stateright",
        &rms.to_string(),
        if bfs { "bfs" } else { "dfs" },
    ]);
    (cpu, word(&text, 1), peak)
}

fn stateright(rms: usize, bfs: bool) -> (Duration, usize) {
    let before = cpu(libc::RUSAGE_SELF);
    let unique = stateright_threads(rms, bfs, 1);
    (cpu(libc::RUSAGE_SELF) - before, unique)
}

/// stateright's unique count with `threads` threads.
fn stateright_threads(rms: usize, bfs: bool, threads: usize) -> usize {
    let builder = TwoPhase { rms }.checker().threads(threads);
    let unique = if bfs {
        let checker = builder.spawn_bfs().join();
        checker.assert_properties();
        checker.unique_state_count()
    } else {
        let checker = builder.spawn_dfs().join();
        checker.assert_properties();
        checker.unique_state_count()
    };
    unique
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/two-phase-commit/Cargo.toml")
        .canonicalize()
        .expect("examples/two-phase-commit")
}

/// Runs `cargo cmc` with `args` on the example; returns its CPU time (its
/// and its children's) and its standard output.
fn cargo_cmc(args: &[&str]) -> (Duration, String) {
    try_cargo_cmc(&example(), args).unwrap_or_else(|err| panic!("{err}"))
}

/// Runs `cargo cmc` with `args` on the project at `manifest`; returns its
/// CPU time (its and its children's) and its standard output, or what went
/// wrong when it could not check (exit code above 1).
fn try_cargo_cmc(manifest: &Path, args: &[&str]) -> Result<(Duration, String), String> {
    let before = cpu(libc::RUSAGE_CHILDREN);
    let out = Command::new("cargo")
        .arg("cmc")
        .args(args)
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("cargo cmc runs (install it: cargo install --locked --path cargo-cmc)");
    let took = cpu(libc::RUSAGE_CHILDREN) - before;
    if out.status.code().is_none_or(|c| c > 1) {
        return Err(format!(
            "cargo cmc {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn cmc(rms: usize, bfs: bool) -> (Duration, usize, u64) {
    cmc_model(&format!("two_phase_commit::two_phase_commit_{rms}"), bfs)
}

/// [`cmc`] on the model at `model`.
fn cmc_model(model: &str, bfs: bool) -> (Duration, usize, u64) {
    let (overhead, _) = cargo_cmc(&["list"]);
    let model = model.to_string();
    let strategy = if bfs { "bfs" } else { "dfs" };
    let (took, stdout) = cargo_cmc(&[
        "check",
        "--model",
        &model,
        "--strategy",
        strategy,
        "--jobs",
        "1",
        "--message-format",
        "json",
    ]);
    let result = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "result" && v["model"] == model.as_str())
        .expect("a result line");
    assert_eq!(result["verdict"], "pass", "{result}");
    let unique = result["unique_states"].as_u64().expect("unique_states") as usize;
    let peak = result["peak_memory_bytes"].as_u64().unwrap_or(0);
    (took.saturating_sub(overhead), unique, peak)
}

/// The runs of each measurement: `CMC_VS_RUNS`, 3 by default.
fn runs() -> usize {
    std::env::var("CMC_VS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--stateright") {
        let rms = args[2].parse().expect("a number of RMs");
        let (cpu, unique) = stateright(rms, args[3] == "bfs");
        println!("{} {unique}", cpu.as_secs_f64());
        return;
    }
    if args.get(1).map(String::as_str) == Some("--stateright-big") {
        let cells = args[2].parse().expect("a number of cells");
        let (cpu, unique, transitions) = big::stateright(cells);
        println!("{} {unique} {transitions}", cpu.as_secs_f64());
        return;
    }
    if args.get(1).map(String::as_str) == Some("--stateright-wall") {
        let rms = args[2].parse().expect("a number of RMs");
        let threads = args[4].parse().expect("a number of threads");
        let start = std::time::Instant::now();
        let unique = stateright_threads(rms, args[3] == "bfs", threads);
        println!("{} {unique}", start.elapsed().as_secs_f64());
        return;
    }
    if args.get(1).map(String::as_str) == Some("--stateright-sym") {
        let rms = args[2].parse().expect("a number of RMs");
        let before = cpu(libc::RUSAGE_SELF);
        let checker = TwoPhase { rms }.checker().symmetry().spawn_dfs().join();
        checker.assert_properties();
        let unique = checker.unique_state_count();
        println!("{} {unique}", (cpu(libc::RUSAGE_SELF) - before).as_secs_f64());
        return;
    }
    if args.get(1).map(String::as_str) == Some("symmetry") {
        if !symmetry(runs()) {
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("jobs") {
        if !parallel(runs()) {
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("memory") {
        if !memory::run() {
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("spill") {
        if !memory::spill() {
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("deep") {
        if !deep::run() {
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("big") {
        if !big::run(runs()) {
            std::process::exit(1);
        }
        return;
    }
    let ns: Vec<usize> = std::env::var("CMC_VS_N")
        .unwrap_or_else(|_| "7,8".into())
        .split(',')
        .map(|n| n.trim().parse().expect("CMC_VS_N: numbers"))
        .collect();
    let runs = runs();
    // Build the harness once before measuring.
    let _ = cargo_cmc(&["list"]);
    let mut same = true;
    // Per strategy: the (unique, stateright peak, cmc peak) of the last N,
    // for the memory per additional state between consecutive Ns.
    let mut last: [Option<(usize, u64, u64)>; 2] = [None, None];
    for &n in &ns {
        for bfs in [false, true] {
            let mut sr = Vec::new();
            let mut cm = Vec::new();
            let mut counts = (0, 0);
            let mut peaks = (0, 0);
            for _ in 0..runs {
                let (t, u, m) = stateright_child(n, bfs);
                sr.push(t);
                counts.0 = u;
                peaks.0 = m;
                let (t, u, m) = cmc(n, bfs);
                cm.push(t);
                counts.1 = u;
                peaks.1 = m;
            }
            let (s, c) = (median(sr), median(cm));
            if counts.0 != counts.1 {
                same = false;
                println!(
                    "counts differ: n={n} stateright={} cmc={}",
                    counts.0, counts.1
                );
            }
            let per_state = |bytes: u64, unique: usize| bytes / unique.max(1) as u64;
            println!(
                "bench vs_stateright n={n} strategy={} unique={} stateright_cpu_s={:.3} cmc_cpu_s={:.3} ratio={:.2} stateright_bytes_per_state={} cmc_bytes_per_state={}",
                if bfs { "bfs" } else { "dfs" },
                counts.1,
                s.as_secs_f64(),
                c.as_secs_f64(),
                c.as_secs_f64() / s.as_secs_f64().max(1e-9),
                per_state(peaks.0, counts.0),
                per_state(peaks.1, counts.1)
            );
            // What each additional state costs, without the fixed part of
            // each process (its code, its libraries, its start-up).
            if let Some((unique, sr_peak, cmc_peak)) = last[bfs as usize] {
                if counts.1 > unique {
                    let more = (counts.1 - unique) as f64;
                    println!(
                        "bench vs_stateright_marginal from_n={} n={n} strategy={} stateright_bytes_per_added_state={:.1} cmc_bytes_per_added_state={:.1}",
                        ns[ns.iter().position(|&m| m == n).expect("n is in ns") - 1],
                        if bfs { "bfs" } else { "dfs" },
                        peaks.0.saturating_sub(sr_peak) as f64 / more,
                        peaks.1.saturating_sub(cmc_peak) as f64 / more,
                    );
                }
            }
            last[bfs as usize] = Some((counts.1, peaks.0, peaks.1));
        }
    }
    if !same {
        std::process::exit(1);
    }
}

/// Symmetry reduction on two-phase commit with `CMC_VS_N` RMs (default
/// 5,7,8; the models go up to 10): stateright's `.symmetry()` (depth-first, its only search with
/// it; a representative that sorts the RMs by state) against cmc's
/// `_symmetric` models (the RMs declared interchangeable; depth-first and
/// breadth-first), one worker each, median CPU time of `runs`. One line per
/// count and strategy:
/// `bench vs_stateright_symmetry n=5 strategy=dfs unique_without=8832 stateright_unique=665 cmc_unique=314 stateright_cpu_s=… cmc_cpu_s=… ratio=… stateright_bytes_per_state=… cmc_bytes_per_state=…`
/// (ratio: cmc's CPU time over stateright's). False when cmc counts more
/// states than stateright (its orbits are exact; stateright's sort is not).
fn symmetry(runs: usize) -> bool {
    let ns: Vec<usize> = std::env::var("CMC_VS_N")
        .unwrap_or_else(|_| "5,7,8".into())
        .split(',')
        .map(|n| n.trim().parse().expect("CMC_VS_N: numbers"))
        .collect();
    let _ = cargo_cmc(&["list"]);
    let mut ok = true;
    for &n in &ns {
        let without = stateright(n, false).1;
        for bfs in [false, true] {
            let (mut sr, mut cm) = (Vec::new(), Vec::new());
            let (mut counts, mut peaks) = ((0, 0), (0, 0));
            for _ in 0..runs {
                let (t, text, peak) = child(&["--stateright-sym", &n.to_string()]);
                sr.push(t);
                counts.0 = word(&text, 1);
                peaks.0 = peak;
                let model = format!("two_phase_commit::two_phase_commit_{n}_symmetric");
                let (t, u, m) = cmc_model(&model, bfs);
                cm.push(t);
                counts.1 = u;
                peaks.1 = m;
            }
            let (s, c) = (median(sr), median(cm));
            ok &= counts.1 <= counts.0;
            let per_state = |bytes: u64, unique: usize| bytes / unique.max(1) as u64;
            println!(
                "bench vs_stateright_symmetry n={n} strategy={} unique_without={without} stateright_unique={} cmc_unique={} stateright_cpu_s={:.3} cmc_cpu_s={:.3} ratio={:.2} stateright_bytes_per_state={} cmc_bytes_per_state={}",
                if bfs { "bfs" } else { "dfs" },
                counts.0,
                counts.1,
                s.as_secs_f64(),
                c.as_secs_f64(),
                c.as_secs_f64() / s.as_secs_f64().max(1e-9),
                per_state(peaks.0, counts.0),
                per_state(peaks.1, counts.1),
            );
        }
    }
    ok
}

/// cmc's wall-clock search time and unique count on `jobs` workers.
fn cmc_wall(rms: usize, bfs: bool, jobs: usize) -> (f64, usize) {
    let model = format!("two_phase_commit::two_phase_commit_{rms}");
    let (_, stdout) = cargo_cmc(&[
        "check",
        "--model",
        &model,
        "--strategy",
        if bfs { "bfs" } else { "dfs" },
        "--jobs",
        &jobs.to_string(),
        "--message-format",
        "json",
    ]);
    let result = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "result" && v["model"] == model.as_str())
        .expect("a result line");
    assert_eq!(result["verdict"], "pass", "{result}");
    (
        result["elapsed_s"].as_f64().expect("elapsed_s"),
        result["unique_states"].as_u64().expect("unique_states") as usize,
    )
}

/// The `jobs` mode (see the crate documentation); false when counts differ.
fn parallel(runs: usize) -> bool {
    let n: usize = std::env::var("CMC_VS_N")
        .ok()
        .and_then(|v| v.split(',').next().and_then(|n| n.trim().parse().ok()))
        .unwrap_or(7);
    let jobs: usize = std::env::var("CMC_VS_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |p| p.get()));
    let _ = cargo_cmc(&["list"]);
    let mut same = true;
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for bfs in [false, true] {
        let strategy = if bfs { "bfs" } else { "dfs" };
        let (mut c1, mut cn, mut s1, mut sn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut counts = Vec::new();
        for _ in 0..runs {
            for (threads, times) in [(1, &mut s1), (jobs, &mut sn)] {
                let (_, text, _) = child(&[
                    "--stateright-wall",
                    &n.to_string(),
                    strategy,
                    &threads.to_string(),
                ]);
                times.push(
                    text.split_whitespace()
                        .next()
                        .and_then(|w| w.parse().ok())
                        .expect("seconds"),
                );
                counts.push(word(&text, 1));
            }
            for (j, times) in [(1, &mut c1), (jobs, &mut cn)] {
                let (t, u) = cmc_wall(n, bfs, j);
                times.push(t);
                counts.push(u);
            }
        }
        if counts.iter().any(|&c| c != counts[0]) {
            same = false;
            println!("counts differ: n={n} strategy={strategy} {counts:?}");
        }
        let (c1, cn, s1, sn) = (med(c1), med(cn), med(s1), med(sn));
        println!(
            "bench parallel n={n} strategy={strategy} jobs={jobs} unique={} cmc_1_s={c1:.3} cmc_n_s={cn:.3} cmc_speedup={:.2} stateright_1_s={s1:.3} stateright_n_s={sn:.3} stateright_speedup={:.2}",
            counts[0],
            c1 / cn.max(1e-9),
            s1 / sn.max(1e-9),
        );
    }
    same
}

/// The `big` mode: how the cost of one transition grows with the size of a
/// process's state (see the crate documentation).
mod big {
    use std::path::PathBuf;
    use std::time::Duration;

    use stateright::{Checker, Model, Property};

    use crate::{child, cpu, median, try_cargo_cmc, word};

    /// The sizes measured: cells, and the suffix of the cmc model's name.
    const SIZES: [(usize, &str); 3] = [(512, "4k"), (8192, "64k"), (131_072, "1m")];

    /// cmc's fingerprint sources, as `--fingerprint` names them.
    const SOURCES: [&str; 6] = ["state", "hash", "debug", "typed", "heap", "bytes"];

    /// How many cells an action may bump (as in `big-state`).
    const SLOTS: usize = 6;

    /// The values a bumped cell cycles through (as in `big-state`).
    const MODULUS: u64 = 3;

    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct State {
        cells: Vec<u64>,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Action {
        Bump(usize),
    }

    /// `big-state`'s table of `cells` cells, of which each action bumps one
    /// of the [`SLOTS`] slots.
    struct BigState {
        cells: usize,
    }

    /// The cell of slot `slot` in a table of `len` cells: the middle of the
    /// `slot`-th of [`SLOTS`] equal parts, as `big-state` places it.
    fn slot_index(len: usize, slot: usize) -> usize {
        (2 * slot + 1) * len / (2 * SLOTS)
    }

    impl Model for BigState {
        type State = State;
        type Action = Action;

        fn init_states(&self) -> Vec<State> {
            vec![State {
                cells: vec![0; self.cells],
            }]
        }

        fn actions(&self, _: &State, actions: &mut Vec<Action>) {
            actions.extend((0..SLOTS).map(Action::Bump));
        }

        fn next_state(&self, s: &State, action: Action) -> Option<State> {
            let Action::Bump(slot) = action;
            let mut t = s.clone();
            let i = slot_index(t.cells.len(), slot);
            t.cells[i] = (t.cells[i] + 1) % MODULUS;
            Some(t)
        }

        // stateright stops exploring once no property awaits a discovery, so
        // a model without one would stop at its first state; this is the
        // invariant `big-state` checks, reading the six slots only.
        fn properties(&self) -> Vec<Property<Self>> {
            vec![Property::always("slots_below_modulus", |_, s: &State| {
                (0..SLOTS).all(|slot| s.cells[slot_index(s.cells.len(), slot)] < MODULUS)
            })]
        }
    }

    /// Checks the table of `cells` cells with stateright, breadth-first on
    /// one thread, in this process; returns its CPU time, unique count and
    /// transitions.
    pub fn stateright(cells: usize) -> (Duration, usize, usize) {
        let before = cpu(libc::RUSAGE_SELF);
        let checker = BigState { cells }.checker().threads(1).spawn_bfs().join();
        checker.assert_properties();
        let took = cpu(libc::RUSAGE_SELF) - before;
        // stateright counts the initial state and then one state per
        // transition, known or not.
        (
            took,
            checker.unique_state_count(),
            checker.state_count() - 1,
        )
    }

    fn project() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("big-state/Cargo.toml")
            .canonicalize()
            .expect("benches/vs-stateright/big-state")
    }

    /// One check of `big_state_<size>` fingerprinted from `source`: its CPU
    /// time less that of `cargo cmc list`, unique count and transitions; or
    /// why there are none.
    fn cmc(size: &str, source: &str) -> Result<(Duration, usize, usize), String> {
        let project = project();
        let (overhead, _) = try_cargo_cmc(&project, &["list"])?;
        let model = format!("big_state::big_state_{size}");
        let (took, stdout) = try_cargo_cmc(
            &project,
            &[
                "check",
                "--model",
                &model,
                "--strategy",
                "bfs",
                "--jobs",
                "1",
                "--fingerprint",
                source,
                "--message-format",
                "json",
            ],
        )?;
        let result = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "result" && v["model"] == model.as_str())
            .ok_or_else(|| format!("no result line for {model} in {stdout:?}"))?;
        if result["verdict"] != "pass" || !result["stopped"].is_null() {
            return Err(format!("the check did not pass in full: {result}"));
        }
        let count = |field: &str| {
            result[field]
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("no {field} in {result}"))
        };
        Ok((
            took.saturating_sub(overhead),
            count("unique_states")?,
            count("transitions")?,
        ))
    }

    /// Microseconds per transition.
    fn us_per(took: Duration, transitions: usize) -> f64 {
        took.as_secs_f64() * 1e6 / transitions.max(1) as f64
    }

    /// Measures every size with stateright and with each cmc source, `runs`
    /// times each, and prints the figures; returns whether every cmc run
    /// succeeded and counted what stateright counted.
    pub fn run(runs: usize) -> bool {
        // Build the harness once before measuring.
        if let Err(err) = try_cargo_cmc(&project(), &["list"]) {
            println!("bench big_state failed: {err}");
            return false;
        }
        // stateright has one way to fingerprint: measure it once per size.
        let stateright: Vec<(f64, usize, usize)> = SIZES
            .iter()
            .map(|&(cells, _)| {
                let mut times = Vec::new();
                let mut counts = (0, 0);
                for _ in 0..runs {
                    let (took, text, _) = child(&["--stateright-big", &cells.to_string()]);
                    times.push(took);
                    counts = (word(&text, 1), word(&text, 2));
                }
                (us_per(median(times), counts.1), counts.0, counts.1)
            })
            .collect();
        let mut ok = true;
        for source in SOURCES {
            // cmc's time per transition at each size (none when a run
            // failed).
            let mut per_size: Vec<Option<f64>> = Vec::new();
            for (&(cells, size), &(sr_us, sr_unique, sr_transitions)) in
                SIZES.iter().zip(&stateright)
            {
                let mut times = Vec::new();
                let mut counts = Vec::new();
                let mut failure = None;
                for _ in 0..runs {
                    match cmc(size, source) {
                        Ok((took, unique, transitions)) => {
                            times.push(took);
                            counts.push((unique, transitions));
                        }
                        Err(err) => {
                            failure = Some(err);
                            break;
                        }
                    }
                }
                let head = format!(
                    "bench big_state cells={cells} bytes={} source={source}",
                    cells * 8
                );
                if let Some(failure) = failure {
                    ok = false;
                    println!("{head} failed: {failure}");
                    per_size.push(None);
                    continue;
                }
                // Every run must count what stateright counts; a search is
                // deterministic, so one that differs is a fault, not noise.
                for &(unique, transitions) in &counts {
                    if (unique, transitions) != (sr_unique, sr_transitions) {
                        ok = false;
                        println!(
                            "counts differ: cells={cells} source={source} stateright unique={sr_unique} transitions={sr_transitions}, cmc unique={unique} transitions={transitions}"
                        );
                    }
                }
                let (unique, transitions) = counts[counts.len() - 1];
                let cmc_us = us_per(median(times), transitions);
                println!(
                    "{head} unique={unique} transitions={transitions} stateright_us_per_transition={sr_us:.3} cmc_us_per_transition={cmc_us:.3} speedup={:.2}",
                    sr_us / cmc_us
                );
                per_size.push(Some(cmc_us));
            }
            // A failed size has no time: say so rather than print a ratio.
            let cmc_x = match (per_size[0], per_size[SIZES.len() - 1]) {
                (Some(small), Some(large)) => format!("{:.2}", large / small),
                _ => "none".to_owned(),
            };
            println!(
                "bench big_state_growth source={source} stateright_x={:.2} cmc_x={cmc_x}",
                stateright[SIZES.len() - 1].0 / stateright[0].0,
            );
        }
        ok
    }
}

/// `memory`: resident bytes per state by owner, against the same search
/// with pages stored full and the whole frontier in memory (what cmc held
/// before page deltas and the frontier on disk), and against stateright
/// on two-phase commit.
///
/// ```sh
/// cargo run --release --manifest-path benches/vs-stateright/Cargo.toml -- memory
/// ```
///
/// Each run is `cargo cmc check --jobs 1 --message-format json` and reads
/// the result's `memory` object (the owners at the largest reading of the
/// resident memory); "before" is the same run with `CMC_PAGE_DELTAS=off
/// CMC_SPILL=off`. Runs: two-phase commit with `CMC_VS_N` RMs (default 7)
/// breadth- and depth-first, complete, and stateright's peak resident
/// memory over its unique count on the same; `membership_3`
/// breadth-first, complete; `aodv_4_nodes` and the raft example's
/// `raft_3_crash` breadth-first, bounded by `CMC_MEM_STATES` states
/// (default 10,000,000). One line per run:
/// `bench memory model=… strategy=… variant=before|now unique=… bytes_per_state=… visited=… frontier=… records=… pages=… page_index=… tree=… caches=… other=… disk_peak_bytes=… disk_entries=… cpu_s=…`
/// (owners in bytes per state), then per model
/// `bench memory_ratio model=… strategy=… now_over_before=…`, and for
/// two-phase commit
/// `bench memory_vs_stateright n=… strategy=… stateright_bytes_per_state=… cmc_bytes_per_state=… ratio=…`.
/// Exits with 1 when a count differs between the two variants.
/// A crash far down one path (`-- deep`): the `deep-crash` model's counter
/// panics `CMC_DEEP` steps deep (20 million by default). Depth-first, on
/// one worker: whether the crash is found, the CPU time, the peak
/// resident memory (bytes per state), the trace's length and size on
/// disk, and the time its replay takes and whether it reproduces.
mod deep {
    use super::*;

    pub(crate) fn run() -> bool {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("deep-crash/Cargo.toml")
            .canonicalize()
            .expect("deep-crash");
        let depth: u64 = std::env::var("CMC_DEEP")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000_000);
        // Build first, outside the measurement.
        let _ = try_cargo_cmc(&manifest, &["list"]).expect("the deep-crash model builds");
        let (took, stdout) = try_cargo_cmc(
            &manifest,
            &[
                "check",
                "--strategy",
                "dfs",
                "--jobs",
                "1",
                "--message-format",
                "json",
            ],
        )
        .expect("cargo cmc check runs");
        let lines: Vec<serde_json::Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let result = lines
            .iter()
            .find(|v| v["type"] == "result")
            .expect("a result line");
        let violation = result["violations"].get(0);
        let unique = result["unique_states"].as_u64().unwrap_or(0);
        let peak = result["peak_memory_bytes"].as_u64().unwrap_or(0);
        let Some(violation) = violation else {
            println!(
                "bench deep depth={depth} found=no verdict={} unique={unique} cpu_s={:.1}",
                result["verdict"],
                took.as_secs_f64()
            );
            return false;
        };
        let trace_len = violation["trace_len"].as_u64().unwrap_or(0);
        let file = violation["trace_file"].as_str().expect("a trace file").to_string();
        let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
        let (replay_took, replayed) =
            try_cargo_cmc(&manifest, &["replay", &file]).expect("cargo cmc replay runs");
        let reproduced = replayed.contains("the violation reproduces");
        println!(
            "bench deep depth={depth} found=yes unique={unique} trace_len={trace_len} \
             trace_bytes={bytes} check_cpu_s={:.1} peak_bytes={peak} bytes_per_state={:.1} \
             replay_cpu_s={:.1} reproduced={}",
            took.as_secs_f64(),
            peak as f64 / unique.max(1) as f64,
            replay_took.as_secs_f64(),
            if reproduced { "yes" } else { "no" }
        );
        trace_len == depth && reproduced
    }
}

mod memory {
    use super::*;

    struct Run {
        unique: u64,
        per_state: f64,
        line: String,
    }

    fn measure(
        manifest: &Path,
        model: &str,
        strategy: &str,
        bound: Option<u64>,
        before: bool,
    ) -> Run {
        let mut cmd = Command::new("cargo");
        cmd.arg("cmc")
            .args(["check", "--model", model, "--strategy", strategy])
            .args([
                "--jobs",
                "1",
                "--max-memory",
                "0",
                "--message-format",
                "json",
            ])
            .arg("--manifest-path")
            .arg(manifest);
        if let Some(n) = bound {
            cmd.args(["--max-states", &n.to_string()]);
        }
        if before {
            cmd.env("CMC_PAGE_DELTAS", "off").env("CMC_SPILL", "off");
        }
        let start = cpu(libc::RUSAGE_CHILDREN);
        let out = cmd.output().expect("cargo cmc runs");
        let took = cpu(libc::RUSAGE_CHILDREN) - start;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let result = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "result")
            .unwrap_or_else(|| {
                panic!(
                    "no result from cargo cmc check --model {model}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let m = &result["memory"];
        let unique = result["unique_states"].as_u64().unwrap_or(0);
        let per = m["bytes_per_state"].as_f64().unwrap_or(0.0);
        let owner = |k: &str| m["owners"][k]["per_state"].as_f64().unwrap_or(0.0);
        let line = format!(
            "bench memory model={model} strategy={strategy} variant={} unique={unique} bytes_per_state={per:.1} visited={:.1} frontier={:.1} records={:.1} pages={:.1} page_index={:.1} tree={:.1} caches={:.1} other={:.1} disk_peak_bytes={} disk_entries={} cpu_s={:.2}",
            if before { "before" } else { "now" },
            owner("visited"),
            owner("frontier"),
            owner("records"),
            owner("pages"),
            owner("page_index"),
            owner("tree"),
            owner("caches"),
            owner("other"),
            m["disk_peak_bytes"].as_u64().unwrap_or(0),
            m["disk_entries"].as_u64().unwrap_or(0),
            took.as_secs_f64(),
        );
        Run {
            unique,
            per_state: per,
            line,
        }
    }

    fn examples(path: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(path)
            .canonicalize()
            .unwrap_or_else(|e| panic!("examples/{path}: {e}"))
    }

    /// One breadth-first check of `model` on one worker: its verdict,
    /// unique states, peak resident memory and most bytes on disk.
    fn check(manifest: &Path, model: &str, budget: u64, spill: bool) -> (String, u64, u64, u64, f64) {
        let mut cmd = Command::new("cargo");
        cmd.arg("cmc")
            .args(["check", "--model", model, "--strategy", "bfs", "--jobs", "1"])
            .args(["--max-memory", &budget.to_string(), "--message-format", "json"])
            .arg("--manifest-path")
            .arg(manifest);
        if !spill {
            cmd.env("CMC_SPILL", "off");
        }
        let start = cpu(libc::RUSAGE_CHILDREN);
        let out = cmd.output().expect("cargo cmc runs");
        let took = cpu(libc::RUSAGE_CHILDREN) - start;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let result = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "result")
            .unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&out.stderr)));
        (
            result["verdict"].as_str().unwrap_or("?").to_string(),
            result["unique_states"].as_u64().unwrap_or(0),
            result["peak_memory_bytes"].as_u64().unwrap_or(0),
            result["memory"]["disk_peak_bytes"].as_u64().unwrap_or(0),
            took.as_secs_f64(),
        )
    }

    /// `-- spill`: a breadth-first search of the AODV flagship's
    /// `aodv_3_nodes` (to depth 10) whose frontier needs about three times
    /// its memory budget: first with the frontier in memory and no budget,
    /// then with a third of that run's peak as the budget and the frontier
    /// on disk. It must end the same way with the same count, within the
    /// budget.
    pub(crate) fn spill() -> bool {
        let manifest = examples("aodv/Cargo.toml");
        let model = std::env::var("CMC_SPILL_MODEL")
            .unwrap_or_else(|_| "aodv::model::aodv_3_nodes".into());
        let _ = Command::new("cargo")
            .args(["cmc", "list", "--manifest-path"])
            .arg(&manifest)
            .output();
        let (verdict0, unique0, peak0, _, cpu0) = check(&manifest, &model, 0, false);
        let budget = peak0 / 3;
        let (verdict1, unique1, peak1, disk1, cpu1) = check(&manifest, &model, budget, true);
        println!(
            "bench spill model={model} in_memory: verdict={verdict0} unique={unique0} peak_bytes={peak0} cpu_s={cpu0:.1}; budget_bytes={budget}; on_disk: verdict={verdict1} unique={unique1} peak_bytes={peak1} disk_peak_bytes={disk1} cpu_s={cpu1:.1}"
        );
        verdict0 == verdict1 && unique0 == unique1 && peak1 <= budget + budget / 8
    }

    pub(crate) fn run() -> bool {
        let n: usize = std::env::var("CMC_VS_N")
            .ok()
            .and_then(|v| v.split(',').next()?.trim().parse().ok())
            .unwrap_or(7);
        let bound: u64 = std::env::var("CMC_MEM_STATES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000_000);
        let tpc = format!("two_phase_commit::two_phase_commit_{n}");
        let configs: Vec<(PathBuf, String, &str, Option<u64>)> = vec![
            (example(), tpc.clone(), "bfs", None),
            (example(), tpc.clone(), "dfs", None),
            (
                examples("membership/Cargo.toml"),
                "membership::model::membership_3".into(),
                "bfs",
                None,
            ),
            (
                examples("aodv/Cargo.toml"),
                "aodv::model::aodv_4_nodes".into(),
                "bfs",
                Some(bound),
            ),
            (
                examples("raft/Cargo.toml"),
                "raft_3_crash".into(),
                "bfs",
                Some(bound),
            ),
        ];
        // `CMC_MEM_MODELS`: only the models whose names contain one of
        // these words; `CMC_MEM_BEFORE=skip`: without the runs before the
        // cuts (at 10 M states they hold 4 to 11 GB).
        let only: Vec<String> = std::env::var("CMC_MEM_MODELS")
            .map(|v| v.split(',').map(|w| w.trim().to_string()).collect())
            .unwrap_or_default();
        let skip_before = std::env::var("CMC_MEM_BEFORE").is_ok_and(|v| v == "skip");
        let mut ok = true;
        for (manifest, model, strategy, bound) in configs {
            if !only.is_empty() && !only.iter().any(|w| model.contains(w.as_str())) {
                continue;
            }
            if skip_before {
                let _ = Command::new("cargo")
                    .args(["cmc", "list", "--manifest-path"])
                    .arg(&manifest)
                    .output();
                println!("{}", measure(&manifest, &model, strategy, bound, false).line);
                continue;
            }
            // Build the harness before measuring.
            let _ = Command::new("cargo")
                .args(["cmc", "list", "--manifest-path"])
                .arg(&manifest)
                .output();
            let before = measure(&manifest, &model, strategy, bound, true);
            println!("{}", before.line);
            let now = measure(&manifest, &model, strategy, bound, false);
            println!("{}", now.line);
            if bound.is_none() && before.unique != now.unique {
                println!(
                    "bench memory model={model}: counts differ ({} before, {} now)",
                    before.unique, now.unique
                );
                ok = false;
            }
            println!(
                "bench memory_ratio model={model} strategy={strategy} now_over_before={:.3}",
                now.per_state / before.per_state.max(1e-9)
            );
            if model == tpc {
                let (_, unique, peak) = stateright_child(n, strategy == "bfs");
                let sr = peak as f64 / unique.max(1) as f64;
                println!(
                    "bench memory_vs_stateright n={n} strategy={strategy} stateright_bytes_per_state={sr:.1} cmc_bytes_per_state={:.1} ratio={:.2}",
                    now.per_state,
                    now.per_state / sr.max(1e-9)
                );
                if unique as u64 != now.unique {
                    println!(
                        "bench memory model={model}: stateright counts {unique}, cmc {}",
                        now.unique
                    );
                    ok = false;
                }
            }
        }
        ok
    }
}
