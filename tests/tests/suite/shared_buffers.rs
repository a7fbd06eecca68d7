//! Shared buffers count by their contents. A node replicates blobs to its
//! peer as `bytes::Bytes`, the way network code does: the copy in flight,
//! the peer's stored copy and the writer's own share one reference-counted
//! buffer in the writer's arena, a trim is a `slice` of it, some blobs are
//! `Bytes::from_static` (a pointer into the program). The same protocol
//! over `Vec<u8>` and over `Arc<[u8]>` must count the same states, and so
//! must a plain breadth-first search over cloned states keyed by a
//! canonical `Debug` string; counts are the same in three processes; the
//! determinism check passes; a seeded violation replays in a fresh process
//! under the default identity and under `--fingerprint heap`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use cmc::{Ctx, FingerprintMode, Model, NetworkConfig, ReplayOutcome, Strategy, Verdict, View};

/// What the protocol needs of a buffer.
trait Blob: Clone + Debug + Hash + Eq + 'static {
    fn from_static(b: &'static [u8]) -> Self;
    fn from_vec(v: Vec<u8>) -> Self;
    /// The first `n` bytes.
    fn prefix(&self, n: usize) -> Self;
    fn bytes(&self) -> &[u8];
}

impl Blob for Bytes {
    fn from_static(b: &'static [u8]) -> Self {
        Bytes::from_static(b)
    }
    fn from_vec(v: Vec<u8>) -> Self {
        Bytes::from(v)
    }
    fn prefix(&self, n: usize) -> Self {
        self.slice(..n.min(self.len()))
    }
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl Blob for Vec<u8> {
    fn from_static(b: &'static [u8]) -> Self {
        b.to_vec()
    }
    fn from_vec(v: Vec<u8>) -> Self {
        v
    }
    fn prefix(&self, n: usize) -> Self {
        self[..n.min(self.len())].to_vec()
    }
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl Blob for Arc<[u8]> {
    fn from_static(b: &'static [u8]) -> Self {
        Arc::from(b)
    }
    fn from_vec(v: Vec<u8>) -> Self {
        Arc::from(v)
    }
    fn prefix(&self, n: usize) -> Self {
        Arc::from(&self[..n.min(self.len())])
    }
    fn bytes(&self) -> &[u8] {
        self
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Msg<B> {
    Put { key: u8, value: B },
    Ack { key: u8, head: B },
}

#[derive(Clone, Debug)]
struct Node<B> {
    me: usize,
    /// What this node wrote, by key.
    written: BTreeMap<u8, B>,
    /// What it stores for its peer.
    stored: HashMap<u8, B>,
    /// Its writes the peer acknowledged.
    acked: BTreeSet<u8>,
    /// Whether it overwrites a stored value with the head of a second copy
    /// (the seeded bug).
    bug: bool,
}

/// The blobs a node writes.
const STATIC: &[u8] = b"static blob";

impl<B: Blob> Node<B> {
    fn new(me: usize, bug: bool) -> Self {
        Node {
            me,
            written: BTreeMap::new(),
            stored: HashMap::new(),
            acked: BTreeSet::new(),
            bug,
        }
    }

    fn peer(&self) -> usize {
        1 - self.me
    }

    /// Process 0 writes, up to two blobs; process 1 stores them.
    fn can_write(&self) -> bool {
        self.me == 0 && self.written.len() < 2
    }

    /// Writes blob `which` (0: a static one, 1: a fresh buffer); returns
    /// the message to send.
    fn write(&mut self, which: usize) -> (usize, Msg<B>) {
        let key = self.written.len() as u8;
        let value = if which == 0 {
            B::from_static(STATIC)
        } else {
            B::from_vec(vec![b'a' + self.me as u8 + key; 3])
        };
        self.written.insert(key, value.clone());
        (self.peer(), Msg::Put { key, value })
    }

    /// The acknowledged writes still longer than a byte.
    fn trimmable(&self) -> Vec<u8> {
        self.acked
            .iter()
            .copied()
            .filter(|k| self.written[k].bytes().len() > 1)
            .collect()
    }

    /// Keeps only the first byte of an acknowledged write.
    fn trim(&mut self, key: u8) {
        let head = self.written[&key].prefix(1);
        self.written.insert(key, head);
    }

    /// The stored keys, in order.
    fn stored_keys(&self) -> Vec<u8> {
        let mut keys: Vec<u8> = self.stored.keys().copied().collect();
        keys.sort();
        keys
    }

    fn forget(&mut self, key: u8) {
        self.stored.remove(&key);
    }

    /// Handles a message; returns the reply, if any.
    fn on_message(&mut self, msg: Msg<B>) -> Option<(usize, Msg<B>)> {
        match msg {
            Msg::Put { key, value } => {
                let head = value.prefix(1);
                let value = if self.bug && self.stored.contains_key(&key) {
                    head.clone()
                } else {
                    value
                };
                self.stored.insert(key, value);
                Some((self.peer(), Msg::Ack { key, head }))
            }
            Msg::Ack { key, .. } => {
                self.acked.insert(key);
                None
            }
        }
    }
}

/// What a node stores for a key begins with what its peer wrote there.
fn stored_extends_written<B: Blob>(nodes: &[&Node<B>]) -> Result<(), String> {
    for n in nodes {
        let writer = nodes[n.peer()];
        for (key, value) in &n.stored {
            let written = writer.written[key].bytes();
            if !value.bytes().starts_with(written) {
                return Err(format!(
                    "process {} stores {:?} for key {key}, which does not begin with {:?}",
                    n.me,
                    value.bytes(),
                    written
                ));
            }
        }
    }
    Ok(())
}

/// The protocol as a cmc process over each buffer type (a process type
/// must be concrete: an alias per type).
macro_rules! process {
    ($alias:ident, $buf:ty) => {
        type $alias = Node<$buf>;

        #[cmc::process(msg = Msg<$buf>)]
        impl $alias {
            #[handler(guard = Self::can_write)]
            fn write_blob(&mut self, ctx: &mut Ctx<'_, Self>) {
                let (to, msg) = self.write(cmc::choose(2));
                let _ = ctx.send(to, msg);
            }

            #[handler(guard = can_trim)]
            fn trim_blob(&mut self, _ctx: &mut Ctx<'_, Self>) {
                let keys = self.trimmable();
                self.trim(keys[cmc::choose(keys.len())]);
            }

            #[handler(guard = can_forget)]
            fn forget_blob(&mut self, _ctx: &mut Ctx<'_, Self>) {
                let keys = self.stored_keys();
                self.forget(keys[cmc::choose(keys.len())]);
            }

            #[handler(guard = has_mail)]
            fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
                if let Some((_, msg)) = ctx.recv() {
                    if let Some((to, reply)) = self.on_message(msg) {
                        let _ = ctx.send(to, reply);
                    }
                }
            }
        }
    };
}

process!(BytesNode, Bytes);
process!(VecNode, Vec<u8>);
process!(ArcNode, Arc<[u8]>);

fn can_trim<B: Blob>(n: &Node<B>) -> bool {
    !n.trimmable().is_empty()
}

fn can_forget<B: Blob>(n: &Node<B>) -> bool {
    !n.stored.is_empty()
}

fn has_mail<P: cmc::Process>(_: &P, view: &View<'_, P>) -> bool {
    view.has_mail()
}

/// Messages in flight at most.
const CAPACITY: usize = 2;

fn network() -> NetworkConfig {
    NetworkConfig::new().capacity(CAPACITY).duplicating(true)
}

fn model<B: Blob>(bug: bool) -> Model<Node<B>>
where
    Node<B>: cmc::Process<Msg = Msg<B>>,
{
    Model::new("blobs", 2, move |i| Node::<B>::new(i, bug))
        .network(network())
        .quiescence_ok(true)
        .invariant("stored_extends_written", |w| {
            let nodes: Vec<&Node<B>> = w.processes().collect();
            stored_extends_written(&nodes)
        })
}

/// The reference: a breadth-first search over cloned states of the
/// `Vec<u8>` protocol, keyed by a canonical `Debug` string (maps sorted,
/// the network as a sorted multiset). Returns the number of states.
fn reference() -> usize {
    type N = Node<Vec<u8>>;
    #[derive(Clone)]
    struct S {
        nodes: Vec<N>,
        net: Vec<(usize, Msg<Vec<u8>>)>,
    }
    fn key(s: &S) -> String {
        let nodes: Vec<String> = s
            .nodes
            .iter()
            .map(|n| {
                let stored: BTreeMap<_, _> = n.stored.iter().collect();
                format!("{:?} {stored:?} {:?}", n.written, n.acked)
            })
            .collect();
        let mut net: Vec<String> = s.net.iter().map(|m| format!("{m:?}")).collect();
        net.sort();
        format!("{nodes:?} {net:?}")
    }
    fn send(s: &mut S, m: (usize, Msg<Vec<u8>>)) {
        // A full network drops what does not fit.
        if s.net.len() < CAPACITY {
            s.net.push(m);
        }
    }
    let start = S {
        nodes: vec![N::new(0, false), N::new(1, false)],
        net: Vec::new(),
    };
    let mut seen = HashSet::from([key(&start)]);
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(s) = queue.pop_front() {
        let mut next = Vec::new();
        for i in 0..2 {
            let n = &s.nodes[i];
            if n.can_write() {
                for which in 0..2 {
                    let mut t = s.clone();
                    let m = t.nodes[i].write(which);
                    send(&mut t, m);
                    next.push(t);
                }
            }
            for k in n.trimmable() {
                let mut t = s.clone();
                t.nodes[i].trim(k);
                next.push(t);
            }
            for k in n.stored_keys() {
                let mut t = s.clone();
                t.nodes[i].forget(k);
                next.push(t);
            }
            for j in 0..s.net.len() {
                if s.net[j].0 == i {
                    let mut t = s.clone();
                    let (_, m) = t.net.remove(j);
                    if let Some(reply) = t.nodes[i].on_message(m) {
                        send(&mut t, reply);
                    }
                    next.push(t);
                }
            }
        }
        if s.net.len() < CAPACITY {
            for j in 0..s.net.len() {
                let mut t = s.clone();
                t.net.push(s.net[j].clone());
                next.push(t);
            }
        }
        for t in next {
            if seen.insert(key(&t)) {
                queue.push_back(t);
            }
        }
    }
    seen.len()
}

/// The unique counts of the three buffer types, BFS and DFS, with the
/// determinism check.
fn counts() -> String {
    let mut out = Vec::new();
    for strategy in [Strategy::Bfs, Strategy::Dfs] {
        let run = |r: cmc::CheckResult| {
            assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.violations);
            r.stats.unique
        };
        let b = run(model::<Bytes>(false)
            .strategy(strategy)
            .check_determinism(true)
            .check()
            .unwrap());
        let v = run(model::<Vec<u8>>(false)
            .strategy(strategy)
            .check_determinism(true)
            .check()
            .unwrap());
        let a = run(model::<Arc<[u8]>>(false)
            .strategy(strategy)
            .check_determinism(true)
            .check()
            .unwrap());
        out.push(format!("{strategy:?}: bytes {b} vec {v} arc {a}"));
    }
    out.join("; ")
}

#[test]
fn shared_buffers_count_by_content() {
    let mine = counts();
    if std::env::var_os("CMC_SHARED_CHILD").is_some() {
        println!("{mine}");
        return;
    }
    let n = reference();
    assert_eq!(
        mine,
        format!("Bfs: bytes {n} vec {n} arc {n}; Dfs: bytes {n} vec {n} arc {n}"),
        "every buffer type counts the reference's states"
    );
    // The same in two other processes (other addresses, other buffers),
    // the second comparing every arena after every transition and failing
    // if one changed that the isolation argument said could not (shared
    // buffers make some states non-isolated, others stay isolated).
    for verify in ["0", "1"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::exact(concat!(module_path!(), "::shared_buffers_count_by_content")),
                "--nocapture",
            ])
            .env("CMC_SHARED_CHILD", "1")
            .env("CMC_VERIFY_TOUCHED", verify)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.lines().any(|l| l == mine), "{mine}\nnot in:\n{text}");
    }
}

/// The seeded bug's trace under `mode`, saved as JSON.
fn violation(mode: Option<FingerprintMode>) -> cmc::Trace {
    let mut m = model::<Bytes>(true).strategy(Strategy::Bfs);
    if let Some(mode) = mode {
        m = m.fingerprint(mode);
    }
    let r = m.check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    let v = &r.violations[0];
    assert_eq!(v.record.property, "stored_extends_written");
    v.trace.clone()
}

fn replays(mode: Option<FingerprintMode>, trace: &cmc::Trace) -> bool {
    let mut m = model::<Bytes>(true);
    if let Some(mode) = mode {
        m = m.fingerprint(mode);
    }
    matches!(m.replay(trace).unwrap(), ReplayOutcome::Reproduced(_))
}

#[test]
fn a_violation_through_shared_buffers_replays_in_a_fresh_process() {
    let modes = [None, Some(FingerprintMode::Heap)];
    if let Some(dir) = std::env::var_os("CMC_SHARED_REPLAY") {
        for (k, mode) in modes.iter().enumerate() {
            let path = std::path::Path::new(&dir).join(format!("{k}.json"));
            let trace = cmc::Trace::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
            println!("replay {k}: {}", replays(*mode, &trace));
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("cmc-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (k, mode) in modes.iter().enumerate() {
        let trace = violation(*mode);
        assert_eq!(trace.steps.len(), 4, "{trace}");
        assert!(replays(*mode, &trace), "in this process");
        std::fs::write(dir.join(format!("{k}.json")), trace.to_json()).unwrap();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(
                module_path!(),
                "::a_violation_through_shared_buffers_replays_in_a_fresh_process"
            )),
            "--nocapture",
        ])
        .env("CMC_SHARED_REPLAY", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
    for k in 0..modes.len() {
        assert!(
            text.contains(&format!("replay {k}: true")),
            "mode {k} does not replay in a fresh process:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
