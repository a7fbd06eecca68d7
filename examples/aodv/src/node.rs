//! The AODV node: a sans-IO state machine.
//!
//! # Time
//!
//! The engine keeps no clock. Every deadline is a [`Timer`] the host arms
//! when the engine returns [`Action::SetTimer`] (re-arming a pending timer
//! replaces it) and reports back with [`Node::timer_expired`]. A route's
//! lifetime is remembered only as the duration last granted to it
//! ([`Route::lifetime`]), which is what an intermediate node puts in the
//! Lifetime field of its RREP. (§6.6.2 asks for the *remaining* lifetime;
//! without a clock the engine sends the lifetime last granted, which can
//! overstate it by at most that duration.)
//!
//! # Readings of the RFC
//!
//! Where RFC 3561 is ambiguous this port reads it as follows; each reading is
//! repeated where it is implemented.
//!
//! * §6.5 / §6.2: the reverse route is updated only under the §6.2 rule
//!   (newer sequence number; or equal with fewer hops, or equal with the
//!   stored route invalid; or stored number unknown), not unconditionally as
//!   the literal text of §6.5 suggests. If afterwards there is no *valid*
//!   route to the originator, the RREQ is dropped: there is no way to send
//!   a reply, and the RREQ is older than what the node knows.
//! * §6.6.1: the destination sets its own sequence number to the maximum of
//!   its own and the RREQ's destination sequence number (the reading of
//!   the loop-freedom proof; the RFC's "increment if equal to own + 1" gives
//!   the same result in every case where it applies).
//! * §6.6.2: the precursor added to the forward route is the next hop of
//!   the reverse route (the neighbour the RREP is sent to, and that will
//!   route through this node), which is the RREQ's previous hop whenever the
//!   reverse route was just updated.
//! * §6.6.3: the gratuitous RREP carries the sequence number and hop count
//!   of the node's route to the originator as it stands after the update.
//! * §6.7: an RREP is forwarded when the forward route was created or
//!   updated, or when the stored route already is exactly the route the RREP
//!   describes (same next hop, sequence number and hop count); otherwise a
//!   second RREP for the same route would never reach its originator.
//! * §6.11 case 3: a RERR's sequence number is accepted only when it is
//!   newer than the stored one (or the stored one is unknown). The RFC says
//!   to copy it; with reordering that moves time backwards (the bug CMC
//!   found in the draft, feature `bug-rerr-seqno`).
//! * §6.11: route expiry invalidates the route and increments its sequence
//!   number like a link break, but sends no RERR (expiry is not one of the
//!   three RERR triggers of §6.11).
//! * §6.13: during the reboot wait the node ignores every control packet:
//!   it neither learns routes nor sends anything (no replies, not even as
//!   the destination, no forwarding, no RERR, no RREP-ACK). The RFC lets it
//!   create routes meanwhile; cmc found that this can close a routing loop
//!   with a neighbour that still routes through the rebooted node (see the
//!   README). A rebooted node starts with sequence number 0 and RREQ ID 0.
//! * §6.2: a route to the previous hop learned from any control message
//!   keeps a known sequence number and becomes valid with hop count 1.

use std::collections::{HashMap, HashSet};

use crate::consts::*;
use crate::message::{Addr, Message, Rerr, Rrep, Rreq};
use crate::seqno;
use crate::table::{Route, RouteState, RouteTable};
use crate::INFINITY;

/// A deadline the host keeps for the node. The short ones (which may end at
/// any moment in the model) sort first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, cmc::StateHash)]
pub enum Timer {
    /// A valid route's lifetime ends: it is invalidated.
    RouteExpiry(Addr),
    /// A route discovery got no reply in time: retry or give up.
    DiscoveryRetry(Addr),
    /// An invalid route's DELETE_PERIOD ends: it is deleted.
    RouteDelete(Addr),
    /// An (originator, RREQ ID) pair is forgotten (PATH_DISCOVERY_TIME).
    RreqSeen(Addr, u32),
    /// The reboot wait (DELETE_PERIOD, §6.13) ends.
    RebootWait,
}

/// What the host must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to every neighbour (IP broadcast on port 654).
    Broadcast(Message),
    /// Send to one neighbour.
    Unicast(Addr, Message),
    /// Arm (or re-arm) a timer to fire after this many ms.
    SetTimer(Timer, u32),
    /// Disarm a timer.
    CancelTimer(Timer),
    /// Disarm every timer of this node (after a reboot).
    CancelAllTimers,
    /// A discovery this node started found a route.
    RouteFound(Addr),
    /// A discovery this node started failed after its retries.
    DiscoveryFailed(Addr),
}

/// Node configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, cmc::StateHash)]
pub struct Config {
    /// RREQ retries per discovery (RREQ_RETRIES).
    pub rreq_retries: u8,
    /// Set the G flag on originated RREQs (ask for gratuitous RREPs).
    pub gratuitous: bool,
    /// Set the D flag on originated RREQs.
    pub dest_only: bool,
    /// Set the A flag on every RREP this node sends or forwards, asking the
    /// next hop for a RREP-ACK (§5.2, §6.7): what a node does when it
    /// suspects its links to be unidirectional. The acknowledgement itself
    /// is not used (blacklists, §6.8, are not built).
    pub request_ack: bool,
    /// The sequence number the node starts with, after a reboot too. RFC
    /// 3561 fixes no starting value; a node that keeps its number across
    /// restarts, or has run long, starts near the wrap-around of §6.1.
    pub first_seq: u32,
    /// NET_DIAMETER (§10): the most hops between two nodes of the network;
    /// a RREQ that has travelled that far is not rebroadcast. A network
    /// known to be smaller (every node hears every other: 1) sets it lower.
    pub net_diameter: u8,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rreq_retries: RREQ_RETRIES,
            gratuitous: false,
            dest_only: false,
            request_ack: false,
            first_seq: 0,
            net_diameter: NET_DIAMETER,
        }
    }
}

/// An AODV node.
#[derive(Clone, Debug, cmc::StateHash)]
pub struct Node {
    addr: Addr,
    seq: u32,
    rreq_id: u32,
    config: Config,
    waiting: bool,
    routes: RouteTable,
    /// (originator, RREQ ID) pairs seen within PATH_DISCOVERY_TIME.
    seen: HashSet<(Addr, u32)>,
    /// Discoveries in progress: the destination and the retries made so
    /// far.
    discoveries: HashMap<Addr, u32>,
}

/// The hop count after one more hop, or `None` when it would reach
/// [`INFINITY`] (such a message is dropped).
fn add_hop(h: u8) -> Option<u8> {
    if h >= INFINITY - 1 {
        None
    } else {
        Some(h + 1)
    }
}

impl Node {
    /// A node that has just started (sequence number
    /// [`Config::first_seq`], empty table).
    pub fn new(addr: Addr, config: Config) -> Node {
        Node {
            addr,
            config,
            seq: config.first_seq,
            rreq_id: 0,
            waiting: false,
            routes: RouteTable::default(),
            seen: HashSet::new(),
            discoveries: HashMap::new(),
        }
    }

    /// This node's address.
    pub fn addr(&self) -> Addr {
        self.addr
    }

    /// Its own sequence number.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The last RREQ ID it used.
    pub fn rreq_id(&self) -> u32 {
        self.rreq_id
    }

    /// Whether it is in the reboot wait (§6.13).
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// The routing table.
    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    /// Discoveries in progress, with the retries each has made.
    pub fn discoveries(&self) -> &HashMap<Addr, u32> {
        &self.discoveries
    }

    /// Whether a discovery for `dest` is in progress.
    pub fn discovering(&self, dest: Addr) -> bool {
        self.discoveries.contains_key(&dest)
    }

    /// The (originator, RREQ ID) pairs remembered.
    pub fn seen(&self) -> &HashSet<(Addr, u32)> {
        &self.seen
    }

    /// The application wants a route to `dest` (§6.3). Starts a discovery
    /// unless there is a valid route, one is in progress, the node is in
    /// its reboot wait, or `dest` is the node itself.
    pub fn originate(&mut self, dest: Addr) -> Vec<Action> {
        let mut out = Vec::new();
        if self.waiting
            || dest == self.addr
            || self.routes.valid(dest).is_some()
            || self.discovering(dest)
        {
            return out;
        }
        // §6.1: increment the own sequence number immediately before
        // originating a route discovery.
        self.seq = seqno::increment(self.seq);
        self.send_rreq(dest, &mut out);
        self.discoveries.insert(dest, 0);
        out.push(Action::SetTimer(
            Timer::DiscoveryRetry(dest),
            NET_TRAVERSAL_TIME,
        ));
        out
    }

    fn send_rreq(&mut self, dest: Addr, out: &mut Vec<Action>) {
        self.rreq_id = self.rreq_id.wrapping_add(1);
        let known = self.routes.get(dest).filter(|r| r.valid_seq);
        let q = Rreq {
            join: false,
            repair: false,
            gratuitous: self.config.gratuitous,
            dest_only: self.config.dest_only,
            unknown_seq: known.is_none(),
            hop_count: 0,
            rreq_id: self.rreq_id,
            dest,
            dest_seq: known.map_or(0, |r| r.seq),
            orig: self.addr,
            orig_seq: self.seq,
        };
        self.remember(self.addr, self.rreq_id, out);
        out.push(Action::Broadcast(Message::Rreq(q)));
    }

    fn remember(&mut self, orig: Addr, id: u32, out: &mut Vec<Action>) {
        self.seen.insert((orig, id));
        out.push(Action::SetTimer(
            Timer::RreqSeen(orig, id),
            PATH_DISCOVERY_TIME,
        ));
    }

    /// A packet arrived from neighbour `from`. Malformed packets are
    /// dropped.
    pub fn receive(&mut self, from: Addr, bytes: &[u8]) -> Vec<Action> {
        match Message::decode(bytes) {
            Ok(m) => self.handle(from, m),
            Err(_) => Vec::new(),
        }
    }

    /// A decoded message arrived from neighbour `from`.
    pub fn handle(&mut self, from: Addr, msg: Message) -> Vec<Action> {
        let mut out = Vec::new();
        // Reading of §6.13: during the reboot wait the node ignores control
        // packets altogether. The RFC lets it create routes meanwhile, but
        // its neighbours may still route through it with knowledge it has
        // lost, so a route it learns can close a loop at once (cmc's
        // counterexample: an RREQ sent before the reboot is answered after
        // it by a neighbour whose route runs through the rebooted node).
        #[cfg(not(feature = "bug-reboot-null-route"))]
        let ignore = self.waiting;
        // Seeded bug: §6.13 read literally (learn during the wait).
        #[cfg(feature = "bug-reboot-null-route")]
        let ignore = false;
        if from == self.addr || ignore {
            return out;
        }
        // §6.2: every control message refreshes the route to its previous
        // hop.
        self.touch_neighbour(from, &mut out);
        match msg {
            Message::Rreq(q) => self.on_rreq(from, q, &mut out),
            Message::Rrep(p) => self.on_rrep(from, p, &mut out),
            Message::Rerr(e) => self.on_rerr(from, e, &mut out),
            Message::RrepAck => {}
        }
        out
    }

    fn touch_neighbour(&mut self, n: Addr, out: &mut Vec<Action>) {
        let route = match self.routes.get(n) {
            Some(r) => Route {
                state: RouteState::Valid,
                hops: 1,
                next_hop: n,
                lifetime: ACTIVE_ROUTE_TIMEOUT,
                ..r.clone()
            },
            None => Route::new(n, 0, false, RouteState::Valid, 1, n, ACTIVE_ROUTE_TIMEOUT),
        };
        self.install(route, out);
    }

    /// Puts a valid route in the table and arms its expiry.
    fn install(&mut self, route: Route, out: &mut Vec<Action>) {
        let (dest, lifetime) = (route.dest, route.lifetime);
        self.routes.put(route);
        out.push(Action::CancelTimer(Timer::RouteDelete(dest)));
        out.push(Action::SetTimer(Timer::RouteExpiry(dest), lifetime));
    }

    /// §6.2: whether fresh information (sequence number `seq`, `hops` after
    /// the increment, `msg_hops` before it) replaces the stored route.
    fn is_better(&self, dest: Addr, seq: u32, hops: u8, msg_hops: u8) -> bool {
        let _ = (hops, msg_hops);
        match self.routes.get(dest) {
            None => true,
            Some(r) if !r.valid_seq => true,
            Some(r) if seqno::newer(seq, r.seq) => true,
            Some(r) if seq == r.seq => {
                // Thesis Fig. 4.7: the comparison must be made after the
                // increment for the hop just taken.
                #[cfg(feature = "bug-hopcount-compare")]
                let shorter = msg_hops < r.hops;
                #[cfg(not(feature = "bug-hopcount-compare"))]
                let shorter = hops < r.hops;
                !r.is_valid() || shorter
            }
            Some(_) => false,
        }
    }

    /// Creates or updates the route to `dest` from a message (§6.2, §6.5,
    /// §6.7); returns whether it changed.
    #[allow(clippy::too_many_arguments)]
    fn update_route(
        &mut self,
        dest: Addr,
        seq: u32,
        hops: u8,
        msg_hops: u8,
        next_hop: Addr,
        lifetime: u32,
        out: &mut Vec<Action>,
    ) -> bool {
        if !self.is_better(dest, seq, hops, msg_hops) {
            return false;
        }
        let old = self.routes.get(dest).cloned();
        #[allow(unused_mut)]
        let mut hops = hops;
        // Seeded bug: an invalid entry with the same sequence number is
        // revalidated in place by adding the new hop to its stored hop
        // count, which is INFINITY and wraps to 0.
        #[cfg(feature = "bug-hopcount-overflow")]
        if let Some(r) = old.as_ref().filter(|r| !r.is_valid() && r.seq == seq) {
            hops = r.hops.wrapping_add(1);
        }
        // The precursors stay (§6.2 says nothing of dropping them).
        let route = match old {
            Some(mut r) => {
                r.seq = seq;
                r.valid_seq = true;
                r.state = RouteState::Valid;
                r.hops = hops;
                r.next_hop = next_hop;
                r.lifetime = lifetime;
                r
            }
            None => Route::new(dest, seq, true, RouteState::Valid, hops, next_hop, lifetime),
        };
        self.install(route, out);
        true
    }

    /// §6.5: a route request.
    fn on_rreq(&mut self, from: Addr, q: Rreq, out: &mut Vec<Action>) {
        if q.orig == self.addr || self.seen.contains(&(q.orig, q.rreq_id)) {
            return;
        }
        self.remember(q.orig, q.rreq_id, out);
        let Some(hops) = add_hop(q.hop_count) else {
            return;
        };
        // Reverse route (reading of §6.5: under the §6.2 rule), with the
        // minimal lifetime of §6.5.
        let lifetime = 2 * NET_TRAVERSAL_TIME - 2 * u32::from(hops) * NODE_TRAVERSAL_TIME;
        #[cfg(not(feature = "bug-reverse-route-revive"))]
        self.update_route(q.orig, q.orig_seq, hops, q.hop_count, from, lifetime, out);
        // Seeded bug: an invalid reverse route is revived by any RREQ from
        // its originator, and its sequence number is "copied if greater"
        // (§6.5), so it keeps the number it was invalidated with, one more
        // than the originator ever sent; the §6.2 rule is applied only to
        // valid routes.
        #[cfg(feature = "bug-reverse-route-revive")]
        match self.routes.get(q.orig).filter(|r| !r.is_valid()).cloned() {
            Some(r) => {
                let seq = if r.valid_seq {
                    seqno::max(r.seq, q.orig_seq)
                } else {
                    q.orig_seq
                };
                let route = Route {
                    seq,
                    valid_seq: true,
                    state: RouteState::Valid,
                    hops,
                    next_hop: from,
                    lifetime,
                    ..r
                };
                self.install(route, out);
            }
            None => {
                self.update_route(q.orig, q.orig_seq, hops, q.hop_count, from, lifetime, out);
            }
        }
        // Reading: no valid route back means no reply is possible and the
        // request is older than what this node knows: drop it.
        let Some(rev) = self.routes.valid(q.orig).cloned() else {
            return;
        };
        // Seeded bug: §6.13 read literally, learn but send nothing. (The
        // port ignores the packet altogether in `handle`.)
        #[cfg(feature = "bug-reboot-null-route")]
        if self.waiting {
            return;
        }
        if q.dest == self.addr {
            // §6.6.1 (reading: the maximum).
            if !q.unknown_seq {
                self.seq = seqno::max(self.seq, q.dest_seq);
            }
            let p = Rrep {
                repair: false,
                ack_required: self.config.request_ack,
                prefix_size: 0,
                hop_count: 0,
                dest: self.addr,
                dest_seq: self.seq,
                orig: q.orig,
                lifetime: MY_ROUTE_TIMEOUT,
            };
            out.push(Action::Unicast(rev.next_hop, Message::Rrep(p)));
            return;
        }
        // §6.6.2: an intermediate node replies from an active route whose
        // sequence number is known and at least the requested one.
        #[cfg(not(feature = "bug-invalid-route-reply"))]
        let fwd = self.routes.valid(q.dest).cloned();
        #[cfg(feature = "bug-invalid-route-reply")]
        let fwd = self.routes.get(q.dest).cloned();
        if let Some(fwd) = fwd.filter(|f| {
            !q.dest_only && f.valid_seq && (q.unknown_seq || !seqno::newer(q.dest_seq, f.seq))
        }) {
            let p = Rrep {
                repair: false,
                ack_required: self.config.request_ack,
                prefix_size: 0,
                hop_count: fwd.hops,
                dest: q.dest,
                dest_seq: fwd.seq,
                orig: q.orig,
                lifetime: fwd.lifetime,
            };
            out.push(Action::Unicast(rev.next_hop, Message::Rrep(p)));
            if let Some(f) = self.routes.get_mut(q.dest) {
                f.precursors.insert(rev.next_hop);
            }
            if let Some(r) = self.routes.get_mut(q.orig) {
                r.precursors.insert(fwd.next_hop);
            }
            if q.gratuitous {
                // §6.6.3: tell the destination the route to the originator.
                let g = Rrep {
                    repair: false,
                    ack_required: self.config.request_ack,
                    prefix_size: 0,
                    hop_count: rev.hops,
                    dest: q.orig,
                    dest_seq: rev.seq,
                    orig: q.dest,
                    lifetime: rev.lifetime,
                };
                out.push(Action::Unicast(fwd.next_hop, Message::Rrep(g)));
            }
            return;
        }
        if hops >= self.config.net_diameter {
            return;
        }
        // Rebroadcast with the freshest destination sequence number known.
        let mut fq = Rreq {
            hop_count: hops,
            ..q
        };
        if let Some(r) = self.routes.get(q.dest).filter(|r| r.valid_seq) {
            if q.unknown_seq || seqno::newer(r.seq, q.dest_seq) {
                fq.dest_seq = r.seq;
                fq.unknown_seq = false;
            }
        }
        out.push(Action::Broadcast(Message::Rreq(fq)));
    }

    /// §6.7: a route reply.
    fn on_rrep(&mut self, from: Addr, p: Rrep, out: &mut Vec<Action>) {
        // A node never keeps a route to itself (a gratuitous RREP can name
        // the node that receives it).
        #[cfg(not(feature = "bug-gratuitous-self-route"))]
        if p.dest == self.addr {
            return;
        }
        let Some(hops) = add_hop(p.hop_count) else {
            return;
        };
        let updated =
            self.update_route(p.dest, p.dest_seq, hops, p.hop_count, from, p.lifetime, out);
        let current = self
            .routes
            .valid(p.dest)
            .is_some_and(|r| r.next_hop == from && r.seq == p.dest_seq && r.hops == hops);
        // Seeded bug (thesis §4.6.2, Fig. 4.6a): like mad-hoc, look the
        // reverse route up first and assume it exists; after a reboot an old
        // RREP finds none.
        #[cfg(feature = "bug-reboot-null-route")]
        if p.orig != self.addr && (updated || current) {
            let rev_next_hop = self
                .routes
                .get(p.orig)
                .expect("the reverse route to the RREP's originator exists")
                .next_hop;
            if let Some(f) = self.routes.get_mut(p.dest) {
                f.precursors.insert(rev_next_hop);
            }
        }
        #[cfg(feature = "bug-reboot-null-route")]
        if self.waiting {
            return;
        }
        if p.ack_required {
            out.push(Action::Unicast(from, Message::RrepAck));
        }
        if p.orig == self.addr {
            if current && self.discoveries.remove(&p.dest).is_some() {
                out.push(Action::CancelTimer(Timer::DiscoveryRetry(p.dest)));
                out.push(Action::RouteFound(p.dest));
            }
            return;
        }
        if !(updated || current) {
            return;
        }
        // Forward towards the originator along the reverse route.
        let Some(rev_next_hop) = self.routes.valid(p.orig).map(|r| r.next_hop) else {
            return;
        };
        let fp = Rrep {
            hop_count: hops,
            ack_required: self.config.request_ack,
            ..p
        };
        out.push(Action::Unicast(rev_next_hop, Message::Rrep(fp)));
        if let Some(f) = self.routes.get_mut(p.dest) {
            f.precursors.insert(rev_next_hop);
        }
        if let Some(r) = self.routes.get_mut(p.orig) {
            r.precursors.insert(from);
        }
    }

    /// Invalidates the route to `dest` with sequence number `seq`; returns
    /// its precursors (now cleared). Every caller has just found the route
    /// in the table.
    fn invalidate(&mut self, dest: Addr, seq: u32, out: &mut Vec<Action>) -> Vec<Addr> {
        let r = self
            .routes
            .get_mut(dest)
            .expect("the route to invalidate is in the table");
        r.seq = seq;
        r.state = RouteState::Invalid;
        r.hops = INFINITY;
        let precursors = std::mem::take(&mut r.precursors).into_iter().collect();
        out.push(Action::CancelTimer(Timer::RouteExpiry(dest)));
        out.push(Action::SetTimer(Timer::RouteDelete(dest), DELETE_PERIOD));
        precursors
    }

    /// Sends a RERR for `lost` to `precursors` (§6.11): unicast when there is
    /// one, broadcast otherwise.
    fn send_rerr(&self, lost: Vec<(Addr, u32)>, mut precursors: Vec<Addr>, out: &mut Vec<Action>) {
        if lost.is_empty() || self.waiting {
            return;
        }
        precursors.sort();
        precursors.dedup();
        let m = Message::Rerr(Rerr {
            no_delete: false,
            unreachable: lost,
        });
        match precursors.as_slice() {
            [] => {}
            [one] => out.push(Action::Unicast(*one, m)),
            _ => out.push(Action::Broadcast(m)),
        }
    }

    /// §6.11 case 3: a route error.
    fn on_rerr(&mut self, from: Addr, e: Rerr, out: &mut Vec<Action>) {
        let (mut lost, mut to) = (Vec::new(), Vec::new());
        for (d, s) in e.unreachable {
            let Some(r) = self.routes.valid(d) else {
                continue;
            };
            if d == self.addr || r.next_hop != from {
                continue;
            }
            // Reading of §6.11: accept the number only when it is newer.
            #[cfg(not(feature = "bug-rerr-seqno"))]
            let accept = !r.valid_seq || seqno::newer(s, r.seq);
            #[cfg(feature = "bug-rerr-seqno")]
            let accept = true;
            if !accept {
                continue;
            }
            if let Some(r) = self.routes.get_mut(d) {
                r.valid_seq = true;
            }
            let p = self.invalidate(d, s, out);
            if !p.is_empty() {
                lost.push((d, s));
                to.extend(p);
            }
        }
        self.send_rerr(lost, to, out);
    }

    /// §6.11 case 1: the link to neighbour `n` broke; every valid route
    /// through it is invalidated with its sequence number incremented.
    pub fn link_broken(&mut self, n: Addr) -> Vec<Action> {
        let mut out = Vec::new();
        // By destination, so that the RERR lists them in a fixed order.
        let dests: Vec<(Addr, u32, bool)> = self
            .routes
            .sorted()
            .into_iter()
            .filter(|r| r.is_valid() && r.next_hop == n)
            .map(|r| (r.dest, r.seq, r.valid_seq))
            .collect();
        let (mut lost, mut to) = (Vec::new(), Vec::new());
        for (d, seq, known) in dests {
            #[cfg(not(feature = "bug-linkbreak-no-increment"))]
            let seq = if known { seqno::bump(seq) } else { seq };
            #[cfg(feature = "bug-linkbreak-no-increment")]
            let _ = known;
            let p = self.invalidate(d, seq, &mut out);
            if !p.is_empty() {
                lost.push((d, seq));
                to.extend(p);
            }
        }
        self.send_rerr(lost, to, &mut out);
        out
    }

    /// A timer the node asked for expired.
    pub fn timer_expired(&mut self, t: Timer) -> Vec<Action> {
        let mut out = Vec::new();
        match t {
            Timer::RouteExpiry(d) => {
                if let Some((seq, known)) = self.routes.valid(d).map(|r| (r.seq, r.valid_seq)) {
                    let seq = if known { seqno::bump(seq) } else { seq };
                    self.invalidate(d, seq, &mut out);
                }
            }
            Timer::RouteDelete(d) => {
                if self.routes.get(d).is_some_and(|r| !r.is_valid()) {
                    self.routes.remove(d);
                }
            }
            Timer::RreqSeen(o, id) => {
                self.seen.remove(&(o, id));
            }
            Timer::DiscoveryRetry(d) => {
                let Some(&retries) = self.discoveries.get(&d) else {
                    return out;
                };
                if self.routes.valid(d).is_some() {
                    self.discoveries.remove(&d);
                    out.push(Action::RouteFound(d));
                } else if retries < u32::from(self.config.rreq_retries) {
                    self.discoveries.insert(d, retries + 1);
                    let wait = NET_TRAVERSAL_TIME << (retries + 1);
                    self.send_rreq(d, &mut out);
                    out.push(Action::SetTimer(Timer::DiscoveryRetry(d), wait));
                } else {
                    self.discoveries.remove(&d);
                    out.push(Action::DiscoveryFailed(d));
                }
            }
            Timer::RebootWait => self.waiting = false,
        }
        out
    }

    /// The node rebooted: everything is lost, including its sequence number,
    /// so it waits DELETE_PERIOD before taking part again (§6.13).
    pub fn reboot(&mut self) -> Vec<Action> {
        *self = Node::new(self.addr, self.config);
        self.waiting = true;
        vec![
            Action::CancelAllTimers,
            Action::SetTimer(Timer::RebootWait, DELETE_PERIOD),
        ]
    }
}
