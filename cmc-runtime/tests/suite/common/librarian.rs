//! The librarian: a process whose state is all heap (a `Vec` of boxes, a
//! B-tree, a `String`, a linked list) and that derives nothing. Shared by
//! the runtime's tests and cmc-tests' typed-walk tests (which include this
//! file by path: the typed walk needs the full debugging information that
//! only cmc-tests is built with).

use std::collections::BTreeMap;

use cmc::{Ctx, Handler, Invariant, Model, Process, View};

/// A process whose state is all heap: derives nothing.
#[allow(
    clippy::vec_box,
    reason = "a Vec of Boxes is the heap shape this model exercises"
)]
pub struct Librarian {
    pub shrinks: bool,
    pub shelves: Vec<Box<[u16; 3]>>,
    pub index: BTreeMap<String, usize>,
    pub log: String,
    pub chain: Option<Box<Link>>,
}

pub struct Link {
    pub value: u8,
    pub next: Option<Box<Link>>,
}

impl Librarian {
    fn add(&mut self, _: &mut Ctx<'_, Self>) {
        let n = self.shelves.len();
        let which = cmc::choose(2);
        self.shelves.push(Box::new([n as u16, which as u16, 7]));
        self.index.insert(format!("book-{n}-{which}"), n);
        self.log.push_str(if which == 0 { "a" } else { "b" });
        self.chain = Some(Box::new(Link {
            value: n as u8,
            next: self.chain.take(),
        }));
    }

    fn can_add(&self, _: &View<'_, Self>) -> bool {
        self.shelves.len() < 3
    }

    fn drop_last(&mut self, _: &mut Ctx<'_, Self>) {
        self.shelves.pop();
        let key = self.index.keys().next_back().cloned();
        if let Some(k) = key {
            self.index.remove(&k);
        }
        self.log.pop();
        if let Some(link) = self.chain.take() {
            self.chain = link.next;
            let _ = link.value;
        }
    }

    fn can_drop(&self, _: &View<'_, Self>) -> bool {
        self.shrinks && !self.shelves.is_empty()
    }
}

impl Process for Librarian {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("add", Librarian::add).guard(Librarian::can_add),
            Handler::new("drop_last", Librarian::drop_last).guard(Librarian::can_drop),
        ]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("consistent", |l| {
            if l.shelves.len() == l.index.len() && l.log.len() == l.shelves.len() {
                Ok(())
            } else {
                Err(format!(
                    "{} shelves, {} index entries, log {:?}",
                    l.shelves.len(),
                    l.index.len(),
                    l.log
                ))
            }
        })]
    }
}

pub fn librarian(shrinks: bool) -> Model<Librarian> {
    Model::new("librarian", 1, move |_| Librarian {
        shrinks,
        shelves: Vec::new(),
        index: BTreeMap::new(),
        log: String::new(),
        chain: None,
    })
    .detect_leaks(true)
}
