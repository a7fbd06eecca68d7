//! Several kinds of process: clients and a lock server, two process types
//! in one model through `#[cmc::roles]`.
//!
//! The clients take turns holding a lock that the server hands out: a
//! client asks for it, waits for the grant, holds it, releases it, and does
//! that `ROUNDS` times. The server queues the clients that ask while the
//! lock is taken. The network is unordered, so a client's release and its
//! next request may arrive in either order.
//!
//! With the feature `bug-regrant` the server answers a request from the
//! client that holds the lock with another grant, as if it were a
//! retransmission: cmc finds the reordering that gives two clients the
//! lock at once.

use std::collections::VecDeque;

use cmc::{Ctx, View};

/// How many times each client takes the lock.
pub const ROUNDS: u32 = 2;

/// Whether the server has the seeded bug (the feature `bug-regrant`).
pub const SEEDED_BUG: bool = cfg!(feature = "bug-regrant");

// ANCHOR: messages
/// What clients and the server exchange: one message type for both roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Acquire,
    Grant,
    Release,
}
// ANCHOR_END: messages

// ANCHOR: client
/// Where a client is in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Waiting,
    Holding,
}

/// A client: asks the server for the lock, holds it, releases it.
#[derive(Debug)]
pub struct Client {
    server: usize,
    phase: Phase,
    rounds_done: u32,
}

impl Client {
    /// A client of the server with process id `server`.
    pub fn new(server: usize) -> Self {
        Client {
            server,
            phase: Phase::Idle,
            rounds_done: 0,
        }
    }

    /// Whether the client holds the lock.
    pub fn holds_lock(&self) -> bool {
        self.phase == Phase::Holding
    }
}

#[cmc::process(msg = Msg)]
impl Client {
    #[handler(guard = Self::wants_lock)]
    fn acquire(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(self.server, Msg::Acquire);
        self.phase = Phase::Waiting;
    }

    fn wants_lock(&self) -> bool {
        self.phase == Phase::Idle && self.rounds_done < ROUNDS
    }

    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, Msg::Grant)) = ctx.recv() {
            self.phase = Phase::Holding;
        }
    }

    fn has_mail(&self, view: &View<'_, Self>) -> bool {
        view.has_mail()
    }

    #[handler(guard = Self::holds_lock)]
    fn release(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(self.server, Msg::Release);
        self.phase = Phase::Idle;
        self.rounds_done += 1;
    }

    /// A client never runs more rounds than it was asked to.
    #[invariant]
    fn rounds_bounded(&self) -> bool {
        self.rounds_done <= ROUNDS
    }
}
// ANCHOR_END: client

// ANCHOR: server
/// The lock server: who holds the lock, and who waits for it, in order.
#[derive(Debug, Default)]
pub struct Server {
    holder: Option<usize>,
    waiting: VecDeque<usize>,
}

#[cmc::process(msg = Msg)]
impl Server {
    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        match ctx.recv() {
            Some((client, Msg::Acquire)) => {
                if SEEDED_BUG && self.holder == Some(client) {
                    // The bug: taken for a retransmission, answered again.
                    let _ = ctx.send(client, Msg::Grant);
                } else if self.holder.is_none() {
                    self.holder = Some(client);
                    let _ = ctx.send(client, Msg::Grant);
                } else {
                    self.waiting.push_back(client);
                }
            }
            Some((client, Msg::Release)) if self.holder == Some(client) => {
                self.holder = self.waiting.pop_front();
                if let Some(next) = self.holder {
                    let _ = ctx.send(next, Msg::Grant);
                }
            }
            _ => {}
        }
    }

    fn has_mail(&self, view: &View<'_, Self>) -> bool {
        view.has_mail()
    }

    /// No client waits twice.
    #[invariant]
    fn waits_once(&self) -> Result<(), String> {
        for (i, client) in self.waiting.iter().enumerate() {
            if self.waiting.iter().skip(i + 1).any(|c| c == client) {
                return Err(format!("client {client} waits twice: {:?}", self.waiting));
            }
        }
        Ok(())
    }
}
// ANCHOR_END: server

// ANCHOR: roles
/// Every process of the model is a client or the server.
#[cmc::roles]
#[derive(Debug)]
pub enum Node {
    Client(Client),
    Server(Server),
}
// ANCHOR_END: roles

// ANCHOR: invariant
/// At most one client holds the lock.
#[cmc::invariant]
fn mutual_exclusion(world: &cmc::World<'_, Node>) -> Result<(), String> {
    let holders: Vec<usize> = (0..world.process_count())
        .filter(|&i| matches!(world.process(i), Node::Client(c) if c.holds_lock()))
        .collect();
    if holders.len() <= 1 {
        Ok(())
    } else {
        Err(format!("processes {holders:?} all hold the lock"))
    }
}
// ANCHOR_END: invariant

// ANCHOR: model
/// The server is process 0; processes 1 to `clients` are its clients.
/// Each client has at most two messages in flight and one grant coming,
/// so the network never fills up and no message is lost.
pub fn lock_service(clients: usize) -> cmc::Model<Node> {
    cmc::Model::new("lock_service", clients + 1, |i| match i {
        0 => Node::Server(Server::default()),
        _ => Node::Client(Client::new(0)),
    })
    .network(cmc::NetworkConfig::new().capacity(2 * clients))
    .quiescence_ok(true)
}

#[cmc::model]
pub fn two_clients() -> cmc::Model<Node> {
    lock_service(2)
}
// ANCHOR_END: model
