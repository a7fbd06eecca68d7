//! The entry point of the checking binaries `cargo cmc` generates. It speaks
//! JSON lines on standard output, one object per line:
//!
//! * `list` → `{"type":"model","path":…,"file":…,"line":…}` per model;
//! * `check <model> <options>` → `{"type":"progress",…}` every 250 ms, then
//!   `{"type":"result","result":<CheckResult>}`;
//! * `replay <model> <trace file> <options> [<stop step>]` →
//!   `{"type":"step","index":k,"step":<Step>}` per re-executed step, then
//!   `{"type":"replay","outcome":<ReplayOutcome>}`;
//! * any failure → `{"type":"error","message":…}` and exit code 2.
//!
//! Checks and replays run in a child process, so a crash in user code is
//! reported as a violation.

use std::io::Write;

use serde_json::json;

use crate::driver::registry::{models, ModelEntry, RunOptions};
use crate::engine::isolate::protocol_fd;
use crate::engine::trace::Trace;

/// This process's rank in the MPI job of a search across processes
/// (`cargo cmc check --processes N` sets `CMC_CLUSTER`), if it is one.
fn cluster_rank() -> Option<usize> {
    std::env::var_os("CMC_CLUSTER")?;
    crate::sys::process::job_rank().or(Some(0))
}

fn emit(value: serde_json::Value) {
    if let Some(rank) = cluster_rank().filter(|&r| r != 0) {
        // Process 0 speaks for the search; the others' errors go to
        // standard error, which the launcher passes on.
        if value["type"] == "error" {
            eprintln!(
                "cmc: process {rank}: {}",
                value["message"].as_str().unwrap_or("unknown error")
            );
        }
        return;
    }
    let line = format!("{value}\n");
    match protocol_fd() {
        Some(fd) => crate::sys::process::write_all(fd, line.as_bytes()),
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
}

fn find(path: &str) -> Result<&'static ModelEntry, String> {
    models()
        .into_iter()
        .find(|m| m.path == path)
        .ok_or_else(|| format!("no model `{path}` in this build"))
}

fn options(text: &str) -> Result<RunOptions, String> {
    let mut options: RunOptions =
        serde_json::from_str(text).map_err(|e| format!("bad options: {e}"))?;
    options.isolate = true;
    if cluster_rank().is_some() {
        options.cluster = Some(true);
    }
    Ok(options)
}

fn run(args: &[String]) -> Result<i32, String> {
    match args {
        [cmd] if cmd == "list" => {
            for m in models() {
                emit(json!({"type": "model", "path": m.path, "file": m.file, "line": m.line}));
            }
            Ok(0)
        }
        [cmd, model, opts] if cmd == "check" => {
            let entry = find(model)?;
            let options = options(opts)?;
            crate::search::progress::set_sink(Some(|p| emit(json!({"type": "progress", "progress": p}))));
            let result = entry.check(&options).map_err(|e| e.to_string());
            // The counters are written whatever the check found; a profile
            // that cannot be written is reported after the result, which
            // is kept.
            let profile = crate::sys::coverage::finish();
            emit(json!({"type": "result", "result": result?}));
            match profile {
                Ok(Some(file)) => emit(json!({"type": "coverage", "profile": file})),
                Ok(None) => {}
                Err(message) => emit(json!({"type": "coverage", "error": message})),
            }
            Ok(0)
        }
        [cmd, model, file, opts, rest @ ..] if cmd == "replay" && rest.len() <= 1 => {
            let entry = find(model)?;
            let options = options(opts)?;
            let trace = Trace::load(std::path::Path::new(file))?;
            if trace.model != *model {
                return Err(format!("{file} is a trace of `{}`, not of `{model}`", trace.model));
            }
            let stop = match rest {
                [n] => Some(n.parse::<usize>().map_err(|_| format!("bad step number `{n}`"))?),
                _ => None,
            };
            crate::search::progress::set_replay_stop(stop);
            crate::search::progress::set_step_sink(Some(|index, step| emit(json!({"type": "step", "index": index, "step": step}))));
            let outcome = entry.replay(&options, &trace).map_err(|e| e.to_string())?;
            emit(json!({"type": "replay", "outcome": outcome}));
            Ok(0)
        }
        _ => Err("usage: list | check <model> <options-json> | replay <model> <trace> <options-json> [<step>]".into()),
    }
}

/// Runs the harness protocol on the process's arguments; returns the exit
/// code.
pub fn harness_main() -> i32 {
    // Ctrl-C and SIGTERM stop the search with what it found so far; and
    // this process does not outlive `cargo cmc`.
    crate::engine::isolate::catch_stop_signals();
    if cluster_rank().is_some() {
        crate::engine::isolate::catch_job_stop_signals();
    }
    if cluster_rank().is_some_and(|r| r != 0) {
        // Only process 0 writes the protocol's file.
        std::env::remove_var("CMC_PROTOCOL_FILE");
    }
    let _ = protocol_fd();
    crate::sys::process::die_with_parent();
    if cluster_rank().is_some() {
        if let Err(message) = crate::sys::process::without_aslr() {
            emit(json!({"type": "error", "message": message}));
            return 2;
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            emit(json!({"type": "error", "message": message}));
            2
        }
    }
}
