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

/// Prints, for every node of every state to depth 10, the hash of what the
/// API shows and of its typed walk but for the ready counter
/// (`P <visible> <typed>`); with
/// `CMC_SPLIT=<visible>`, the typed walk of the nodes that show that, to
/// diff. Run with `cargo test --release --test identity -- --ignored
/// --nocapture typed_splits`.
#[test]
#[ignore = "a diagnostic: prints the data"]
fn typed_splits() {
    use std::hash::{DefaultHasher, Hash, Hasher};
    fn probe(world: &cmc::World<'_, Node>) -> Result<(), String> {
        let want = std::env::var("CMC_SPLIT").ok();
        for n in world.processes() {
            let mut d = DefaultHasher::new();
            visible(n).hash(&mut d);
            let vis = format!("{:016x}", d.finish());
            let mut h = DefaultHasher::new();
            let dump: String = cmc::identity::typed::dump(n)
                .unwrap()
                .lines()
                .filter(|l| !is_ready_number(l) && !l.starts_with("volatile.raft.raft.prs.votes"))
                .chain([format!("{:?}", n.volatile.raft.raft.prs().tally_votes()).as_str()])
                .collect::<Vec<_>>()
                .join("\n");
            dump.hash(&mut h);
            let typed = h.finish();
            match &want {
                None => eprintln!("P {vis} {typed:032x}"),
                Some(w) if *w == vis || *w == format!("{typed:016x}") => {
                    eprintln!(
                        "DUMP {typed:032x}\n{}\nVISIBLE {}\nEND",
                        cmc::identity::typed::dump(n).unwrap(),
                        visible(n)
                    )
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
    let r = raft_3_election()
        .invariant("probe", probe)
        .strategy(Strategy::Bfs)
        .max_depth(40)
        .check()
        .expect("runs");
    println!("{}", r.summary());
}

/// A line of the typed walk that holds a ready number: RawNode's private
/// counter (`max_number`), the numbers of its ready records, the numbers
/// the application keeps with its pending writes.
fn is_ready_number(line: &str) -> bool {
    [
        "volatile.raft.max_number =",
        "volatile.raft.records.number =",
        "volatile.unsynced.number =",
    ]
    .iter()
    .any(|p| line.starts_with(p))
}

/// What the typed identity adds to what the API shows: counted by the
/// typed walk with the ready numbers left out, the election model has as
/// many states as by what the API shows.
#[test]
#[ignore = "a diagnostic: prints counts"]
fn typed_without_the_ready_numbers() {
    fn typed_but_counter(n: &Node) -> String {
        cmc::identity::typed::dump(n)
            .unwrap()
            .lines()
            .filter(|l| !is_ready_number(l))
            .collect::<Vec<_>>()
            .join("\n")
    }
    // And with the private map of who voted how replaced by its tally,
    // which is what the API shows.
    fn typed_but_counter_and_votes(n: &Node) -> String {
        cmc::identity::typed::dump(n)
            .unwrap()
            .lines()
            .filter(|l| !is_ready_number(l) && !l.starts_with("volatile.raft.raft.prs.votes"))
            .chain([format!("{:?}", n.volatile.raft.raft.prs().tally_votes()).as_str()])
            .collect::<Vec<_>>()
            .join("\n")
    }
    for (label, model) in [
        ("visible state", raft_3_election().abstraction(visible)),
        (
            "typed without ready numbers",
            raft_3_election().abstraction(typed_but_counter),
        ),
        (
            "typed without ready numbers, votes by their tally",
            raft_3_election().abstraction(typed_but_counter_and_votes),
        ),
        ("typed", raft_3_election()),
    ] {
        let r = model.strategy(Strategy::Bfs).check().expect("runs");
        println!("{label}: {}", r.summary());
    }
}

/// Symmetry: three fresh replicas, hashed under the masked renaming with
/// the model's identifier declarations, are alike but for what raft drew
/// at random; the typed dumps show where they differ. Run with
/// `cargo test --release --test identity -- --ignored --nocapture
/// replicas_alike`.
#[test]
#[ignore = "a diagnostic: prints where replicas differ"]
fn replicas_alike_up_to_renaming() {
    use cmc::identity::rename::{hashing_renamed, Renaming};
    use cmc::identity::typed::{declare_ids, dump, typed_hash, Root};
    let model = raft_kv::model::raft_3_election_symmetric();
    let _ = model;
    let decls: Vec<(String, Vec<String>)> = vec![
        (std::any::type_name::<Node>().into(), vec!["id".into(), "peers".into()]),
        ("raft::raft::RaftCore".into(), vec!["id".into(), "vote".into(), "leader_id".into(), "lead_transferee".into()]),
        ("raft::raft::SoftState".into(), vec!["leader_id".into()]),
        ("raft::tracker::ProgressTracker".into(), vec!["progress".into(), "votes".into()]),
        ("raft::quorum::majority::Configuration".into(), vec!["voters".into()]),
        (std::any::type_name::<raft::eraftpb::ConfState>().into(), vec!["voters".into()]),
    ];
    declare_ids(&[Root::of::<Node>()], &decls, &[], &[]).unwrap();
    let nodes: Vec<Node> = (1..=3).map(|i| Node::new(i, 3, raft_kv::model::ELECTION)).collect();
    let masked = Renaming::masked(&[1, 2, 3]);
    for n in &nodes {
        let h = hashing_renamed(&masked, || {
            let mut h = cmc::StateHasher::default();
            typed_hash(n, &mut h);
            h.finish128()
        });
        println!("masked {h:x}");
    }
    let d: Vec<String> = nodes.iter().map(|n| dump(n).unwrap()).collect();
    for (a, b) in d[0].lines().zip(d[1].lines()) {
        if a != b {
            println!("- {a}\n+ {b}");
        }
    }
}
