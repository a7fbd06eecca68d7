//! The key-value node as a cmc process, its environment, the Raft paper's
//! safety properties (Figure 3) and the registered models.
//!
//! The environment: cmc's network carries raft's own `eraftpb::Message`;
//! a node's election timeout and a leader's heartbeat timer are events (time
//! is abstract: a timeout is one event, whatever the ticks); clients propose
//! at the leader; a node may crash and restart from its disk; its disk may
//! sync what it was handed. Proposals, crashes, terms and heartbeats are
//! bounded so that the state space is finite.

use cmc::{Ctx, Model, NetworkConfig, View, World};
use raft::eraftpb::Message;

use crate::{Id, Limits, Node};

/// What the environment has done so far, shared by all nodes.
#[derive(Debug, Default)]
pub struct Environment {
    /// Client proposals made.
    pub proposals: u32,
    /// Crashes so far.
    pub crashes: u32,
}

// ANCHOR: process
#[cmc::process(msg = Message, shared = Environment)]
impl Node {
    /// A message arrives.
    #[handler(guard = has_mail)]
    fn deliver(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, msg)) = ctx.recv() {
            step(self, ctx, |node| node.receive(msg));
        }
    }

    /// The disk syncs the writes it was handed.
    #[handler(guard = Self::has_unsynced)]
    fn disk_sync(&mut self, ctx: &mut Ctx<'_, Self>) {
        step(self, ctx, Node::sync);
    }

    /// The election timeout fires.
    #[handler(guard = Self::may_time_out)]
    fn election_timer(&mut self, ctx: &mut Ctx<'_, Self>) {
        step(self, ctx, Node::election_timeout);
    }

    /// The leader's heartbeat timer fires.
    #[handler(guard = Self::may_heartbeat)]
    fn heartbeat_timer(&mut self, ctx: &mut Ctx<'_, Self>) {
        step(self, ctx, Node::heartbeat);
    }

    /// A client asks the leader to write.
    #[handler(guard = may_propose)]
    fn client_put(&mut self, ctx: &mut Ctx<'_, Self>) {
        let n = ctx.with_shared(|env| {
            env.proposals += 1;
            env.proposals
        });
        step(self, ctx, |node| node.propose("x", &n.to_string()));
    }

    /// The node crashes and restarts from its disk.
    #[handler(guard = may_crash)]
    fn crash_restart(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.with_shared(|env| env.crashes += 1);
        step(self, ctx, Node::crash);
    }

    fn flush(&mut self, ctx: &mut Ctx<'_, Self>) {
        for (to, msg) in self.take_outbox() {
            // A full network drops what does not fit, as a real one would.
            let _ = ctx.send(index(to), msg);
        }
    }
}

/// One step of a node: `f`, then leader append-only checked across it (a
/// property of two states, so an assertion of the application's, as a
/// user would write it; cmc reports the panic with its trace), then what
/// the step produced is sent.
fn step(node: &mut Node, ctx: &mut Ctx<'_, Node>, f: impl FnOnce(&mut Node)) {
    let before = node.leader_log();
    f(node);
    if let Some(before) = before {
        if let Err(e) = crate::leader_append_only(&before, node) {
            panic!("leader append-only violated: {e}");
        }
    }
    node.flush(ctx);
}
// ANCHOR_END: process

/// The cmc process index of raft id `id`.
fn index(id: Id) -> usize {
    usize::try_from(id - 1).expect("raft ids are small")
}

fn has_mail(_: &Node, view: &View<'_, Node>) -> bool {
    view.has_mail()
}

fn may_propose(node: &Node, view: &View<'_, Node>) -> bool {
    node.is_leader() && view.shared().proposals < node.limits.proposals
}

fn may_crash(node: &Node, view: &View<'_, Node>) -> bool {
    view.shared().crashes < node.limits.crashes
}

fn nodes<'a>(world: &World<'a, Node>) -> Vec<&'a Node> {
    world.processes().collect()
}

// ANCHOR: invariants
/// At most one leader per term.
#[cmc::invariant]
fn election_safety(world: &World<'_, Node>) -> Result<(), String> {
    crate::election_safety(&nodes(world))
}

/// Logs that agree on an entry agree on everything before it.
#[cmc::invariant]
fn log_matching(world: &World<'_, Node>) -> Result<(), String> {
    crate::log_matching(&nodes(world))
}

/// Leaders of later terms hold every applied entry.
#[cmc::invariant]
fn leader_completeness(world: &World<'_, Node>) -> Result<(), String> {
    crate::leader_completeness(&nodes(world))
}

/// No two nodes apply different entries at one index.
#[cmc::invariant]
fn state_machine_safety(world: &World<'_, Node>) -> Result<(), String> {
    crate::state_machine_safety(&nodes(world))
}
// ANCHOR_END: invariants

/// Some replica applies a client's command: the models with proposals
/// must be able to commit one (a reachability property: the search reports
/// a witness, and a complete search without one fails).
fn a_command_is_applied(world: &World<'_, Node>) -> bool {
    world
        .processes()
        .any(|n| n.volatile.applied.iter().any(|a| !a.data.is_empty()))
}

/// `nodes` replicas within `limits`, over a network with `network`.
pub fn group(nodes: u64, limits: Limits, network: NetworkConfig) -> Model<Node> {
    Model::new("raft", usize::try_from(nodes).unwrap(), move |i| {
        Node::new(i as Id + 1, nodes, limits)
    })
    .network(network)
    .quiescence_ok(true)
}

// ANCHOR: symmetric
/// The replicas declared interchangeable: raft numbers them 1..=n with
/// plain `u64`s, so the model names where raft and the store keep them,
/// by type and field (the crate is not changed; private types by the name
/// `std::any::type_name` gives them). cmc renames them there, walking the
/// states by their type information, and counts each state once up to a
/// renaming of the replicas.
pub fn interchangeable(model: Model<Node>, nodes: u64) -> Model<Node> {
    use std::any::type_name;
    use raft::eraftpb::{ConfState, HardState};
    model
        .interchangeable(0..usize::try_from(nodes).unwrap(), |i| i as Id + 1)
        .ids_in(type_name::<Node>(), &["id", "peers"])
        .ids_in(type_name::<crate::Volatile>(), &["outbox.0"])
        .ids_in(type_name::<Message>(), &["from", "to"])
        .ids_in(type_name::<HardState>(), &["vote"])
        .ids_in(
            type_name::<ConfState>(),
            &["voters", "learners", "voters_outgoing", "learners_next"],
        )
        .ids_in("raft::raft::RaftCore", &["id", "vote", "leader_id", "lead_transferee"])
        .ids_in("raft::raft::SoftState", &["leader_id"])
        .ids_in("raft::tracker::ProgressTracker", &["progress", "votes"])
        .ids_in("raft::tracker::Configuration", &["learners", "learners_next"])
        .ids_in("raft::quorum::majority::Configuration", &["voters"])
        .ids_in("raft::read_only::ReadIndexStatus", &["acks"])
        // raft's logger carries `raft_id` as a key-value pair.
        .ids_in("slog::SingleKV<u64>", &["1"])
        // A ready's messages come in the order of raft's map of peers,
        // which depends on their ids; they go into an unordered network.
        .unordered_in(type_name::<crate::Write>(), &["messages"])
}
// ANCHOR_END: symmetric

/// Elections: term 1 only, no proposal, no crash.
pub const ELECTION: Limits = Limits {
    max_term: 1,
    heartbeats_per_term: 0,
    proposals: 0,
    crashes: 0,
};

/// Three replicas electing a leader of term 1, two messages in flight on a
/// reliable network: the whole space in under a minute.
#[cmc::model]
pub fn raft_3_election() -> Model<Node> {
    group(3, ELECTION, NetworkConfig::new().capacity(2))
}

// ANCHOR: crash_model
/// Three replicas electing a leader of term 1, interchangeable: one state
/// per renaming of the replicas. The network never fills (a replica sends
/// to its peers in the order of a hash map of their ids, so which message
/// a full network drops depends on the ids: that is not symmetric, and
/// the symmetry check says so).
#[cmc::model]
pub fn raft_3_election_symmetric() -> Model<Node> {
    interchangeable(group(3, ELECTION, NetworkConfig::new().capacity(8)), 3)
}

/// Elections with a crash: term 1 only, no proposal, one crash.
pub const CRASH: Limits = Limits {
    max_term: 1,
    heartbeats_per_term: 0,
    proposals: 0,
    crashes: 1,
};

/// Three replicas electing a leader of term 1, one of which may crash and
/// restart, three messages in flight on a reliable network.
#[cmc::model]
pub fn raft_3_crash() -> Model<Node> {
    group(3, CRASH, NetworkConfig::new().capacity(3))
}
// ANCHOR_END: crash_model

/// [`raft_3_crash`] with the replicas interchangeable, on a network that
/// never fills (see [`raft_3_election_symmetric`]).
#[cmc::model]
pub fn raft_3_crash_symmetric() -> Model<Node> {
    interchangeable(group(3, CRASH, NetworkConfig::new().capacity(8)), 3)
}

/// Replication: terms up to 2, one proposal, no crash.
pub const REPLICATION: Limits = Limits {
    max_term: 2,
    heartbeats_per_term: 0,
    proposals: 1,
    crashes: 0,
};

/// Three replicas, two terms, one proposal, two messages in flight on a
/// lossy network.
#[cmc::model]
pub fn raft_3_replication() -> Model<Node> {
    group(3, REPLICATION, NetworkConfig::new().capacity(2).lossy(true))
        .sometimes("a_command_is_applied", a_command_is_applied)
}

/// [`raft_3_replication`] with the replicas interchangeable, on a lossy
/// network that never fills (see [`raft_3_election_symmetric`]).
#[cmc::model]
pub fn raft_3_replication_symmetric() -> Model<Node> {
    let network = NetworkConfig::new().capacity(8).lossy(true);
    interchangeable(group(3, REPLICATION, network), 3)
        .sometimes("a_command_is_applied", a_command_is_applied)
}

/// The bounds of the larger model.
pub const LARGE: Limits = Limits {
    max_term: 3,
    heartbeats_per_term: 1,
    proposals: 2,
    crashes: 1,
};

/// Three replicas, terms up to 3, two proposals, one heartbeat round per
/// term, one crash, three messages in flight on a lossy, duplicating
/// network.
#[cmc::model]
pub fn raft_3_large() -> Model<Node> {
    group(
        3,
        LARGE,
        NetworkConfig::new()
            .capacity(3)
            .lossy(true)
            .duplicating(true),
    )
    .sometimes("a_command_is_applied", a_command_is_applied)
}

/// Five replicas electing a leader of term 1, three messages in flight on
/// a reliable network: a bench model (`cargo bench`), minutes of search.
#[cmc::model]
pub fn raft_5_election() -> Model<Node> {
    group(5, ELECTION, NetworkConfig::new().capacity(3))
}

/// Five replicas electing a leader of term 1, interchangeable, on a
/// network that never fills (each may campaign once: at most 20 requests
/// and their answers): a bench model.
#[cmc::model]
pub fn raft_5_election_symmetric() -> Model<Node> {
    interchangeable(group(5, ELECTION, NetworkConfig::new().capacity(40)), 5)
}

/// The bounds of the five-replica bench model with crashes and proposals.
pub const LARGE_5: Limits = Limits {
    max_term: 2,
    heartbeats_per_term: 1,
    proposals: 2,
    crashes: 2,
};

/// Five replicas, terms up to 2, two proposals, one heartbeat round per
/// term, two crashes, four messages in flight on a lossy network: a bench
/// model, far beyond what a search completes.
#[cmc::model]
pub fn raft_5_large() -> Model<Node> {
    group(5, LARGE_5, NetworkConfig::new().capacity(4).lossy(true))
        .sometimes("a_command_is_applied", a_command_is_applied)
}
