//! Fingerprints do not depend on where the program is loaded: a state that
//! holds a string literal, a trait object (its vtable) and a function
//! pointer has the same fingerprints — initial state and every step of a
//! trace — in another process of the same build, whose executable and
//! libraries address randomization put elsewhere. Checked for every source
//! that reads such words: canonical heap, raw bytes, `Hash` and `Debug`.

use std::fmt;
use std::process::Command;

use cmc::{FingerprintMode, Handler, Model, Process, Verdict};

trait Codec {
    fn name(&self) -> &'static str;
}

struct Plain;

impl Codec for Plain {
    fn name(&self) -> &'static str {
        "plain"
    }
}

fn double(x: u8) -> u8 {
    x.wrapping_mul(2)
}

/// A process that holds pointers into the program image. `repr(C)` keeps
/// the function pointer just before the counter, which is zero at first:
/// the pointer is then the object's last non-zero word, whose zero high
/// bytes the canonical heap must not trim away (a pointer into the arena,
/// `note`, gives the object a field map to follow it).
#[repr(C)]
struct Holder {
    label: &'static str,
    note: Box<u8>,
    codec: Box<dyn Codec>,
    op: fn(u8) -> u8,
    n: u8,
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Prints the addresses, as a `Debug` of pointers would.
        write!(
            f,
            "Holder {{ label: {:p}, codec: {:p}, op: {:p}, n: {} }}",
            self.label, &*self.codec as *const dyn Codec as *const u8, self.op as *const u8, self.n
        )
    }
}

impl std::hash::Hash for Holder {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.label.as_ptr() as usize).hash(h);
        self.op.hash(h);
        self.n.hash(h);
    }
}

impl Process for Holder {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("step", |h: &mut Holder, _| {
            h.n = (h.op)(h.n + 1);
            h.label = if h.n > 2 { "big" } else { "small" };
        })]
    }
    fn hash_fns() -> cmc::HashFns<Self> {
        let mut fns = cmc::HashFns::none();
        fns.process.hash = Some(|h: &Holder, s| std::hash::Hash::hash(h, s));
        fns.process.debug = Some(cmc::identity::debug_hash::<Holder>);
        fns
    }
}

/// The fingerprints of a 3-step trace (the invariant fails at n = 14).
fn fingerprints(mode: FingerprintMode) -> Vec<String> {
    let r = Model::new("holder", 1, |_| Holder {
        label: "start",
        note: Box::new(7),
        codec: Box::new(Plain),
        op: double,
        n: 0,
    })
    .fingerprint(mode)
    .invariant("small", |w| {
        let h = w.processes().next().unwrap();
        assert_eq!(h.codec.name(), "plain");
        if h.n < 14 {
            Ok(())
        } else {
            Err(format!("n is {}", h.n))
        }
    })
    .check()
    .expect("the check runs");
    assert_eq!(r.verdict, Verdict::Violation);
    let t = &r.violations[0].trace;
    assert_eq!(t.steps.len(), 3);
    std::iter::once(t.initial_fingerprint.clone())
        .chain(t.steps.iter().map(|s| s.fingerprint.clone()))
        .collect()
}

const MODES: [FingerprintMode; 4] = [
    FingerprintMode::Heap,
    FingerprintMode::Bytes,
    FingerprintMode::Hash,
    FingerprintMode::Debug,
];

#[test]
fn fingerprints_are_the_same_in_another_process() {
    if std::env::var_os("CMC_LAYOUT_CHILD").is_some() {
        for mode in MODES {
            println!("{}: {}", mode.name(), fingerprints(mode).join(" "));
        }
        return;
    }
    let mine: Vec<String> = MODES
        .iter()
        .map(|&m| format!("{}: {}", m.name(), fingerprints(m).join(" ")))
        .collect();
    let exe = std::env::current_exe().unwrap();
    for _ in 0..2 {
        let out = Command::new(&exe)
            .args([
                "--exact",
                crate::exact(concat!(
                    module_path!(),
                    "::fingerprints_are_the_same_in_another_process"
                )),
                "--nocapture",
            ])
            .env("CMC_LAYOUT_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for line in &mine {
            assert!(
                text.lines().any(|l| l == line),
                "{line}\nnot in the other process's output:\n{text}"
            );
        }
    }
}
