//! cmc's own failures are cmc's: a resource the checker needs and is
//! refused (here a mapping for the visited set, refused by fault
//! injection as the kernel refuses one under `ulimit -v`) ends the check
//! with a message naming the resource, never with a violation blamed on
//! the user code that happened to be running (it used to be "crash in the
//! hash of process 0", with a trace whose replay passed).

use std::process::Command;

use cmc::{Handler, Model, Process, Verdict};

#[derive(Debug, Hash)]
struct Counter {
    n: u32,
}

impl Counter {
    fn up(&mut self, _: &mut cmc::Ctx<'_, Self>) {
        self.n += 1;
    }
}

impl Process for Counter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![Handler::new("up", Self::up).guard(|c, _| c.n < 300)]
    }
}

/// Two counters to 300: 90,601 states, so the visited set grows several
/// times.
fn model() -> Model<Counter> {
    Model::new("counters", 2, |_| Counter { n: 0 }).quiescence_ok(true)
}

const CHILD: &str = "CMC_CHECKER_FAILURE_CHILD";

#[test]
fn a_refused_mapping_of_the_visited_set_is_cmcs_failure() {
    if std::env::var_os(CHILD).is_some() {
        // The child: the third mapping of a visited table is refused.
        let r = model().jobs(1).check_isolated().expect("the check ends");
        println!("verdict={:?}", r.verdict);
        println!("violations={}", r.violations.len());
        println!("stopped={}", r.stopped.unwrap_or_default());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::exact(concat!(
                module_path!(),
                "::a_refused_mapping_of_the_visited_set_is_cmcs_failure"
            )),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("CMC_FAULT_VISITED_MAP", "3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("verdict=Interrupted"), "{stdout}");
    assert!(stdout.contains("violations=0"), "{stdout}");
    assert!(
        stdout.contains("stopped=cmc's own machinery failed, not user code: cannot map ")
            && stdout.contains(" bytes for the visited set: "),
        "{stdout}"
    );
    // Without the fault, the same check passes.
    let r = model().jobs(1).check_isolated().unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.summary());
    assert_eq!(r.stats.unique, 301 * 301);
}
