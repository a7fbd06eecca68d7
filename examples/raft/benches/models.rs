//! The raft example's models, each searched breadth-first for a fixed time
//! (`CMC_RAFT_TIME` seconds, default 60; `CMC_RAFT_JOBS` workers, default
//! 2; `CMC_RAFT_MODELS` a comma-separated subset): unique states,
//! transitions, depth, time, the replica's fingerprint source, and states
//! per second. `cargo bench` in `examples/raft`.

use std::time::Duration;

use cmc::{Model, Strategy, Verdict};
use raft_kv::model;
use raft_kv::Node;

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs = env("CMC_RAFT_TIME", 60);
    let jobs = env("CMC_RAFT_JOBS", 2) as usize;
    let only = std::env::var("CMC_RAFT_MODELS").ok();
    type Named = (&'static str, fn() -> Model<Node>);
    let models: [Named; 6] = [
        ("raft_3_election", model::raft_3_election),
        ("raft_3_crash", model::raft_3_crash),
        ("raft_3_replication", model::raft_3_replication),
        ("raft_3_large", model::raft_3_large),
        ("raft_5_election", model::raft_5_election),
        ("raft_5_large", model::raft_5_large),
    ];
    println!("# {secs} s per model, {jobs} workers, breadth-first");
    println!("model\tverdict\tunique\ttransitions\tdepth\ttime_s\tsource\tstates_per_s");
    for (name, model) in models {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|m| m == name))
        {
            continue;
        }
        let r = model()
            .strategy(Strategy::Bfs)
            .jobs(jobs)
            .time_limit(Duration::from_secs(secs))
            .check()
            .expect("the check runs");
        assert!(
            matches!(r.verdict, Verdict::Pass | Verdict::Bounded),
            "{name}: {}",
            r.summary()
        );
        let source = r
            .sources
            .iter()
            .find(|s| s.role == "process")
            .map_or("?".to_string(), |s| s.source.name().to_string());
        let time = r.stats.elapsed.as_secs_f64();
        println!(
            "{name}\t{:?}\t{}\t{}\t{}\t{time:.1}\t{source}\t{:.0}",
            r.verdict,
            r.stats.unique,
            r.stats.transitions,
            r.stats.max_depth,
            r.stats.unique as f64 / time
        );
    }
}
