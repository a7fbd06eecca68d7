//! AODV (Ad hoc On-Demand Distance Vector routing, RFC 3561) as a sans-IO
//! protocol engine, and a cmc model that checks it.
//!
//! The engine ([`Node`]) knows nothing of sockets or clocks, and of cmc only
//! the `cmc::StateHash` derive on its state types (which tells the checker
//! what a node's state is, field by field). The host feeds it events ("originate a route discovery", "a packet arrived from a
//! neighbour", "a timer expired", "the link to a neighbour broke", "the node
//! rebooted") and carries out the [`Action`]s it returns (send a packet, set
//! or cancel a timer, report a route). The same code could run on UDP port
//! 654 unchanged; [`model`] runs it under cmc instead.
//!
//! Built: RREQ / RREP / RERR / RREP-ACK with their byte encodings (§5), own
//! sequence numbers with wrap-around comparison (§6.1), route updates (§6.2,
//! §6.7), the RREQ ID cache, reverse routes, precursor lists, destination and
//! intermediate replies, gratuitous RREPs (§6.6.3), RERR generation and
//! propagation (§6.11), route expiry and deletion, the reboot wait (§6.13),
//! RREQ retries (§6.3), and RREP-ACKs (requested with [`Config::request_ack`],
//! always answered). Not built
//! (optional or host business): HELLO messages (§6.9), local repair (§6.12),
//! expanding ring search and the IP TTL (§6.4: every RREQ is flooded
//! network-wide, bounded by NET_DIAMETER hops), blacklists for unidirectional
//! links (§6.8), rate limits, data-packet buffering.

pub mod message;
pub mod model;
pub mod node;
pub mod seqno;
pub mod table;

pub use message::{Addr, DecodeError, Message, Rerr, Rrep, Rreq};
pub use node::{Action, Config, Node, Timer};
pub use table::{Route, RouteState, RouteTable};

/// The hop count that means "unreachable", as in the implementations CMC
/// checked (8-bit hop counts, 255 for infinity). An invalidated route holds
/// it; no message ever carries it.
pub const INFINITY: u8 = 255;

/// Protocol constants (RFC 3561 §10, defaults), in milliseconds or counts.
pub mod consts {
    /// ACTIVE_ROUTE_TIMEOUT.
    pub const ACTIVE_ROUTE_TIMEOUT: u32 = 3000;
    /// MY_ROUTE_TIMEOUT = 2 · ACTIVE_ROUTE_TIMEOUT.
    pub const MY_ROUTE_TIMEOUT: u32 = 2 * ACTIVE_ROUTE_TIMEOUT;
    /// NET_DIAMETER (hops).
    pub const NET_DIAMETER: u8 = 35;
    /// NODE_TRAVERSAL_TIME.
    pub const NODE_TRAVERSAL_TIME: u32 = 40;
    /// NET_TRAVERSAL_TIME = 2 · NODE_TRAVERSAL_TIME · NET_DIAMETER.
    pub const NET_TRAVERSAL_TIME: u32 = 2 * NODE_TRAVERSAL_TIME * NET_DIAMETER as u32;
    /// PATH_DISCOVERY_TIME = 2 · NET_TRAVERSAL_TIME.
    pub const PATH_DISCOVERY_TIME: u32 = 2 * NET_TRAVERSAL_TIME;
    /// HELLO_INTERVAL.
    pub const HELLO_INTERVAL: u32 = 1000;
    /// DELETE_PERIOD = 5 · max(ACTIVE_ROUTE_TIMEOUT, HELLO_INTERVAL).
    pub const DELETE_PERIOD: u32 = 5 * if ACTIVE_ROUTE_TIMEOUT > HELLO_INTERVAL {
        ACTIVE_ROUTE_TIMEOUT
    } else {
        HELLO_INTERVAL
    };
    /// RREQ_RETRIES.
    pub const RREQ_RETRIES: u8 = 2;
}
