// A role whose type is not a process type (no #[cmc::process]): each use
// of it says so, at the variant.
struct Client;

#[cmc::process]
impl Client {
    #[handler]
    fn ask(&mut self) {}
}

struct NotAProcess;

#[cmc::roles]
enum Mixed {
    Client(Client),
    Plain(NotAProcess),
}

fn main() {
    let _ = Mixed::Plain(NotAProcess);
    let _ = Mixed::Client(Client);
}
