//! The AODV port's seeded bugs (`examples/aodv`, one cargo feature each),
//! hunted by each search: for every bug, every strategy and worker count
//! asked for, whether `cargo cmc check` found the bug's property within
//! the time limit, how long it took and how long its trace is.
//!
//! ```sh
//! cargo install --locked --path cargo-cmc
//! cargo run --release --manifest-path benches/seeded-bugs/Cargo.toml
//! ```
//!
//! `CMC_BUGS_TIME` is the time limit per run in seconds (default 30),
//! `CMC_BUGS_RUNS` the searches as `strategy:jobs` pairs (default
//! `bfs:1,bfs:2,walk:1,walk:2`; walks run with `--max-depth 60 --seed 1`;
//! a strategy ending in `+por`, such as `bfs+por:1`, adds `--por`),
//! `CMC_BUGS` a comma-separated subset of the bugs. One line per run:
//! `bench seeded_bug bug=… model=… strategy=… jobs=… found=true property=… time_s=… steps=… unique=…`
//! (`time_s` is the search's own `elapsed_s`, not the build).

use std::path::PathBuf;
use std::process::Command;

/// Each bug, its feature's property, and the model that shows it.
const BUGS: [(&str, &str); 8] = [
    ("invalid-route-reply", "aodv_3_nodes"),
    ("reboot-null-route", "aodv_3_nodes"),
    ("hopcount-overflow", "aodv_3_nodes"),
    ("linkbreak-no-increment", "aodv_3_nodes"),
    ("rerr-seqno", "aodv_4_line"),
    ("hopcount-compare", "aodv_4_ring"),
    ("gratuitous-self-route", "aodv_4_ring"),
    ("reverse-route-revive", "aodv_4_nodes"),
];

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/aodv/Cargo.toml")
        .canonicalize()
        .expect("examples/aodv")
}

/// One search: (the violated property, if any; seconds; trace length;
/// unique states).
fn hunt(
    bug: &str,
    model: &str,
    strategy: &str,
    jobs: &str,
    secs: &str,
) -> (Option<String>, f64, usize, u64) {
    let feature = format!("bug-{bug}");
    // `bfs+por`: breadth-first with partial-order reduction.
    let (strategy, por) = match strategy.strip_suffix("+por") {
        Some(s) => (s, true),
        None => (strategy, false),
    };
    let mut args = vec![
        "cmc",
        "check",
        "--features",
        &feature,
        "--model",
        model,
        "--strategy",
        strategy,
        "--jobs",
        jobs,
        "--time-limit",
        secs,
        "--message-format",
        "json",
    ];
    if strategy == "walk" {
        args.extend(["--max-depth", "60", "--seed", "1"]);
    }
    if por {
        args.push("--por");
    }
    let out = Command::new("cargo")
        .args(&args)
        .arg("--manifest-path")
        .arg(example())
        .output()
        .expect("cargo cmc runs (install it: cargo install --locked --path cargo-cmc)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| {
            panic!(
                "no result from cargo {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let violation = result["violations"]
        .as_array()
        .and_then(|v| v.first())
        .cloned();
    (
        violation
            .as_ref()
            .and_then(|v| v["property"].as_str().map(String::from)),
        result["elapsed_s"].as_f64().unwrap_or(0.0),
        violation.and_then(|v| v["trace_len"].as_u64()).unwrap_or(0) as usize,
        result["unique_states"].as_u64().unwrap_or(0),
    )
}

fn main() {
    let secs = std::env::var("CMC_BUGS_TIME").unwrap_or_else(|_| "30".into());
    let runs =
        std::env::var("CMC_BUGS_RUNS").unwrap_or_else(|_| "bfs:1,bfs:2,walk:1,walk:2".into());
    let only: Option<Vec<String>> = std::env::var("CMC_BUGS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    for (bug, model) in BUGS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|b| b == bug)) {
            continue;
        }
        for run in runs.split(',') {
            let (strategy, jobs) = run.trim().split_once(':').expect("runs are strategy:jobs");
            let (found, time, steps, unique) = hunt(bug, model, strategy, jobs, &secs);
            println!(
                "bench seeded_bug bug={bug} model={model} strategy={strategy} jobs={jobs} found={} property={} time_s={time:.2} steps={steps} unique={unique}",
                found.is_some(),
                found.as_deref().unwrap_or("-"),
            );
        }
    }
}
