//! A diagnostic, not a check of the store: how many of the states the
//! default identity (the canonical heap, since `RawNode` has no `Debug`)
//! counts differ in something raft's public API or the node's own fields
//! can see. Run with `cargo test --release --test identity -- --ignored
//! --nocapture`.

use cmc::{Model, Strategy};
use raft_kv::model::{raft_3_election, raft_3_replication};
use raft_kv::Node;

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

/// Everything of a node that raft's public API shows, and the node's own
/// fields; not raft's private ready bookkeeping (`RawNode`'s ready number,
/// records, previous hard and soft state).
fn visible(n: &Node) -> String {
    let r = &n.volatile.raft.raft;
    let log = &r.raft_log;
    let hard_state = log.store.rl().hard_state().clone();
    // The writes without their ready numbers, which count readies.
    let unsynced: Vec<String> = n
        .volatile
        .unsynced
        .iter()
        .map(|w| {
            format!(
                "{:?}",
                (&w.snapshot, &w.entries, &w.hard_state, &w.messages)
            )
        })
        .collect();
    let mut prs: Vec<String> = r
        .prs()
        .iter()
        .map(|(id, p)| format!("{id}:{p:?}"))
        .collect();
    prs.sort();
    format!(
        "{:?}",
        (
            (
                n.id,
                &n.disk,
                r.term,
                r.vote,
                r.state,
                r.leader_id,
                r.election_elapsed
            ),
            (
                r.heartbeat_elapsed(),
                r.randomized_election_timeout(),
                r.prs().tally_votes()
            ),
            (log.committed, log.persisted, log.applied, &log.unstable),
            (hard_state, log.all_entries(), prs, &r.msgs),
            (
                unsynced,
                &n.volatile.kv,
                &n.volatile.applied,
                n.volatile.heartbeats
            ),
        )
    )
}

fn run(model: Model<Node>, label: &str) -> u64 {
    let r = model
        .strategy(Strategy::Bfs)
        .max_depth(8)
        .check()
        .expect("runs");
    println!("{label}: {}", r.summary());
    r.stats.unique
}

#[test]
#[ignore = "a diagnostic: prints counts"]
fn heap_against_what_the_api_shows() {
    let heap = run(raft_3_replication(), "default identity");
    let visible = run(raft_3_replication().abstraction(visible), "visible state");
    println!("heap {heap} visible {visible}");
}

#[test]
#[ignore = "a diagnostic: prints counts"]
fn election_model_by_what_the_api_shows() {
    let r = raft_3_election()
        .abstraction(visible)
        .strategy(Strategy::Bfs)
        .time_limit(std::time::Duration::from_secs(60))
        .check()
        .expect("runs");
    println!("visible state: {}", r.summary());
}
