// Roles with messages and shared variables, a cfg'd role, raw names, and
// the enum used as a process type everywhere one is expected.
use cmc::{Ctx, Model, World};

#[derive(Clone, Debug)]
enum Msg {
    Hello,
}

#[derive(Default)]
struct Shared {
    greetings: u8,
}

#[derive(Debug)]
struct Greeter;

#[cmc::process(msg = Msg, shared = Shared)]
impl Greeter {
    #[handler(start)]
    fn greet(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(1, Msg::Hello);
        ctx.with_shared(|s| s.greetings += 1);
    }
}

#[derive(Debug)]
struct Listener {
    heard: u8,
}

#[cmc::process(msg = Msg, shared = Shared)]
impl Listener {
    #[handler(guard = has_mail)]
    fn r#match(&mut self, ctx: &mut Ctx<'_, Self>) {
        if ctx.recv().is_some() {
            self.heard += 1;
        }
    }

    fn has_mail(&self, view: &cmc::View<'_, Self>) -> bool {
        view.has_mail()
    }

    #[invariant]
    fn heard_once(&self) -> bool {
        self.heard <= 1
    }
}

#[cmc::roles]
#[derive(Debug)]
enum Node {
    Greeter(Greeter),
    #[cfg(any())]
    Ghost(Greeter),
    r#Listener(Listener),
}

#[cmc::invariant]
fn greeted_once(world: &World<'_, Node>) -> bool {
    world.shared().greetings == 1
}

#[cmc::model]
fn hello() -> Model<Node> {
    Model::new("hello", 2, |i| match i {
        0 => Node::Greeter(Greeter),
        _ => Node::Listener(Listener { heard: 0 }),
    })
    .quiescence_ok(true)
}

#[global_allocator]
static A: cmc::Allocator = cmc::Allocator;

fn main() {
    let names: Vec<&str> = <Node as cmc::Process>::handlers()
        .iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(names, ["Greeter::greet", "Listener::match"]);
    let result = hello().check().unwrap();
    assert_eq!(result.verdict, cmc::Verdict::Pass);
    assert_eq!(result.stats.unique, 2);
}
