//! State identity: the same logical value reached through different
//! histories has one fingerprint, whatever its bytes; a changed element
//! gives another. For every standard type cmc implements `StateHash` for,
//! for derived types, and for the canonical `Debug` of types that offer
//! nothing else.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cmc::identity::{debug_hash, fingerprint};
use cmc::{StateHash, StateHasher};

/// The fingerprint by canonical `Debug`.
fn by_debug<T: Debug + ?Sized>(v: &T) -> u128 {
    let mut h = StateHasher::default();
    debug_hash(v, &mut h);
    h.finish128()
}

#[track_caller]
fn same<T: StateHash + Debug + ?Sized>(a: &T, b: &T) {
    assert_eq!(
        fingerprint(a),
        fingerprint(b),
        "{a:?} and {b:?} differ by StateHash"
    );
    assert_eq!(by_debug(a), by_debug(b), "{a:?} and {b:?} differ by Debug");
}

#[track_caller]
fn differ<T: StateHash + Debug + ?Sized>(a: &T, b: &T) {
    assert_ne!(
        fingerprint(a),
        fingerprint(b),
        "{a:?} and {b:?} agree by StateHash"
    );
    assert_ne!(by_debug(a), by_debug(b), "{a:?} and {b:?} agree by Debug");
}

#[test]
fn hash_maps_count_by_contents_whatever_their_keys_and_history() {
    let mut a: HashMap<u32, String> = HashMap::new();
    for k in 0..50 {
        a.insert(k, format!("v{k}"));
    }
    // Another RandomState, another insertion order, and a history of
    // removals and regrowth.
    let mut b: HashMap<u32, String> = HashMap::with_hasher(RandomState::new());
    for k in (0..200).rev() {
        b.insert(k, "x".into());
    }
    b.retain(|&k, _| k < 50);
    for k in (0..50).rev() {
        b.insert(k, format!("v{k}"));
    }
    assert_ne!(
        a.keys().copied().collect::<Vec<_>>(),
        b.keys().copied().collect::<Vec<_>>(),
        "the two maps should iterate in different orders for this test to mean anything"
    );
    same(&a, &b);
    b.insert(7, "changed".into());
    differ(&a, &b);
    b.insert(7, "v7".into());
    b.insert(50, "v50".into());
    differ(&a, &b);
}

#[test]
fn hash_sets_and_hashbrown_count_by_contents() {
    let a: HashSet<u64> = (0..40).collect();
    let b: HashSet<u64> = (0..40).rev().collect();
    same(&a, &b);
    differ(&a, &(1..41).collect());
    let c: hashbrown::HashSet<u64, RandomState> = (0..40).collect();
    let d: hashbrown::HashSet<u64, RandomState> = (0..40).rev().collect();
    assert_eq!(fingerprint(&c), fingerprint(&d));
    let e: hashbrown::HashMap<u8, u8, RandomState> = [(1, 2), (3, 4)].into_iter().collect();
    let f: hashbrown::HashMap<u8, u8, RandomState> = [(3, 4), (1, 2)].into_iter().collect();
    assert_eq!(fingerprint(&e), fingerprint(&f));
    let g: hashbrown::HashMap<u8, u8, RandomState> = [(3, 2), (1, 4)].into_iter().collect();
    assert_ne!(fingerprint(&e), fingerprint(&g));
}

#[test]
fn vectors_and_strings_count_only_their_live_elements() {
    let mut a = vec![1u32, 2, 3, 4, 5];
    a.pop();
    a.truncate(2);
    let b = vec![1u32, 2];
    same(&a, &b);
    differ(&a, &vec![2, 1]);
    differ(&a, &vec![1, 2, 0]);
    let mut s = String::from("a long string that leaves garbage");
    s.clear();
    s.push_str("ok");
    same(&s, &"ok".to_string());
    differ(&s, &"ko".to_string());
    // Nested sequences do not run together.
    differ(&vec![vec![1u8, 2], vec![3]], &vec![vec![1], vec![2, 3]]);
    differ(
        &vec!["ab".to_string(), "c".into()],
        &vec!["a".into(), "bc".into()],
    );
    same(&[1u8, 2, 3], &[1, 2, 3]);
}

#[test]
fn a_wrapped_deque_counts_in_logical_order() {
    let mut a: VecDeque<u32> = VecDeque::with_capacity(4);
    let mut i = 0;
    // Push and pop until the three elements wrap around the buffer's end.
    while a.len() < 3 || a.as_slices().1.is_empty() {
        a.push_back(i);
        if a.len() > 3 {
            a.pop_front();
        }
        i += 1;
        assert!(i < 1000, "the ring buffer never wrapped");
    }
    let b: VecDeque<u32> = (i - 3..i).collect();
    assert!(b.as_slices().1.is_empty());
    same(&a, &b);
    differ(&a, &[i - 2, i - 3, i - 1].into_iter().collect());
}

#[test]
fn b_trees_count_by_contents_whatever_their_history() {
    let mut a = BTreeMap::new();
    for k in 0..300u32 {
        a.insert(k, k * 2);
    }
    a.retain(|k, _| k % 3 == 0);
    let b: BTreeMap<u32, u32> = (0..300)
        .filter(|k| k % 3 == 0)
        .rev()
        .map(|k| (k, k * 2))
        .collect();
    same(&a, &b);
    let mut c = b.clone();
    c.insert(3, 7);
    differ(&a, &c);
    let s: BTreeSet<String> = ["x", "y", "z"].iter().map(|s| s.to_string()).collect();
    let mut t = BTreeSet::new();
    for x in ["z", "q", "y", "x"] {
        t.insert(x.to_string());
    }
    t.remove("q");
    same(&s, &t);
}

#[test]
fn a_binary_heap_is_a_multiset() {
    let a: BinaryHeap<u32> = [5, 1, 4, 2, 3].into_iter().collect();
    let mut b = BinaryHeap::new();
    for x in [1, 2, 3, 4, 5, 9] {
        b.push(x);
    }
    b.pop();
    assert_eq!(fingerprint(&a), fingerprint(&b));
    b.push(5);
    assert_ne!(fingerprint(&a), fingerprint(&b));
}

#[test]
fn pointers_options_cells_and_small_types_count_by_what_they_hold() {
    same(&Box::new(5u8), &Box::new(5u8));
    differ(&Box::new(5u8), &Box::new(6u8));
    same(&Rc::new(vec![1u8]), &Rc::new(vec![1u8]));
    same(&Arc::new("a".to_string()), &Arc::new("a".to_string()));
    differ(&Some(0u8), &None);
    differ::<Result<u8, u8>>(&Ok(1), &Err(1));
    same(&(1u8, "a".to_string(), 'c'), &(1u8, "a".to_string(), 'c'));
    differ(&(1u8, 2u8), &(2u8, 1u8));
    same(&Cell::new(3u16), &Cell::new(3u16));
    differ(&RefCell::new(vec![1u8]), &RefCell::new(vec![2u8]));
    same(&Duration::from_millis(1500), &Duration::new(1, 500_000_000));
    differ(&Duration::from_millis(1500), &Duration::from_millis(1501));
    let ip: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
    differ(&ip, &Ipv4Addr::new(10, 0, 0, 2).into());
    let sa: SocketAddr = "10.0.0.1:80".parse().unwrap();
    same(&sa, &"10.0.0.1:80".parse().unwrap());
    differ(&sa, &"10.0.0.1:81".parse().unwrap());
    differ(&true, &false);
    differ(&0.5f64, &0.25f64);
}

/// A type from "another crate": only `Debug`, with a map inside.
#[derive(Debug)]
struct Foreign {
    name: &'static str,
    table: HashMap<String, Vec<u32>>,
    seen: HashSet<(u8, u8)>,
}

fn foreign(order: &[&str], pairs: &[(u8, u8)]) -> Foreign {
    let mut table = HashMap::new();
    for (i, k) in order.iter().enumerate() {
        table.insert(k.to_string(), vec![i as u32 % 2, 7]);
    }
    let mut f = Foreign {
        name: "n",
        table,
        seen: HashSet::new(),
    };
    for &p in pairs {
        f.seen.insert(p);
    }
    f
}

#[test]
fn a_debug_only_type_counts_by_its_contents() {
    let keys = ["a", "bb", "c, d", "{", "}", "e"];
    let a = foreign(&keys, &[(1, 2), (3, 4), (5, 6)]);
    let mut rev = keys;
    rev.reverse();
    // Same entries (the values depend on the position, so rebuild them in
    // the same positions but insert in reverse).
    let mut b = foreign(&[], &[(5, 6), (1, 2), (3, 4)]);
    for (i, k) in keys.iter().enumerate().rev() {
        b.table.insert(k.to_string(), vec![i as u32 % 2, 7]);
    }
    assert_eq!(by_debug(&a), by_debug(&b));
    let c = foreign(&rev, &[(1, 2), (3, 4), (5, 6)]);
    assert_ne!(by_debug(&a), by_debug(&c), "values moved between keys");
    let d = foreign(&keys, &[(1, 2), (3, 4), (5, 7)]);
    assert_ne!(by_debug(&a), by_debug(&d));
    assert_eq!(a.name, "n");
}

#[derive(Debug, StateHash)]
struct Node {
    routes: HashMap<u32, Route>,
    queue: VecDeque<Vec<u8>>,
    peer: Foreign,
    #[cmc(skip)]
    forwarded: u64,
}

#[derive(Debug, Hash)]
struct Route {
    next_hop: u32,
    hops: u8,
}

#[derive(Debug, StateHash)]
#[allow(dead_code, reason = "the skipped tick counts are only written")]
enum Role {
    Follower {
        leader: Option<u32>,
        #[cmc(skip)]
        _ticks: u32,
    },
    Candidate(u32, #[cmc(skip)] u32),
    Leader,
}

#[derive(Debug, StateHash)]
struct Generic<T> {
    items: Vec<T>,
}

#[test]
fn derived_types_hash_every_field_but_the_skipped_ones_by_its_best_source() {
    let node = |order: &[u32], forwarded: u64| {
        let mut routes = HashMap::new();
        for &d in order {
            routes.insert(
                d,
                Route {
                    next_hop: d + 1,
                    hops: 1,
                },
            );
        }
        Node {
            routes,
            queue: [vec![1u8], vec![2, 3]].into_iter().collect(),
            peer: foreign(&["x", "y"], &[(1, 1)]),
            forwarded,
        }
    };
    let a = node(&[1, 2, 3, 4], 0);
    let b = node(&[4, 3, 2, 1], 99);
    assert_eq!(
        fingerprint(&a),
        fingerprint(&b),
        "order and a skipped field"
    );
    let mut c = node(&[1, 2, 3, 4], 0);
    c.routes.get_mut(&3).unwrap().hops = 2;
    assert_ne!(
        fingerprint(&a),
        fingerprint(&c),
        "a field reached through Hash"
    );
    let mut d = node(&[1, 2, 3, 4], 0);
    d.peer.seen.insert((9, 9));
    assert_ne!(
        fingerprint(&a),
        fingerprint(&d),
        "a field reached through Debug"
    );
    let mut e = node(&[1, 2, 3, 4], 0);
    e.queue.push_back(Vec::new());
    assert_ne!(fingerprint(&a), fingerprint(&e));
    assert_eq!(a.forwarded + b.forwarded, 99);

    let f1 = Role::Follower {
        leader: Some(1),
        _ticks: 0,
    };
    let f2 = Role::Follower {
        leader: Some(1),
        _ticks: 5,
    };
    assert_eq!(fingerprint(&f1), fingerprint(&f2));
    assert_ne!(
        fingerprint(&f1),
        fingerprint(&Role::Follower {
            leader: None,
            _ticks: 0
        })
    );
    assert_ne!(
        fingerprint(&Role::Candidate(1, 0)),
        fingerprint(&Role::Leader)
    );
    assert_eq!(
        fingerprint(&Role::Candidate(1, 0)),
        fingerprint(&Role::Candidate(1, 8))
    );
    assert_ne!(
        fingerprint(&Role::Candidate(1, 0)),
        fingerprint(&Role::Candidate(2, 0))
    );

    assert_eq!(
        fingerprint(&Generic {
            items: vec![1u8, 2]
        }),
        fingerprint(&Generic {
            items: vec![1u8, 2]
        })
    );
    assert_ne!(
        fingerprint(&Generic {
            items: vec![1u8, 2]
        }),
        fingerprint(&Generic {
            items: vec![2u8, 1]
        })
    );
}

/// A derived type is self-contained (its hash may be remembered by the
/// pages that hold it, see `identity::cache`) exactly when every field it
/// hashes is, by its own `StateHash`.
#[test]
fn derived_types_are_self_contained_when_their_hashed_fields_are() {
    #[derive(Clone, Copy, Debug, PartialEq, StateHash)]
    struct Plain {
        a: u32,
        b: Option<(u8, bool)>,
        c: [i16; 3],
    }
    #[allow(dead_code, reason = "only its type is looked at")]
    #[derive(Debug, StateHash)]
    enum Kind {
        Idle,
        Busy { until: u64 },
        Named(String),
    }
    #[allow(dead_code, reason = "only its type is looked at")]
    #[derive(Debug, StateHash)]
    enum Light {
        Red,
        Green(u8),
    }
    #[derive(Debug, StateHash)]
    struct Skips {
        a: u64,
        #[cmc(skip)]
        _log: Vec<String>,
    }
    /// Hashed by its `Hash`: not self-contained, whatever it holds.
    #[derive(Debug, Hash)]
    struct ByHash(u64);
    #[derive(Debug, StateHash)]
    struct HoldsByHash {
        x: ByHash,
    }
    #[derive(Debug, StateHash)]
    struct Generic<T> {
        t: T,
        n: u8,
    }
    // Checked when the test compiles.
    const {
        assert!(Plain::SELF_CONTAINED);
        assert!(Light::SELF_CONTAINED);
        assert!(!Kind::SELF_CONTAINED, "a String follows a pointer");
        assert!(Skips::SELF_CONTAINED, "skipped fields are not hashed");
        assert!(!HoldsByHash::SELF_CONTAINED);
        assert!(Generic::<u32>::SELF_CONTAINED);
        assert!(!Generic::<String>::SELF_CONTAINED);
    }

    // A long vector of them is hashed in chunks: still by content.
    let a = vec![
        Plain {
            a: 1,
            b: Some((2, true)),
            c: [3, 4, 5],
        };
        5000
    ];
    let mut b = Vec::with_capacity(9000);
    b.extend_from_slice(&a);
    assert_eq!(fingerprint(&a), fingerprint(&b), "capacity is not content");
    b[4321].b = None;
    assert_ne!(fingerprint(&a), fingerprint(&b), "one element changed");
    b[4321].b = Some((2, true));
    assert_eq!(fingerprint(&a), fingerprint(&b));
    b.push(b[0]);
    assert_ne!(fingerprint(&a), fingerprint(&b), "one element more");
}
