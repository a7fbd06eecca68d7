// Variants that do not wrap exactly one process type.
struct Client;

#[cmc::process]
impl Client {
    #[handler]
    fn ask(&mut self) {}
}

#[cmc::roles]
enum Node {
    Client(Client),
    Idle,
    Pair(Client, Client),
    Named { client: Client },
}

fn main() {
    let _ = Node::Client(Client);
    let _ = Node::Idle;
    let _ = Node::Pair(Client, Client);
    let _ = Node::Named { client: Client };
}
