//! The typed walk against what a value means: equal values with different
//! bytes fingerprint alike, any change to a value changes it. (Here, not
//! in the runtime's unit tests: the walk reads the type descriptions of
//! the crate that defines a type, and only this package is built with full
//! debugging information; see the workspace manifest.)
// The fields are read by the walk, through the type information.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use cmc::identity::typed::{available, describe, guesses, new_check, typed_hash};
use cmc::StateHasher;

/// The typed fingerprint of `v`. These values live outside any arena,
/// where a check takes an object's meaning once (see `Scratch::outside`):
/// each is a check of its own.
fn fp<T>(v: &T) -> u128 {
    new_check();
    available::<T>().unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()));
    let mut h = StateHasher::default();
    typed_hash(v, &mut h);
    h.finish128()
}

trait Drain {
    fn level(&self) -> u32;
}
struct Quiet;
struct Loud(u32, String);
impl Drain for Quiet {
    fn level(&self) -> u32 {
        0
    }
}
impl Drain for Loud {
    fn level(&self) -> u32 {
        self.0
    }
}

enum Event {
    Tick,
    Vote { term: u64, granted: bool },
    Append(Vec<u64>, Option<Box<Event>>),
}

/// State written the ordinary way, deriving nothing.
struct Node {
    id: u8,
    term: u64,
    log: Vec<(u64, String)>,
    peers: HashMap<u32, HashSet<u16>>,
    applied: BTreeMap<u64, Vec<u8>>,
    queue: VecDeque<u32>,
    shared: Rc<RefCell<Vec<u32>>>,
    also: Rc<RefCell<Vec<u32>>>,
    drain: Arc<dyn Drain>,
    boxed: Box<dyn Drain>,
    last: Option<Event>,
    name: &'static str,
    ids: Box<[u16]>,
    text: Arc<str>,
    set: BTreeSet<String>,
}

fn node() -> Node {
    let shared = Rc::new(RefCell::new(vec![1, 2]));
    Node {
        id: 1,
        term: 3,
        log: vec![(1, "a".into()), (2, "b".into())],
        peers: HashMap::from([(1, HashSet::from([1, 2])), (2, HashSet::new())]),
        applied: (0..40).map(|i| (i, vec![i as u8])).collect(),
        queue: VecDeque::from([1, 2, 3]),
        also: shared.clone(),
        shared,
        drain: Arc::new(Quiet),
        boxed: Box::new(Loud(2, "x".into())),
        last: Some(Event::Vote {
            term: 3,
            granted: true,
        }),
        name: "n1",
        ids: vec![1, 2].into_boxed_slice(),
        text: Arc::from("hello"),
        set: ["x".to_string(), "y".to_string()].into_iter().collect(),
    }
}

#[test]
fn equal_values_with_different_bytes_fingerprint_alike() {
    let a = node();
    let mut b = node();
    // Spare capacity holding removed elements.
    b.log.push((9, "junk".into()));
    b.log.pop();
    b.log.reserve(100);
    // A hash map built in another order, with other random keys, grown
    // and shrunk.
    b.peers = HashMap::new();
    for i in 0..50 {
        b.peers.insert(100 + i, HashSet::from([7]));
    }
    b.peers.insert(2, HashSet::new());
    b.peers.insert(1, HashSet::from([2, 1]));
    for i in 0..50 {
        b.peers.remove(&(100 + i));
    }
    // A B-tree of another shape: built in reverse, with removals.
    b.applied = (0..60).rev().map(|i| (i, vec![i as u8])).collect();
    for i in 40..60 {
        b.applied.remove(&i);
    }
    // A ring buffer that wraps.
    b.queue = VecDeque::with_capacity(4);
    b.queue.extend([0, 0, 0]);
    b.queue.pop_front();
    b.queue.pop_front();
    b.queue.pop_front();
    b.queue.extend([1, 2, 3]);
    // Another allocation of an equal string.
    b.name = Box::leak(String::from("n1").into_boxed_str());
    assert_eq!(fp(&a), fp(&b));
}

#[test]
fn different_values_fingerprint_apart() {
    let base = fp(&node());
    type Change = Box<dyn Fn(&mut Node)>;
    let changes: Vec<(&str, Change)> = vec![
        ("term", Box::new(|n| n.term += 1)),
        ("log element", Box::new(|n| n.log[1].1.push('!'))),
        (
            "log length",
            Box::new(|n| {
                n.log.pop();
            }),
        ),
        (
            "map value",
            Box::new(|n| {
                n.peers.get_mut(&2).unwrap().insert(5);
            }),
        ),
        (
            "map key",
            Box::new(|n| {
                let v = n.peers.remove(&2).unwrap();
                n.peers.insert(3, v);
            }),
        ),
        (
            "b-tree value",
            Box::new(|n| n.applied.get_mut(&39).unwrap().push(0)),
        ),
        (
            "b-tree key",
            Box::new(|n| {
                n.applied.remove(&0);
                n.applied.insert(1000, vec![0]);
            }),
        ),
        ("deque order", Box::new(|n| n.queue.rotate_left(1))),
        ("shared value", Box::new(|n| n.shared.borrow_mut().push(3))),
        (
            "dyn type",
            Box::new(|n| n.drain = Arc::new(Loud(0, String::new()))),
        ),
        (
            "dyn value",
            Box::new(|n| n.boxed = Box::new(Loud(3, "x".into()))),
        ),
        ("variant", Box::new(|n| n.last = Some(Event::Tick))),
        (
            "variant field",
            Box::new(|n| {
                n.last = Some(Event::Vote {
                    term: 3,
                    granted: false,
                })
            }),
        ),
        (
            "nested box",
            Box::new(|n| n.last = Some(Event::Append(vec![1], Some(Box::new(Event::Tick))))),
        ),
        ("none", Box::new(|n| n.last = None)),
        ("str", Box::new(|n| n.name = "n2")),
        (
            "boxed slice",
            Box::new(|n| n.ids = vec![1, 3].into_boxed_slice()),
        ),
        ("arc str", Box::new(|n| n.text = Arc::from("hellO"))),
        (
            "set",
            Box::new(|n| {
                n.set.insert("z".into());
            }),
        ),
    ];
    let mut seen = HashSet::from([base]);
    for (what, change) in changes {
        let mut n = node();
        change(&mut n);
        assert!(
            seen.insert(fp(&n)),
            "changing the {what} did not change the fingerprint"
        );
    }
}

#[test]
fn cycles_and_sharing_terminate() {
    struct Link {
        v: u32,
        next: RefCell<Option<Rc<Link>>>,
    }
    let a = Rc::new(Link {
        v: 1,
        next: RefCell::new(None),
    });
    let b = Rc::new(Link {
        v: 2,
        next: RefCell::new(Some(a.clone())),
    });
    *a.next.borrow_mut() = Some(b.clone());
    let f1 = fp(&a);
    assert_eq!(f1, fp(&a));
    assert_ne!(f1, fp(&b));
    // A long list does not overflow the stack.
    let mut list: Option<Box<Chain>> = None;
    for i in 0..100_000 {
        list = Some(Box::new(Chain { v: i, next: list }));
    }
    let _ = fp(&list);
    // Dropping it recursively would overflow; leak it.
    std::mem::forget(list);
    *a.next.borrow_mut() = None;
}

struct Chain {
    v: u32,
    next: Option<Box<Chain>>,
}

#[test]
fn marker_only_dyn_values_count_by_their_type_and_value() {
    struct N {
        a: HashMap<u8, String>,
        b: Arc<dyn Send + Sync>,
        c: Option<Box<u32>>,
    }
    let shapes = describe::<N>().unwrap();
    assert!(shapes.contains("hash table"), "{shapes}");
    assert!(shapes.contains("): dyn"), "{shapes}");
    let n1 = N {
        a: Default::default(),
        b: Arc::new(5u32),
        c: None,
    };
    let n2 = N {
        a: Default::default(),
        b: Arc::new(6u32),
        c: None,
    };
    assert_ne!(fp(&n1), fp(&n2));
    let n3 = N {
        a: Default::default(),
        b: Arc::new(5u64),
        c: None,
    };
    assert_ne!(
        fp(&n1),
        fp(&n3),
        "a u32 and a u64 behind a dyn are different values"
    );
}

/// A hash map's hasher is not part of its value, whatever the hasher: a
/// seeded one of the user's counts by the entries alone.
#[test]
fn a_maps_hasher_is_not_its_value() {
    #[derive(Clone)]
    struct Seeded(u64);
    impl std::hash::BuildHasher for Seeded {
        type Hasher = std::collections::hash_map::DefaultHasher;
        fn build_hasher(&self) -> Self::Hasher {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hasher::write_u64(&mut h, self.0);
            h
        }
    }
    struct Table {
        m: HashMap<u32, String, Seeded>,
    }
    let mut a = Table {
        m: HashMap::with_hasher(Seeded(1)),
    };
    let mut b = Table {
        m: HashMap::with_hasher(Seeded(2)),
    };
    for i in 0..20 {
        a.m.insert(i, i.to_string());
        b.m.insert(19 - i, (19 - i).to_string());
    }
    assert_eq!(fp(&a), fp(&b));
    b.m.insert(20, String::new());
    assert_ne!(fp(&a), fp(&b));
}

/// Against a reference: random values of a type written the ordinary way,
/// each built through a random history (spare capacity, junk inserted and
/// removed, a ring buffer rotated), over a small domain so that equal
/// values recur. Two values fingerprint alike exactly when their
/// canonical `Debug` (maps sorted, the ring in order) is equal.
#[test]
fn fingerprints_agree_with_a_canonical_debug_reference() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap as Sorted;

    #[derive(Debug)]
    enum E {
        A,
        B(u8),
        C { x: String },
    }
    struct V {
        n: u16,
        s: String,
        v: Vec<u8>,
        m: HashMap<u8, Vec<u16>>,
        b: BTreeMap<u16, Option<Box<u8>>>,
        q: VecDeque<u8>,
        e: E,
        r: Rc<RefCell<Vec<u8>>>,
    }
    fn reference(x: &V) -> String {
        let m: Sorted<_, _> = x.m.iter().collect();
        let q: Vec<_> = x.q.iter().collect();
        format!("{:?}", (x.n, &x.s, &x.v, m, &x.b, q, &x.e, &*x.r.borrow()))
    }
    fn random(rng: &mut SmallRng) -> V {
        let small = |rng: &mut SmallRng| rng.gen_range(0..2u8);
        let mut v = Vec::with_capacity(rng.gen_range(0..8));
        for _ in 0..rng.gen_range(0..2) {
            v.push(small(rng));
        }
        // Junk pushed and popped: stale bytes in the spare capacity.
        for _ in 0..rng.gen_range(0..3) {
            v.push(rng.gen());
        }
        v.truncate(rng.gen_range(0..=v.len().min(1)));
        let mut m = HashMap::new();
        for _ in 0..rng.gen_range(0..6) {
            m.insert(rng.gen_range(100..200u8), vec![rng.gen()]);
        }
        if small(rng) == 1 {
            m.insert(0, vec![1; usize::from(small(rng))]);
        }
        m.retain(|k, _| *k < 100);
        let mut b = BTreeMap::new();
        let keys = rng.gen_range(0..30u16);
        for k in 0..keys {
            b.insert(k * 7 + 1000, None);
        }
        if small(rng) == 1 {
            let some = small(rng) == 1;
            b.insert(0, some.then(|| Box::new(small(rng))));
        }
        b.retain(|k, _| *k < 1000);
        let mut q = VecDeque::with_capacity(4);
        for _ in 0..rng.gen_range(0..4) {
            q.push_back(rng.gen());
            q.pop_front();
        }
        for _ in 0..rng.gen_range(0..2) {
            q.push_back(small(rng));
        }
        let e = match rng.gen_range(0..4) {
            0 => E::A,
            1 => E::B(small(rng)),
            _ => E::C {
                x: "c".repeat(usize::from(small(rng))),
            },
        };
        let mut s = String::with_capacity(rng.gen_range(0..16));
        s.push_str(["", "xy"][rng.gen_range(0..2)]);
        V {
            n: u16::from(small(rng)),
            s,
            v,
            m,
            b,
            q,
            e,
            r: Rc::new(RefCell::new(vec![small(rng); usize::from(small(rng))])),
        }
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let values: Vec<V> = (0..6000).map(|_| random(&mut rng)).collect();
    let mut by_reference: HashMap<String, u128> = HashMap::new();
    let mut by_fingerprint: HashMap<u128, String> = HashMap::new();
    for x in &values {
        let (r, f) = (reference(x), fp(x));
        assert_eq!(
            *by_reference.entry(r.clone()).or_insert(f),
            f,
            "{r}: two fingerprints"
        );
        assert_eq!(
            *by_fingerprint.entry(f).or_insert(r.clone()),
            r,
            "one fingerprint, two values"
        );
    }
    // The domain is small enough that values recur, and large enough that
    // they differ.
    let distinct = by_reference.len();
    assert!(
        distinct < values.len() * 2 / 3 && distinct > 1000,
        "{distinct} distinct values"
    );
}

/// Where the walk guesses, it says so: a union it can only hash by its
/// bytes, a raw pointer in a type of the user's; the standard containers'
/// own unions and raw pointers (B-tree slots, `Rc`, `Vec`) are not named.
#[test]
fn guesses_are_named() {
    struct Raw {
        slot: std::mem::MaybeUninit<u64>,
        tree: BTreeMap<u8, u8>,
        list: *const u32,
        shared: Rc<Vec<u8>>,
    }
    let names = guesses::<Raw>();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.iter().any(|n| n.contains("MaybeUninit<u64>")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("*const u32 in ")),
        "{names:?}"
    );
    assert!(guesses::<Node>().is_empty(), "{:?}", guesses::<Node>());
    let _ = Raw {
        slot: std::mem::MaybeUninit::new(1),
        tree: BTreeMap::new(),
        list: std::ptr::null(),
        shared: Rc::new(Vec::new()),
    };
}

/// smallvec's `SmallVec` counts by its elements, inline or spilled to the
/// heap: equal contents fingerprint alike whichever way they are held, and
/// a change behind the heap pointer is seen.
#[test]
fn smallvecs_count_by_their_elements() {
    use smallvec::SmallVec;
    struct Holder {
        v: SmallVec<[u32; 2]>,
    }
    let inline = Holder {
        v: SmallVec::from_slice(&[1]),
    };
    let mut spilled = Holder {
        v: SmallVec::from_slice(&[1, 2, 3]),
    };
    assert!(spilled.v.spilled());
    spilled.v.truncate(1);
    assert!(spilled.v.spilled());
    assert_eq!(fp(&inline), fp(&spilled));
    let mut big = Holder {
        v: SmallVec::from_slice(&[1, 2, 3, 4]),
    };
    let before = fp(&big);
    big.v[3] = 9;
    assert_ne!(before, fp(&big), "a change behind the heap pointer");
    let mut small = Holder {
        v: SmallVec::from_slice(&[1, 2]),
    };
    let before = fp(&small);
    small.v[1] = 9;
    assert_ne!(before, fp(&small), "a change inline");
    assert!(guesses::<Holder>().is_empty(), "{:?}", guesses::<Holder>());
}
