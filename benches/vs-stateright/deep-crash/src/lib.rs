//! A crash far down one path: a counter whose handler panics when it
//! reaches `CMC_DEEP` (20 million by default). A depth-first search must
//! hold the whole path, find the crash within its memory budget, and
//! write a trace of every step that replays.

/// The depth of the crash: `CMC_DEEP`, or 20 million.
fn deep() -> u64 {
    std::env::var("CMC_DEEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000)
}

/// Counts up; crashes at [`deep`].
#[derive(Debug)]
pub struct Counter {
    value: u64,
}

#[cmc::process]
impl Counter {
    #[handler]
    fn bump(&mut self) {
        self.value += 1;
        if self.value == deep() {
            panic!("crashed {} steps deep", self.value);
        }
    }
}

/// One counter.
#[cmc::model]
pub fn deep_crash() -> cmc::Model<Counter> {
    cmc::Model::new("deep_crash", 1, |_| Counter { value: 0 })
}
