// Derived StateHash on structs, tuple structs, unit structs, enums and
// generic types, with skipped fields, hashing each field by its best source.
use std::collections::{BTreeSet, HashMap};

#[derive(Debug)]
struct ForeignDebugOnly {
    table: HashMap<u8, u8>,
}

#[derive(Hash)]
struct HashOnly(u32);

#[derive(cmc::StateHash)]
struct Named {
    a: HashMap<String, BTreeSet<u8>>,
    b: ForeignDebugOnly,
    c: HashOnly,
    #[cmc(skip)]
    _d: std::cell::Cell<u64>,
}

#[derive(cmc::StateHash)]
struct Tuple(u8, #[cmc(skip)] String);

#[derive(cmc::StateHash)]
struct Unit;

#[derive(cmc::StateHash)]
enum E {
    A,
    B(u8, #[cmc(skip)] u8),
    C { x: Vec<u8>, #[cmc(skip)] y: u8 },
}

#[derive(cmc::StateHash)]
enum Never {}

#[derive(cmc::StateHash)]
struct Generic<T, const N: usize> {
    items: [T; N],
}

fn main() {
    let n = Named {
        a: HashMap::new(),
        b: ForeignDebugOnly { table: HashMap::new() },
        c: HashOnly(1),
        _d: std::cell::Cell::new(0),
    };
    let _ = cmc::identity::fingerprint(&n);
    let _ = cmc::identity::fingerprint(&Tuple(1, String::new()));
    let _ = cmc::identity::fingerprint(&Unit);
    for e in [E::A, E::B(1, 2), E::C { x: vec![1], y: 0 }] {
        let _ = cmc::identity::fingerprint(&e);
    }
    let _ = cmc::identity::fingerprint(&Generic { items: [1u8, 2] });
    let _: Option<&Never> = None;
}
