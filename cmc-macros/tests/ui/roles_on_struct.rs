// `#[cmc::roles]` on a struct, and with arguments.
struct Client;

#[cmc::process]
impl Client {
    #[handler]
    fn ask(&mut self) {}
}

#[cmc::roles]
struct Node {
    client: Client,
}

#[cmc::roles(msg = ())]
enum Other {
    Client(Client),
}

fn main() {
    let _ = Node { client: Client }.client;
    let _ = Other::Client(Client);
}
