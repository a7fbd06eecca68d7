//! Every accepted form, in a crate that denies warnings and
//! `unused_qualifications`, with the runtime's names imported so that a
//! qualified path in generated code would be flagged.
#![deny(warnings, unused_qualifications)]

use cmc::registry::{models, RunOptions};
use cmc::{Check, Ctx, Handler, Invariant, Model, Process, Verdict, View, World};

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Msg {
    Hello,
}

#[derive(Default)]
struct Shared {
    hellos: u8,
}

struct Node {
    said: bool,
    heard: u8,
    ticks: u8,
}

#[cmc::process(msg = Msg, shared = Shared)]
impl Node {
    /// Guarded by a method taking a view.
    #[handler(guard = can_say)]
    fn say(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.said = true;
        let _ = ctx.broadcast(Msg::Hello);
        ctx.with_shared(|s| s.hellos += 1);
        ctx.set_timer("tick");
    }

    fn can_say(&self, view: &View<'_, Self>) -> bool {
        view.me() == 0 && !self.said
    }

    /// Guarded by a free function taking a view.
    #[handler(guard = has_mail)]
    fn hear(&mut self, ctx: &mut Ctx<Self>) {
        if ctx.recv().is_some() {
            self.heard += 1;
        }
    }

    /// A timer handler without a context.
    #[handler(timer = "tick")]
    fn tick(&mut self) {
        self.ticks += 1;
    }

    /// Guarded by a method without a view (written with `Self::`) and by a
    /// free function without one; never enabled.
    #[handler(guard = Self::never)]
    fn r#unused(&mut self) {}

    #[handler(guard = nobody)]
    fn nothing<'a>(&mut self, _ctx: &mut Ctx<'a, Node>) {}

    fn never(&self) -> bool {
        false
    }

    #[invariant]
    fn heard_at_most_once(&self) -> bool {
        self.heard <= 1
    }

    #[invariant]
    fn ticks_bounded(&self) -> Check {
        if self.ticks <= 1 {
            Ok(())
        } else {
            Err(format!("{} ticks", self.ticks))
        }
    }

    #[invariant]
    fn with_error_type(&self) -> Result<(), std::fmt::Error> {
        Ok(())
    }
}

fn has_mail(_: &Node, view: &View<'_, Node>) -> bool {
    view.has_mail()
}

fn nobody(_: &Node) -> bool {
    false
}

#[cmc::invariant]
fn one_hello(world: &World<'_, Node>) -> bool {
    world.shared().hellos <= 1
}

#[cmc::invariant]
fn said_implies_sent(world: &World<Node>) -> Check {
    let said = world.processes().filter(|n| n.said).count();
    if said <= 1 {
        Ok(())
    } else {
        Err(format!("{said} said hello"))
    }
}

#[cmc::model]
fn hello() -> Model<Node> {
    Model::new("hello", 2, |_| Node {
        said: false,
        heard: 0,
        ticks: 0,
    })
    .quiescence_ok(true)
}

fn main() {
    let names: Vec<&str> = Node::handlers().iter().map(|h: &Handler<Node>| h.name).collect();
    assert_eq!(names, ["say", "hear", "tick", "unused", "nothing"]);
    let invariants: Vec<&str> = Node::invariants()
        .iter()
        .map(|i: &Invariant<Node>| i.name)
        .collect();
    assert_eq!(
        invariants,
        ["heard_at_most_once", "ticks_bounded", "with_error_type"]
    );
    let all = models();
    let entry = all.iter().find(|m| m.path.ends_with("::hello")).unwrap();
    let result = entry.check(&RunOptions::default()).unwrap();
    assert_eq!(result.verdict, Verdict::Pass, "{}", result.summary());
    // say; then hear, tick in any order.
    assert_eq!(result.stats.unique, 5, "{}", result.summary());
}
