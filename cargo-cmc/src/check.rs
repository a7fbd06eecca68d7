//! `cargo cmc check`: its flags, and the run that builds the harnesses,
//! checks the models chosen, saves a trace and a report for each violation
//! and prints the results.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cmc::registry::RunOptions;
use cmc::{CheckResult, FingerprintWidth, Strategy};

use crate::args::{FingerprintArg, MessageFormat, ProjectArgs};
use crate::diagnostic::report_warning;
use crate::exit::{stopped_by, Exit};
use crate::output::{Output, Saved};
use crate::project::Project;
use crate::traces::{file_stem, traces_dir};

/// `cargo cmc check`: which models, how to search them, how to report.
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
    /// With --strategy walk: stop after this many walks (a plain walk goes
    /// from the initial state to --max-depth, default 1000, or a state
    /// without successor; a guided one ends when its budget of transitions
    /// is spent or nothing novel is left).
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
    /// The most entries a breadth-first frontier keeps in memory before
    /// the rest wait on disk, under target/cmc/spill (default 65536; 0:
    /// all in memory).
    #[arg(long, value_name = "N")]
    pub(crate) frontier_in_memory: Option<usize>,
    /// Seed of --strategy random (the order of each state's successors)
    /// and --strategy walk (the walks); an error with a strategy that uses
    /// none.
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// Worker processes searching at once (default: one per core, unless
    /// the model sets a number; best-first runs on one). They share the
    /// visited set: a complete search finds the same states, and
    /// breadth-first traces stay shortest, though which shortest trace is
    /// shown may change from run to run (--jobs 1: always the same).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub(crate) jobs: Option<u64>,
    /// Search across N processes started by `mpirun` (on this machine, or
    /// on the hosts a hostfile or a scheduler gives it): each owns a part
    /// of the visited set, expands the states it owns, and sends the
    /// others theirs; the counts are those of one process, and traces stay
    /// shortest. With --strategy walk, a swarm: each process walks from a
    /// seed of its own, the first violation anywhere stops them all, and
    /// --walks bounds the swarm's walks in all. Breadth-first search or
    /// walks; each process has one worker, or --jobs of them (sharing its
    /// part of the visited set). Needs Open MPI (`bash
    /// scripts/install-mpi.sh`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) processes: Option<u64>,
    /// With --strategy walk: plain random walks, one random event at a
    /// time, each from the initial state, instead of walks guided by
    /// novelty (the default: walks move into states no walk has entered,
    /// and start where earlier walks left successors untried).
    #[arg(long)]
    pub(crate) plain_walks: bool,
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
    /// Where a model declares interchangeable processes
    /// (`Model::interchangeable`): compare every state the symmetry
    /// reduction merges with another of its orbit (their invariants'
    /// verdicts, handlers and successors), not a sample. States compared
    /// stay in memory.
    #[arg(long)]
    pub(crate) check_symmetry: bool,
    /// Where a model declares interchangeable processes: count every
    /// state, not one per orbit (to measure the reduction).
    #[arg(long)]
    pub(crate) no_symmetry: bool,
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
    /// Measure which lines of the checked crates (the package and its
    /// local dependencies) the search executed: writes
    /// target/cmc/coverage/<model>.lcov and .html and prints a summary
    /// (lines reached per file, handlers never enabled, functions never
    /// entered). Builds the harness again with the toolchain's coverage
    /// instrumentation, and installs its llvm-tools when missing.
    #[arg(long)]
    pub(crate) coverage: bool,
    /// Also measure the coverage of this dependency (repeatable; implies
    /// --coverage), such as a crates.io crate the models check.
    #[arg(long = "coverage-crate", value_name = "CRATE")]
    pub(crate) coverage_crates: Vec<String>,
    /// Write a #[test] that replays the (first) counterexample to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) emit_test: Option<PathBuf>,
}

/// `--strategy`: the order the search visits states in.
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
    /// Random walks, guided by novelty (--plain-walks: plain ones, from
    /// the initial state): memory that does not grow with the run; needs
    /// --time-limit or --walks; reproducible with --seed
    Walk,
}

/// `--fingerprint-bits`: the width of the fingerprints the visited set
/// keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum BitsArg {
    /// 64-bit fingerprints (the default).
    #[value(name = "64")]
    B64,
    /// 128-bit fingerprints: collisions out of reach.
    #[value(name = "128")]
    B128,
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

/// The runtime's options for the flags; fails on flags that contradict
/// each other or out-of-range durations.
fn options(args: &CheckArgs) -> Result<RunOptions> {
    let mut o = RunOptions::default();
    o.strategy = args.strategy.map(|s| match s {
        StrategyArg::Dfs => Strategy::Dfs,
        StrategyArg::Bfs => Strategy::Bfs,
        StrategyArg::Random => Strategy::Random,
        StrategyArg::Best => Strategy::BestFirst,
        StrategyArg::Walk => Strategy::Walk,
    });
    if args.plain_walks && args.strategy != Some(StrategyArg::Walk) {
        anyhow::bail!("--plain-walks is a kind of random walk: it needs --strategy walk");
    }
    if args.walks.is_some() && args.strategy != Some(StrategyArg::Walk) {
        anyhow::bail!("--walks bounds random walks: it needs --strategy walk");
    }
    if args.strategy == Some(StrategyArg::Walk) && args.walks.is_none() && args.time_limit.is_none()
    {
        anyhow::bail!(
            "--strategy walk never ends by itself: give it --walks N or --time-limit SECS"
        );
    }
    if args.strategy == Some(StrategyArg::Walk) && args.require_complete {
        anyhow::bail!(
            "--require-complete asks every search to cover all reachable states, and random \
             walks (--strategy walk) never do: their verdict is always `bounded`"
        );
    }
    o.max_walks = args.walks;
    o.max_depth = args.max_depth;
    o.max_states = args.max_states;
    if let Some(secs) = args.time_limit {
        o.time_limit = Some(
            Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|d| !d.is_zero())
                .with_context(|| {
                    if secs.is_finite() && secs > 0.0 {
                        format!(
                            "--time-limit {secs:?} is too large for a time limit (leave it out \
                             for none)"
                        )
                    } else {
                        format!("--time-limit must be a positive number of seconds, not {secs:?}")
                    }
                })?,
        );
    }
    o.transition_timeout = Some(
        Duration::try_from_secs_f64(args.transition_timeout)
            .ok()
            .with_context(|| {
                format!(
                    "--transition-timeout must be a number of seconds, 0 or more (0: no \
                     limit), not {}",
                    args.transition_timeout
                )
            })?,
    );
    o.seed = args.seed;
    // Absent: one worker per core (0), unless the model sets a number.
    o.jobs = Some(args.jobs.map_or(0, |j| j as usize));
    if args.processes.is_some() {
        match args.strategy {
            None | Some(StrategyArg::Bfs) => o.strategy = Some(Strategy::Bfs),
            Some(StrategyArg::Walk) => o.strategy = Some(Strategy::Walk),
            Some(_) => anyhow::bail!(
                "--processes runs a breadth-first search or a swarm of random walks across \
                 processes: give --strategy bfs or walk, or leave --strategy out"
            ),
        }
        // Each process its own workers: one unless --jobs says more (a
        // launcher may put several processes on one machine).
        o.jobs = Some(args.jobs.map_or(1, |j| j.max(1) as usize));
        o.cluster = Some(true);
    }
    o.keep_going = args.keep_going.then_some(true);
    o.por = args.por.then_some(true);
    o.guided_walks = args.plain_walks.then_some(false);
    o.transition_cache = args.no_transition_cache.then_some(false);
    if args.check_symmetry && args.no_symmetry {
        anyhow::bail!(
            "--check-symmetry checks the symmetry a reduction relies on, and --no-symmetry \
             turns the reduction off: give one of them"
        );
    }
    o.symmetry = args.no_symmetry.then_some(false);
    o.check_symmetry = args.check_symmetry.then_some(cmc::SymmetryCheck::All);
    o.fingerprint = args.fingerprint.map(FingerprintArg::mode);
    o.width = args.fingerprint_bits.map(|b| match b {
        BitsArg::B64 => FingerprintWidth::Bits64,
        BitsArg::B128 => FingerprintWidth::Bits128,
    });
    o.check_determinism = args.check_determinism.map(|_| true);
    o.determinism_runs = args.check_determinism.map(|n| n as usize);
    o.max_memory = args.max_memory;
    o.frontier_in_memory = args.frontier_in_memory;
    o.random_seeds = args.random_seeds.map(|k| k as usize);
    o.isolate = true;
    Ok(o)
}

/// How the project was built, for the traces (replay rebuilds it so).
fn build_info(project: &Project, options: &RunOptions) -> cmc::BuildInfo {
    let args = &project.args;
    cmc::BuildInfo {
        packages: args.packages.clone(),
        features: args
            .features
            .iter()
            .flat_map(|f| f.split([' ', ',']))
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect(),
        all_features: args.all_features,
        no_default_features: args.no_default_features,
        cmc_version: env!("CARGO_PKG_VERSION").to_string(),
        sources: crate::project::sources_hash(project),
        profile: "release".to_string(),
        options: Some(options.clone()),
    }
}

/// A short hash of a trace's contents, so that traces of different
/// violations (or of the same one under other features) get different
/// files.
fn short_hash(trace: &cmc::Trace) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    trace.to_json().hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

/// Saves the violations a search across processes that failed had found
/// with whole paths (see `harness::ClusterFailure`), as `save` saves a
/// result's; returns a line for each, with the command that replays it.
fn save_found(
    project: &Project,
    options: &RunOptions,
    model: &str,
    found: &[cmc::Violation],
) -> Result<Vec<String>> {
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let partial = CheckResult {
        model: model.to_string(),
        verdict: cmc::Verdict::Violation,
        violations: found.to_vec(),
        reached: Vec::new(),
        stats: Default::default(),
        sources: Vec::new(),
        stopped: None,
        handlers: Vec::new(),
    };
    let saved = save(project, options, &partial)?;
    Ok(found
        .iter()
        .zip(&saved)
        .map(|(v, s)| {
            format!(
                "the trace of {} ({} steps) is saved: replay it with: {}",
                v.record.property,
                v.trace.len(),
                replay_command(project, &s.trace_file)
            )
        })
        .collect())
}

/// Saves each violation of `result` as a trace (with how it was built, for
/// replay) and an HTML report, one file of each per violation.
fn save(project: &Project, options: &RunOptions, result: &CheckResult) -> Result<Vec<Saved>> {
    let traces = traces_dir(project);
    let reports = project.target_dir.join("cmc").join("reports");
    std::fs::create_dir_all(&traces)
        .with_context(|| format!("cannot create {}", traces.display()))?;
    std::fs::create_dir_all(&reports)
        .with_context(|| format!("cannot create {}", reports.display()))?;
    let stem = file_stem(&result.model);
    let mut saved = Vec::new();
    for v in &result.violations {
        let mut trace = v.trace.clone();
        trace.build = Some(build_info(project, options));
        // One file per violation: model, property, contents.
        let name = format!(
            "{stem}--{}-{}",
            file_stem(&v.record.property),
            short_hash(&trace)
        );
        let trace_file = traces.join(format!("{name}.json"));
        let report_file = reports.join(format!("{name}.html"));
        trace
            .save(&trace_file)
            .with_context(|| format!("cannot write {}", trace_file.display()))?;
        std::fs::write(&report_file, crate::report::render(&v.trace))
            .with_context(|| format!("cannot write {}", report_file.display()))?;
        saved.push(Saved {
            trace_file,
            report_file,
        });
    }
    Ok(saved)
}

/// `text` quoted for a POSIX shell, when it needs to be.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The command that replays `trace_file` (which records the features and
/// packages it was checked with), ready to paste in any directory: the
/// trace file and the manifest by absolute paths.
pub(crate) fn replay_command(project: &Project, trace_file: &Path) -> String {
    let trace_file = std::path::absolute(trace_file).unwrap_or_else(|_| trace_file.to_path_buf());
    format!(
        "cargo cmc replay {} --manifest-path {}",
        shell_quote(&trace_file.display().to_string()),
        shell_quote(&project.manifest.display().to_string())
    )
}

/// Runs `cargo cmc check`: the exit code, or an error when the tool could
/// not do its job before any model ran.
pub(crate) fn run(args: CheckArgs) -> Result<ExitCode> {
    let options = options(&args)?;
    let project = crate::project::discover(&args.project)?;
    let coverage =
        (args.coverage || !args.coverage_crates.is_empty()).then(|| args.coverage_crates.clone());
    let tools = match &coverage {
        Some(_) => Some(crate::coverage::Tools::find(&project.workspace_root)?),
        None => None,
    };
    let built = crate::harness::build_all(
        &project,
        coverage.as_deref(),
        args.processes.map(|n| n as usize),
    )?;
    let coverage_dir = project.target_dir.join("cmc").join("coverage");
    let mut union: Option<crate::coverage::Union> = None;
    let all: Vec<&String> = built
        .iter()
        .flat_map(|(_, m)| m.iter().map(|m| &m.path))
        .collect();
    for pattern in args.models.iter().chain(&args.exclude) {
        if !all.iter().any(|p| selects(pattern, p)) {
            let near: Vec<&str> = all
                .iter()
                .filter(|p| p.contains(pattern.trim_matches('*')))
                .map(|p| p.as_str())
                .collect();
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(
                    " (it is part of {}: name a model by its full path or its last segments, \
                     or use a glob such as `*{}*`)",
                    near.join(", "),
                    pattern.trim_matches('*')
                )
            };
            bail!(
                "--model `{pattern}` matches none of the models{hint}; the models: {}",
                all.iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let selected: Vec<(&crate::harness::Harness, &String)> = built
        .iter()
        .flat_map(|(h, models)| models.iter().map(move |m| (h, &m.path)))
        .filter(|(_, path)| {
            (args.models.is_empty() || args.models.iter().any(|m| selects(m, path)))
                && !args.exclude.iter().any(|m| selects(m, path))
        })
        .collect();
    if selected.is_empty() {
        bail!("--exclude leaves no model to check");
    }
    let options_json = serde_json::to_string(&options).context("options serialise")?;
    let mut out = Output::new(args.message_format, args.verbose);
    let json = args.message_format == MessageFormat::Json;
    let mut violation = false;
    let mut failed = false;
    let mut incomplete = false;
    let mut traces_saved = 0usize;
    let mut emitted = false;
    for (harness, model) in selected {
        if crate::harness::caught().is_some() {
            break;
        }
        out.start(model);
        let mut result: Option<CheckResult> = None;
        let profraw = coverage_dir.join(format!("{}.profraw", file_stem(model)));
        let mut profile: Option<Result<PathBuf, String>> = None;
        let env: Vec<(&str, &std::ffi::OsStr)> = match &tools {
            Some(_) => {
                std::fs::create_dir_all(&coverage_dir)
                    .with_context(|| format!("cannot create {}", coverage_dir.display()))?;
                let _ = std::fs::remove_file(&profraw);
                for stale in crate::coverage::other_processes(&profraw) {
                    let _ = std::fs::remove_file(stale);
                }
                vec![("CMC_COVERAGE_FILE", profraw.as_os_str())]
            }
            None => Vec::new(),
        };
        let ran = harness.run_with(
            &["check".into(), model.clone(), options_json.clone()],
            &env,
            |line| {
                match line["type"].as_str() {
                    Some("progress") => {
                        let p: cmc::progress::Progress =
                            serde_json::from_value(line["progress"].clone())
                                .context("bad progress line")?;
                        out.progress(&p);
                    }
                    Some("result") => {
                        result = Some(
                            serde_json::from_value(line["result"].clone())
                                .context("bad result line")?,
                        );
                    }
                    Some("coverage") => {
                        profile = Some(match line["profile"].as_str() {
                            Some(p) => Ok(PathBuf::from(p)),
                            None => Err(line["error"].as_str().unwrap_or("no profile").to_string()),
                        });
                    }
                    _ => {}
                }
                Ok(())
            },
        );
        // One model's failure does not stop the others.
        let result = match ran.and_then(|()| {
            result.with_context(|| format!("the harness printed no result for {model}"))
        }) {
            Ok(result) => result,
            Err(e) => {
                let mut message = format!("{e:#}");
                if let Some(f) = e.downcast_ref::<crate::harness::ClusterFailure>() {
                    // The violations whose paths were whole: their traces
                    // saved, to replay.
                    for line in save_found(&project, &options, model, &f.found)? {
                        message.push('\n');
                        message.push_str(&line);
                    }
                }
                out.error(model, &message);
                failed = true;
                continue;
            }
        };
        let saved = save(&project, &options, &result)?;
        traces_saved += saved.len();
        out.result(&result, &saved, &|s| {
            replay_command(&project, &s.trace_file)
        });
        if let (Some(file), Some(v), false) = (&args.emit_test, result.violations.first(), emitted)
        {
            let pkg = project
                .packages
                .iter()
                .find(|p| p.name == harness.package)
                .context("the harness's package")?;
            crate::emit::write(file, pkg, &result.model, &v.trace)?;
            report_warning(
                json,
                &format!(
                    "wrote a regression test for {} to {}",
                    result.model,
                    file.display()
                ),
            );
            emitted = true;
        }
        if let Some(tools) = &tools {
            remove_stray_profiles(&coverage_dir);
            let measured = match profile {
                Some(Ok(file)) => tools.lcov(&file, &harness.binary, &harness.source_dir),
                Some(Err(e)) => Err(anyhow::anyhow!(e)),
                None => Err(anyhow::anyhow!("the harness wrote no coverage profile")),
            };
            match measured {
                Ok(mut lcov) => {
                    let pkg = project
                        .packages
                        .iter()
                        .find(|p| p.name == harness.package)
                        .context("the harness's package")?;
                    crate::coverage::retain_checked(&mut lcov, pkg, &args.coverage_crates);
                    let stem = file_stem(model);
                    let never: Vec<String> = result
                        .handlers
                        .iter()
                        .filter(|h| h.enabled == 0)
                        .map(|h| h.name.clone())
                        .collect();
                    let summary =
                        write_coverage(&project, &coverage_dir, model, &stem, &lcov, never)?;
                    out.coverage(&summary, &project.workspace_root);
                    let u = union.get_or_insert_with(Default::default);
                    u.lcov.merge(&lcov);
                    for h in &result.handlers {
                        *u.handlers
                            .entry((harness.package.clone(), h.name.clone()))
                            .or_insert(0) += h.enabled;
                    }
                    u.models += 1;
                }
                Err(e) => {
                    out.error(model, &format!("coverage: {e:#}"));
                    failed = true;
                }
            }
        }
        violation |= !result.violations.is_empty();
        failed |= result.verdict == cmc::Verdict::Interrupted;
        incomplete |= result.verdict == cmc::Verdict::Bounded;
    }
    if let Some(crate::coverage::Union {
        lcov: all,
        handlers,
        models,
    }) = union.filter(|u| u.models > 1)
    {
        let never = handlers
            .into_iter()
            .filter(|(_, n)| *n == 0)
            .map(|((_, name), _)| name)
            .collect();
        let summary = write_coverage(
            &project,
            &coverage_dir,
            &format!("all {models} models"),
            "all",
            &all,
            never,
        )?;
        out.coverage(&summary, &project.workspace_root);
    }
    if let Some(signal) = crate::harness::caught() {
        // Only what was written is said to be saved.
        let what = match traces_saved {
            0 => "no violation was found before it, so no trace was saved".to_string(),
            1 => "the trace found before it is saved (its path is above)".to_string(),
            n => format!("the {n} traces found before it are saved (their paths are above)"),
        };
        report_warning(json, &format!("stopped by signal {signal}; {what}"));
        return Ok(stopped_by(signal));
    }
    if args.emit_test.is_some() && !emitted {
        report_warning(json, "no counterexample, so no regression test was written");
    }
    if incomplete && args.require_complete && !failed && !violation {
        report_warning(
            json,
            "a search ended bounded, and --require-complete asks for complete ones (exit 3)",
        );
    }
    Ok(if failed {
        Exit::Failure
    } else if violation {
        Exit::Violation
    } else if incomplete && args.require_complete {
        Exit::Inconclusive
    } else {
        Exit::Success
    }
    .into())
}

/// Writes `<stem>.lcov` and `<stem>.html` under `dir` for `lcov`, the
/// coverage of `model`, and returns its summary.
fn write_coverage(
    project: &Project,
    dir: &Path,
    model: &str,
    stem: &str,
    lcov: &crate::coverage::Lcov,
    never_enabled: Vec<String>,
) -> Result<crate::coverage::Summary> {
    let lcov_file = dir.join(format!("{stem}.lcov"));
    let page_file = dir.join(format!("{stem}.html"));
    let base = &project.workspace_root;
    let summary = crate::coverage::summarize(
        model,
        lcov,
        never_enabled,
        base,
        lcov_file.clone(),
        page_file.clone(),
    );
    std::fs::write(&lcov_file, lcov.render())
        .with_context(|| format!("cannot write {}", lcov_file.display()))?;
    std::fs::write(&page_file, crate::coverage::page(&summary, lcov, base))
        .with_context(|| format!("cannot write {}", page_file.display()))?;
    Ok(summary)
}

/// Removes the profiles a coverage harness wrote as it exited (its `list`
/// run): only the check's own count.
fn remove_stray_profiles(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with("stray-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `pattern` (of --model or --exclude) names the model at `path`:
/// the full path, or its last `::` segments, or a glob (`*`, `?`) over
/// either.
pub(crate) fn selects(pattern: &str, path: &str) -> bool {
    let glob = pattern.contains(['*', '?']);
    let mut tails = vec![path];
    let mut at = 0;
    while let Some(i) = path[at..].find("::") {
        at += i + 2;
        tails.push(&path[at..]);
    }
    tails.iter().any(|tail| {
        if glob {
            glob_match(pattern.as_bytes(), tail.as_bytes())
        } else {
            *tail == pattern
        }
    })
}

/// `*` matches any run of characters, `?` one character.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::{glob_match, parse_size, selects};

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

    #[test]
    fn a_model_is_named_exactly_or_by_a_glob() {
        let path = "aodv::models::aodv_4_line";
        for yes in [
            "aodv::models::aodv_4_line",
            "models::aodv_4_line",
            "aodv_4_line",
            "aodv_4_*",
            "*4_line",
            "aodv::*",
            "aodv_?_line",
        ] {
            assert!(selects(yes, path), "{yes}");
        }
        for no in [
            "aodv_4",
            "4_line",
            "line",
            "aodv_4_line_dup",
            "odv_4_line",
            "aodv_3_*",
        ] {
            assert!(!selects(no, path), "{no}");
        }
        assert!(selects("abp_3_payloads", "abp::abp_3_payloads"));
        assert!(!selects("abp_3_payloads", "abp::abp_3_payloads_dup"));
    }

    /// The glob matcher against a naive recursive one on every short
    /// pattern and text over a small alphabet.
    #[test]
    fn globs_match_like_the_naive_definition() {
        fn naive(p: &[u8], t: &[u8]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some((b'*', rest)) => (0..=t.len()).any(|i| naive(rest, &t[i..])),
                Some((&c, rest)) => {
                    t.first().is_some_and(|&x| c == b'?' || c == x) && naive(rest, &t[1..])
                }
            }
        }
        let words = |n: usize, alphabet: &[u8]| {
            let mut all: Vec<Vec<u8>> = vec![Vec::new()];
            for len in 1..=n {
                let mut w = vec![0usize; len];
                loop {
                    all.push(w.iter().map(|&i| alphabet[i]).collect());
                    let Some(k) = w.iter().rposition(|&i| i + 1 < alphabet.len()) else {
                        break;
                    };
                    w[k] += 1;
                    for x in &mut w[k + 1..] {
                        *x = 0;
                    }
                }
            }
            all
        };
        for p in words(4, b"ab*?") {
            for t in words(4, b"ab") {
                assert_eq!(glob_match(&p, &t), naive(&p, &t), "{p:?} {t:?}");
            }
        }
    }
}
