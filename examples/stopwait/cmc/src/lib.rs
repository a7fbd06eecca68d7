//! Models of `stopwait`, checked by `cargo cmc check` (run it in
//! `stopwait`'s directory or in this one).
//!
//! `stopwait` is a library written without cmc in mind: its `Sender` and
//! `Receiver` return the actions to perform, and know nothing of processes,
//! networks or timers. This crate wraps each in a process type of its own,
//! performs their actions with cmc's environment, and says what must hold.
//!
//! With the library's feature `bug-stale-ack` (forwarded by this crate's
//! feature of the same name), the sender takes a late acknowledgement of
//! the previous payload for one of the payload in flight.

use cmc::{Ctx, NetworkConfig, Process, View};
use stopwait::{Action, Packet, Receiver, Sender};

/// The payloads the application sends, in order.
pub const PAYLOADS: [&str; 2] = ["a", "b"];

/// The sender is process 0, the receiver process 1.
pub const SENDER: usize = 0;
/// The receiver's process id.
pub const RECEIVER: usize = 1;

/// The most retransmissions explored (see the prune in [`link`]).
pub const MAX_RETRANSMISSIONS: u64 = 2;

// ANCHOR: perform
/// The name of the sender's retransmission timer.
const RETRANSMIT: &str = "retransmit";

/// Performs what the library asked for, with cmc's network and timers;
/// returns the payloads it delivered.
fn perform<P: Process<Msg = Packet>>(
    ctx: &mut Ctx<'_, P>,
    peer: usize,
    actions: Vec<Action>,
) -> Vec<String> {
    let mut delivered = Vec::new();
    for action in actions {
        match action {
            // A send into a full network is lost: the channel may lose.
            Action::Transmit(packet) => {
                let _ = ctx.send(peer, packet);
            }
            Action::ArmTimer => ctx.set_timer(RETRANSMIT),
            Action::DisarmTimer => {
                ctx.cancel_timer(RETRANSMIT);
            }
            Action::Deliver(payload) => delivered.push(payload),
        }
    }
    delivered
}
// ANCHOR_END: perform

// ANCHOR: sender
/// The library's sender as a process: the application hands it every
/// payload when the model starts.
#[derive(Debug)]
pub struct SenderNode(pub Sender);

#[cmc::process(msg = Packet)]
impl SenderNode {
    #[handler(start)]
    fn start(&mut self, ctx: &mut Ctx<'_, Self>) {
        for payload in PAYLOADS {
            let actions = self.0.send(payload);
            perform(ctx, RECEIVER, actions);
        }
    }

    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, packet)) = ctx.recv() {
            let actions = self.0.on_packet(packet);
            perform(ctx, RECEIVER, actions);
        }
    }

    fn has_mail(&self, view: &View<'_, Self>) -> bool {
        view.has_mail()
    }

    #[handler(timer = "retransmit")]
    fn timeout(&mut self, ctx: &mut Ctx<'_, Self>) {
        let actions = self.0.on_timeout();
        perform(ctx, RECEIVER, actions);
    }
}
// ANCHOR_END: sender

// ANCHOR: receiver
/// The library's receiver as a process, and the application above it:
/// what it was handed, in order.
#[derive(Debug, Default)]
pub struct ReceiverNode {
    link: Receiver,
    delivered: Vec<String>,
}

#[cmc::process(msg = Packet)]
impl ReceiverNode {
    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, packet)) = ctx.recv() {
            let actions = self.link.on_packet(packet);
            let delivered = perform(ctx, from, actions);
            self.delivered.extend(delivered);
        }
    }

    fn has_mail(&self, view: &View<'_, Self>) -> bool {
        view.has_mail()
    }

    /// The application gets the payloads in order, each once: what it was
    /// handed is a prefix of what was sent.
    #[invariant]
    fn in_order(&self) -> Result<(), String> {
        if PAYLOADS.starts_with(
            &self
                .delivered
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ) {
            Ok(())
        } else {
            Err(format!("delivered {:?} of {PAYLOADS:?}", self.delivered))
        }
    }
}
// ANCHOR_END: receiver

impl ReceiverNode {
    /// The payloads handed to the application, in order.
    pub fn delivered(&self) -> &[String] {
        &self.delivered
    }
}

// ANCHOR: roles
/// Every process is one end of the link.
#[cmc::roles]
#[derive(Debug)]
pub enum Node {
    Sender(SenderNode),
    Receiver(ReceiverNode),
}
// ANCHOR_END: roles

impl Node {
    fn sender(&self) -> Option<&Sender> {
        match self {
            Node::Sender(s) => Some(&s.0),
            Node::Receiver(_) => None,
        }
    }

    fn delivered(&self) -> &[String] {
        match self {
            Node::Receiver(r) => r.delivered(),
            Node::Sender(_) => &[],
        }
    }
}

// ANCHOR: properties
/// A payload the sender counts as acknowledged has reached the
/// application: the sender may forget it.
#[cmc::invariant]
fn acknowledged_means_delivered(world: &cmc::World<'_, Node>) -> Result<(), String> {
    let pending = world.process(SENDER).sender().map_or(0, Sender::pending);
    let acknowledged = PAYLOADS.len() - pending;
    let delivered = world.process(RECEIVER).delivered();
    if acknowledged <= delivered.len() {
        Ok(())
    } else {
        Err(format!(
            "the sender has {acknowledged} payloads acknowledged, the application got {delivered:?}"
        ))
    }
}

/// Everything can get through: the link is not stuck by construction.
#[cmc::sometimes]
fn all_delivered(world: &cmc::World<'_, Node>) -> bool {
    world.process(RECEIVER).delivered().len() == PAYLOADS.len()
}
// ANCHOR_END: properties

// ANCHOR: model
/// A sender and a receiver over `network`. The sender counts its
/// retransmissions, so every timeout makes a new state: states with more
/// than `MAX_RETRANSMISSIONS` of them are left out.
pub fn link(network: NetworkConfig) -> cmc::Model<Node> {
    cmc::Model::new("link", 2, |i| match i {
        SENDER => Node::Sender(SenderNode(Sender::new())),
        _ => Node::Receiver(ReceiverNode::default()),
    })
    .network(network)
    .prune(|world| {
        world
            .process(SENDER)
            .sender()
            .is_some_and(|s| s.retransmissions() > MAX_RETRANSMISSIONS)
    })
    .quiescence_ok(true)
}

/// The channel the library asks for: it loses and duplicates packets, but
/// keeps their order.
#[cmc::model]
pub fn lossy_link() -> cmc::Model<Node> {
    link(
        NetworkConfig::new()
            .fifo(true)
            .lossy(true)
            .duplicating(true)
            .capacity(2),
    )
}
// ANCHOR_END: model

/// A network that also reorders packets, which the library says it cannot
/// run over: an old copy of a payload passes for a new one. Not
/// registered (it fails without any bug); the tests check it.
pub fn reordering_link() -> cmc::Model<Node> {
    link(
        NetworkConfig::new()
            .lossy(true)
            .duplicating(true)
            .capacity(2),
    )
}
