//! The membership node as a cmc process, and the registered models.

use cmc::{Ctx, Model, NetworkConfig, View, World};

use crate::{Id, Msg, Node};

#[cmc::process(msg = Msg)]
impl Node {
    /// The node restarts at its next incarnation.
    #[handler(guard = Self::can_restart)]
    fn restart_node(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.restart();
        self.flush(ctx);
    }

    /// The node suspects one of the peers it knows.
    #[handler(guard = may_suspect)]
    fn suspect_peer(&mut self, ctx: &mut Ctx<'_, Self>) {
        let peers = self.suspectable();
        let peer = peers[cmc::choose(peers.len())];
        self.suspect(peer);
        self.flush(ctx);
    }

    /// The node gossips its view to one peer.
    #[handler(guard = Self::can_gossip)]
    fn gossip_digest(&mut self, ctx: &mut Ctx<'_, Self>) {
        let peers: Vec<Id> = self
            .group
            .iter()
            .copied()
            .filter(|&p| p != self.id)
            .collect();
        let to = peers[cmc::choose(peers.len())];
        self.gossip(to);
        self.flush(ctx);
    }

    /// A message arrives.
    #[handler(guard = has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, msg)) = ctx.recv() {
            self.on_message(from as Id, msg);
            self.flush(ctx);
        }
    }

    fn flush(&mut self, ctx: &mut Ctx<'_, Self>) {
        while let Some((to, msg)) = self.outbox.pop_front() {
            // A full network drops what does not fit, as a real one would.
            let _ = ctx.send(to as usize, msg);
        }
    }
}

fn may_suspect(node: &Node) -> bool {
    !node.suspectable().is_empty()
}

fn has_mail(_: &Node, view: &View<'_, Node>) -> bool {
    view.has_mail()
}

#[cmc::invariant]
fn incarnations_are_never_ahead(world: &World<'_, Node>) -> Result<(), String> {
    let nodes: Vec<&Node> = world.processes().collect();
    crate::incarnations_are_never_ahead(&nodes)
}

/// The network every model uses: unordered, reliable, `capacity` messages.
pub fn network(capacity: usize) -> NetworkConfig {
    NetworkConfig::new().capacity(capacity)
}

/// `nodes` members that reach incarnation `max_incarnation` at most,
/// `capacity` messages in flight.
pub fn group(nodes: u32, max_incarnation: u32, capacity: usize) -> Model<Node> {
    Model::new("membership", nodes as usize, move |i| {
        Node::new(i as Id, nodes, max_incarnation)
    })
    .network(network(capacity))
    .quiescence_ok(true)
}

/// Two members up to incarnation 2, two messages in flight.
#[cmc::model]
pub fn membership_2() -> Model<Node> {
    group(2, 2, 2)
}

/// Three members up to incarnation 1, one message in flight.
#[cmc::model]
pub fn membership_3() -> Model<Node> {
    group(3, 1, 1)
}

// ANCHOR: symmetric
/// `model` (of `nodes` nodes) with the nodes declared interchangeable. The
/// crate's ids are plain `u32`s, named by type and field; the log names
/// ids as text ("suspects 2"), which no renaming can rewrite, and is for
/// humans: it is hidden.
pub fn symmetric(model: Model<Node>, nodes: u32) -> Model<Node> {
    interchangeable_ids(model, nodes).hidden_in("membership::Node", &["log"])
}
// ANCHOR_END: symmetric

/// `model` with the nodes declared interchangeable and the fields that hold
/// ids named, the log not hidden.
pub fn interchangeable_ids(model: Model<Node>, nodes: u32) -> Model<Node> {
    model
        .interchangeable(0..nodes as usize, |i| i as Id)
        .ids_in(
            "membership::Node",
            &["id", "group", "members", "suspects", "learned", "outbox.0"],
        )
        .ids_in(
            "membership::Msg",
            &["from", "about", "known", "incarnations"],
        )
}

/// `membership_2` with its nodes interchangeable (a node has one peer, so
/// which message a full network drops does not depend on names).
#[cmc::model]
pub fn membership_2_symmetric() -> Model<Node> {
    symmetric(group(2, 2, 2), 2)
}
