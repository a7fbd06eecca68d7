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
//! of each measurement (default 3; the median is printed). Prints one line
//! per configuration:
//! `bench vs_stateright n=7 strategy=dfs unique=… stateright_cpu_s=… cmc_cpu_s=… ratio=… stateright_bytes_per_state=… cmc_bytes_per_state=…`
//! (ratio: cmc's CPU time over stateright's; bytes per state: the peak
//! resident memory of the process that searched over the unique states —
//! stateright runs in a child process of this bench for that), and exits
//! with 1 when the counts differ.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use stateright::{Checker, Model, Property};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// Runs [`stateright`] in a child process of this bench (so that its peak
/// memory is its own); returns its CPU time, unique count and peak
/// resident memory in bytes.
fn stateright_child(rms: usize, bfs: bool) -> (Duration, usize, u64) {
    let child = Command::new(std::env::current_exe().expect("this bench's path"))
        .args(["--stateright", &rms.to_string(), if bfs { "bfs" } else { "dfs" }])
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
        "the stateright run failed"
    );
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let unique: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .expect("the child prints its CPU time and unique count");
    (
        tv(usage.ru_utime) + tv(usage.ru_stime),
        unique,
        usage.ru_maxrss as u64 * 1024,
    )
}

fn stateright(rms: usize, bfs: bool) -> (Duration, usize) {
    let before = cpu(libc::RUSAGE_SELF);
    let builder = TwoPhase { rms }.checker().threads(1);
    let unique = if bfs {
        let checker = builder.spawn_bfs().join();
        checker.assert_properties();
        checker.unique_state_count()
    } else {
        let checker = builder.spawn_dfs().join();
        checker.assert_properties();
        checker.unique_state_count()
    };
    (cpu(libc::RUSAGE_SELF) - before, unique)
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
    let before = cpu(libc::RUSAGE_CHILDREN);
    let out = Command::new("cargo")
        .arg("cmc")
        .args(args)
        .arg("--manifest-path")
        .arg(example())
        .output()
        .expect("cargo cmc runs (install it: cargo install --locked --path cargo-cmc)");
    let took = cpu(libc::RUSAGE_CHILDREN) - before;
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "cargo cmc {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cmc(rms: usize, bfs: bool) -> (Duration, usize, u64) {
    let (overhead, _) = cargo_cmc(&["list"]);
    let model = format!("two_phase_commit::two_phase_commit_{rms}");
    let strategy = if bfs { "bfs" } else { "dfs" };
    let (took, stdout) = cargo_cmc(&[
        "check",
        "--model",
        &model,
        "--strategy",
        strategy,
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
    let ns: Vec<usize> = std::env::var("CMC_VS_N")
        .unwrap_or_else(|_| "7,8".into())
        .split(',')
        .map(|n| n.trim().parse().expect("CMC_VS_N: numbers"))
        .collect();
    let runs: usize = std::env::var("CMC_VS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    // Build the harness once before measuring.
    let _ = cargo_cmc(&["list"]);
    let mut same = true;
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
        }
    }
    if !same {
        std::process::exit(1);
    }
}
