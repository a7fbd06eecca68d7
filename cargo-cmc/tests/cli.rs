//! End-to-end tests of `cargo cmc` over the fixture crates in
//! `tests/fixtures/`: verdicts, exit codes, the summary line, the JSON
//! result object, replay, `--emit-test`, the HTML report in headless
//! Chromium, and every error the tool reports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixture(name: &str) -> PathBuf {
    workspace().join("tests").join("fixtures").join(name)
}

/// One target directory for every fixture, so the runtime is built once
/// (the fixtures' lock files pin the same versions as the workspace's, so
/// their harnesses share one build of it). It sits in the target directory
/// this test was built in (`<target>/release/deps/cli-…`), so that a
/// `CARGO_TARGET_DIR` elsewhere is honoured.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap();
    target.join("cmc-e2e")
}

/// The optimization level the fixtures' harnesses build at: what these
/// tests check does not depend on it, and at level 1 a harness (which
/// compiles the engine for its process types) builds in about half the
/// time. `CARGO_PROFILE_RELEASE_OPT_LEVEL` overrides the harness manifest's
/// release profile, as it would for a user.
const E2E_OPT_LEVEL: &str = "1";

fn cargo_cmc(dir: &Path) -> Command {
    cargo_cmc_at(dir, E2E_OPT_LEVEL)
}

/// `cargo cmc` whose harnesses build at optimization level `opt`.
fn cargo_cmc_at(dir: &Path, opt: &str) -> Command {
    let mut cmd = Command::cargo_bin("cargo-cmc").unwrap();
    cmd.current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", opt)
        .arg("cmc");
    cmd
}

fn run(dir: &Path, args: &[&str]) -> Output {
    run_at(dir, args, E2E_OPT_LEVEL)
}

/// [`run`] with the harness built at optimization level `opt`.
fn run_at(dir: &Path, args: &[&str], opt: &str) -> Output {
    let out = cargo_cmc_at(dir, opt).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "cargo cmc panicked:\n{stderr}"
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts `out` exited with `code`, showing what it printed if not.
fn exits_with(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn summary_re(line: &str, model: &str, verdict: &str) -> bool {
    let prefix = format!("cmc: {model} {verdict} unique=");
    let Some(rest) = line.strip_prefix(&prefix) else {
        return false;
    };
    let parts: Vec<&str> = rest.split(' ').collect();
    parts.len() == 4
        && parts[0].chars().all(|c| c.is_ascii_digit())
        && parts[1].starts_with("transitions=")
        && parts[2].starts_with("depth=")
        && parts[3].starts_with("time=")
        && parts[3].ends_with('s')
}

#[test]
fn a_passing_model_passes_with_the_summary_as_its_last_line() {
    let out = run(
        &fixture("passing"),
        &["check", "--model", "fixture_passing::counters"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap();
    assert!(
        summary_re(last, "fixture_passing::counters", "pass"),
        "{last}"
    );
    assert!(
        last.starts_with("cmc: fixture_passing::counters pass unique=9 transitions=18 depth="),
        "{last}"
    );
    // Partial-order reduction: the same states, on one worker; several
    // workers are an error.
    let out = run(
        &fixture("passing"),
        &[
            "check",
            "--model",
            "fixture_passing::counters",
            "--por",
            "-v",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.lines().last().unwrap().contains(" pass unique=9 "),
        "{stdout}"
    );
    let out = run(
        &fixture("passing"),
        &[
            "check",
            "--model",
            "fixture_passing::counters",
            "--por",
            "-j",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("use --jobs 1 with it"),
        "{}",
        text(&out.stderr)
    );
    // Every mode the process type supports, at either width, finds the
    // same 9 states of this allocation-free model.
    for args in [
        ["--fingerprint", "bytes", "--fingerprint-bits", "128"],
        ["--fingerprint", "heap", "--fingerprint-bits", "64"],
    ] {
        let mut all = vec!["check", "--model", "fixture_passing::counters"];
        all.extend(args);
        let out = run(&fixture("passing"), &all);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}");
        assert!(
            stdout.lines().last().unwrap().contains(" pass unique=9 "),
            "{args:?}: {stdout}"
        );
    }
}

#[test]
fn list_prints_the_models_by_full_path() {
    let out = run(&fixture("violating"), &["list"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "fixture_violating::two_messages\nfixture_violating::two_messages_fifo\n"
    );
}

#[test]
fn a_violation_is_reported_with_trace_replay_command_and_report() {
    let out = run(&fixture("violating"), &["check", "--strategy", "bfs"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("violation in fixture_violating::two_messages: invariant violated: in_order: process 1: received [2, 1]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("trace of fixture_violating::two_messages (3 steps):"),
        "{stdout}"
    );
    assert!(stdout.contains("1. process 0 send_both"), "{stdout}");
    assert!(
        stdout.contains("replay it with: cargo cmc replay "),
        "{stdout}"
    );
    assert!(stdout.contains("report: "), "{stdout}");
    // Each model's last line is its summary.
    let summaries: Vec<&str> = stdout.lines().filter(|l| l.starts_with("cmc: ")).collect();
    assert_eq!(summaries.len(), 2);
    assert!(
        summary_re(summaries[0], "fixture_violating::two_messages", "violation"),
        "{}",
        summaries[0]
    );
    assert!(
        summary_re(summaries[1], "fixture_violating::two_messages_fifo", "pass"),
        "{}",
        summaries[1]
    );
    assert_eq!(stdout.lines().last().unwrap(), summaries[1]);
    // The check ran inside the project, without --manifest-path; its
    // replay line, pasted into a shell in another directory, reproduces
    // the violation.
    let commands = replay_commands(&stdout);
    assert_eq!(commands.len(), 1, "{stdout}");
    let elsewhere = std::env::temp_dir();
    let out = paste(&elsewhere, &commands[0]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "`{}` in {}:\n{}{}",
        commands[0],
        elsewhere.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("invariant violated: in_order"),
        "{}",
        text(&out.stdout)
    );
}

fn json_result(model_filter: &str) -> Value {
    let out = run(
        &fixture("violating"),
        &[
            "check",
            "--strategy",
            "bfs",
            "--message-format",
            "json",
            "--model",
            model_filter,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    lines
        .into_iter()
        .rfind(|v| v["type"] == "result")
        .expect("a result object")
}

#[test]
fn the_json_result_object_has_every_promised_field() {
    let result = json_result("two_messages");
    let keys: Vec<&str> = result
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "type",
            "model",
            "verdict",
            "unique_states",
            "transitions",
            "max_depth",
            "elapsed_s",
            "peak_memory_bytes",
            "memory",
            "walks",
            "jobs",
            "processes",
            "sent_states",
            "sent_bytes",
            "sent_raw_bytes",
            "replayed",
            "slept",
            "reexpanded",
            "cached",
            "derived",
            "revisited",
            "complete",
            "reached",
            "violations",
            "stopped",
            "fingerprint",
            "symmetry",
            "sources"
        ]
    );
    // The memory by owner, at the largest reading: every owner, bytes
    // and bytes per state, and the resident figure they divide.
    let memory = &result["memory"];
    let owners: Vec<&str> = memory["owners"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        owners,
        [
            "visited",
            "frontier",
            "records",
            "pages",
            "page_index",
            "tree",
            "caches",
            "other"
        ]
    );
    assert!(memory["resident_bytes"].as_u64().unwrap() > 0, "{memory}");
    assert_eq!(memory["states"], result["unique_states"], "{memory}");
    assert!(
        memory["owners"]["visited"]["bytes"].as_u64().unwrap() > 0,
        "{memory}"
    );
    // One entry per role with state (the fixture shares nothing), each
    // with the source of identity the check used: the process type derives
    // only Debug; its messages are u8, which cmc implements StateHash for.
    assert_eq!(
        result["sources"],
        serde_json::json!([
            {"role": "process", "type": "fixture_violating::Node", "source": "debug"},
            {"role": "message", "type": "u8", "source": "state"},
        ])
    );
    // The process type's source of identity.
    assert_eq!(result["fingerprint"], "debug");
    // The search process's peak memory: at least its arenas' first pages.
    assert!(
        result["peak_memory_bytes"]
            .as_u64()
            .is_some_and(|b| b > 1 << 20),
        "{result}"
    );
    // `--model two_messages` names that model only (not
    // `two_messages_fifo`). Without --model, both run: the first result is
    // the violating one, the last the FIFO one, which passes.
    let out = run(
        &fixture("violating"),
        &["check", "--strategy", "bfs", "--message-format", "json"],
    );
    let first: Value = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "result")
        .unwrap();
    assert_eq!(first["model"], "fixture_violating::two_messages");
    assert_eq!(first["verdict"], "violation");
    let v = &first["violations"][0];
    assert_eq!(v["kind"], "invariant");
    assert_eq!(v["property"], "in_order");
    assert_eq!(v["message"], "process 1: received [2, 1]");
    assert_eq!(v["trace_len"], 3);
    assert_eq!(v["also_violated"], serde_json::json!([]));
    assert!(Path::new(v["trace_file"].as_str().unwrap()).exists());
    assert!(Path::new(v["report_file"].as_str().unwrap()).exists());
    assert_eq!(result["verdict"], "violation");
    let last: Value = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|v| v["type"] == "result")
        .unwrap();
    assert_eq!(
        (last["model"].as_str(), last["verdict"].as_str()),
        (Some("fixture_violating::two_messages_fifo"), Some("pass"))
    );
}

fn violating_trace() -> PathBuf {
    let out = run(
        &fixture("violating"),
        &["check", "--strategy", "bfs", "--message-format", "json"],
    );
    let first: Value = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "result")
        .unwrap();
    PathBuf::from(first["violations"][0]["trace_file"].as_str().unwrap())
}

#[test]
fn replay_reproduces_the_violation_and_can_stop_early() {
    let trace = violating_trace();
    let out = run(&fixture("violating"), &["replay", trace.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("   1. process 0 send_both"), "{stdout}");
    assert!(stdout.contains("receives 2 from process 0"), "{stdout}");
    assert!(stdout.contains("process 1 is now:"), "{stdout}");
    assert!(
        stdout.contains("the violation reproduces: invariant violated: in_order"),
        "{stdout}"
    );
    let out = run(
        &fixture("violating"),
        &["replay", trace.to_str().unwrap(), "--step", "1"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("stopped after step 1"));
    // The newest trace of the project's models (other tests may have saved
    // newer ones of the same fixture, which reproduce as well).
    let out = run(&fixture("violating"), &["replay", "--last"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("the violation reproduces"), "{stdout}");
    assert!(stdout.contains("replaying fixture_violating::"), "{stdout}");
    // A project none of whose models has a trace says so.
    let empty = tempdir("no-traces");
    std::fs::create_dir_all(empty.join("src")).unwrap();
    let manifest = std::fs::read_to_string(fixture("violating").join("Cargo.toml"))
        .unwrap()
        .replace("fixture-violating", "fixture-never-checked")
        .replace(
            "../../../cmc-runtime",
            &workspace().join("cmc-runtime").display().to_string(),
        );
    std::fs::write(empty.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(
        fixture("violating").join("src/lib.rs"),
        empty.join("src/lib.rs"),
    )
    .unwrap();
    let out = run(&empty, &["replay", "--last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--last: no trace of this project's models"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&empty).unwrap();
}

#[test]
fn bad_trace_files_are_clear_errors() {
    let dir = tempdir("bad-traces");
    // Writes `contents` to `name`, replays it, and expects exit 2 with
    // `expected` on standard error.
    let rejects = |name: &str, contents: &str, expected: &str| {
        let file = dir.join(name);
        std::fs::write(&file, contents).unwrap();
        let out = run(&fixture("violating"), &["replay", file.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{name}: expected {expected:?} in:\n{stderr}"
        );
    };
    rejects("malformed.json", "{ not json", "not a cmc trace");

    let good: Value =
        serde_json::from_str(&std::fs::read_to_string(violating_trace()).unwrap()).unwrap();
    let mut other = good.clone();
    other["model"] = "fixture_violating::no_such_model".into();
    rejects(
        "other.json",
        &other.to_string(),
        "which this project does not have",
    );

    // A trace that does not fit the build is a verdict, not a tool error.
    let mut rebuilt = good;
    rebuilt["initial_fingerprint"] = "0123456789abcdef".into();
    let file = dir.join("rebuilt.json");
    std::fs::write(&file, rebuilt.to_string()).unwrap();
    let out = run(&fixture("violating"), &["replay", file.to_str().unwrap()]);
    // The sources are the recorded ones: the initial state's difference is
    // hidden nondeterminism (exit 5).
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("the trace's initial state is not this build's")
            && stdout.contains("hidden nondeterminism in initialisation"),
        "{stdout}"
    );
    // A step that names a handler or a process the model does not have:
    // the trace does not fit the model (exit 6).
    let good: Value =
        serde_json::from_str(&std::fs::read_to_string(violating_trace()).unwrap()).unwrap();
    for (what, field, value, expected) in [
        ("handler", "handler", Value::from("resend"), "runs `resend`"),
        ("process", "process", Value::from(9), "names process 9"),
    ] {
        let mut misfit = good.clone();
        misfit["steps"][0][field] = value;
        let file = dir.join(format!("misfit-{what}.json"));
        std::fs::write(&file, misfit.to_string()).unwrap();
        let out = run(&fixture("violating"), &["replay", file.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(6),
            "{what}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("the trace does not fit the model at step 1")
                && stdout.contains(expected),
            "{what}: {stdout}"
        );
    }
}

#[test]
fn tool_errors_exit_with_2_and_a_message() {
    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        (
            fixture("no-models"),
            vec!["check"],
            "no models found in `fixture-no-models`",
        ),
        (fixture("plain"), vec!["check"], "depends on cmc-runtime"),
        (
            fixture("broken"),
            vec!["check"],
            "building package `fixture-broken` failed",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "nothing"],
            "--model `nothing` matches none of the models",
        ),
        (
            fixture("passing"),
            vec!["check", "--strategy", "sideways"],
            "invalid value 'sideways'",
        ),
        (
            fixture("passing"),
            vec!["check", "-p", "nonexistent"],
            "package `nonexistent` is not a member",
        ),
        (
            tempdir("not-a-project"),
            vec!["check"],
            "not inside a cargo project",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--fingerprint", "hash"],
            "needs the process type fixture_passing::Counter to implement Hash",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--fingerprint", "abstract"],
            "needs an abstraction function",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--strategy", "best"],
            "best-first search needs a priority",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--seed", "3"],
            "--seed chooses the order of --strategy random",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--walks", "3"],
            "--walks bounds random walks: it needs --strategy walk",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--strategy", "walk"],
            "--strategy walk never ends by itself",
        ),
        (
            fixture("passing"),
            vec![
                "check",
                "--model",
                "counters",
                "--strategy",
                "walk",
                "--walks",
                "3",
                "--require-complete",
            ],
            "random walks (--strategy walk) never do",
        ),
        (
            fixture("passing"),
            vec![
                "check",
                "--model",
                "counters",
                "--strategy",
                "walk",
                "--walks",
                "3",
                "--por",
            ],
            "random walks (--strategy walk) store nothing it could use",
        ),
        (
            fixture("passing"),
            vec![
                "check",
                "--model",
                "counters",
                "--strategy",
                "walk",
                "--walks",
                "3",
                "--no-transition-cache",
            ],
            "--no-transition-cache",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "many"],
            "it is part of fixture_passing::many_counters",
        ),
        (
            fixture("passing"),
            vec!["check", "--model", "counters", "--exclude", "counters"],
            "--exclude leaves no model to check",
        ),
        (
            fixture("passing"),
            vec!["check", "--features", "bad-bounds", "--model", "bad_bounds"],
            "building `fixture_passing::bad_bounds` failed: a model needs at least one counter, not 0 (at ",
        ),
    ];
    for (dir, args, expected) in cases {
        let out = run(&dir, &args);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} in {}: {stderr}",
            dir.display()
        );
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in:\n{stderr}"
        );
    }
    // A build failure shows cargo's own diagnostics.
    let out = run(&fixture("broken"), &["check"]);
    assert!(
        text(&out.stderr).contains("mismatched types"),
        "{}",
        text(&out.stderr)
    );
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cmc-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies the violating fixture, with an absolute path to the runtime.
fn copy_of_violating() -> PathBuf {
    let dir = tempdir("emit");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = std::fs::read_to_string(fixture("violating").join("Cargo.toml"))
        .unwrap()
        .replace(
            "../../../cmc-runtime",
            &workspace().join("cmc-runtime").display().to_string(),
        );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(
        fixture("violating").join("src/lib.rs"),
        dir.join("src/lib.rs"),
    )
    .unwrap();
    dir
}

/// A regression test as the first `cargo cmc check --emit-test` wrote it
/// (commit aa880c9), for the violating fixture; `{TRACE}` is its trace.
const OLD_EMITTED_TEST: &str = r####"//! Emitted by `cargo cmc check --emit-test`: replays the counterexample
//! cmc found in `fixture_violating::two_messages`:
//! invariant violated: in_order
//! The test fails while the violation reproduces.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

// Links the library with its registered models.
use fixture_violating as _;

const TRACE: &str = r#"{TRACE}"#;

#[test]
fn cmc_counterexample_two_messages() {
    let trace = cmc::Trace::from_json(TRACE).expect("a cmc trace");
    let model = cmc::registry::models()
        .into_iter()
        .find(|m| m.path == "fixture_violating::two_messages")
        .expect("the model is registered");
    let mut options = cmc::registry::RunOptions::default();
    options.isolate = true;
    match model.replay(&options, &trace).expect("the trace fits the model") {
        cmc::ReplayOutcome::Reproduced(v) => panic!("the counterexample still reproduces: {v}"),
        other => eprintln!("the counterexample no longer reproduces: {other:?}"),
    }
}
"####;

#[test]
#[ignore = "a debug build of the runtime for the emitted test, four times (bash scripts/test.sh --full runs it)"]
fn an_emitted_test_fails_while_the_bug_is_there_and_passes_once_fixed() {
    let dir = copy_of_violating();
    let out = run(
        &dir,
        &[
            "check",
            "--model",
            "two_messages",
            "--emit-test",
            "tests/regression.rs",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let emitted = std::fs::read_to_string(dir.join("tests/regression.rs")).unwrap();
    assert!(emitted.contains("#[test]") && emitted.contains("fixture_violating::two_messages"));
    let cargo = || {
        let mut c = std::process::Command::new(env!("CARGO"));
        c.current_dir(&dir)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
            .args(["test", "--test", "regression"]);
        c
    };
    let out = cargo().output().unwrap();
    assert!(
        !out.status.success(),
        "the emitted test passed while the bug is there"
    );
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("the counterexample still reproduces"), "{all}");
    assert!(
        emitted.contains("fn cmc_counterexample_fixture_violating_two_messages()"),
        "{emitted}"
    );
    // A test emitted by the first cmc (its text then, verbatim): it passed
    // on every verdict but a reproduction. Its trace, recorded before
    // states were hashed with this cmc's function, can match no
    // fingerprint; the runtime refuses to read it, so the old test fails
    // and says to emit it again, instead of passing with the bug there.
    let trace = emitted
        .split_once("const TRACE: &str = r#\"")
        .and_then(|(_, rest)| rest.split_once("\"#;"))
        .expect("the emitted test holds its trace")
        .0
        .replace(&format!("\"state_hash\": \"{}\",", cmc::STATE_HASH), "");
    assert!(!trace.contains("state_hash"), "{trace}");
    std::fs::write(
        dir.join("tests/old_regression.rs"),
        OLD_EMITTED_TEST.replace("{TRACE}", &trace),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO"))
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
        .args(["test", "--test", "old_regression"])
        .output()
        .unwrap();
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        !out.status.success(),
        "a test emitted by an older cmc passed:\n{all}"
    );
    assert!(
        all.contains("recorded by an older cmc") && all.contains("emit it again"),
        "{all}"
    );
    std::fs::remove_file(dir.join("tests/old_regression.rs")).unwrap();
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    // A change that keeps the bug but moves the states off the trace: the
    // test cannot tell, so it fails and says why (it used to pass).
    std::fs::write(
        dir.join("src/lib.rs"),
        lib.replace("self.got.push(m)", "self.got.push(m + 10)"),
    )
    .unwrap();
    let out = cargo().output().unwrap();
    assert!(
        !out.status.success(),
        "the emitted test passed on a trace that no longer fits"
    );
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("no longer fits the program"), "{all}");
    // Fix the receiver: it no longer insists on the order.
    std::fs::write(
        dir.join("src/lib.rs"),
        lib.replace("w[0] < w[1]", "w[0] != w[1]"),
    )
    .unwrap();
    let out = cargo().output().unwrap();
    assert!(
        out.status.success(),
        "the emitted test fails after the fix:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Copies a fixture to a temporary directory named after `dir_name`, with
/// an absolute path to the runtime.
fn copy_of(name: &str, dir_name: &str) -> PathBuf {
    let dir = tempdir(dir_name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = std::fs::read_to_string(fixture(name).join("Cargo.toml"))
        .unwrap()
        .replace(
            "../../../cmc-runtime",
            &workspace().join("cmc-runtime").display().to_string(),
        );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    for file in ["src/lib.rs", "Cargo.lock"] {
        std::fs::copy(fixture(name).join(file), dir.join(file)).unwrap();
    }
    dir
}

#[test]
#[ignore = "builds a fixture whose state depends on the world at full optimization, 160 s (bash scripts/test.sh --full runs it)"]
fn state_that_depends_on_the_world_replays_under_each_identity() {
    // A string literal, a trait object, a fn pointer, Bytes shared between
    // state and messages, a thread_rng() draw and Instant::now(): the same
    // counts in three runs, the determinism check passes, and the printed
    // replay command reproduces the violation in new processes, under the
    // default identity and under the canonical heap; the emitted test (a
    // different executable: the function pointer is named by its symbol)
    // fails while the bug is there.
    // At the optimization level `cargo cmc` builds with: at level 1 the
    // canonical heap's counts differ between runs here (stack garbage the
    // scrub does not reach at that level; not yet understood).
    let dir = copy_of("worldly", "worldly");
    for mode in [None, Some("heap")] {
        let mut args = vec![
            "check",
            "--strategy",
            "bfs",
            "--check-determinism",
            "--features",
            "bug-keep-backoff",
        ];
        if let Some(m) = mode {
            args.extend(["--fingerprint", m]);
        }
        let mut summaries = Vec::new();
        let mut trace = String::new();
        for _ in 0..3 {
            let out = run_at(&dir, &args, "3");
            let stdout = text(&out.stdout);
            assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
            assert!(
                stdout.contains("invariant violated: no_backoff_after_two_acks"),
                "{mode:?}: {stdout}"
            );
            let summary = stdout.lines().last().unwrap();
            summaries.push(summary[..summary.find(" time=").unwrap()].to_string());
            trace = stdout
                .lines()
                .find_map(|l| l.strip_prefix("replay it with: cargo cmc replay "))
                .and_then(|rest| rest.split(" --manifest-path ").next())
                .expect("a replay command")
                .to_string();
        }
        assert!(
            summaries.iter().all(|s| *s == summaries[0]),
            "{summaries:?}"
        );
        for _ in 0..2 {
            let out = run_at(&dir, &["replay", &trace], "3");
            let replayed = text(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{mode:?}: {replayed}{}",
                text(&out.stderr)
            );
            assert!(
                replayed.contains("the violation reproduces: invariant violated"),
                "{mode:?}: {replayed}"
            );
        }
    }
    let out = run_at(
        &dir,
        &[
            "check",
            "--strategy",
            "bfs",
            "--features",
            "bug-keep-backoff",
            "--emit-test",
            "tests/regression.rs",
        ],
        "3",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = std::process::Command::new(env!("CARGO"))
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
        .args([
            "test",
            "--release",
            "--features",
            "bug-keep-backoff",
            "--test",
            "regression",
        ])
        .output()
        .unwrap();
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        !out.status.success(),
        "the emitted test passed while the bug is there"
    );
    assert!(all.contains("the counterexample still reproduces"), "{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "builds the same fixture with and without a feature, 45 s (bash scripts/test.sh --full runs it)"]
fn the_printed_replay_command_rebuilds_with_the_traces_features() {
    // A crate in a directory whose name has a space and a quote, checked
    // with a feature: the printed command, pasted into a shell as is,
    // rebuilds with that feature and reproduces the violation (exit 1);
    // after the handler changes, the same command says the trace no
    // longer fits (exit 4).
    let dir = copy_of("worldly", "it's a crate");
    let out = run(
        &dir,
        &[
            "check",
            "--strategy",
            "bfs",
            "--features",
            "bug-keep-backoff",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let command = stdout
        .lines()
        .find_map(|l| l.strip_prefix("replay it with: "))
        .expect("a replay command")
        .to_string();
    assert!(
        command.contains("--no_backoff_after_two_acks-"),
        "one file per violation, named by its property: {command}"
    );
    let cargo_cmc = assert_cmd::cargo::cargo_bin("cargo-cmc");
    let path = format!(
        "{}:{}",
        cargo_cmc.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let paste = || {
        std::process::Command::new("sh")
            .args(["-c", &command])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
            .output()
            .unwrap()
    };
    let out = paste();
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{command}\n{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("building with --features bug-keep-backoff, as the trace was checked"),
        "{replayed}"
    );
    assert!(replayed.contains("the violation reproduces"), "{replayed}");
    // The handler changes: longer backoffs.
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        lib.replace("gen_range(1..=3)", "gen_range(2..=4)"),
    )
    .unwrap();
    let out = paste();
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("the replay diverged at step"),
        "{replayed}"
    );
    // The trace recorded the sources: the divergence is the change's.
    assert!(
        replayed.contains("the project's sources changed since the trace was recorded"),
        "{replayed}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Where Chromium is, or a failure (browser tests must not silently skip).
fn chromium() -> Option<PathBuf> {
    if std::env::var_os("CMC_SKIP_BROWSER_TESTS").is_some() {
        return None;
    }
    for candidate in [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ] {
        if Path::new(candidate).exists() {
            return Some(candidate.into());
        }
    }
    panic!("Chromium is needed for the report test: install it (apt-get install -y chromium) or set CMC_SKIP_BROWSER_TESTS=1");
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let out = run(
        &fixture("violating"),
        &["check", "--strategy", "bfs", "--message-format", "json"],
    );
    let first: Value = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "result")
        .unwrap();
    let report = PathBuf::from(first["violations"][0]["report_file"].as_str().unwrap());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("fixture_violating::two_messages"));
    let Some(browser) = chromium() else { return };
    let profile = tempdir("chromium-profile");
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    let dom = text(&out.stdout);
    assert!(dom.contains("data-rendered-steps=\"3\""), "{dom}");
    assert!(dom.contains("data-errors=\"0\""), "{dom}");
}

#[test]
#[ignore = "a build for each of four feature sets (bash scripts/test.sh --full runs it)"]
fn features_and_manifest_path_work_like_cargo() {
    let elsewhere = tempdir("elsewhere");
    let manifest = fixture("passing").join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();
    let list = |extra: &[&str]| {
        let mut args = vec!["list", "--manifest-path", manifest];
        args.extend_from_slice(extra);
        let out = run(&elsewhere, &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert_eq!(
        list(&[]),
        "fixture_passing::counters\nfixture_passing::many_counters\n"
    );
    let with_extra =
        "fixture_passing::counters\nfixture_passing::extra_counters\nfixture_passing::many_counters\n";
    assert_eq!(list(&["--features", "extra"]), with_extra);
    // Every feature also registers the fixture's model with bad bounds.
    assert_eq!(
        list(&["--all-features"]),
        format!("fixture_passing::bad_bounds\n{with_extra}")
    );
    assert_eq!(
        list(&["--features", "extra", "--no-default-features"]),
        with_extra
    );
    let out = run(
        &elsewhere,
        &[
            "check",
            "--manifest-path",
            manifest,
            "--features",
            "extra",
            "--model",
            "extra_counters",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("cmc: fixture_passing::extra_counters pass unique=27 "),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn progress_is_reported_while_a_model_runs() {
    // JSON: progress objects for the model, then its result.
    // Report every millisecond, so the test does not depend on how fast
    // the machine explores the model.
    let out = cargo_cmc(&fixture("passing"))
        .env("CMC_PROGRESS_INTERVAL_MS", "1")
        .args([
            "check",
            "--model",
            "many_counters",
            "--message-format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let progress: Vec<&Value> = lines.iter().filter(|v| v["type"] == "progress").collect();
    assert!(!progress.is_empty(), "no progress line in {lines:?}");
    assert_eq!(progress[0]["model"], "fixture_passing::many_counters");
    assert!(progress[0]["progress"]["unique"].as_u64().unwrap() > 0);
    assert_eq!(lines.last().unwrap()["unique_states"], 100_000);
    // Not a terminal: a plain line on standard error every interval.
    let out = cargo_cmc(&fixture("passing"))
        .env("CMC_PROGRESS_INTERVAL_MS", "1")
        .args(["check", "--model", "many_counters"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        stderr.lines().any(|l| l
            .starts_with("cmc: fixture_passing::many_counters running: unique=")
            && l.contains(" states/s=")),
        "{stderr}"
    );
    assert!(text(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .starts_with("cmc: fixture_passing::many_counters pass unique=100000 "));
}

#[test]
fn ordinary_std_state_is_counted_by_meaning_and_its_trace_replays() {
    // A handler that builds a fresh HashMap (new random keys every time)
    // and a Clone + Debug-only message holding a HashSet: with default
    // flags both are fingerprinted by canonical Debug, and the trace, whose
    // fingerprints are by meaning too, replays in new processes.
    let dir = fixture("ordinary");
    // One worker: the two peers are symmetric, and which of the shortest
    // traces several workers show first can change between runs.
    let out = run(&dir, &["check", "-v", "--strategy", "bfs", "--jobs", "1"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    for line in [
        "identity of fixture_ordinary::peers: process fixture_ordinary::Peer: debug",
        "identity of fixture_ordinary::peers: message fixture_ordinary::Msg: debug",
        "invariant violated: acks_differ_from_one_two: process 0: acks are [1, 2]",
        "trace of fixture_ordinary::peers (6 steps):",
    ] {
        assert!(stdout.contains(line), "expected {line:?} in:\n{stdout}");
    }
    let trace = stdout
        .lines()
        .find_map(|l| l.strip_prefix("trace saved to "))
        .expect("a trace file")
        .to_string();
    for _ in 0..2 {
        let out = run(&dir, &["replay", &trace]);
        let replayed = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{replayed}{}",
            text(&out.stderr)
        );
        assert!(
            replayed
                .contains("the violation reproduces: invariant violated: acks_differ_from_one_two"),
            "{replayed}"
        );
    }
    let out = run(
        &dir,
        &["check", "--strategy", "bfs", "--message-format", "json"],
    );
    let result: Value = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .expect("a result line");
    assert_eq!(result["sources"][0]["role"], "process");
    assert_eq!(result["sources"][0]["source"], "debug");
    assert_eq!(result["fingerprint"], "debug");
}

/// Runs a printed command through `sh -c` in `dir`, with this build's
/// `cargo-cmc` first on the path, as a user pasting it would.
fn paste(dir: &Path, command: &str) -> Output {
    let cargo_cmc = assert_cmd::cargo::cargo_bin("cargo-cmc");
    let path = format!(
        "{}:{}",
        cargo_cmc.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env("PATH", &path)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
        .output()
        .unwrap()
}

/// The replay commands a check printed, one per violation.
fn replay_commands(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("replay it with: "))
        .map(str::to_string)
        .collect()
}

#[test]
#[ignore = "a build with two seeded bugs, and one for each replay (bash scripts/test.sh --full runs it)"]
fn each_violation_replays_and_each_verdict_is_distinct() {
    // The ledger's server builds a std HashMap in its handler. With two
    // seeded bugs and --keep-going, the check finds two violations (a
    // three-line panic and an invariant), writes one trace file for each,
    // and each printed command, pasted, reproduces its own violation.
    let dir = copy_of("ledger", "ledger-verdicts");
    let features = "bug-double-ack,bug-order-panic";
    let out = run(
        &dir,
        &[
            "check",
            "--strategy",
            "bfs",
            "--keep-going",
            "--features",
            features,
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let commands = replay_commands(&stdout);
    assert_eq!(commands.len(), 2, "{stdout}");
    assert_ne!(commands[0], commands[1], "one file per violation");
    let panic = commands
        .iter()
        .find(|c| c.contains("--receive-"))
        .expect("the panic's trace");
    let acks = commands
        .iter()
        .find(|c| c.contains("--one_ack_per_amount-"))
        .expect("the invariant's trace");
    for (command, expected) in [
        (
            panic,
            "the violation reproduces: panic in receive: process 1: out of order:",
        ),
        (
            acks,
            "the violation reproduces: invariant violated: one_ack_per_amount",
        ),
    ] {
        let out = paste(&dir, command);
        let replayed = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{command}\n{replayed}{}",
            text(&out.stderr)
        );
        assert!(replayed.contains(expected), "{replayed}");
    }
    // Hidden nondeterminism, with the same sources: the server reads its
    // increment from the environment, which the check ran without. The
    // replay names the process and the field that differ (exit 5).
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("LEDGER_SCALE=2 {acks}")])
        .current_dir(&dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                assert_cmd::cargo::cargo_bin("cargo-cmc")
                    .parent()
                    .unwrap()
                    .display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
        .output()
        .unwrap();
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(5),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("the replay diverged at step 2")
            && replayed.contains("hidden nondeterminism in receive")
            && replayed.contains("the state of process 1 differs in `Node.totals.\"a\"`"),
        "{replayed}"
    );
    // The panic is fixed: its trace runs to its end and violates nothing
    // (exit 0), though the sources changed.
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        lib.replace(r#"cfg!(feature = "bug-order-panic")"#, "false"),
    )
    .unwrap();
    let out = paste(&dir, panic);
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("the recorded violation no longer occurs"),
        "{replayed}"
    );
    // The model changed shape (a handler renamed): the invariant's trace
    // does not fit it (exit 6), and the replay says what changed.
    std::fs::write(
        dir.join("src/lib.rs"),
        lib.replace("fn receive(", "fn deliver("),
    )
    .unwrap();
    let out = paste(&dir, acks);
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(6),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("runs `receive`, which process 1 does not have")
            && replayed.contains("the model's shape changed")
            && replayed.contains("the project's sources changed"),
        "{replayed}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "two seeded bugs, each a build, and a release build of the emitted test (bash scripts/test.sh --full runs it)"]
fn a_crash_replays_and_a_three_line_panic_becomes_a_test_that_compiles() {
    let dir = copy_of("ledger", "ledger-crash");
    // A segfault in a handler: its printed replay command reproduces it.
    let out = run(
        &dir,
        &["check", "--strategy", "bfs", "--features", "bug-crash"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("crash in receive"), "{stdout}");
    let commands = replay_commands(&stdout);
    assert_eq!(commands.len(), 1, "{stdout}");
    let out = paste(&dir, &commands[0]);
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("the violation reproduces: crash in receive"),
        "{replayed}"
    );
    // A panic whose message has three lines (and quotes): the emitted test
    // compiles, fails while the bug is there, and passes once it is fixed
    // (the feature off).
    let out = run(
        &dir,
        &[
            "check",
            "--strategy",
            "bfs",
            "--features",
            "bug-order-panic",
            "--emit-test",
            "tests/regression.rs",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let emitted = std::fs::read_to_string(dir.join("tests/regression.rs")).unwrap();
    assert!(
        emitted.contains("//!   got \"b\" before \"a\"")
            && emitted.contains("//!   the ledger needs them in order"),
        "{emitted}"
    );
    let test = |features: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO"));
        c.current_dir(&dir)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
            .args(["test", "--release", "--test", "regression"])
            .args(features);
        c.output().unwrap()
    };
    let out = test(&["--features", "bug-order-panic"]);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        !out.status.success(),
        "the emitted test passed while the bug is there:\n{all}"
    );
    assert!(
        all.contains("the counterexample still reproduces: panic in receive"),
        "{all}"
    );
    assert!(
        !all.contains("warning"),
        "the emitted test compiles without warnings:\n{all}"
    );
    let out = test(&[]);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        out.status.success(),
        "the emitted test fails after the fix:\n{all}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether a process whose command line mentions `needle` is alive.
fn process_alive(needle: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(needle))
}

#[test]
fn misbehaving_user_code_is_reported_and_the_other_models_still_run() {
    // A handler that never returns (a timeout violation with its trace), a
    // handler that exits the process (a violation with its trace), a model
    // function that segfaults (an error for that model only: exit 2), a
    // handler that prints the harness's protocol on standard output
    // (passed through, not taken for the protocol).
    let dir = fixture("misbehaving");
    let out = run(
        &dir,
        &[
            "check",
            "--transition-timeout",
            "1",
            "--model",
            "spins",
            "--model",
            "exits",
            "--model",
            "chatters",
            "--model",
            "builder_crashes",
        ],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    // Either process's tick, whichever the search reaches first.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("timeout in tick: handler tick of process ")
                && l.contains(" did not return within 1 s")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("crash in tick: handler tick of process ")
                && l.contains(" ended the checking process with exit status 7")),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "error: fixture_misbehaving::builder_crashes: invalid model: building \
             `fixture_misbehaving::builder_crashes` crashed: killed by SIGSEGV"
        ),
        "{stderr}"
    );
    for model in ["spins", "exits"] {
        assert!(
            stdout.lines().any(|l| summary_re(
                l,
                &format!("fixture_misbehaving::{model}"),
                "violation"
            )),
            "{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| summary_re(l, "fixture_misbehaving::chatters", "pass")),
        "{stdout}"
    );
    assert!(
        stderr.contains(r#"{"type":"error","message":"the user's own output"}"#),
        "the user's output passes through: {stderr}"
    );
    // The hang's trace replays: the printed command reproduces the timeout.
    let command = replay_commands(&stdout)
        .into_iter()
        .find(|c| c.contains("fixture_misbehaving__spins"))
        .expect("the hang's replay command");
    let out = paste(&dir, &command);
    let replayed = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{replayed}{}",
        text(&out.stderr)
    );
    assert!(
        replayed.contains("the violation reproduces: timeout in tick"),
        "{replayed}"
    );
}

#[test]
#[ignore = "runs a dozen crashing checks in processes of their own, 65 s (bash scripts/test.sh --full runs it)"]
fn crashes_outside_handlers_and_panic_tricks_are_pinned_on_their_code() {
    // resume_unwind, a hook the model installs, a crash in a guard, in an
    // invariant, in a constructor, and memory grown without bound: each a
    // violation naming its code, with the statistics, and each trace
    // replays; no process is left behind.
    let dir = fixture("misbehaving");
    let models = [
        ("resumes", "panic in tick: process 0: resumed at three"),
        (
            "hooks",
            "panic in tick: process 0: panicked after installing a hook",
        ),
        (
            "guard_crashes",
            "crash in guard of tick: the guard of tick in process 0 crashed: killed by SIGSEGV",
        ),
        (
            "invariant_crashes",
            "crash in modest: invariant modest of process 0 crashed: killed by SIGSEGV",
        ),
        (
            "constructor_crashes",
            "crash in initialisation of process 1: the constructor of process 1 crashed",
        ),
        (
            "hoards",
            "arena exhausted in tick: process 0's arena exceeded 256 MiB",
        ),
    ];
    let mut args = vec!["check", "--strategy", "bfs"];
    for (m, _) in &models {
        args.extend(["--model", m]);
    }
    let out = run(&dir, &args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    for (model, expected) in models {
        let path = format!("fixture_misbehaving::{model}");
        assert!(
            stdout.contains(&format!("violation in {path}: {expected}")),
            "{model}: {stdout}"
        );
        assert!(
            stdout.lines().any(|l| summary_re(l, &path, "violation")),
            "{model}: {stdout}"
        );
        let command = replay_commands(&stdout)
            .into_iter()
            .find(|c| c.contains(&format!("fixture_misbehaving__{model}--")))
            .expect("a replay command");
        let out = paste(&dir, &command);
        let replayed = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{model}: {replayed}{}",
            text(&out.stderr)
        );
        assert!(
            replayed.contains("the violation reproduces"),
            "{model}: {replayed}"
        );
    }
    for (model, _) in models {
        assert!(
            !process_alive(&format!("fixture_misbehaving::{model}")),
            "a process checking {model} was left running"
        );
    }
}

#[test]
fn bad_limits_are_clear_errors() {
    for (args, expected) in [
        (
            vec!["--time-limit", "1e300"],
            "--time-limit 1e300 is too large for a time limit",
        ),
        (
            vec!["--time-limit=-3"],
            "--time-limit must be a positive number of seconds, not -3",
        ),
        (
            vec!["--check-determinism=1"],
            "1 run of each piece of code cannot show a difference: give 2 or more",
        ),
        (
            vec!["--transition-timeout=-1"],
            "--transition-timeout must be a number of seconds",
        ),
        (vec!["--max-memory", "4X"], "is not a unit of size"),
    ] {
        let mut all = vec!["check"];
        all.extend(args);
        let out = run(&fixture("passing"), &all);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(expected), "{all:?}: {stderr}");
    }
}

/// Starts `cargo cmc check --model endless` on the misbehaving fixture, sends
/// `signal` to cargo-cmc once the search runs, and returns its output.
fn interrupted_check(signal: i32, extra: &[&str]) -> Output {
    let dir = fixture("misbehaving");
    // Build first, so that the signal reaches a running search.
    let out = run(&dir, &["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cargo-cmc"));
    cmd.current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", E2E_OPT_LEVEL)
        .env("CMC_PROGRESS_INTERVAL_MS", "100")
        .args(["cmc", "check", "--model", "endless"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    // Wait for the search's first progress lines (the build may wait for
    // other tests' locks), then signal.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("running: unique=") {
                let _ = tx.send(());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let started = rx.recv_timeout(std::time::Duration::from_secs(300)).is_ok();
    // At a moment of its run that differs from one test run to the next.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::thread::sleep(std::time::Duration::from_millis(u64::from(nanos % 1500)));
    // SAFETY: signals our own child process.
    unsafe { libc::kill(pid, signal) };
    let mut out = child.wait_with_output().unwrap();
    out.stderr = reader.join().unwrap().into_bytes();
    assert!(
        started,
        "the search never reported progress: {}",
        text(&out.stderr)
    );
    out
}

#[test]
#[ignore = "waits on searches it interrupts, 70 s (bash scripts/test.sh --full runs it)"]
fn sigint_and_sigterm_stop_the_search_with_its_statistics_and_leave_nothing_running() {
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let out = interrupted_check(signal, &[]);
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {stdout}{stderr}");
        assert!(
            stdout.contains(&format!("stopped early: interrupted by {name}")),
            "{name}: {stdout}"
        );
        // Nothing was found, so nothing is said to be saved.
        assert!(
            stderr.contains("no violation was found before it, so no trace was saved"),
            "{name}: {stderr}"
        );
        // The search stops between transitions: nothing it ran is blamed
        // for the time it took to stop.
        assert!(
            !stdout.contains("a second after") && !stdout.contains("had been running"),
            "{name}: {stdout}"
        );
        let summary = stdout.lines().last().unwrap_or_default();
        assert!(
            summary_re(summary, "fixture_misbehaving::endless", "interrupted"),
            "{name}: {stdout}"
        );
        let unique: u64 = summary
            .split("unique=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(unique > 1000, "{name}: the statistics so far: {summary}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !process_alive("fixture_misbehaving::endless"),
            "{name}: a harness process was left running"
        );
    }
}

/// `cargo cmc init` in a crate of one's own: a check crate with a sample
/// model that passes, found by `cargo cmc check` from the crate's root.
#[test]
fn init_makes_a_check_crate_that_passes_out_of_the_box() {
    let dir = tempdir("init");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"my-lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "pub fn answer() -> u8 {\n    42\n}\n",
    )
    .unwrap();
    let out = run(&dir, &["init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("cargo cmc check"),
        "{}",
        text(&out.stdout)
    );
    assert!(dir.join("cmc/Cargo.toml").is_file() && dir.join("cmc/src/lib.rs").is_file());
    let out = run(&dir, &["check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| summary_re(l, "my_lib_cmc::sample", "pass") && l.contains("unique=16 ")),
        "{}",
        text(&out.stdout)
    );
    let again = run(&dir, &["init"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("already exists"),
        "{}",
        text(&again.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--features` in a crate with a check crate: a feature of the library
/// alone reaches the library (cargo cmc enables it there), a feature of
/// the check crate alone reaches the check crate, and a feature nobody
/// declares is an error that names the packages.
#[test]
#[ignore = "a build for each feature (bash scripts/test.sh --full runs it)"]
fn features_reach_the_package_that_declares_them() {
    let dir = tempdir("init-features");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"my-lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [features]\nlib-bug = []\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "pub fn limit() -> u8 {\n    if cfg!(feature = \"lib-bug\") { 4 } else { 3 }\n}\n",
    )
    .unwrap();
    let out = run(&dir, &["init"]);
    exits_with(&out, 0);
    let manifest = dir.join("cmc/Cargo.toml");
    let m = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{m}\n[features]\ncheck-only = []\n")).unwrap();
    let lib = dir.join("cmc/src/lib.rs");
    let l = std::fs::read_to_string(&lib).unwrap();
    // The sample's counters stop at the library's limit (3 unless the
    // library's feature is on); a second model exists only under the
    // check crate's feature.
    let l = l.replace("self.value < 3", "self.value < my_lib::limit()");
    std::fs::write(
        &lib,
        format!(
            "{l}\n#[cfg(feature = \"check-only\")]\n#[cmc::model]\n\
             pub fn extra() -> cmc::Model<Counter> {{\n    \
             cmc::Model::new(\"extra\", 1, |_| Counter {{ value: 0 }}).quiescence_ok(true)\n}}\n"
        ),
    )
    .unwrap();
    let out = run(&dir, &["check"]);
    exits_with(&out, 0);
    let out = run(&dir, &["check", "--features", "lib-bug"]);
    exits_with(&out, 1);
    assert!(
        text(&out.stdout).contains("at_most_three"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&dir, &["check", "--features", "check-only"]);
    exits_with(&out, 0);
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| summary_re(l, "my_lib_cmc::extra", "pass") && l.contains("unique=4 ")),
        "{}",
        text(&out.stdout)
    );
    let out = run(&dir, &["check", "--features", "no-such-feature"]);
    exits_with(&out, 2);
    let err = text(&out.stderr);
    assert!(
        err.contains("no package declares the feature `no-such-feature`")
            && err.contains("my-lib, my-lib-cmc"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cargo cmc init` in a member of a workspace (whose root is not a
/// package): the check crate goes into the member, depends on it, and
/// `cargo cmc check` from the member finds it.
#[test]
fn init_in_a_workspace_member_makes_the_members_check_crate() {
    let dir = tempdir("init-member");
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"link\"]\n",
    )
    .unwrap();
    let member = dir.join("link");
    std::fs::create_dir_all(member.join("src")).unwrap();
    std::fs::write(
        member.join("Cargo.toml"),
        "[package]\nname = \"link\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(member.join("src/lib.rs"), "pub struct Sender;\n").unwrap();
    let out = run(&member.join("src"), &["init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest = std::fs::read_to_string(member.join("cmc/Cargo.toml")).unwrap();
    assert!(manifest.contains("link = { path = \"..\" }"), "{manifest}");
    assert!(!dir.join("cmc").exists(), "not at the workspace root");
    let out = run(&member, &["check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| summary_re(l, "link_cmc::sample", "pass") && l.contains("unique=16 ")),
        "{}",
        text(&out.stdout)
    );
    // At the root of the workspace, which is no package, init says so.
    let out = run(&dir, &["init"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("workspace without a root package"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `init --dep NAME@VERSION` makes a check crate of its own for a crate of
/// the registry, which passes out of the box; a crate that does not exist
/// leaves nothing behind.
#[test]
#[ignore = "downloads and builds a registry crate and its harness, 100 s (bash scripts/test.sh --full runs it)"]
fn init_dep_makes_a_check_crate_for_a_registry_crate() {
    let dir = tempdir("init-dep");
    let out = run(&dir, &["init", "--dep", "bytes@1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let manifest = std::fs::read_to_string(dir.join("bytes-cmc/Cargo.toml")).unwrap();
    assert!(manifest.contains("bytes = \"1"), "{manifest}");
    assert!(manifest.contains("[workspace]"), "{manifest}");
    let out = run(&dir.join("bytes-cmc"), &["check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| summary_re(l, "bytes_cmc::sample", "pass") && l.contains("unique=16 ")),
        "{}",
        text(&out.stdout)
    );
    let out = run(&dir, &["init", "--dep", "bytes@1"]);
    assert_eq!(out.status.code(), Some(2), "the directory exists");
    let out = run(
        &dir,
        &["init", "--dep", "no-such-crate-cmc-e2e", "--dir", "gone"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("could not be found"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !dir.join("gone").exists(),
        "a failed init leaves nothing behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inside a member that does not use cmc, in a workspace whose other
/// members do, the error names those members and how to reach them.
#[test]
fn a_member_without_models_points_at_the_members_with_models() {
    let dir = tempdir("member-without-models");
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"app\", \"checks\"]\n",
    )
    .unwrap();
    let runtime = workspace().join("cmc-runtime");
    for (name, deps) in [
        ("app", String::new()),
        (
            "checks",
            format!(
                "cmc = {{ package = \"cmc-runtime\", path = {:?} }}\n",
                runtime
            ),
        ),
    ] {
        std::fs::create_dir_all(dir.join(name).join("src")).unwrap();
        std::fs::write(
            dir.join(name).join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{deps}"
            ),
        )
        .unwrap();
        std::fs::write(dir.join(name).join("src/lib.rs"), "").unwrap();
    }
    let out = run(&dir.join("app"), &["list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("package `app` does not depend on cmc-runtime, so it has no models; in its workspace, checks does: run cargo cmc at the workspace root"),
        "{stderr}"
    );
    assert!(stderr.contains("or choose with -p checks"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--model` names models exactly (full path or last segments) or by a
/// glob; `--exclude` leaves some out.
#[test]
fn models_are_selected_exactly_by_glob_and_by_exclusion() {
    let models = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["check", "--message-format", "json"];
        all.extend(args);
        let out = run(&fixture("passing"), &all);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "result")
            .map(|v| v["model"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        models(&["--model", "counters"]),
        ["fixture_passing::counters"]
    );
    assert_eq!(
        models(&["--model", "fixture_passing::counters"]),
        ["fixture_passing::counters"]
    );
    assert_eq!(
        models(&["--model", "*counters", "--exclude", "many_*"]),
        ["fixture_passing::counters"]
    );
    assert_eq!(
        models(&["--model", "fixture_passing::*", "--exclude", "counters"]),
        ["fixture_passing::many_counters"]
    );
}

/// A bounded search exits 0 unless --require-complete asks for complete
/// searches (then 3, with the reason); JSON errors are JSON objects.
#[test]
fn require_complete_and_json_errors() {
    let dir = fixture("passing");
    let bounded = ["check", "--model", "counters", "--max-states", "3"];
    let out = run(&dir, &bounded);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("stopped early: the state bound (3) was reached"));
    let mut strict = bounded.to_vec();
    strict.push("--require-complete");
    let out = run(&dir, &strict);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("--require-complete"));
    let out = run(
        &dir,
        &["check", "--model", "counters", "--require-complete"],
    );
    assert_eq!(out.status.code(), Some(0));
    for args in [
        vec!["check", "--model", "nothing", "--message-format", "json"],
        vec!["check", "--strategy", "sideways", "--message-format=json"],
        vec![
            "check",
            "--model",
            "counters",
            "--seed",
            "1",
            "--message-format",
            "json",
        ],
    ] {
        let out = run(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let errors: Vec<Value> = text(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "error")
            .collect();
        assert!(
            errors
                .iter()
                .any(|e| e["message"].as_str().is_some_and(|m| !m.is_empty())),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("error:"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
#[ignore = "fills a 64 MiB budget, 65 s (bash scripts/test.sh --full runs it)"]
fn a_memory_budget_bounds_the_search_gracefully() {
    let out = run(
        &fixture("misbehaving"),
        &["check", "--model", "huge", "--max-memory", "64M"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("stopped early: the memory budget (64.0 MiB) was reached"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| summary_re(l, "fixture_misbehaving::huge", "bounded")),
        "{stdout}"
    );
}

#[test]
fn frontier_files_of_a_search_that_was_killed_are_removed_by_the_next_check() {
    // A search killed before it removed its frontier on disk leaves a
    // directory named by its pid; the next check removes it when that
    // process is gone, and leaves a running one's.
    let spill = target_dir().join("cmc").join("spill");
    // Above any pid the kernel hands out (pid_max is at most 2^22).
    let dead = spill.join("frontier-4000000000-0");
    let alive = spill.join(format!("frontier-{}-0", std::process::id()));
    for d in [&dead, &alive] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("segment-0"), b"entries").unwrap();
    }
    let result = json_result("two_messages");
    assert_eq!(result["type"], "result");
    assert!(!dead.exists(), "{} is still there", dead.display());
    assert!(
        alive.join("segment-0").exists(),
        "a running process's frontier was removed"
    );
    std::fs::remove_dir_all(&alive).unwrap();
}

/// `--coverage` on a model whose coverage is known line by line (the
/// fixture marks its lines `// hit` and `// miss`): the lines the lcov
/// file says were never reached are exactly those marked `// miss`; the
/// handler whose guard never held and the functions never entered are
/// named, in text and JSON; the page marks as many lines.
#[test]
#[ignore = "builds the runtime with coverage instrumentation, 115 s (bash scripts/test.sh --full runs it)"]
fn coverage_names_exactly_the_lines_the_check_never_reached() {
    let dir = fixture("covered");
    let out = run(&dir, &["check", "--coverage"]);
    let stdout = text(&out.stdout);
    exits_with(&out, 0);
    let source = std::fs::read_to_string(dir.join("src").join("lib.rs")).unwrap();
    let marked = |mark: &str| -> BTreeSet<u32> {
        source
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_end().ends_with(mark))
            .map(|(i, _)| i as u32 + 1)
            .collect()
    };
    let lcov_file = target_dir()
        .join("cmc")
        .join("coverage")
        .join("fixture_covered__gate.lcov");
    let lcov = std::fs::read_to_string(&lcov_file).unwrap();
    assert_eq!(
        lcov.lines().filter(|l| l.starts_with("SF:")).count(),
        1,
        "only the fixture's own file: {lcov}"
    );
    let lines: Vec<(u32, u64)> = lcov
        .lines()
        .filter_map(|l| l.strip_prefix("DA:"))
        .map(|d| {
            let (l, n) = d.split_once(',').unwrap();
            (l.parse().unwrap(), n.parse().unwrap())
        })
        .collect();
    let never: BTreeSet<u32> = lines.iter().filter(|l| l.1 == 0).map(|l| l.0).collect();
    assert_eq!(never, marked("// miss"), "{lcov}");
    let reached: BTreeSet<u32> = lines.iter().filter(|l| l.1 > 0).map(|l| l.0).collect();
    let hits = marked("// hit");
    assert!(
        hits.len() == 6 && hits.is_subset(&reached),
        "{hits:?} {lcov}"
    );
    assert!(
        stdout.contains("handlers never enabled: reset\n"),
        "{stdout}"
    );
    for function in ["<fixture_covered::Gate>::reset", "fixture_covered::audit"] {
        assert!(stdout.contains(function), "{stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("src/lib.rs")
                && l.ends_with("unreached: 22, 28-31, 48-50")),
        "{stdout}"
    );
    let page = std::fs::read_to_string(lcov_file.with_extension("html")).unwrap();
    assert!(
        page.contains(&format!("data-unreached-lines=\"{}\"", never.len())),
        "the page counts the unreached lines"
    );
    assert_eq!(page.matches("<tr class=\"miss\">").count(), never.len());

    // The same in JSON.
    let out = run(&dir, &["check", "--coverage", "--message-format", "json"]);
    exits_with(&out, 0);
    let coverage: Value = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "coverage")
        .expect("a coverage line");
    let c = &coverage["coverage"];
    assert_eq!(c["handlers_never_enabled"], serde_json::json!(["reset"]));
    assert_eq!(
        c["lines"].as_u64().unwrap() - c["lines_reached"].as_u64().unwrap(),
        never.len() as u64
    );
}
