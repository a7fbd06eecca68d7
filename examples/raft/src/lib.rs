//! A small replicated key-value store built on tikv's `raft` crate (0.7,
//! unmodified, from crates.io), written the way the crate's documentation
//! tells its users to write one, and checked by cmc ([`model`]).
//!
//! Each [`Node`] owns
//!
//! * a [`Disk`]: what it has persisted (hard state, log entries, snapshot,
//!   configuration). It survives a crash;
//! * a [`Volatile`] part: the `RawNode<MemStorage>` (raft's state and its
//!   in-memory log), the writes handed to the disk but not yet synced, the
//!   key-value state machine and the record of what was applied. A crash
//!   loses it, and the node is rebuilt from its disk.
//!
//! The node handles `Ready` as raft-rs prescribes for asynchronous
//! persistence (the crate documentation's "async ready"): the leader's
//! messages go out at once; snapshot, entries and hard state are written to
//! the `MemStorage` (so that raft can read them) and handed to the disk as
//! one [`Write`]; the messages that must follow persistence (votes,
//! append responses) are sent only when that write is synced
//! ([`Node::sync`]), which then reports it with `on_persist_ready`; committed
//! entries are applied to the state machine and `advance_apply` follows.
//!
//! Seeded bugs, each behind a cargo feature:
//!
//! * `bug-send-before-persist`: the messages that must follow persistence
//!   are sent when the write is handed to the disk, before it is synced; a
//!   crash before the sync loses a vote that was already sent.
//! * `bug-apply-uncommitted`: entries are applied to the state machine as
//!   soon as they are appended, not when they are committed.
//! * `bug-restart-without-hardstate`: a restart rebuilds raft from the
//!   persisted log but not from the persisted hard state (term, vote,
//!   commit).

use std::collections::BTreeMap;

use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message, Snapshot};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole};

pub mod model;

/// A raft id (raft ids start at 1).
pub type Id = u64;

/// The election timeout in ticks. Time is abstract in the model (a timeout
/// is one event, however many ticks it takes), so a short timeout changes
/// nothing but the range raft draws its randomized timeout from.
pub const ELECTION_TICK: usize = 2;

/// The heartbeat interval in ticks.
pub const HEARTBEAT_TICK: usize = 1;

/// How far the environment may drive a node: the model's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// No node campaigns for a term past this one.
    pub max_term: u64,
    /// Heartbeat rounds a leader sends in one term.
    pub heartbeats_per_term: u32,
    /// Client proposals in the whole run.
    pub proposals: u32,
    /// Crashes in the whole run.
    pub crashes: u32,
}

// ANCHOR: node
/// What a node has persisted: it survives a crash.
#[derive(Clone, Debug)]
pub struct Disk {
    /// The configuration the node started with (or the snapshot's).
    pub conf_state: ConfState,
    /// The last persisted hard state (term, vote, commit).
    pub hard_state: HardState,
    /// The persisted log after the snapshot.
    pub entries: Vec<Entry>,
    /// The last persisted snapshot (empty until one is received).
    pub snapshot: Snapshot,
}

/// One write handed to the disk: what one `Ready` asked to persist, and the
/// messages that may go out once it is durable.
#[derive(Clone, Debug)]
pub struct Write {
    /// The ready's number, reported back with `on_persist_ready`.
    pub number: u64,
    /// A snapshot to persist.
    pub snapshot: Option<Snapshot>,
    /// Entries to append (replacing any conflicting suffix).
    pub entries: Vec<Entry>,
    /// A new hard state.
    pub hard_state: Option<HardState>,
    /// Messages to send after the write is synced.
    pub messages: Vec<Message>,
}

/// An entry the state machine applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Its log index.
    pub index: u64,
    /// Its term.
    pub term: u64,
    /// Its command (empty for the entry a new leader appends).
    pub data: Vec<u8>,
}

/// What a crash loses.
pub struct Volatile {
    /// Raft itself, over its in-memory log.
    pub raft: RawNode<MemStorage>,
    /// Writes handed to the disk, not yet synced, oldest first.
    pub unsynced: Vec<Write>,
    /// The key-value state machine.
    pub kv: BTreeMap<String, String>,
    /// Every entry applied, in order.
    pub applied: Vec<Applied>,
    /// The term of the last heartbeat round and the rounds sent in it.
    pub heartbeats: (u64, u32),
    /// Messages to send, as (raft id, message), in order.
    pub outbox: Vec<(Id, Message)>,
}

/// One replica of the key-value store.
pub struct Node {
    /// Its raft id.
    pub id: Id,
    /// The raft ids of the group.
    pub peers: Vec<Id>,
    /// The model's bounds.
    pub limits: Limits,
    /// What survives a crash.
    pub disk: Disk,
    /// What does not.
    pub volatile: Volatile,
}
// ANCHOR_END: node

fn logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl Disk {
    /// The disk of a fresh member of a group whose voters are `peers`.
    pub fn new(peers: &[Id]) -> Disk {
        Disk {
            conf_state: ConfState::from((peers.to_vec(), vec![])),
            hard_state: HardState::default(),
            entries: Vec::new(),
            snapshot: Snapshot::default(),
        }
    }

    fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    /// Makes `write` durable.
    pub fn persist(&mut self, write: &Write) {
        if let Some(snapshot) = &write.snapshot {
            let index = snapshot.get_metadata().index;
            self.entries.retain(|e| e.index > index);
            self.conf_state = snapshot.get_metadata().get_conf_state().clone();
            self.snapshot = snapshot.clone();
        }
        if let Some(first) = write.entries.first() {
            // The new entries replace the log from their first index on.
            let keep = first.index.saturating_sub(self.snapshot_index() + 1) as usize;
            self.entries.truncate(keep);
            self.entries.extend(write.entries.iter().cloned());
        }
        if let Some(hs) = &write.hard_state {
            self.hard_state = hs.clone();
        }
    }

    /// Raft's storage rebuilt from what is on disk.
    pub fn load(&self) -> MemStorage {
        let storage = MemStorage::new();
        if self.snapshot_index() > 0 {
            storage
                .wl()
                .apply_snapshot(self.snapshot.clone())
                .expect("the persisted snapshot applies to an empty storage");
        } else {
            storage.initialize_with_conf_state(self.conf_state.clone());
        }
        let mut core = storage.wl();
        core.append(&self.entries)
            .expect("the persisted log follows the snapshot");
        if !cfg!(feature = "bug-restart-without-hardstate") {
            core.set_hardstate(self.hard_state.clone());
        }
        drop(core);
        storage
    }
}

impl Volatile {
    /// Starts raft for node `id` from what `disk` holds.
    pub fn recover(id: Id, disk: &Disk) -> Volatile {
        let config = Config {
            id,
            election_tick: ELECTION_TICK,
            heartbeat_tick: HEARTBEAT_TICK,
            ..Default::default()
        };
        config.validate().expect("the configuration is valid");
        let raft = RawNode::new(&config, disk.load(), &logger()).expect("raft starts");
        Volatile {
            raft,
            unsynced: Vec::new(),
            kv: BTreeMap::new(),
            applied: Vec::new(),
            heartbeats: (0, 0),
            outbox: Vec::new(),
        }
    }
}

impl Node {
    /// Member `id` of a fresh group of raft ids `1..=size`.
    pub fn new(id: Id, size: u64, limits: Limits) -> Node {
        let peers: Vec<Id> = (1..=size).collect();
        let disk = Disk::new(&peers);
        let volatile = Volatile::recover(id, &disk);
        Node {
            id,
            peers,
            limits,
            disk,
            volatile,
        }
    }

    /// Raft's role.
    pub fn role(&self) -> StateRole {
        self.volatile.raft.raft.state
    }

    /// Raft's current term.
    pub fn term(&self) -> u64 {
        self.volatile.raft.raft.term
    }

    /// Whether it leads.
    pub fn is_leader(&self) -> bool {
        self.role() == StateRole::Leader
    }

    /// Raft's log, stable and unstable entries.
    pub fn log(&self) -> Vec<Entry> {
        self.volatile.raft.raft.raft_log.all_entries()
    }

    /// Raft's commit index.
    pub fn committed(&self) -> u64 {
        self.volatile.raft.raft.raft_log.committed
    }

    /// The term of the entry at `index` in raft's log, if it has one.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        let log = &self.volatile.raft.raft.raft_log;
        if index == 0 || index > log.last_index() {
            return None;
        }
        log.term(index).ok()
    }

    /// Whether its election timeout may still fire (it would start a term
    /// within the bounds).
    pub fn may_time_out(&self) -> bool {
        !self.is_leader() && self.term() < self.limits.max_term
    }

    /// The election timeout fires: raft is ticked until it campaigns.
    pub fn election_timeout(&mut self) {
        let raft = &mut self.volatile.raft;
        let term = raft.raft.term;
        // The randomized timeout is below twice the election tick.
        for _ in 0..2 * ELECTION_TICK {
            if raft.raft.term != term {
                break;
            }
            raft.tick();
        }
        self.on_ready();
    }

    /// Whether the heartbeat timer may still fire in this term.
    pub fn may_heartbeat(&self) -> bool {
        let (term, rounds) = self.volatile.heartbeats;
        let rounds = if term == self.term() { rounds } else { 0 };
        self.is_leader() && rounds < self.limits.heartbeats_per_term
    }

    /// The heartbeat timer fires: the leader ticks once.
    pub fn heartbeat(&mut self) {
        let term = self.term();
        let (last, rounds) = self.volatile.heartbeats;
        self.volatile.heartbeats = (term, if last == term { rounds + 1 } else { 1 });
        for _ in 0..HEARTBEAT_TICK {
            self.volatile.raft.tick();
        }
        self.on_ready();
    }

    /// A client asks the leader to set `key` to `value`.
    pub fn propose(&mut self, key: &str, value: &str) {
        let command = format!("{key}={value}").into_bytes();
        // A leader that is transferring leadership drops proposals; the
        // client would retry elsewhere.
        let _ = self.volatile.raft.propose(vec![], command);
        self.on_ready();
    }

    /// A message from a peer arrives.
    pub fn receive(&mut self, msg: Message) {
        // Messages from unknown peers are dropped, as raft asks.
        let _ = self.volatile.raft.step(msg);
        self.on_ready();
    }

    /// Whether writes wait for the disk.
    pub fn has_unsynced(&self) -> bool {
        !self.volatile.unsynced.is_empty()
    }

    /// The disk syncs everything handed to it: the writes become durable,
    /// the messages that waited for them go out, and raft is told.
    pub fn sync(&mut self) {
        let writes = std::mem::take(&mut self.volatile.unsynced);
        let mut last = None;
        for mut write in writes {
            self.disk.persist(&write);
            for msg in write.messages.drain(..) {
                self.volatile.outbox.push((msg.to, msg));
            }
            last = Some(write.number);
        }
        if let Some(number) = last {
            self.volatile.raft.on_persist_ready(number);
        }
        self.on_ready();
    }

    /// The node crashes and restarts from its disk.
    pub fn crash(&mut self) {
        self.volatile = Volatile::recover(self.id, &self.disk);
        self.on_ready();
    }

    // ANCHOR: ready
    /// Handles every pending `Ready`.
    fn on_ready(&mut self) {
        let v = &mut self.volatile;
        while v.raft.has_ready() {
            let mut ready = v.raft.ready();
            let store = v.raft.raft.raft_log.store.clone();

            // The leader's messages may go out before its log is persisted
            // (raft thesis 10.2.1).
            for msg in ready.take_messages() {
                v.outbox.push((msg.to, msg));
            }

            let snapshot = (!ready.snapshot().is_empty()).then(|| ready.snapshot().clone());
            if let Some(snapshot) = &snapshot {
                store
                    .wl()
                    .apply_snapshot(snapshot.clone())
                    .expect("raft hands over a newer snapshot");
                // MemStorage snapshots carry no data: the state machine
                // restarts from the log.
                v.kv.clear();
            }

            if cfg!(feature = "bug-apply-uncommitted") {
                apply(&mut v.kv, &mut v.applied, ready.entries());
                ready.take_committed_entries();
            } else {
                apply(&mut v.kv, &mut v.applied, &ready.take_committed_entries());
            }

            if !ready.entries().is_empty() {
                store
                    .wl()
                    .append(ready.entries())
                    .expect("raft appends after its snapshot");
            }
            if let Some(hs) = ready.hs() {
                store.wl().set_hardstate(hs.clone());
            }

            let hard_state = if cfg!(feature = "bug-hardstate-with-entries-only")
                && ready.entries().is_empty()
            {
                // Saves a disk write: a ready without entries rarely has
                // anything else worth persisting... except a vote.
                None
            } else {
                ready.hs().cloned()
            };
            let mut write = Write {
                number: ready.number(),
                snapshot,
                entries: ready.entries().clone(),
                hard_state,
                messages: ready.take_persisted_messages(),
            };
            if cfg!(feature = "bug-send-before-persist") {
                for msg in write.messages.drain(..) {
                    v.outbox.push((msg.to, msg));
                }
            }
            let nothing_to_write = write.snapshot.is_none()
                && write.entries.is_empty()
                && write.hard_state.is_none()
                && write.messages.is_empty();
            let number = write.number;
            v.raft.advance_append_async(ready);
            if nothing_to_write && v.unsynced.is_empty() {
                // Nothing to wait for: it is as durable as it will be.
                v.raft.on_persist_ready(number);
            } else {
                // Readies are persisted in order: this one is reported with
                // the writes before it.
                v.unsynced.push(write);
            }
            v.raft.advance_apply();
        }
    }
    // ANCHOR_END: ready

    /// Takes the messages to send.
    pub fn take_outbox(&mut self) -> Vec<(Id, Message)> {
        std::mem::take(&mut self.volatile.outbox)
    }
}

/// Applies `entries` to the state machine and records them.
fn apply(kv: &mut BTreeMap<String, String>, applied: &mut Vec<Applied>, entries: &[Entry]) {
    for entry in entries {
        applied.push(Applied {
            index: entry.index,
            term: entry.term,
            data: entry.data.to_vec(),
        });
        if entry.data.is_empty() || entry.get_entry_type() != EntryType::EntryNormal {
            // The empty entry a new leader appends, or a configuration
            // change (this store never proposes one).
            continue;
        }
        let command = String::from_utf8_lossy(&entry.data);
        if let Some((key, value)) = command.split_once('=') {
            kv.insert(key.to_string(), value.to_string());
        }
    }
}

/// What leader append-only compares: a leader's term and its log as
/// (index, term, data), taken before a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderLog {
    /// The term it leads.
    pub term: u64,
    /// Its log then.
    pub entries: Vec<(u64, u64, Vec<u8>)>,
}

impl Node {
    /// Its log, if it leads (see [`leader_append_only`]).
    pub fn leader_log(&self) -> Option<LeaderLog> {
        self.is_leader().then(|| LeaderLog {
            term: self.term(),
            entries: self
                .log()
                .into_iter()
                .map(|e| (e.index, e.term, e.data.to_vec()))
                .collect(),
        })
    }
}

/// Leader append-only, across one step of one node: a node that led term
/// `before.term` before the step and leads it still has kept every entry
/// it had, unchanged (it may only have appended). It relates two states,
/// so the application checks it around each step (see `model.rs`) rather
/// than as an invariant of one state.
pub fn leader_append_only(before: &LeaderLog, after: &Node) -> Result<(), String> {
    if !after.is_leader() || after.term() != before.term {
        return Ok(());
    }
    let now: BTreeMap<u64, (u64, Vec<u8>)> = after
        .log()
        .into_iter()
        .map(|e| (e.index, (e.term, e.data.to_vec())))
        .collect();
    for (index, term, data) in &before.entries {
        match now.get(index) {
            None => {
                return Err(format!(
                    "node {}, leader of term {}, lost its entry at index {index}",
                    after.id, before.term
                ))
            }
            Some((t, d)) if t != term || d != data => {
                return Err(format!(
                    "node {}, leader of term {}, overwrote its entry at index {index} \
                     (term {term}, now term {t})",
                    after.id, before.term
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Election safety: at most one leader per term.
pub fn election_safety(nodes: &[&Node]) -> Result<(), String> {
    let mut leaders: BTreeMap<u64, Id> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.is_leader()) {
        if let Some(other) = leaders.insert(n.term(), n.id) {
            return Err(format!(
                "nodes {other} and {} both lead term {}",
                n.id,
                n.term()
            ));
        }
    }
    Ok(())
}

/// Log matching: if two logs hold an entry with the same index and term,
/// they are identical up to that index.
pub fn log_matching(nodes: &[&Node]) -> Result<(), String> {
    let logs: Vec<(Id, Vec<Entry>)> = nodes.iter().map(|n| (n.id, n.log())).collect();
    for (i, (a, la)) in logs.iter().enumerate() {
        for (b, lb) in &logs[i + 1..] {
            // The last index at which both hold an entry of the same term.
            let last_match = la
                .iter()
                .rev()
                .find(|e| lb.iter().any(|f| f.index == e.index && f.term == e.term));
            let Some(last) = last_match else { continue };
            for e in la.iter().filter(|e| e.index <= last.index) {
                if let Some(f) = lb.iter().find(|f| f.index == e.index) {
                    if f.term != e.term || f.data != e.data {
                        return Err(format!(
                            "nodes {a} and {b} agree at index {} (term {}) but differ at index {}",
                            last.index, last.term, e.index
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// State-machine safety: no two nodes apply different entries at the same
/// index, and no node applies two entries at one index.
pub fn state_machine_safety(nodes: &[&Node]) -> Result<(), String> {
    let mut at: BTreeMap<u64, (Id, &Applied)> = BTreeMap::new();
    for n in nodes {
        let mut last = 0;
        for a in &n.volatile.applied {
            if a.index <= last {
                return Err(format!(
                    "node {} applied index {} after index {last}",
                    n.id, a.index
                ));
            }
            last = a.index;
            if let Some((other, b)) = at.get(&a.index) {
                if *b != a {
                    return Err(format!(
                        "at index {}, node {other} applied {b:?} and node {} applied {a:?}",
                        a.index, n.id
                    ));
                }
            } else {
                at.insert(a.index, (n.id, a));
            }
        }
    }
    Ok(())
}

/// Leader completeness, where it can be checked: an entry a node has
/// applied was committed in its current term at the latest, so every leader
/// of a later term holds it.
pub fn leader_completeness(nodes: &[&Node]) -> Result<(), String> {
    for n in nodes {
        for a in &n.volatile.applied {
            for l in nodes
                .iter()
                .filter(|l| l.is_leader() && l.term() > n.term())
            {
                if l.term_at(a.index) != Some(a.term) {
                    return Err(format!(
                        "node {} applied index {} of term {} in term {}, but the leader {} of term {} has {:?} there",
                        n.id,
                        a.index,
                        a.term,
                        n.term(),
                        l.id,
                        l.term(),
                        l.term_at(a.index)
                    ));
                }
            }
        }
    }
    Ok(())
}
