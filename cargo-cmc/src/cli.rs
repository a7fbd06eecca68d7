//! The command line: one enum of subcommands, shared flags flattened.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit codes: no violation, a violation, the tool could not do its job.
pub(crate) const OK: u8 = 0;
pub(crate) const VIOLATION: u8 = 1;
pub(crate) const FAILURE: u8 = 2;
/// `cargo cmc replay`: the trace ends in another violation than it recorded.
pub(crate) const OTHER_VIOLATION: u8 = 3;
/// `check --require-complete`: a search ended bounded, without a violation.
pub(crate) const INCOMPLETE: u8 = 3;
/// `cargo cmc replay`: the replay diverged (a step is not enabled or
/// reaches another state than recorded) and the program changed since the
/// trace was recorded (or the trace does not record enough to tell).
pub(crate) const DIVERGED: u8 = 4;
/// `cargo cmc replay`: the replay diverged with the same program: hidden
/// nondeterminism.
pub(crate) const NONDETERMINISM: u8 = 5;
/// `cargo cmc replay`: the trace does not fit the model (a handler or
/// process it does not have, a choice out of its range).
pub(crate) const MISFIT: u8 = 6;

#[derive(Parser, Debug)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// Model-check the models of a Rust project.
    Cmc(Cmc),
}

#[derive(Args, Debug)]
#[command(version, about = "Model-check the #[cmc::model]s of a cargo project", long_about = None)]
struct Cmc {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Make a check crate (`cmc/`) in an existing crate, with a sample model.
    Init(InitArgs),
    /// Check models and report violations with replayable traces.
    Check(CheckArgs),
    /// List the models, one full path per line.
    List(ListArgs),
    /// Re-execute a saved trace, step by step.
    #[command(
        after_help = "Exit codes: 1 the violation reproduces; 3 the trace ends in \
another violation; 0 it ends in none (or --step stopped it); 4 it diverges because the \
program changed; 5 it diverges with the same sources (hidden nondeterminism); 6 the trace \
does not fit the model; 2 a tool error."
    )]
    Replay(ReplayArgs),
}

/// `cargo cmc init`.
#[derive(Args, Debug)]
pub(crate) struct InitArgs {
    /// Path to the Cargo.toml of the crate to check.
    #[arg(long, value_name = "PATH")]
    pub(crate) manifest_path: Option<PathBuf>,
    /// Where to put the check crate, relative to the crate's directory.
    #[arg(long, value_name = "DIR", default_value = "cmc")]
    pub(crate) dir: PathBuf,
}

/// Which packages to look at, and how to build them (as cargo does).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ProjectArgs {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub(crate) manifest_path: Option<PathBuf>,
    /// Only this package (repeatable).
    #[arg(short = 'p', long = "package", value_name = "SPEC")]
    pub(crate) packages: Vec<String>,
    /// Features to enable (space or comma separated, repeatable).
    #[arg(long, value_name = "FEATURES")]
    pub(crate) features: Vec<String>,
    /// Enable all features.
    #[arg(long)]
    pub(crate) all_features: bool,
    /// Do not enable the default features.
    #[arg(long)]
    pub(crate) no_default_features: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StrategyArg {
    /// Depth-first (least memory, long counterexamples).
    Dfs,
    /// Breadth-first, the default (shortest counterexamples).
    Bfs,
    /// Random, reproducible with --seed.
    Random,
    /// Best-first by the model's priority function.
    Best,
    /// Random walks from the initial state with restarts: memory that does
    /// not grow with the run; needs --time-limit or --walks; reproducible
    /// with --seed
    Walk,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FingerprintArg {
    /// The process type's cmc::StateHash (derive it): by meaning, the first
    /// choice when it exists.
    State,
    /// The process type's own Hash.
    Hash,
    /// The process type's Debug output, canonicalized (maps and sets count
    /// as unordered).
    Debug,
    /// The value walked by its type information (the executable's
    /// debugging information): the default for types with none of the
    /// above.
    Typed,
    /// The canonical heap reachable from each process (the default only
    /// for types with none of the above that the debugging information
    /// does not describe).
    Heap,
    /// The raw pages of each process's arena (fastest; equal values with
    /// different bytes count twice).
    Bytes,
    /// The model's abstraction function (Model::abstraction).
    Abstract,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum BitsArg {
    /// 64-bit fingerprints (the default).
    #[value(name = "64")]
    B64,
    /// 128-bit fingerprints: collisions out of reach.
    #[value(name = "128")]
    B128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum MessageFormat {
    /// Text for people.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    /// Only this model (repeatable): its full path, or its path's last
    /// segments (`two_phase_commit_7`, `aodv::aodv_4_line`), or a glob
    /// over either (`'aodv_4_*'`).
    #[arg(long = "model", value_name = "NAME")]
    pub(crate) models: Vec<String>,
    /// Leave out the models this selects, as --model does (repeatable).
    #[arg(long = "exclude", value_name = "NAME")]
    pub(crate) exclude: Vec<String>,
    /// Exit with 3 when a search ended bounded (a bound, the time limit,
    /// the memory budget, random walks) without a violation: only a
    /// complete search counts as a pass.
    #[arg(long)]
    pub(crate) require_complete: bool,
    /// The search strategy (default: the model's, breadth-first unless it
    /// chose another).
    #[arg(long, value_enum)]
    pub(crate) strategy: Option<StrategyArg>,
    /// Do not expand states at this depth.
    #[arg(long, value_name = "N")]
    pub(crate) max_depth: Option<usize>,
    /// Stop after this many unique states.
    #[arg(long, value_name = "N")]
    pub(crate) max_states: Option<usize>,
    /// Stop each model after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub(crate) time_limit: Option<f64>,
    /// With --strategy walk: stop after this many walks (each from the
    /// initial state to --max-depth, default 1000, or a state without
    /// successor).
    #[arg(long, value_name = "N")]
    pub(crate) walks: Option<u64>,
    /// How long one piece of user code (a handler, guard, invariant,
    /// constructor, Hash or Debug) may run before the check stops it and
    /// reports a timeout violation with its trace; 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub(crate) transition_timeout: f64,
    /// Stop the search, bounded, before its resident memory exceeds this
    /// (512M, 4G, 1.5GiB, or a number of bytes; 0: no budget). Default: 80 %
    /// of the memory available when the search starts.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) max_memory: Option<u64>,
    /// Seed of the random strategy.
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// Worker processes searching at once (default: one per core, unless
    /// the model sets a number; best-first runs on one). They share the
    /// visited set: a complete search finds the same states, and
    /// breadth-first traces stay shortest, though which shortest trace is
    /// shown may change from run to run (--jobs 1: always the same).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub(crate) jobs: Option<u64>,
    /// Collect distinct violations instead of stopping at the first.
    #[arg(long)]
    pub(crate) keep_going: bool,
    /// Partial-order reduction: an event of one process that commutes
    /// with an event of another explored before it does not run again
    /// after it (sleep sets). Every state is still visited, fewer
    /// transitions run. One worker; not with random walks or a prune over
    /// the whole world (a bound on each process, `Model::prune_process`,
    /// is fine); with --keep-going the search goes on past violations.
    #[arg(long)]
    pub(crate) por: bool,
    /// Run every transition, even one whose successor the transition
    /// cache can tell is already visited (the cache changes no count;
    /// this measures what it saves).
    #[arg(long)]
    pub(crate) no_transition_cache: bool,
    /// How processes are fingerprinted (default: each type's best source:
    /// StateHash, then Hash, then Debug, then its type information
    /// (typed), then the canonical heap, unless the model chooses; -v says
    /// which each type used).
    #[arg(long, value_enum)]
    pub(crate) fingerprint: Option<FingerprintArg>,
    /// Bits of each fingerprint the visited set keeps.
    #[arg(long, value_enum, value_name = "BITS")]
    pub(crate) fingerprint_bits: Option<BitsArg>,
    /// Run every transition, guard and invariant N times (2 when N is not
    /// given) and report hidden nondeterminism.
    #[arg(
        long,
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "2",
        value_parser = runs_to_compare
    )]
    pub(crate) check_determinism: Option<u64>,
    /// Run each transition that draws randomness (thread_rng, OsRng, a new
    /// HashMap's keys) with K seeds derived from the state and the event,
    /// as up to K successors (default 1: one draw per state and event).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) random_seeds: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) message_format: MessageFormat,
    /// Also say, for each model, which source of identity each of its
    /// types (process, shared variables, messages) was fingerprinted from.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Write a #[test] that replays the (first) counterexample to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) emit_test: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    /// The trace file written by `cargo cmc check`.
    #[arg(required_unless_present = "last")]
    pub(crate) trace: Option<PathBuf>,
    /// Replay the newest trace `cargo cmc check` saved in this project.
    #[arg(long, conflicts_with = "trace")]
    pub(crate) last: bool,
    /// Stop after this step.
    #[arg(long, value_name = "N")]
    pub(crate) step: Option<usize>,
    /// Fingerprint the states by this source instead of the one the trace
    /// was recorded with.
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) fingerprint: Option<FingerprintArg>,
}

/// A size such as `512M`, `4G`, `1.5GiB`, `100k` or `1048576` (bytes;
/// the units are powers of 1024).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (say 512M or 4G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "`{other}` is not a unit of size (use K, M, G or T)"
            ))
        }
    };
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// Whether the command line asks for JSON output (read before parsing, so
/// that an error in the arguments is JSON too).
fn json_requested() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().enumerate().any(|(i, a)| {
        a == "--message-format=json"
            || (a == "--message-format" && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Prints an error: a line on standard error, or with `--message-format
/// json` a `{"type": "error", "message": …}` object on standard output.
pub(crate) fn report_error(json: bool, message: &str) {
    if json {
        println!(
            "{}",
            serde_json::json!({"type": "error", "message": message})
        );
    } else {
        eprintln!("error: {message}");
    }
}

/// Prints a warning or a notice the same way (`"type": "warning"`).
pub(crate) fn report_warning(json: bool, message: &str) {
    if json {
        println!(
            "{}",
            serde_json::json!({"type": "warning", "message": message})
        );
    } else {
        eprintln!("cmc: {message}");
    }
}

pub(crate) fn main() -> ExitCode {
    let json = json_requested();
    let cmc = match Cargo::try_parse() {
        Ok(Cargo::Cmc(cmc)) => cmc,
        Err(e) if json && e.use_stderr() => {
            report_error(true, e.to_string().trim());
            return ExitCode::from(FAILURE);
        }
        Err(e) => e.exit(),
    };
    crate::harness::catch_signals();
    let result = match cmc.command {
        Command::Init(args) => crate::init::run(args),
        Command::Check(args) => crate::check::run(args),
        Command::List(args) => crate::list::run(args),
        Command::Replay(args) => crate::replay::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            report_error(json, &format!("{err:#}"));
            ExitCode::from(FAILURE)
        }
    }
}

/// `--check-determinism N`: how many runs of each piece of code to
/// compare, at least two.
fn runs_to_compare(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 2 => Ok(n),
        Ok(n) => Err(format!(
            "{n} run{} of each piece of code cannot show a difference: give 2 or more \
             (or no number, for 2)",
            if n == 1 { "" } else { "s" }
        )),
        Err(_) => Err(format!("`{s}` is not a number of runs (2 or more)")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_like_people_write_them() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("100k"), Ok(100 << 10));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("1e300G").is_err());
    }
}
