// A generic roles enum and an empty one.
struct Client;

#[cmc::process]
impl Client {
    #[handler]
    fn ask(&mut self) {}
}

#[cmc::roles]
enum Node<T> {
    Client(Client),
    Other(T),
}

#[cmc::roles]
enum Nothing {}

fn main() {
    let _ = Node::<u8>::Other(1);
}
