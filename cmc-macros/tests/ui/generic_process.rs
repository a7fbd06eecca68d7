// A generic process type.
struct Counter<T> {
    value: T,
}

#[cmc::process]
impl<T: Copy + 'static> Counter<T> {
    #[handler]
    fn inc(&mut self) {
        let _ = self.value;
    }
}

fn main() {}
