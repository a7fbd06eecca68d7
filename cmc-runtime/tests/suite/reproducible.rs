//! Arenas sit at fixed addresses, so a state holding pointers has the same
//! bytes, and the same fingerprint, in every run of the same program.

use std::collections::BTreeMap;
use std::process::Command;

use cmc::memory::{Memory, MemoryConfig};
use cmc::ArenaConfig;

const CHILD: &str = "CMC_REPRODUCIBLE_CHILD";

/// Builds pointer-rich states in two arenas, runs a few transitions, and
/// prints the arena bases and every fingerprint.
fn run() -> String {
    let mut mem = Memory::new(MemoryConfig::default());
    let a = mem.add_arena("process 0", ArenaConfig::default()).unwrap();
    let b = mem.add_arena("process 1", ArenaConfig::default()).unwrap();
    let map: *mut BTreeMap<u32, String> = {
        let _in = mem.enter(a);
        Box::into_raw(Box::new(
            (0..50).map(|i| (i, format!("value {i}"))).collect(),
        ))
    };
    let list: *mut Vec<Box<[u64; 4]>> = {
        let _in = mem.enter(b);
        Box::into_raw(Box::new((0..20).map(|i| Box::new([i; 4])).collect()))
    };
    let mut out = format!("bases {:p} {:p}\n", mem.base(a), mem.base(b));
    let s0 = mem.capture();
    out += &format!("{}\n", mem.fingerprint(s0));
    for k in 0..10u32 {
        mem.restore(s0);
        {
            let _in = mem.enter(a);
            // SAFETY: the root of the restored arena.
            unsafe { (*map).insert(100 + k, "new".repeat(k as usize)) };
        }
        {
            let _in = mem.enter(b);
            // SAFETY: the root of the restored arena.
            unsafe { (*list).push(Box::new([k as u64; 4])) };
        }
        let s = mem.capture();
        out += &format!("{}\n", mem.fingerprint(s));
    }
    out
}

#[test]
fn child() {
    if std::env::var(CHILD).is_ok() {
        print!("{}", run());
    }
}

fn run_child() -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(module_path!(), "::child")),
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .filter(|l| l.starts_with("bases") || l.len() == 16)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn two_runs_have_the_same_addresses_and_fingerprints() {
    let first = run_child();
    let second = run_child();
    assert_eq!(first.lines().count(), 12, "{first}");
    assert!(
        first.starts_with("bases 0x200000000000 0x200040000000"),
        "{first}"
    );
    assert_eq!(first, second, "fingerprints differ between runs");
}
