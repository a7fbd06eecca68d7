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
    limit: u32,
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
        vec![Handler::new("up", Self::up).guard(|c, _| c.n < c.limit)]
    }
}

/// Two counters to 300: 90,601 states, so the visited set grows several
/// times.
fn model() -> Model<Counter> {
    Model::new("counters", 2, |_| Counter { n: 0, limit: 300 }).quiescence_ok(true)
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

/// The pids of this process's children (every thread's).
fn children() -> Vec<i32> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            pids.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    pids
}

/// Two counters to 1,000: a million states, a few seconds on two workers.
fn bigger() -> Model<Counter> {
    Model::new("counters", 2, |_| Counter { n: 0, limit: 1000 })
        .quiescence_ok(true)
        .time_limit(std::time::Duration::from_secs(60))
}

/// One of two workers killed from outside (SIGKILL) at a moment of the
/// search: the check ends as cmc's failure (interrupted, the reason named),
/// never with a violation and never with a hang blamed on user code. A
/// survivor could wait forever on a lock the dead worker held, and the
/// watchdog then reported "timeout in the hash of process …" with a trace.
fn killed_at(strategy: cmc::Strategy, after: std::time::Duration) {
    let killer = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while start.elapsed() < after + std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            if start.elapsed() < after {
                continue;
            }
            let pids = children();
            if pids.len() == 2 {
                // SAFETY: kill takes two integers; the pid is our child's.
                unsafe { libc::kill(pids[1], libc::SIGKILL) };
                return true;
            }
        }
        false
    });
    let model = bigger().strategy(strategy).jobs(2);
    let r = model
        .transition_timeout(Some(std::time::Duration::from_secs(2)))
        .check()
        .expect("the check ends");
    let killed = killer.join().unwrap();
    assert!(
        r.violations.is_empty(),
        "{strategy:?} after {after:?}: {}: {:?}",
        r.summary(),
        r.violations.first().map(|v| &v.record)
    );
    if !killed {
        // The search ended before the kill: nothing to judge.
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.summary());
        return;
    }
    assert_eq!(
        r.verdict,
        Verdict::Interrupted,
        "{strategy:?} after {after:?}: {}",
        r.summary()
    );
    let why = r.stopped.clone().unwrap_or_default();
    assert!(
        why.contains("killed by SIGKILL from outside cmc"),
        "{strategy:?} after {after:?}: {why}"
    );
    assert!(!why.contains("did not return"), "{why}");
}

#[test]
fn a_worker_killed_from_outside_is_cmcs_failure_breadth_first() {
    for ms in [5, 40, 150, 400, 900] {
        killed_at(cmc::Strategy::Bfs, std::time::Duration::from_millis(ms));
    }
}

#[test]
fn a_worker_killed_from_outside_is_cmcs_failure_depth_first() {
    for ms in [5, 40, 150, 400, 900] {
        killed_at(cmc::Strategy::Dfs, std::time::Duration::from_millis(ms));
    }
}

const DYING: &str = "CMC_DYING_HOLDER_CHILD";

/// A worker dies while it holds a lock of the workers' shared memory (the
/// visited set's or the work queue's; fault injection makes the worst
/// moment certain): the other worker does not wait for it forever, and
/// the check ends as cmc's failure, nothing blamed on user code.
#[test]
fn a_worker_that_dies_holding_a_lock_is_cmcs_failure() {
    if let Some(strategy) = std::env::var_os(DYING) {
        let strategy = match strategy.to_str() {
            Some("bfs") => cmc::Strategy::Bfs,
            _ => cmc::Strategy::Dfs,
        };
        let r = bigger()
            .strategy(strategy)
            .jobs(2)
            .transition_timeout(Some(std::time::Duration::from_secs(2)))
            .check()
            .expect("the check ends");
        println!("verdict={:?}", r.verdict);
        println!("violations={}", r.violations.len());
        println!("stopped={}", r.stopped.unwrap_or_default());
        println!("elapsed={}", r.stats.elapsed.as_secs_f64());
        return;
    }
    for strategy in ["bfs", "dfs"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::exact(concat!(
                    module_path!(),
                    "::a_worker_that_dies_holding_a_lock_is_cmcs_failure"
                )),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DYING, strategy)
            .env("CMC_FAULT_DIE_HOLDING_LOCK", "1:2000")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("verdict=Interrupted"),
            "{strategy}: {stdout}"
        );
        assert!(stdout.contains("violations=0"), "{strategy}: {stdout}");
        // The reason given is the dead worker's, not its consequence for
        // the other (which found the lock's holder gone, or was stopped).
        assert!(
            stdout.contains("stopped=the checking process was killed by SIGKILL from outside cmc"),
            "{strategy}: {stdout}"
        );
        assert!(!stdout.contains("did not return"), "{strategy}: {stdout}");
    }
}

const LIMITED: &str = "CMC_ULIMIT_CHILD";

/// The virtual memory this process has mapped (`VmSize`), in bytes.
fn mapped_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Under `ulimit -v` (a limit on the address space), whatever the limit,
/// a check passes or ends as cmc's own failure naming what it could not
/// get: never a violation of the user's code, never a trace. The limits
/// tried: from none above what the test maps (no thread can start), past
/// the smallest that lets the check set up (its arenas reserved), to a
/// few (6, a MiB apart) above it, where a later mapping (the visited set's, the page
/// store's) is refused in the middle of the search.
#[test]
fn under_an_address_space_limit_the_check_never_blames_user_code() {
    if let Some(extra) = std::env::var_os(LIMITED) {
        let extra: u64 = extra.to_str().unwrap().parse().unwrap();
        let limit = mapped_bytes() + extra;
        let rlimit = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: setrlimit reads the struct we pass.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) }, 0);
        match model().jobs(1).check_isolated() {
            Ok(r) => {
                println!("verdict={:?}", r.verdict);
                println!("violations={}", r.violations.len());
                println!("stopped={}", r.stopped.unwrap_or_default());
            }
            Err(e) => println!("error={e}"),
        }
        return;
    }
    let run = |extra_mib: u64| -> String {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::exact(concat!(
                    module_path!(),
                    "::under_an_address_space_limit_the_check_never_blames_user_code"
                )),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(LIMITED, (extra_mib << 20).to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "+{extra_mib} MiB: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A verdict, or an error of the checker: never a violation.
        if stdout.contains("error=") {
            assert!(
                stdout.contains("error=cannot ") || stdout.contains(": cannot "),
                "+{extra_mib} MiB: an error that does not name the resource: {stdout}"
            );
            assert!(
                stdout.contains("Cannot allocate memory")
                    || stdout.contains("Resource temporarily unavailable"),
                "+{extra_mib} MiB: an error that does not name the refusal: {stdout}"
            );
        } else {
            assert!(
                stdout.contains("violations=0"),
                "+{extra_mib} MiB: {stdout}"
            );
            assert!(
                stdout.contains("verdict=Pass")
                    || (stdout.contains("verdict=Interrupted")
                        && stdout.contains("stopped=cmc's own machinery failed, not user code: ")),
                "+{extra_mib} MiB: {stdout}"
            );
        }
        stdout
    };
    run(0);
    // The smallest limit (in MiB above what is mapped) at which the check
    // sets up, by bisection.
    let (mut low, mut high) = (0u64, 2048u64);
    assert!(!run(high).contains("error="), "2 GiB more is enough");
    while high - low > 1 {
        let mid = (low + high) / 2;
        if run(mid).contains("error=") {
            low = mid;
        } else {
            high = mid;
        }
    }
    let mut failed_later = 0;
    for above in 0..6 {
        if run(high + above).contains("verdict=Interrupted") {
            failed_later += 1;
        }
    }
    println!("set up from +{high} MiB; {failed_later} of 6 limits above failed later");
}
