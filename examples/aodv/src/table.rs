//! The routing table (RFC 3561 §2): one entry per destination, each with the
//! set of neighbours that route through this node (its precursors).

use std::collections::{BTreeSet, HashMap};

use crate::message::Addr;

/// Whether a route may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, cmc::StateHash)]
pub enum RouteState {
    /// Invalidated; kept until DELETE_PERIOD passes so its sequence number
    /// is remembered.
    Invalid,
    /// Valid (active when used for data).
    Valid,
}

/// One routing table entry.
#[derive(Clone, Debug, PartialEq, Eq, cmc::StateHash)]
pub struct Route {
    /// The destination.
    pub dest: Addr,
    /// Destination sequence number (meaningful only with `valid_seq`).
    pub seq: u32,
    /// Whether `seq` is known.
    pub valid_seq: bool,
    /// Valid or invalid.
    pub state: RouteState,
    /// Hops to the destination; [`crate::INFINITY`] once invalid.
    pub hops: u8,
    /// The neighbour packets for `dest` go to.
    pub next_hop: Addr,
    /// Neighbours that route to `dest` through this node: they are told
    /// when the route breaks (§6.11). Ordered, so that a RERR lists them
    /// the same way every time.
    pub precursors: BTreeSet<Addr>,
    /// The lifetime last granted to the route, in ms (the engine keeps no
    /// clock; see [`crate::node`]).
    pub lifetime: u32,
}

impl Route {
    /// A route with no precursors.
    pub fn new(
        dest: Addr,
        seq: u32,
        valid_seq: bool,
        state: RouteState,
        hops: u8,
        next_hop: Addr,
        lifetime: u32,
    ) -> Route {
        Route {
            dest,
            seq,
            valid_seq,
            state,
            hops,
            next_hop,
            precursors: BTreeSet::new(),
            lifetime,
        }
    }

    /// Whether the route may be used.
    pub fn is_valid(&self) -> bool {
        self.state == RouteState::Valid
    }
}

/// The routing table, keyed by destination.
#[derive(Clone, Debug, Default, cmc::StateHash)]
pub struct RouteTable {
    routes: HashMap<Addr, Route>,
}

impl RouteTable {
    /// The entry for `dest`.
    pub fn get(&self, dest: Addr) -> Option<&Route> {
        self.routes.get(&dest)
    }

    /// The entry for `dest`, mutably.
    pub fn get_mut(&mut self, dest: Addr) -> Option<&mut Route> {
        self.routes.get_mut(&dest)
    }

    /// The valid entry for `dest`.
    pub fn valid(&self, dest: Addr) -> Option<&Route> {
        self.get(dest).filter(|r| r.is_valid())
    }

    /// Inserts or replaces the entry for `route.dest`.
    pub fn put(&mut self, route: Route) {
        self.routes.insert(route.dest, route);
    }

    /// Removes the entry for `dest`.
    pub fn remove(&mut self, dest: Addr) -> Option<Route> {
        self.routes.remove(&dest)
    }

    /// Every entry with the destination it is filed under, in no
    /// particular order.
    pub fn entries(&self) -> impl Iterator<Item = (Addr, &Route)> {
        self.routes.iter().map(|(&d, r)| (d, r))
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.values()
    }

    /// Every entry, by destination: for output, and wherever the order
    /// shows (a RERR's list of destinations).
    pub fn sorted(&self) -> Vec<&Route> {
        let mut routes: Vec<&Route> = self.routes.values().collect();
        routes.sort_unstable_by_key(|r| r.dest);
        routes
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(d: u8) -> Addr {
        Addr::new(10, 0, 0, d)
    }

    fn route(d: u8) -> Route {
        Route::new(a(d), d.into(), true, RouteState::Valid, 1, a(d), 1)
    }

    #[test]
    fn one_entry_per_destination_listed_in_order() {
        let mut t = RouteTable::default();
        for d in [3, 1, 2, 1] {
            t.put(route(d));
        }
        let dests: Vec<Addr> = t.sorted().iter().map(|r| r.dest).collect();
        assert_eq!(dests, vec![a(1), a(2), a(3)]);
        assert_eq!(t.remove(a(2)).map(|r| r.dest), Some(a(2)));
        assert_eq!(t.len(), 2);
        assert!(t.entries().all(|(d, r)| d == r.dest));
    }

    #[test]
    fn equal_tables_have_equal_identities_whatever_their_history() {
        let mut t = RouteTable::default();
        for d in [3, 1, 2] {
            t.put(route(d));
        }
        t.remove(a(2));
        let mut u = RouteTable::default();
        for d in [1, 3] {
            u.put(route(d));
        }
        assert_eq!(
            cmc::identity::fingerprint(&t),
            cmc::identity::fingerprint(&u)
        );
        u.get_mut(a(3)).unwrap().precursors.insert(a(1));
        assert_ne!(
            cmc::identity::fingerprint(&t),
            cmc::identity::fingerprint(&u)
        );
    }
}
