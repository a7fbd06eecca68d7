//! What `cargo cmc check` prints: progress (a bar per model on a terminal,
//! a plain line every few seconds elsewhere, JSON lines on request) on
//! standard error, results on standard output. The last line printed for
//! each model in human format is its summary:
//! `cmc: <model-path> <verdict> unique=<N> transitions=<N> depth=<N> time=<secs>s`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cmc::progress::Progress;
use cmc::{CheckResult, MemoryUse, Step, StepKind};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::args::MessageFormat;

/// Files written for one violation.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    pub(crate) trace_file: PathBuf,
    pub(crate) report_file: PathBuf,
}

/// How often the plain (non-terminal) progress line is printed, unless
/// `CMC_PROGRESS_INTERVAL_MS` says otherwise.
fn plain_interval() -> Duration {
    std::env::var("CMC_PROGRESS_INTERVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(5), Duration::from_millis)
}

pub(crate) struct Output {
    format: MessageFormat,
    verbose: bool,
    tty: bool,
    bar: Option<ProgressBar>,
    last_plain: Instant,
}

pub(crate) fn human_bytes(n: usize) -> String {
    let n = n as f64;
    if n >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", n / (1024.0 * 1024.0 * 1024.0))
    } else if n >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", n / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", n / 1024.0)
    }
}

/// The owners of the checker's memory, by name, with their bytes.
fn memory_owners(m: &MemoryUse) -> [(&'static str, u64); 8] {
    [
        ("visited", m.visited),
        ("frontier", m.frontier),
        ("records", m.records),
        ("pages", m.pages),
        ("page_index", m.page_index),
        ("tree", m.tree),
        ("caches", m.caches),
        ("other", m.other()),
    ]
}

/// The memory by owner, for `--message-format json`: bytes and bytes per
/// state of each owner, at the reading of the largest resident memory.
fn memory_json(m: &MemoryUse) -> serde_json::Value {
    let per = |b: u64| b as f64 / m.states.max(1) as f64;
    let mut owners = serde_json::Map::new();
    for (name, bytes) in memory_owners(m) {
        owners.insert(
            name.to_string(),
            json!({ "bytes": bytes, "per_state": (per(bytes) * 10.0).round() / 10.0 }),
        );
    }
    json!({
        "resident_bytes": m.resident,
        "states": m.states,
        "bytes_per_state": (per(m.resident) * 10.0).round() / 10.0,
        "owners": owners,
        "disk_bytes": m.disk,
        "disk_peak_bytes": m.disk_peak,
        "disk_entries": m.disk_entries,
    })
}

/// The memory by owner, in a line: resident bytes per state and each
/// owner's share.
fn memory_line(m: &MemoryUse) -> String {
    let per = |b: u64| b as f64 / m.states.max(1) as f64;
    let owners: Vec<String> = memory_owners(m)
        .iter()
        .filter(|(_, b)| *b > 0)
        .map(|(name, b)| format!("{name} {:.0}", per(*b)))
        .collect();
    let disk = if m.disk_entries > 0 {
        format!(
            "; the frontier on disk: {} at most, {} entries written",
            human_bytes(m.disk_peak as usize),
            m.disk_entries
        )
    } else {
        String::new()
    };
    format!(
        "memory at its largest: {} at {} states, {:.0} bytes per state ({}){disk}",
        human_bytes(m.resident as usize),
        m.states,
        per(m.resident),
        owners.join(", ")
    )
}

fn describe(p: &Progress) -> String {
    let rate = p.unique as f64 / p.elapsed_s.max(1e-9);
    let budget = if p.budget_bytes > 0 {
        format!(" of {}", human_bytes(p.budget_bytes as usize))
    } else {
        String::new()
    };
    let disk = if p.disk_bytes > 0 {
        format!(" disk={}", human_bytes(p.disk_bytes as usize))
    } else {
        String::new()
    };
    let symmetry = if p.symmetric > 0 {
        format!(" symmetry: {} processes, {} merged", p.symmetric, p.merged)
    } else {
        String::new()
    };
    // Across processes: the bytes sent per state, and the process the
    // others wait for.
    let across = if p.processes > 0 {
        let slowest = p.slowest.map_or(String::new(), |(rank, load)| {
            format!(" slowest=process {rank} ({load:.2}× the mean)")
        });
        format!(
            " processes={} sent/state={:.0}B{slowest}",
            p.processes,
            p.sent_bytes as f64 / p.unique.max(1) as f64
        )
    } else {
        String::new()
    };
    format!(
        "unique={} states/s={:.0} depth={} frontier={} memory={}{budget} (visited {}, pages {}){disk}{symmetry}{across}",
        p.unique,
        rate,
        p.max_depth,
        p.frontier,
        human_bytes(p.memory_bytes),
        human_bytes(p.visited_bytes),
        human_bytes(p.page_bytes)
    )
}

impl Output {
    pub(crate) fn new(format: MessageFormat, verbose: bool) -> Self {
        Output {
            format,
            verbose,
            tty: std::io::stderr().is_terminal(),
            bar: None,
            last_plain: Instant::now(),
        }
    }

    pub(crate) fn start(&mut self, model: &str) {
        self.last_plain = Instant::now();
        if self.format == MessageFormat::Human && self.tty {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} [{elapsed_precise}] {msg}")
                    .expect("a valid template"),
            );
            bar.set_prefix(model.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            self.bar = Some(bar);
        }
    }

    pub(crate) fn progress(&mut self, p: &Progress) {
        match self.format {
            MessageFormat::Json => println!(
                "{}",
                json!({"type": "progress", "model": p.model, "progress": p})
            ),
            MessageFormat::Human => {
                if let Some(bar) = &self.bar {
                    bar.set_message(describe(p));
                } else if self.last_plain.elapsed() >= plain_interval() {
                    self.last_plain = Instant::now();
                    eprintln!("cmc: {} running: {}", p.model, describe(p));
                }
            }
        }
    }

    fn finish_progress(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Reports that `model` could not be checked (the others still are).
    /// The coverage of a check (`--coverage`): its summary.
    pub(crate) fn coverage(&mut self, summary: &crate::coverage::Summary, base: &std::path::Path) {
        match self.format {
            MessageFormat::Json => println!(
                "{}",
                serde_json::json!({"type": "coverage", "coverage": summary})
            ),
            MessageFormat::Human => print!("{}", summary.text(base)),
        }
    }

    pub(crate) fn error(&mut self, model: &str, message: &str) {
        self.finish_progress();
        match self.format {
            MessageFormat::Json => println!(
                "{}",
                json!({"type": "error", "model": model, "message": message})
            ),
            MessageFormat::Human => {
                // The line names the model already.
                let message = message.replace(&format!("model `{model}`: "), "");
                eprintln!("error: {model}: {message}")
            }
        }
    }

    /// Prints a model's result; `saved[i]` are the files of violation `i`.
    pub(crate) fn result(
        &mut self,
        result: &CheckResult,
        saved: &[Saved],
        replay_hint: &dyn Fn(&Saved) -> String,
    ) {
        self.finish_progress();
        match self.format {
            MessageFormat::Json => {
                let violations: Vec<_> = result
                    .violations
                    .iter()
                    .zip(saved)
                    .map(|(v, s)| {
                        json!({
                            "kind": v.record.kind,
                            "property": v.record.property,
                            "message": v.record.message,
                            "location": v.record.location,
                            "also_violated": v.trace.also_violated,
                            "trace_len": v.trace.len(),
                            "loop_start": v.trace.loop_start,
                            "trace_file": s.trace_file,
                            "report_file": s.report_file,
                        })
                    })
                    .collect();
                println!(
                    "{}",
                    json!({
                        "type": "result",
                        "model": result.model,
                        "verdict": result.verdict,
                        "unique_states": result.stats.unique,
                        "transitions": result.stats.transitions,
                        "max_depth": result.stats.max_depth,
                        "elapsed_s": result.stats.elapsed.as_secs_f64(),
                        "peak_memory_bytes": result.stats.peak_memory_bytes,
                        "memory": memory_json(&result.stats.memory),
                        "walks": result.stats.walks,
                        "jobs": result.stats.jobs.max(1),
                        "processes": result.stats.processes.max(1),
                        "sent_states": result.stats.sent_states,
                        "sent_bytes": result.stats.sent_bytes,
                        "sent_raw_bytes": result.stats.sent_raw_bytes,
                        "replayed": result.stats.replayed,
                        "slept": result.stats.slept,
                        "reexpanded": result.stats.reexpanded,
                        "cached": result.stats.cached,
                        "derived": result.stats.derived,
                        "revisited": result.stats.revisited,
                        "complete": result.stats.complete,
                        "reached": result.reached.iter().map(|r| json!({
                            "property": r.property,
                            "trace_len": r.trace.len(),
                            "trace": r.trace,
                        })).collect::<Vec<_>>(),
                        "violations": violations,
                        "stopped": result.stopped,
                        "fingerprint": result.stats.fingerprint.map(|m| m.name()),
                        "symmetry": result.stats.symmetry,
                        "sources": result.sources.iter().map(|s| json!({
                            "role": s.role,
                            "type": s.type_name,
                            "source": s.source.name(),
                        })).collect::<Vec<_>>(),
                    })
                );
            }
            MessageFormat::Human => {
                if self.verbose {
                    for s in &result.sources {
                        println!("identity of {}: {s}", result.model);
                    }
                    if result.stats.jobs > 1 {
                        println!(
                            "{}: searched with {} workers ({} steps replayed to hand states \
                             between them)",
                            result.model, result.stats.jobs, result.stats.replayed
                        );
                    }
                    if result.stats.cached > 0 {
                        println!(
                            "{}: {} of {} transitions answered by the transition cache \
                             (their successors known without running them; {} of them new \
                             states built from what it kept)",
                            result.model,
                            result.stats.cached,
                            result.stats.transitions,
                            result.stats.derived
                        );
                    }
                    if result.stats.revisited > 0 {
                        println!(
                            "{}: {} states expanded again because a shorter path reached \
                             them after a longer one (under the depth bound)",
                            result.model, result.stats.revisited
                        );
                    }
                    if result.stats.memory.states > 0 {
                        println!("{}: {}", result.model, memory_line(&result.stats.memory));
                    }
                    if result.stats.slept > 0 || result.stats.reexpanded > 0 {
                        println!(
                            "{}: partial-order reduction left {} events asleep ({} states \
                             expanded again for events a later path woke)",
                            result.model, result.stats.slept, result.stats.reexpanded
                        );
                    }
                }
                for r in &result.reached {
                    println!(
                        "{}: reached `{}` after {} step{}",
                        result.model,
                        r.property,
                        r.trace.len(),
                        if r.trace.len() == 1 { "" } else { "s" }
                    );
                    if self.verbose {
                        print!("{}", r.trace);
                    }
                }
                for (v, s) in result.violations.iter().zip(saved) {
                    println!("violation in {}: {}", result.model, v.record);
                    print!("{}", v.trace);
                    println!("trace saved to {}", s.trace_file.display());
                    println!("replay it with: {}", replay_hint(s));
                    println!("report: {}", s.report_file.display());
                }
                if let Some(why) = &result.stopped {
                    println!("{}: stopped early: {why}", result.model);
                }
                if let Some(line) = symmetry_line(result) {
                    println!("{}: {line}", result.model);
                }
                println!("{}", result.summary());
            }
        }
    }
}

/// What symmetry reduction did, for people: `None` without it.
pub(crate) fn symmetry_line(result: &CheckResult) -> Option<String> {
    let s = result.stats.symmetry?;
    let mut line = format!(
        "symmetry reduction over {} interchangeable processes: one state per orbit; {} \
         successors merged with another state of their orbit, {} of those pairs compared \
         (--check-symmetry compares all)",
        s.processes, s.merged, s.checked
    );
    if s.inexact > 0 {
        line.push_str(&format!(
            "; {} states had too many tied orderings and were fingerprinted by one image, not \
             the smallest: an orbit may count more than once",
            s.inexact
        ));
    }
    Some(line)
}

/// One re-executed step of `cargo cmc replay`, for people.
pub(crate) fn print_step(index: usize, step: &Step) {
    let mut line = format!("{index:>4}. {} {}", step.actor, step.handler);
    if !step.choices.is_empty() {
        line += &format!(" choices={:?}", step.choices);
    }
    if step.seed != 0 {
        line += &format!(" seed={}", step.seed);
    }
    match (step.kind, &step.message, step.from, step.to) {
        (StepKind::Loss, Some(m), Some(from), Some(to)) => {
            line += &format!(" loses {m} ({from} → {to})")
        }
        (StepKind::Duplication, Some(m), Some(from), Some(to)) => {
            line += &format!(" duplicates {m} ({from} → {to})")
        }
        (_, Some(m), Some(from), _) => line += &format!(" receives {m} from process {from}"),
        _ => {}
    }
    if step.kind == StepKind::Timer {
        line += " (timer expired)";
    }
    println!("{line}");
    for s in &step.sent {
        println!(
            "        sends {} to process {}{}",
            s.message,
            s.to,
            if s.fate == "sent" {
                String::new()
            } else {
                format!(" ({})", s.fate)
            }
        );
    }
    if let Some(after) = &step.after {
        println!(
            "        {} is now: {}",
            step.actor,
            after.replace('\n', "\n        ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(across: serde_json::Value) -> Progress {
        let mut p = json!({
            "model": "m", "unique": 1000, "transitions": 5000, "max_depth": 7,
            "frontier": 10, "memory_bytes": 1 << 20, "elapsed_s": 2.0,
        });
        p.as_object_mut()
            .unwrap()
            .extend(across.as_object().unwrap().clone());
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn the_progress_line_across_processes_says_bytes_per_state_and_the_slowest() {
        let one = describe(&progress(json!({})));
        assert!(!one.contains("processes="), "{one}");
        let across = describe(&progress(json!({
            "processes": 4, "sent_bytes": 250_000, "slowest": [2, 1.5],
        })));
        assert!(
            across.ends_with(" processes=4 sent/state=250B slowest=process 2 (1.50× the mean)"),
            "{across}"
        );
        // Before the processes first compare their times.
        let early = describe(&progress(json!({"processes": 2, "sent_bytes": 0})));
        assert!(early.ends_with(" processes=2 sent/state=0B"), "{early}");
    }
}
