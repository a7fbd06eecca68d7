//! The routing table (RFC 3561 §2): at most one entry per destination.
//!
//! Storage is inline and of fixed capacity ([`MAX_ROUTES`] routes of at most
//! [`MAX_PRECURSORS`] precursors each), kept sorted, with unused slots
//! zeroed and no padding bytes (`repr(C)`, fields laid out to fill every
//! word). A router on a small device would size its tables the same way;
//! here it also makes two nodes that hold the same routes hold the same
//! bytes, which is what cmc's state fingerprints compare.

use crate::message::Addr;

/// Routes a table holds at most; a route to a new destination is not
/// installed when the table is full (the message that offered it is then
/// handled as if the route had not been better).
pub const MAX_ROUTES: usize = 16;

/// Precursors a route holds at most; a further precursor is not recorded
/// (that neighbour then learns of a break only through its own timeout).
pub const MAX_PRECURSORS: usize = 8;

/// Whether a route may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RouteState {
    /// Invalidated; kept until DELETE_PERIOD passes so its sequence number
    /// is remembered. (Also the state of an empty slot.)
    #[default]
    Invalid = 0,
    /// Valid (active when used for data).
    Valid = 1,
}

/// One routing table entry.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Route {
    /// The destination.
    pub dest: Addr,
    /// Destination sequence number (meaningful only with `valid_seq`).
    pub seq: u32,
    /// The neighbour packets for `dest` go to.
    pub next_hop: Addr,
    /// The lifetime last granted to the route, in ms (the engine keeps no
    /// clock; see [`crate::node`]).
    pub lifetime: u32,
    precursors: [Addr; MAX_PRECURSORS],
    /// Hops to the destination; [`crate::INFINITY`] once invalid.
    pub hops: u8,
    /// Whether `seq` is known.
    pub valid_seq: bool,
    /// Valid or invalid.
    pub state: RouteState,
    n_precursors: u8,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("dest", &self.dest)
            .field("seq", &self.seq)
            .field("valid_seq", &self.valid_seq)
            .field("state", &self.state)
            .field("hops", &self.hops)
            .field("next_hop", &self.next_hop)
            .field("precursors", &self.precursors())
            .field("lifetime", &self.lifetime)
            .finish()
    }
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
            next_hop,
            lifetime,
            precursors: [Addr(0); MAX_PRECURSORS],
            hops,
            valid_seq,
            state,
            n_precursors: 0,
        }
    }

    /// Whether the route may be used.
    pub fn is_valid(&self) -> bool {
        self.state == RouteState::Valid
    }

    /// Neighbours that route to `dest` through this node, sorted.
    pub fn precursors(&self) -> &[Addr] {
        &self.precursors[..self.n_precursors as usize]
    }

    /// Adds a precursor (no duplicates; ignored when the list is full).
    pub fn add_precursor(&mut self, p: Addr) {
        let n = self.n_precursors as usize;
        if let Err(at) = self.precursors[..n].binary_search(&p) {
            if n < MAX_PRECURSORS {
                self.precursors.copy_within(at..n, at + 1);
                self.precursors[at] = p;
                self.n_precursors += 1;
            }
        }
    }

    /// Removes and returns every precursor.
    pub fn take_precursors(&mut self) -> Vec<Addr> {
        let out = self.precursors().to_vec();
        self.precursors = [Addr(0); MAX_PRECURSORS];
        self.n_precursors = 0;
        out
    }
}

/// The routing table.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct RouteTable {
    routes: [Route; MAX_ROUTES],
    len: u32,
}

impl Default for RouteTable {
    fn default() -> Self {
        RouteTable {
            routes: [Route::default(); MAX_ROUTES],
            len: 0,
        }
    }
}

impl std::fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl RouteTable {
    /// The entry for `dest`.
    pub fn get(&self, dest: Addr) -> Option<&Route> {
        self.find(dest).ok().map(|i| &self.routes[i])
    }

    /// The entry for `dest`, mutably.
    pub fn get_mut(&mut self, dest: Addr) -> Option<&mut Route> {
        match self.find(dest) {
            Ok(i) => Some(&mut self.routes[i]),
            Err(_) => None,
        }
    }

    /// The valid entry for `dest`.
    pub fn valid(&self, dest: Addr) -> Option<&Route> {
        self.get(dest).filter(|r| r.is_valid())
    }

    /// Inserts or replaces the entry for `route.dest`; returns false when
    /// the table is full.
    pub fn put(&mut self, route: Route) -> bool {
        let n = self.len as usize;
        match self.find(route.dest) {
            Ok(i) => self.routes[i] = route,
            Err(_) if n == MAX_ROUTES => return false,
            Err(i) => {
                self.routes.copy_within(i..n, i + 1);
                self.routes[i] = route;
                self.len += 1;
            }
        }
        true
    }

    /// Removes the entry for `dest`.
    pub fn remove(&mut self, dest: Addr) -> Option<Route> {
        let i = self.find(dest).ok()?;
        let n = self.len as usize;
        let r = self.routes[i];
        self.routes.copy_within(i + 1..n, i);
        self.routes[n - 1] = Route::default();
        self.len -= 1;
        Some(r)
    }

    /// Every entry, by destination.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes[..self.len as usize].iter()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn find(&self, dest: Addr) -> Result<usize, usize> {
        self.routes[..self.len as usize].binary_search_by_key(&dest, |r| r.dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(d: u8) -> Addr {
        Addr::new(10, 0, 0, d)
    }

    #[test]
    fn sorted_one_entry_per_destination_and_zeroed_slots() {
        let mut t = RouteTable::default();
        for d in [3, 1, 2, 1] {
            assert!(t.put(Route::new(
                a(d),
                d as u32,
                true,
                RouteState::Valid,
                1,
                a(d),
                1
            )));
        }
        let dests: Vec<Addr> = t.iter().map(|r| r.dest).collect();
        assert_eq!(dests, vec![a(1), a(2), a(3)]);
        t.remove(a(2));
        let mut u = RouteTable::default();
        u.put(Route::new(a(1), 1, true, RouteState::Valid, 1, a(1), 1));
        u.put(Route::new(a(3), 3, true, RouteState::Valid, 1, a(3), 1));
        assert!(t.routes == u.routes && t.len == u.len);
        assert_eq!(size_of::<Route>(), 52);
    }

    #[test]
    fn precursors_are_a_sorted_set() {
        let mut r = Route::new(a(1), 1, true, RouteState::Valid, 1, a(1), 1);
        for p in [4, 2, 4, 3] {
            r.add_precursor(a(p));
        }
        assert_eq!(r.precursors(), &[a(2), a(3), a(4)]);
        assert_eq!(r.take_precursors().len(), 3);
        assert!(r.precursors().is_empty());
    }
}
