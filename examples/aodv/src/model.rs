//! The cmc model of AODV (thesis §4.4): every process is a [`Node`] driven
//! by the events of thesis Table 4.1, over a network that is a bounded,
//! unordered, lossy multiset of packets (the wire bytes). The network is
//! fully connected (the CMC setting), a line or a ring ([`Topology`]); the
//! [`Bounds`] also say who looks for whom, which links may break, and
//! whether nodes reboot and routes expire.
//!
//! Time is abstract: the engine's timers are kept per process and any
//! pending one may expire at any moment, except the long ones
//! (DELETE_PERIOD for route deletion and the reboot wait,
//! PATH_DISCOVERY_TIME for the RREQ ID cache), which are only allowed to
//! expire when the network holds no packet. In real time these periods are
//! far longer than a packet can live (NET_TRAVERSAL_TIME), so when they end
//! every packet sent before they began is gone; without that rule the
//! checker reports loops that need a packet to outlive DELETE_PERIOD (see
//! the README).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use cmc::{Ctx, Model, NetworkConfig, View, World};

use crate::message::{Addr, Message};
use crate::node::{Action, Config, Node, Timer};
use crate::{seqno, INFINITY};

/// The address of model process `i`: 10.0.0.(i+1).
pub fn addr_of(i: usize) -> Addr {
    Addr::new(10, 0, 0, i as u8 + 1)
}

/// The model process of address `a`.
pub fn index_of(a: Addr) -> usize {
    (a.0 - addr_of(0).0) as usize
}

/// A packet in flight: the encoded message. Its `Debug` decodes it for
/// traces; its identity is its bytes.
#[derive(Clone)]
pub struct Packet(pub Vec<u8>);

/// A packet is its bytes; under symmetry reduction, the message they
/// encode, whose addresses are renamed with the nodes (bytes that are not
/// the canonical encoding of a message stay bytes).
impl cmc::StateHash for Packet {
    fn state_hash(&self, h: &mut cmc::StateHasher) {
        if h.renaming() {
            if let Some(m) = Message::decode(&self.0)
                .ok()
                .filter(|m| m.encode() == self.0)
            {
                std::hash::Hasher::write_u8(h, 1);
                return m.state_hash(h);
            }
            std::hash::Hasher::write_u8(h, 0);
        }
        self.0.state_hash(h)
    }
}

/// Nodes by index (a node's neighbours, the destinations it looks for,
/// the links that may break): the indices, or under symmetry reduction the
/// set of the nodes' addresses, renamed with them.
#[derive(Clone, Debug)]
struct Peers(Vec<usize>);

impl cmc::StateHash for Peers {
    fn state_hash(&self, h: &mut cmc::StateHasher) {
        if h.renaming() {
            let addrs: BTreeSet<Addr> = self.0.iter().map(|&j| addr_of(j)).collect();
            return addrs.state_hash(h);
        }
        self.0.state_hash(h)
    }
}

impl std::ops::Deref for Peers {
    type Target = Vec<usize>;
    fn deref(&self) -> &Vec<usize> {
        &self.0
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Message::decode(&self.0) {
            Ok(m) => write!(f, "{m:?}"),
            Err(e) => write!(f, "<{e}: {:02x?}>", self.0),
        }
    }
}

/// How the network damages a packet it delivers (`Bounds::garbling`). Each
/// leaves bytes that no message encodes to, so the receiver must reject
/// them.
#[derive(Clone, Copy, Debug)]
pub enum Damage {
    /// Nothing but the UDP header arrives: an empty payload.
    Empty,
    /// Cut after the first 3 bytes (a cut header; a RREP-ACK loses one).
    Header,
    /// The last byte is missing.
    Short,
    /// One byte too many.
    Padded,
    /// The type byte is 0, which no AODV message has.
    Retyped,
}

impl Damage {
    /// Every kind of damage.
    pub const ALL: [Damage; 5] = [
        Damage::Empty,
        Damage::Header,
        Damage::Short,
        Damage::Padded,
        Damage::Retyped,
    ];

    /// The damaged copy of `bytes` (a non-empty encoded message).
    pub fn apply(self, bytes: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        match self {
            Damage::Empty => b.clear(),
            Damage::Header => b.truncate(3.min(bytes.len() - 1)),
            Damage::Short => {
                b.pop();
            }
            Damage::Padded => b.push(0),
            Damage::Retyped => b[0] = 0,
        }
        b
    }
}

/// Nodes a model may have: node `i` is 10.0.0.(i+1), and 10.0.0.255 would
/// be the subnet's broadcast address.
pub const MAX_NODES: usize = 254;

/// What the environment knows of every routing table: for each node with a
/// valid route, its next hop towards each destination it has a valid route
/// to. Handlers publish it after every step; the guards of the long timers
/// read it (a guard sees only its own process).
#[derive(Debug, Default, cmc::StateHash)]
pub struct Network {
    /// Node → (destination → next hop). A node without valid routes has no
    /// entry (rather than an empty one, which would make a second state
    /// that means the same).
    next_hops: HashMap<Addr, HashMap<Addr, Addr>>,
}

impl Network {
    /// Whether some node other than `n` has a valid route to `d` (or, with
    /// `None`, to any destination other than `n`) whose next hop is `n`.
    fn routes_through(&self, n: Addr, d: Option<Addr>) -> bool {
        self.next_hops.iter().any(|(&i, row)| {
            i != n
                && row
                    .iter()
                    .any(|(&dest, &hop)| hop == n && dest != n && d.is_none_or(|d| d == dest))
        })
    }
}

/// Who hears whom. A node's broadcasts reach its neighbours only, and its
/// links to them are the ones that can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Every node is every other node's neighbour (the CMC setting).
    Full,
    /// Node `i` neighbours nodes `i - 1` and `i + 1`: routes of several hops
    /// form without any message being lost.
    Line,
    /// A line whose ends are neighbours too: two disjoint paths between
    /// some pairs of nodes.
    Ring,
}

impl Topology {
    /// Whether nodes `a` and `b` (of `nodes`) are neighbours.
    pub fn linked(self, a: usize, b: usize, nodes: usize) -> bool {
        let ring_ends = nodes > 2 && (a.min(b), a.max(b)) == (0, nodes - 1);
        a != b
            && match self {
                Topology::Full => true,
                Topology::Line => a.abs_diff(b) == 1,
                Topology::Ring => a.abs_diff(b) == 1 || ring_ends,
            }
    }
}

/// A node of the model: the engine, the timers it asked for and its part
/// of the environment.
#[derive(Clone, Debug, cmc::StateHash)]
pub struct AodvNode {
    /// The protocol engine.
    pub node: Node,
    /// The timers pending (time is abstract: which ones, not when).
    timers: BTreeSet<Timer>,
    /// Timers cancelled while already expiring (`Bounds::late_timers`):
    /// each may still fire once.
    late: BTreeSet<Timer>,
    /// Whether cancelled timers may fire late.
    late_timers: bool,
    nodes: usize,
    /// The neighbours, by index.
    neighbours: Peers,
    /// The nodes this node may look for a route to, by index.
    wants: Peers,
    /// The neighbours whose link may break, by index.
    breakable: Peers,
    /// Whether the node may reboot.
    reboots: bool,
    /// Whether valid routes may expire.
    expiry: bool,
    /// Whether packets may arrive damaged.
    garbling: bool,
    /// Whether the application asks again while a discovery is in progress.
    repeats: bool,
    /// The first route update that broke the §6.2 rule (see
    /// [`AodvNode::drive`]).
    bad_update: Option<BadUpdate>,
}

/// A route replaced in breach of the §6.2 rule: at the same, known sequence
/// number, by one that is not shorter.
#[derive(Clone, Copy, Debug, cmc::StateHash)]
struct BadUpdate {
    dest: Addr,
    seq: u32,
    old_hops: u8,
    old_next_hop: Addr,
    new_hops: u8,
    new_next_hop: Addr,
}

impl AodvNode {
    fn new(i: usize, b: &Bounds) -> Self {
        let nodes = b.nodes;
        let config = Config {
            rreq_retries: b.retries,
            gratuitous: true,
            request_ack: b.request_ack,
            first_seq: b.first_seq,
            net_diameter: b.net_diameter,
            ..Config::default()
        };
        AodvNode {
            node: Node::new(addr_of(i), config),
            timers: BTreeSet::new(),
            late: BTreeSet::new(),
            late_timers: b.late_timers,
            nodes,
            neighbours: Peers(
                (0..nodes)
                    .filter(|&j| b.topology.linked(i, j, nodes))
                    .collect(),
            ),
            wants: Peers(
                (0..nodes)
                    .filter(|&j| j != i && b.flows.is_none_or(|f| f.contains(&(i, j))))
                    .collect(),
            ),
            breakable: Peers(
                (0..nodes)
                    .filter(|&j| {
                        b.topology.linked(i, j, nodes)
                            && b.breaks.is_none_or(|l| l.contains(&(i, j)))
                    })
                    .collect(),
            ),
            reboots: b.reboots,
            expiry: b.expiry,
            garbling: b.garbling,
            repeats: b.repeat_requests,
            bad_update: None,
        }
    }

    /// The indices of this node's neighbours.
    pub fn neighbours(&self) -> &[usize] {
        &self.neighbours
    }

    /// The pending timers, in order (short ones first).
    pub fn timers(&self) -> &BTreeSet<Timer> {
        &self.timers
    }

    /// Whether timer `t` may expire now, given the network.
    fn may_fire(&self, t: Timer, in_flight: usize, net: &Network) -> bool {
        let me = self.node.addr();
        match t {
            Timer::RouteExpiry(_) | Timer::DiscoveryRetry(_) => true,
            // DELETE_PERIOD and PATH_DISCOVERY_TIME outlast every packet;
            // DELETE_PERIOD also outlasts every route that other nodes
            // learned through this node (ACTIVE_ROUTE_TIMEOUT is shorter,
            // and using such a route makes this node send a RERR).
            Timer::RreqSeen(..) => in_flight == 0,
            Timer::RouteDelete(d) => in_flight == 0 && !net.routes_through(me, Some(d)),
            Timer::RebootWait => in_flight == 0 && !net.routes_through(me, None),
        }
    }

    /// Tells the environment this node's valid next hops, if they changed.
    fn publish(&self, ctx: &mut Ctx<'_, Self>) {
        let me = self.node.addr();
        let row: HashMap<Addr, Addr> = self
            .node
            .routes()
            .iter()
            .filter(|r| r.is_valid())
            .map(|r| (r.dest, r.next_hop))
            .collect();
        let published = ctx.shared().next_hops.get(&me);
        if published.map_or(row.is_empty(), |p| *p == row) {
            return;
        }
        ctx.with_shared(|s| {
            if row.is_empty() {
                s.next_hops.remove(&me);
            } else {
                // A copy made here is allocated with the shared variables
                // (in the environment's arena), not with this process.
                s.next_hops.insert(me, row.clone());
            }
        });
    }

    fn apply(&mut self, actions: Vec<Action>, ctx: &mut Ctx<'_, Self>) {
        for a in actions {
            match a {
                Action::Broadcast(m) => {
                    let _ = ctx.multicast(self.neighbours.iter().copied(), Packet(m.encode()));
                }
                Action::Unicast(to, m) => {
                    // A node learns next hops only from neighbours it heard.
                    let to = index_of(to);
                    assert!(
                        self.neighbours.contains(&to),
                        "{:?} unicasts to {:?}, which is not a neighbour",
                        self.node.addr(),
                        addr_of(to)
                    );
                    let _ = ctx.send(to, Packet(m.encode()));
                }
                Action::SetTimer(t, _) => {
                    self.late.remove(&t);
                    self.timers.insert(t);
                }
                Action::CancelTimer(t) => {
                    if self.timers.remove(&t) && self.late_timers {
                        self.late.insert(t);
                    }
                }
                Action::CancelAllTimers => {
                    // A reboot loses the timers with everything else.
                    self.timers.clear();
                    self.late.clear();
                }
                Action::RouteFound(_) | Action::DiscoveryFailed(_) => {}
            }
        }
        self.publish(ctx);
    }

    /// Destinations this node lacks a valid route to and is not already
    /// looking for (or, with `Bounds::repeat_requests`, is looking for: the
    /// application asks again, and the engine must ignore it).
    fn wanted(&self) -> Vec<Addr> {
        self.wants
            .iter()
            .map(|&j| addr_of(j))
            .filter(|&d| {
                d != self.node.addr()
                    && self.node.routes().valid(d).is_none()
                    && (self.repeats || !self.node.discovering(d))
            })
            .collect()
    }

    fn short_timers(&self) -> Vec<Timer> {
        self.timers
            .iter()
            .copied()
            .filter(|t| match t {
                Timer::RouteExpiry(_) => self.expiry,
                Timer::DiscoveryRetry(_) => true,
                _ => false,
            })
            .collect()
    }

    fn long_timers(&self, in_flight: usize, net: &Network) -> Vec<Timer> {
        self.timers
            .iter()
            .copied()
            .filter(|t| !matches!(t, Timer::RouteExpiry(_) | Timer::DiscoveryRetry(_)))
            .filter(|&t| self.may_fire(t, in_flight, net))
            .collect()
    }

    fn fire(&mut self, t: Timer, ctx: &mut Ctx<'_, Self>) {
        self.timers.remove(&t);
        self.drive(ctx, |n| n.timer_expired(t));
    }

    /// Runs one engine event and carries out its actions, auditing the
    /// §6.2 update rule on the way: a valid route whose sequence number is
    /// known and stays the same may change only to a strictly shorter one.
    /// (A message's route is never fresher than its sender's current one,
    /// so this rule is what keeps the next hop strictly fresher; an
    /// implementation that accepts an equally long route breaks it without
    /// closing a loop, so the loop invariants alone cannot see it.)
    fn drive(&mut self, ctx: &mut Ctx<'_, Self>, event: impl FnOnce(&mut Node) -> Vec<Action>) {
        let before = self.node.routes().clone();
        let actions = event(&mut self.node);
        if self.bad_update.is_none() {
            self.bad_update = self
                .node
                .routes()
                .sorted()
                .into_iter()
                .filter(|new| new.is_valid())
                .find_map(|new| {
                    let old = before.valid(new.dest)?;
                    let changed = (old.hops, old.next_hop) != (new.hops, new.next_hop);
                    let breach = old.valid_seq
                        && new.valid_seq
                        && old.seq == new.seq
                        && changed
                        && new.hops >= old.hops;
                    breach.then_some(BadUpdate {
                        dest: new.dest,
                        seq: new.seq,
                        old_hops: old.hops,
                        old_next_hop: old.next_hop,
                        new_hops: new.hops,
                        new_next_hop: new.next_hop,
                    })
                });
        }
        self.apply(actions, ctx);
    }
}

// ANCHOR: process
#[cmc::process(msg = Packet, shared = Network)]
impl AodvNode {
    /// Table 4.1: a node without a valid route to some destination starts a
    /// route discovery (every such destination is explored).
    #[handler(guard = Self::can_originate)]
    fn originate(&mut self, ctx: &mut Ctx<'_, Self>) {
        let wanted = self.wanted();
        let dest = wanted[cmc::choose(wanted.len())];
        self.drive(ctx, |n| n.originate(dest));
    }

    fn can_originate(&self) -> bool {
        !self.node.is_waiting() && !self.wanted().is_empty()
    }

    /// Table 4.1: a pending message is received.
    #[handler(guard = Self::has_mail)]
    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, Packet(bytes))) = ctx.recv() {
            self.drive(ctx, |n| n.receive(addr_of(from), &bytes));
        }
    }

    fn has_mail(&self, view: &View<'_, Self>) -> bool {
        view.has_mail()
    }

    /// A pending message arrives damaged (`Bounds::garbling`): cut short,
    /// padded or with an unknown type (every kind is explored). No damage
    /// leaves a well-formed message.
    #[handler(guard = Self::has_garbled_mail)]
    fn receive_garbled(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((from, Packet(bytes))) = ctx.recv() {
            let damaged = Damage::ALL[cmc::choose(Damage::ALL.len())].apply(&bytes);
            self.drive(ctx, |n| n.receive(addr_of(from), &damaged));
        }
    }

    fn has_garbled_mail(&self, view: &View<'_, Self>) -> bool {
        self.garbling && view.has_mail()
    }

    /// Table 4.1: a route times out, or a discovery's wait ends (any order:
    /// time is abstract).
    #[handler(guard = Self::has_short_timer)]
    fn timeout(&mut self, ctx: &mut Ctx<'_, Self>) {
        let ts = self.short_timers();
        let t = ts[cmc::choose(ts.len())];
        self.fire(t, ctx);
    }

    fn has_short_timer(&self) -> bool {
        !self.short_timers().is_empty()
    }

    /// DELETE_PERIOD or PATH_DISCOVERY_TIME ends: only once the network is
    /// empty and, for DELETE_PERIOD, no other node routes through this one
    /// (see the module documentation).
    #[handler(guard = Self::long_timer_may_fire)]
    fn long_timeout(&mut self, ctx: &mut Ctx<'_, Self>) {
        // The guard held in this state, so the network is empty.
        let ts = self.long_timers(0, ctx.shared());
        let t = ts[cmc::choose(ts.len())];
        self.fire(t, ctx);
    }

    fn long_timer_may_fire(&self, view: &View<'_, Self>) -> bool {
        !self.long_timers(view.in_flight(), view.shared()).is_empty()
    }

    /// A cancelled timer fires after all (`Bounds::late_timers`; every
    /// such timer is explored): the engine must ignore it.
    #[handler(guard = Self::has_late_timer)]
    fn late_timeout(&mut self, ctx: &mut Ctx<'_, Self>) {
        let t = *self
            .late
            .iter()
            .nth(cmc::choose(self.late.len()))
            .expect("the guard saw a late timer");
        self.late.remove(&t);
        self.drive(ctx, |n| n.timer_expired(t));
    }

    fn has_late_timer(&self) -> bool {
        !self.late.is_empty()
    }

    /// Table 4.1: the link to a neighbour breaks (every neighbour is
    /// explored).
    #[handler(guard = Self::has_breakable_links)]
    fn link_break(&mut self, ctx: &mut Ctx<'_, Self>) {
        let n = self.breakable[cmc::choose(self.breakable.len())];
        self.drive(ctx, |node| node.link_broken(addr_of(n)));
    }

    fn has_breakable_links(&self) -> bool {
        !self.breakable.is_empty()
    }

    fn may_reboot(&self) -> bool {
        self.reboots
    }

    /// Table 4.1: the node reboots and loses its state.
    #[handler(guard = Self::may_reboot)]
    fn reboot(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.drive(ctx, |n| n.reboot());
    }

    /// At most one entry per destination: every entry is filed under its
    /// own destination.
    #[invariant]
    fn one_entry_per_destination(&self) -> Result<(), String> {
        let mut misfiled: Vec<(Addr, Addr)> = self
            .node
            .routes()
            .entries()
            .filter(|&(d, r)| d != r.dest)
            .map(|(d, r)| (d, r.dest))
            .collect();
        if misfiled.is_empty() {
            return Ok(());
        }
        misfiled.sort_unstable();
        Err(format!(
            "{:?} files routes under other destinations (under, for): {misfiled:?}",
            self.node.addr()
        ))
    }

    /// §6.2: at an unchanged, known sequence number a valid route is
    /// replaced only by a strictly shorter one (audited by
    /// [`AodvNode::drive`]).
    #[invariant]
    fn update_rule(&self) -> Result<(), String> {
        match self.bad_update {
            None => Ok(()),
            Some(b) => Err(format!(
                "{:?} replaced its route to {:?} (seq {}, hops {} via {:?}) by (seq {}, hops {} via {:?})",
                self.node.addr(),
                b.dest,
                b.seq,
                b.old_hops,
                b.old_next_hop,
                b.seq,
                b.new_hops,
                b.new_next_hop
            )),
        }
    }

    /// A route to self has hop count 0, or there is none (this port keeps
    /// none).
    #[invariant]
    fn route_to_self(&self) -> Result<(), String> {
        match self.node.routes().get(self.node.addr()) {
            Some(r) if r.hops != 0 => Err(format!(
                "{:?} has a route to itself with hop count {}",
                self.node.addr(),
                r.hops
            )),
            _ => Ok(()),
        }
    }

    /// Hop counts are infinite or below the number of nodes; a valid route
    /// to another node has at least one hop.
    #[invariant]
    fn hop_count_bounds(&self) -> Result<(), String> {
        for r in self.node.routes().sorted() {
            if r.dest == self.node.addr() {
                continue;
            }
            let ok = if r.is_valid() {
                r.hops >= 1 && usize::from(r.hops) < self.nodes
            } else {
                r.hops == INFINITY
            };
            if !ok {
                return Err(format!(
                    "{:?}: route to {:?} has hop count {} ({:?})",
                    self.node.addr(),
                    r.dest,
                    r.hops,
                    r.state
                ));
            }
        }
        Ok(())
    }

    /// The host keeps exactly the timers the engine's state calls for: an
    /// expiry for each valid route and a deletion for each invalid one, a
    /// retry for each discovery in progress, one per remembered RREQ, and
    /// the reboot wait while it lasts. (So a timer never fires for a route,
    /// discovery or RREQ the engine has forgotten, and none is lost.)
    #[invariant]
    fn timers_match_state(&self) -> Result<(), String> {
        let n = &self.node;
        let mut expected: BTreeSet<Timer> = n
            .routes()
            .iter()
            .map(|r| {
                if r.is_valid() {
                    Timer::RouteExpiry(r.dest)
                } else {
                    Timer::RouteDelete(r.dest)
                }
            })
            .collect();
        expected.extend(n.discoveries().keys().map(|&d| Timer::DiscoveryRetry(d)));
        expected.extend(n.seen().iter().map(|&(o, id)| Timer::RreqSeen(o, id)));
        if n.is_waiting() {
            expected.insert(Timer::RebootWait);
        }
        if expected == self.timers {
            return Ok(());
        }
        Err(format!(
            "{:?} has timers {:?} but its state calls for {:?}",
            n.addr(),
            self.timers,
            expected
        ))
    }
}
// ANCHOR_END: process

// ANCHOR: loop_freedom
/// Loop freedom: following valid next hops towards any destination never
/// revisits a node.
#[cmc::invariant]
fn loop_freedom(world: &World<'_, AodvNode>) -> Result<(), String> {
    let n = world.process_count();
    for d in 0..n {
        let dest = addr_of(d);
        for start in 0..n {
            let mut path = vec![start];
            let mut at = start;
            while at != d {
                let Some(r) = world.process(at).node.routes().valid(dest) else {
                    break;
                };
                at = index_of(r.next_hop);
                if at >= n {
                    break;
                }
                if path.contains(&at) {
                    path.push(at);
                    let names: Vec<String> =
                        path.iter().map(|&i| format!("{:?}", addr_of(i))).collect();
                    return Err(format!(
                        "routing loop towards {dest:?}: {}",
                        names.join(" -> ")
                    ));
                }
                path.push(at);
            }
        }
    }
    Ok(())
}
// ANCHOR_END: loop_freedom

/// The net sequence number (AODV.md): the number if valid, minus one if not
/// (wrapping, like every sequence number).
fn net_seq(r: &crate::Route) -> u32 {
    r.seq.wrapping_sub(u32::from(!r.is_valid()))
}

/// The freshness invariant (AODV.md, from the mechanised proof): if `i` has
/// a valid route to `d` via `n ≠ d` and `n` has a valid route to `d`, `n`'s
/// is strictly fresher: a greater net sequence number, or an equal one with
/// fewer hops. Sequence numbers are compared as §6.1 says, across
/// wrap-around.
#[cmc::invariant]
fn freshness(world: &World<'_, AodvNode>) -> Result<(), String> {
    for p in world.processes() {
        for r in p
            .node
            .routes()
            .sorted()
            .into_iter()
            .filter(|r| r.is_valid() && r.valid_seq)
        {
            if r.next_hop == r.dest {
                continue;
            }
            // A node in its reboot wait has forgotten what it told others
            // (that is what the wait of §6.13 is for): it is exempt.
            let Some(nb) = world
                .processes()
                .find(|q| q.node.addr() == r.next_hop && !q.node.is_waiting())
                .and_then(|q| q.node.routes().valid(r.dest))
            else {
                continue;
            };
            let fresher = nb.valid_seq
                && (seqno::newer(net_seq(nb), net_seq(r))
                    || (net_seq(nb) == net_seq(r) && nb.hops < r.hops));
            if !fresher {
                return Err(format!(
                    "{:?} routes to {:?} via {:?} with (seq {}, hops {}), but {:?} has (seq {}{}, hops {})",
                    p.node.addr(),
                    r.dest,
                    r.next_hop,
                    r.seq,
                    r.hops,
                    r.next_hop,
                    nb.seq,
                    if nb.valid_seq { "" } else { "?" },
                    nb.hops
                ));
            }
        }
    }
    Ok(())
}

/// Every packet in flight decodes, has zero reserved bits and no infinite
/// hop count.
#[cmc::invariant]
fn message_sanity(world: &World<'_, AodvNode>) -> Result<(), String> {
    for (from, to, Packet(bytes)) in world.in_flight() {
        let m = Message::decode(bytes).map_err(|e| format!("{from} -> {to}: {e}"))?;
        if !Message::reserved_bits_zero(bytes) {
            return Err(format!("{from} -> {to}: reserved bits set in {m:?}"));
        }
        if m.hop_count() == Some(INFINITY) {
            return Err(format!("{from} -> {to}: infinite hop count in {m:?}"));
        }
    }
    Ok(())
}

/// The bounds of a model.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Nodes.
    pub nodes: usize,
    /// Largest own sequence number a node may reach; a stored sequence
    /// number may exceed it by one (one invalidation increments it; each
    /// further link break while the neighbour keeps talking would increment
    /// it again without bound).
    pub max_seq: u32,
    /// Largest RREQ ID a node may reach.
    pub max_rreq_id: u32,
    /// Packets in flight at once.
    pub queue: usize,
    /// Whether the network may duplicate packets.
    pub duplicating: bool,
    /// Who hears whom.
    pub topology: Topology,
    /// The (originator, destination) pairs for which route discoveries
    /// happen, by node index; `None`: every pair (the CMC setting).
    pub flows: Option<&'static [(usize, usize)]>,
    /// The links that may break, as (node, neighbour) pairs by index: the
    /// node notices the break. `None`: every link, at either end.
    pub breaks: Option<&'static [(usize, usize)]>,
    /// Whether nodes may reboot.
    pub reboots: bool,
    /// Whether valid routes may expire (ACTIVE_ROUTE_TIMEOUT).
    pub expiry: bool,
    /// Whether the network may deliver a packet damaged ([`Damage`]).
    pub garbling: bool,
    /// Whether the application may ask for a route again while its
    /// discovery is in progress (as one that sends a packet after another
    /// does); otherwise it asks only when no discovery is in progress.
    pub repeat_requests: bool,
    /// RREQ retries per discovery (`Config::rreq_retries`).
    pub retries: u8,
    /// Whether nodes ask for a RREP-ACK of every RREP (`Config::request_ack`).
    pub request_ack: bool,
    /// The sequence number nodes start with (`Config::first_seq`);
    /// `max_seq` counts from it, across wrap-around.
    pub first_seq: u32,
    /// NET_DIAMETER (`Config::net_diameter`).
    pub net_diameter: u8,
    /// Whether a timer the node cancels may still fire once, as on a host
    /// whose timer was already expiring when the cancellation came (a
    /// callback racing `del_timer`); unless the node sets it again first.
    pub late_timers: bool,
}

/// The AODV model with these bounds.
pub fn aodv(name: &str, b: Bounds) -> Model<AodvNode> {
    let nodes = b.nodes;
    assert!(
        (2..=MAX_NODES).contains(&nodes),
        "an AODV model has 2 to {MAX_NODES} nodes, not {nodes}"
    );
    for &(o, d) in b.flows.unwrap_or(&[]) {
        assert!(
            o < nodes && d < nodes && o != d,
            "the flow {o} -> {d} is not between two distinct nodes of {nodes}"
        );
    }
    for &(i, j) in b.breaks.unwrap_or(&[]) {
        assert!(
            i < nodes && j < nodes && b.topology.linked(i, j, nodes),
            "{i} - {j} is not a link of the {:?} topology of {nodes} nodes",
            b.topology
        );
    }
    Model::new(name, nodes, move |i| AodvNode::new(i, &b))
        .network(
            NetworkConfig::new()
                .capacity(b.queue)
                .lossy(true)
                .duplicating(b.duplicating),
        )
        .prune_process(move |p| {
            // Sequence numbers count from `first_seq`, across wrap-around.
            let run = |s: u32| s.wrapping_sub(b.first_seq);
            run(p.node.seq()) > b.max_seq
                || p.node.rreq_id() > b.max_rreq_id
                || p.node.routes().iter().any(|r| run(r.seq) > b.max_seq + 1)
        })
        .quiescence_ok(true)
        .debug_with(show)
}

/// A compact view of a node for traces: own sequence number, RREQ ID, each
/// route as `dest=(seq, hops) via next`, pending timers.
pub fn show(p: &AodvNode) -> String {
    let n = &p.node;
    let mut s = format!("{:?} seq={} id={}", n.addr(), n.seq(), n.rreq_id());
    if n.is_waiting() {
        s.push_str(" WAITING");
    }
    for r in n.routes().sorted() {
        s.push_str(&format!(
            " | {:?}=({}{}, {}) via {:?}{}{:?}",
            r.dest,
            r.seq,
            if r.valid_seq { "" } else { "?" },
            r.hops,
            r.next_hop,
            if r.is_valid() { "" } else { " INVALID" },
            r.precursors
        ));
    }
    s.push_str(&format!(" | timers {:?}", p.timers()));
    s
}

/// The starting bounds: three fully connected nodes that may all look for
/// each other, with every event of Table 4.1; sequence numbers and RREQ IDs
/// up to 1, one packet in flight.
pub const SMALL: Bounds = Bounds {
    nodes: 3,
    max_seq: 1,
    max_rreq_id: 1,
    queue: 1,
    duplicating: false,
    topology: Topology::Full,
    flows: None,
    breaks: None,
    reboots: true,
    expiry: true,
    garbling: false,
    repeat_requests: false,
    retries: 0,
    request_ack: false,
    first_seq: 0,
    net_diameter: crate::consts::NET_DIAMETER,
    late_timers: false,
};

/// Four nodes in a ring (0–1–2–3–0) with every event and two packets in
/// flight: the smallest network with two disjoint paths of equal length,
/// where stale requests and replies cross.
pub const RING: Bounds = Bounds {
    nodes: 4,
    queue: 2,
    topology: Topology::Ring,
    ..SMALL
};

/// The RERR race of the specification bug (thesis §4.6.5): four nodes in a
/// line 0–1–2–3; node 1 looks for node 3 and node 3 for node 0; only the
/// link from node 2 to node 3 breaks; no reboots and no route expiry;
/// sequence numbers and RREQ IDs up to 2; two packets in flight. The race
/// needs a node that routes through the victim of a stale RERR, fresh
/// information arriving between the RERR's sending and its receipt, and a
/// second discovery: 15 steps, beyond breadth-first reach in the
/// unrestricted four-node environment.
pub const RERR_RACE: Bounds = Bounds {
    nodes: 4,
    max_seq: 2,
    max_rreq_id: 2,
    queue: 2,
    topology: Topology::Line,
    flows: Some(&[(1, 3), (3, 0)]),
    breaks: Some(&[(2, 3)]),
    reboots: false,
    expiry: false,
    ..SMALL
};

/// Two nodes (explored completely).
#[cmc::model]
pub fn aodv_2_nodes() -> Model<AodvNode> {
    aodv("aodv_2_nodes", Bounds { nodes: 2, ..SMALL })
}

/// Three nodes, to depth 10.
#[cmc::model]
pub fn aodv_3_nodes() -> Model<AodvNode> {
    aodv("aodv_3_nodes", SMALL).max_depth(10)
}

/// `aodv_3_nodes` with the nodes declared interchangeable: in a full mesh
/// where every node may look for every other, a state and its renamings of
/// the nodes (addresses renamed everywhere: tables, timers, packets, the
/// shared next hops) are counted once, and the declaration is checked.
#[cmc::model]
pub fn aodv_3_symmetric() -> Model<AodvNode> {
    aodv("aodv_3_symmetric", SMALL)
        .max_depth(10)
        .interchangeable(0..3, addr_of)
}

/// Four nodes, to depth 7.
#[cmc::model]
pub fn aodv_4_nodes() -> Model<AodvNode> {
    aodv("aodv_4_nodes", Bounds { nodes: 4, ..SMALL }).max_depth(7)
}

/// Four nodes in a ring ([`RING`]), to depth 8.
#[cmc::model]
pub fn aodv_4_ring() -> Model<AodvNode> {
    aodv("aodv_4_ring", RING).max_depth(8)
}

/// The RERR race environment ([`RERR_RACE`]), to depth 15.
#[cmc::model]
pub fn aodv_4_line() -> Model<AodvNode> {
    aodv("aodv_4_line", RERR_RACE).max_depth(15)
}

/// Three fully connected nodes with the options the other models leave
/// off: RREQ retries (the RFC's RREQ_RETRIES = 2), a RREP-ACK asked for on
/// every RREP, an application that asks again while it waits, and a
/// network that damages packets; RREQ IDs up to 3 (a discovery and its two
/// retries), to depth 8.
#[cmc::model]
pub fn aodv_3_options() -> Model<AodvNode> {
    aodv("aodv_3_options", OPTIONS).max_depth(8)
}

/// The environment of [`aodv_3_options`].
pub const OPTIONS: Bounds = Bounds {
    max_rreq_id: 3,
    garbling: true,
    repeat_requests: true,
    retries: crate::consts::RREQ_RETRIES,
    request_ack: true,
    ..SMALL
};

/// Three fully connected nodes whose sequence numbers start two below the
/// wrap-around: a node's own number goes 2^32 - 2, 2^32 - 1, 1 (0 is
/// skipped, §6.1 and `seqno::increment`), a stored one may wrap to 0. Every
/// event, one packet in flight, to depth 9.
#[cmc::model]
pub fn aodv_3_wrap() -> Model<AodvNode> {
    aodv("aodv_3_wrap", WRAP).max_depth(9)
}

/// The environment of [`aodv_3_wrap`]: `max_seq` 3 counts the skipped 0.
pub const WRAP: Bounds = Bounds {
    max_seq: 3,
    first_seq: u32::MAX - 1,
    ..SMALL
};

/// Three fully connected nodes on hosts whose timers may fire just after
/// they were cancelled, configured for the network they form: every node
/// hears every other, so NET_DIAMETER is 1 and no RREQ is rebroadcast
/// (routes through a neighbour come from intermediate replies). Every
/// event, one packet in flight, to depth 9.
#[cmc::model]
pub fn aodv_3_hosts() -> Model<AodvNode> {
    aodv("aodv_3_hosts", HOSTS).max_depth(9)
}

/// The environment of [`aodv_3_hosts`].
pub const HOSTS: Bounds = Bounds {
    net_diameter: 1,
    late_timers: true,
    ..SMALL
};
