//! A SWIM-style group membership protocol, written the way a daemon is
//! written: the node keeps its view of the group in a `HashMap`, its
//! suspicions in a `HashSet`, the tags it learned in `BTreeSet<String>`s,
//! what it has to send in a `VecDeque`, its last event in a
//! `Vec<String>`, and rebuilds a `HashMap` of what a digest taught it every
//! time one arrives. Its messages derive `Clone` and `Debug` only.
//!
//! The protocol core ([`Node`]) is sans-IO: events go in as method calls,
//! messages come out of [`Node::outbox`]. [`model`] wraps it as a cmc
//! process; `tests/check.rs` explores the same core with a plain
//! breadth-first search over cloned states and compares the counts.
//!
//! * A node *restarts* with a higher incarnation and announces it (`Alive`).
//! * A node may *suspect* a peer and tell the others (`Suspect`); the
//!   suspected node refutes by bumping its incarnation and announcing it.
//! * A node may *gossip* a digest of what it knows (`Digest`).
//!
//! The property: no node believes another is at an incarnation that node
//! has not reached ([`incarnations_are_never_ahead`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

pub mod model;
pub mod reference;

/// How many digests a node sends in its life.
pub const GOSSIP_BUDGET: u8 = 1;

/// A node id.
pub type Id = u32;

// ANCHOR: message
/// What nodes tell each other.
#[derive(Clone, Debug)]
pub enum Msg {
    /// "I am alive at this incarnation."
    Alive {
        /// The sender.
        from: Id,
        /// Its incarnation.
        incarnation: u32,
    },
    /// "I think `about` has failed."
    Suspect {
        /// The suspected node.
        about: Id,
    },
    /// What the sender knows: the members and their incarnations.
    Digest {
        /// The members it knows.
        known: HashSet<Id>,
        /// Their incarnations.
        incarnations: BTreeMap<Id, u32>,
    },
}
// ANCHOR_END: message

/// What a node knows of a member.
#[derive(Clone, Debug, Default)]
pub struct Member {
    /// The highest incarnation heard of.
    pub incarnation: u32,
    /// How it was learned (`alive`, `digest`), one tag per way.
    pub tags: BTreeSet<String>,
}

// ANCHOR: node
/// One member of the group.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its id.
    pub id: Id,
    /// The ids of the whole group, itself included.
    pub group: Vec<Id>,
    /// Its own incarnation.
    pub incarnation: u32,
    /// The highest incarnation it will reach (its configuration; bounds
    /// the state space).
    pub max_incarnation: u32,
    /// Its view of the group (itself included).
    pub members: HashMap<Id, Member>,
    /// Peers it suspects.
    pub suspects: HashSet<Id>,
    /// What the last digest taught it: member → newer incarnation.
    pub learned: HashMap<Id, u32>,
    /// Messages to send, as (receiver, message), in order.
    pub outbox: VecDeque<(Id, Msg)>,
    /// The last event, for humans.
    pub log: Vec<String>,
    /// Digests it may still send.
    pub gossip_budget: u8,
    /// Whether it has suspected anyone yet (one suspicion per node).
    pub has_suspected: bool,
}
// ANCHOR_END: node

impl Node {
    /// Node `id` of a group of `size` nodes, at incarnation 0, knowing only
    /// itself; it never goes past `max_incarnation`.
    pub fn new(id: Id, size: u32, max_incarnation: u32) -> Node {
        let mut members = HashMap::new();
        members.insert(id, Member::default());
        Node {
            id,
            group: (0..size).collect(),
            incarnation: 0,
            max_incarnation,
            members,
            suspects: HashSet::new(),
            learned: HashMap::new(),
            outbox: VecDeque::new(),
            log: Vec::new(),
            gossip_budget: GOSSIP_BUDGET,
            has_suspected: false,
        }
    }

    fn note(&mut self, event: String) {
        self.log.push(event);
        if self.log.len() > 1 {
            self.log.remove(0);
        }
    }

    fn peers(&self) -> impl Iterator<Item = Id> + '_ {
        self.group.iter().copied().filter(move |&p| p != self.id)
    }

    fn announce(&mut self) {
        let msg = Msg::Alive {
            from: self.id,
            incarnation: self.incarnation,
        };
        let peers: Vec<Id> = self.peers().collect();
        for p in peers {
            self.outbox.push_back((p, msg.clone()));
        }
    }

    /// Whether it may restart.
    pub fn can_restart(&self) -> bool {
        self.incarnation < self.max_incarnation
    }

    /// Restarts at the next incarnation and announces it.
    pub fn restart(&mut self) {
        self.incarnation += 1;
        self.members
            .get_mut(&self.id)
            .expect("a node knows itself")
            .incarnation = self.incarnation;
        self.suspects.clear();
        self.note(format!("restarted at {}", self.incarnation));
        self.announce();
    }

    /// The peers it may suspect now.
    pub fn suspectable(&self) -> Vec<Id> {
        if self.has_suspected {
            return Vec::new();
        }
        let mut known: Vec<Id> = self
            .members
            .keys()
            .copied()
            .filter(|&p| p != self.id && !self.suspects.contains(&p))
            .collect();
        known.sort_unstable();
        known
    }

    /// Suspects `peer` and tells the group.
    pub fn suspect(&mut self, peer: Id) {
        self.has_suspected = true;
        self.suspects.insert(peer);
        self.note(format!("suspects {peer}"));
        let peers: Vec<Id> = self.peers().collect();
        for p in peers {
            self.outbox.push_back((p, Msg::Suspect { about: peer }));
        }
    }

    /// Whether it may gossip.
    pub fn can_gossip(&self) -> bool {
        self.gossip_budget > 0 && self.members.len() > 1
    }

    /// Sends a digest of its view to `to`.
    pub fn gossip(&mut self, to: Id) {
        self.gossip_budget -= 1;
        let known: HashSet<Id> = self.members.keys().copied().collect();
        let incarnations: BTreeMap<Id, u32> = self
            .members
            .iter()
            .map(|(&id, m)| (id, m.incarnation))
            .collect();
        self.outbox.push_back((
            to,
            Msg::Digest {
                known,
                incarnations,
            },
        ));
    }

    /// Handles a message from `from`.
    pub fn on_message(&mut self, from: Id, msg: Msg) {
        match msg {
            Msg::Alive {
                from: who,
                incarnation,
            } => {
                let m = self.members.entry(who).or_default();
                if incarnation >= m.incarnation {
                    m.incarnation = incarnation;
                    m.tags.insert("alive".to_string());
                    self.suspects.remove(&who);
                }
                self.note(format!("{who} alive at {incarnation}"));
            }
            Msg::Suspect { about } if about == self.id => {
                if self.incarnation < self.max_incarnation {
                    // Refute: a higher incarnation overrides the suspicion.
                    if cfg!(feature = "bug-refute-without-adopting") {
                        let msg = Msg::Alive {
                            from: self.id,
                            incarnation: self.incarnation + 1,
                        };
                        let peers: Vec<Id> = self.peers().collect();
                        for p in peers {
                            self.outbox.push_back((p, msg.clone()));
                        }
                    } else {
                        self.incarnation += 1;
                        self.members
                            .get_mut(&self.id)
                            .expect("a node knows itself")
                            .incarnation = self.incarnation;
                        self.announce();
                    }
                    self.note(format!("refuted {from}"));
                }
            }
            Msg::Suspect { about } => {
                if self.members.contains_key(&about) {
                    self.suspects.insert(about);
                }
            }
            Msg::Digest {
                known,
                incarnations,
            } => {
                // A fresh map each time: what this digest teaches.
                self.learned = known
                    .iter()
                    .filter_map(|id| {
                        let theirs = incarnations.get(id).copied().unwrap_or(0);
                        let ours = self.members.get(id).map(|m| m.incarnation);
                        (ours.is_none_or(|o| o < theirs)).then_some((*id, theirs))
                    })
                    .collect();
                for (&id, &inc) in &self.learned {
                    if id != self.id {
                        let m = self.members.entry(id).or_default();
                        m.incarnation = inc;
                        m.tags.insert("digest".to_string());
                    }
                }
            }
        }
    }
}

/// No node believes another is at an incarnation it has not reached.
pub fn incarnations_are_never_ahead(nodes: &[&Node]) -> Result<(), String> {
    for a in nodes {
        for b in nodes {
            if let Some(m) = a.members.get(&b.id) {
                if m.incarnation > b.incarnation {
                    return Err(format!(
                        "node {} believes node {} is at incarnation {}, but it is at {}",
                        a.id, b.id, m.incarnation, b.incarnation
                    ));
                }
            }
        }
    }
    Ok(())
}
