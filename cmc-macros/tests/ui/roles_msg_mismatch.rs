// Two roles that exchange different message types.
#[derive(Clone, Debug)]
struct Request;

#[derive(Clone, Debug)]
struct Reply;

struct Client;

#[cmc::process(msg = Request)]
impl Client {
    #[handler]
    fn ask(&mut self) {}
}

struct Server;

#[cmc::process(msg = Reply)]
impl Server {
    #[handler]
    fn answer(&mut self) {}
}

#[cmc::roles]
enum Node {
    Client(Client),
    Server(Server),
}

fn main() {
    let _ = Node::Client(Client);
    let _ = Node::Server(Server);
}
